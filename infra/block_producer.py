"""The backtest's confirmation blocks: mined when a tick's verify step starts on the backtest's own worker, by an
activity interceptor (see golem/backtest/replay.py's docstring for why this is repeatable). It lives in infra/ because
it hooks the Temporal worker: golem/ never imports temporalio (tests/unit/test_layers.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor
from web3 import Web3
from web3.types import RPCEndpoint

from golem.backtest.replay import ReplayError
from workflows.tick import ThetaTickWorkflow

TICK_WORKFLOW = ThetaTickWorkflow.__name__  # @workflow.defn without a name: the type is the class name
VERIFY_ACTIVITY = "verify"


class BlockProducer(Interceptor):
    """Mines each acting tick's confirmation blocks just before that tick's VERIFY step runs (module docstring).

    Give it to the backtest's worker (`build_worker(..., interceptors=[producer])`); `mined` counts the blocks,
    `confirmed` the tick workflow ids it confirmed. A failure to mine is raised by `check()` (the runner calls it
    after each row): otherwise every later tick's verify would report "1 of 2 confirmations"."""

    def __init__(self, w3: Web3, blocks: int) -> None:
        self.w3 = w3
        self.blocks = max(0, blocks)
        self.mined = 0
        self.confirmed: list[str] = []
        self._runs: set[tuple[str, str]] = set()  # tick runs already confirmed: a retried verify mines nothing
        self._error: BaseException | None = None

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _MineBeforeVerify(next, self)

    def _mine(self) -> None:
        head = self.w3.eth.get_block("latest")
        for _ in range(self.blocks):
            # keep the head's base fee: an empty confirmation block is not a gas-market event
            answer = self.w3.provider.make_request(RPCEndpoint("anvil_setNextBlockBaseFeePerGas"),
                                                   [hex(int(head["baseFeePerGas"]))])
            if "error" not in answer:
                answer = self.w3.provider.make_request(RPCEndpoint("evm_mine"), [])
            if "error" in answer:
                raise ReplayError(f"confirmation block: {answer['error'].get('message', answer['error'])}")
            self.mined += 1

    async def before_verify(self) -> None:
        info = activity.info()
        run = (info.workflow_id or "", info.workflow_run_id or "")
        if info.activity_type != VERIFY_ACTIVITY or info.workflow_type != TICK_WORKFLOW or run in self._runs:
            return
        self._runs.add(run)
        try:
            await asyncio.to_thread(self._mine)
            self.confirmed.append(run[0])
        except Exception as err:  # verify still runs (and says what it saw); the runner stops at check()
            self._error = self._error or err

    def check(self) -> None:
        """Raise now if a confirmation block could not be mined (fail fast rather than let every later tick's
        verify wait out its deadline)."""
        if self._error is not None:
            raise ReplayError(f"mining a tick's confirmation blocks failed: {self._error!r}") from self._error


class _MineBeforeVerify(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, producer: BlockProducer) -> None:
        super().__init__(next)
        self.producer = producer

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        await self.producer.before_verify()
        return await self.next.execute_activity(input)
