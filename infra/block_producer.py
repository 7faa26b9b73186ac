"""The backtest's confirmation blocks: mined when a tick's verify step is scheduled, read from that tick's Temporal
history (see golem/world/replay.py's docstring for why this is repeatable). It lives in infra/ because it reads
Temporal: golem/ never imports temporalio (tests/unit/test_layers.py)."""

from __future__ import annotations

import asyncio

from temporalio.api.enums.v1 import EventType
from web3 import Web3

from golem.world.replay import ReplayError
from workflows.tick import ThetaTickWorkflow

TICK_WORKFLOW = ThetaTickWorkflow.__name__  # @workflow.defn without a name: the type is the class name
VERIFY_ACTIVITY = "verify"


class BlockProducer:
    """Mines each acting tick's confirmation blocks when that tick's VERIFY step is scheduled (module docstring).

    `async with BlockProducer(w3, client, workflow_id, run_id, blocks):` around the rows; `mined` counts the blocks,
    `confirmed` the tick workflow ids it confirmed. A failure to follow the histories is raised by `check()` (after
    each row) and on exit: otherwise every later tick's verify would report "1 of 2 confirmations"."""

    def __init__(self, w3: Web3, client, workflow_id: str, run_id: str | None, blocks: int) -> None:
        self.w3 = w3
        self.client = client
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.blocks = max(0, blocks)
        self.mined = 0
        self.confirmed: list[str] = []
        self._tasks: set[asyncio.Task] = set()
        self._error: BaseException | None = None

    def _mine(self) -> None:
        head = self.w3.eth.get_block("latest")
        for _ in range(self.blocks):
            # keep the head's base fee: an empty confirmation block is not a gas-market event
            answer = self.w3.provider.make_request("anvil_setNextBlockBaseFeePerGas", [hex(int(head["baseFeePerGas"]))])
            if "error" not in answer:
                answer = self.w3.provider.make_request("evm_mine", [])
            if "error" in answer:
                raise ReplayError(f"confirmation block: {answer['error'].get('message', answer['error'])}")
            self.mined += 1

    async def _follow_golem(self) -> None:
        """The GolemWorkflow's runs in turn (continue-as-new); a watcher per tick child that started."""
        run_id = self.run_id
        while run_id is not None:
            handle = self.client.get_workflow_handle(self.workflow_id, run_id=run_id)
            run_id = None
            async for ev in handle.fetch_history_events(wait_new_event=True):
                if ev.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
                    attrs = ev.child_workflow_execution_started_event_attributes
                    if attrs.workflow_type.name == TICK_WORKFLOW:
                        self._spawn(self._watch_tick(attrs.workflow_execution.workflow_id,
                                                     attrs.workflow_execution.run_id))
                elif ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                    run_id = ev.workflow_execution_continued_as_new_event_attributes.new_execution_run_id

    async def _watch_tick(self, workflow_id: str, run_id: str) -> None:
        handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
        async for ev in handle.fetch_history_events(wait_new_event=True):
            if (ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                    and ev.activity_task_scheduled_event_attributes.activity_type.name == VERIFY_ACTIVITY):
                await asyncio.to_thread(self._mine)
                self.confirmed.append(workflow_id)
                return  # one verify per tick run; a retried verify attempt schedules no new event

    def _spawn(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and self._error is None:
            self._error = task.exception()

    def check(self) -> None:
        """Raise now if following the histories failed (the runner calls it after each row: fail fast rather
        than let every later tick's verify wait out its deadline)."""
        if self._error is not None:
            raise ReplayError(f"following the golem's tick histories for confirmations failed: {self._error!r}") \
                from self._error

    async def __aenter__(self) -> "BlockProducer":
        self._spawn(self._follow_golem())
        return self

    async def __aexit__(self, *exc) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if exc[0] is None:
            self.check()
