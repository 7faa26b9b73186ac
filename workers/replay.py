"""Replay and re-run of ticks: determinism checks against recorded histories, and re-execution of a
failed tick from its recorded input as a new workflow linked to the original."""

from __future__ import annotations

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from workers.converter import data_converter
from temporalio.worker import Replayer

from golem.ids import tick_workflow_id
from golem.models.tick import TickContext, TickResult
from workflows import ALL_WORKFLOWS
from workflows.tick import SA_GOLEM_ID, SA_TICK, ThetaTickWorkflow


def replayer() -> Replayer:
    return Replayer(workflows=ALL_WORKFLOWS, data_converter=data_converter)


async def replay_history(history: WorkflowHistory) -> tuple[bool, str]:
    """(True, "") when the current workflow code reproduces the history's commands exactly."""
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is None:
        return True, ""
    return False, f"{type(result.replay_failure).__name__}: {result.replay_failure}"


async def recorded_tick_input(client: Client, workflow_id: str) -> TickContext:
    """The TickContext a tick was started with, read back from its first history event."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    (ctx,) = await data_converter.decode(started.input.payloads, [TickContext])
    return ctx


class RerunRefused(ValueError):
    pass


async def rerun_tick(client: Client, golem_id: str, tick: int, *, force: bool = False) -> tuple[str, TickResult]:
    """Start a new ThetaTickWorkflow from tick N's recorded input, linked by memo and record to it.
    Its record is written beside the original's (`cycle-NNNNNN-rerun-K.json`), never over it.

    Only failed (or timed-out / terminated) ticks are re-run unless forced: a re-run of a completed tick
    observes and decides again and may act again (an action the first run already sent is not sent twice)."""
    original = tick_workflow_id(golem_id, tick)
    desc = await client.get_workflow_handle(original).describe()
    if desc.status == WorkflowExecutionStatus.RUNNING:
        raise RerunRefused(f"tick {tick} is still running; wait for it to finish")
    if desc.status == WorkflowExecutionStatus.COMPLETED and not force:
        raise RerunRefused(
            f"tick {tick} completed; `golem replay {tick}` checks it, `golem rerun {tick} --force` re-executes it "
            "anyway (it may act again; its record is kept beside the first run's)"
        )
    ctx = await recorded_tick_input(client, original)
    ctx = ctx.model_copy(update={"rerun_of": original})
    attempt = 1
    async for _ in client.list_workflows(f"WorkflowId STARTS_WITH '{original}-rerun-'"):
        attempt += 1
    new_id = f"{original}-rerun-{attempt}"
    result = await client.execute_workflow(
        ThetaTickWorkflow.run,
        ctx,
        id=new_id,
        task_queue=ctx.task_queue,
        memo={"rerun_of": original},
        search_attributes=TypedSearchAttributes([SearchAttributePair(SA_GOLEM_ID, golem_id), SearchAttributePair(SA_TICK, tick)]),
    )
    return new_id, result
