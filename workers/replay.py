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
    if not isinstance(ctx, TickContext):
        raise TypeError(f"{workflow_id}'s first event does not hold a TickContext (got {type(ctx).__name__})")
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
        task_queue=(await client.get_workflow_handle(original).describe()).task_queue,  # its golem's or host's
        memo={"rerun_of": original},
        search_attributes=TypedSearchAttributes([SearchAttributePair(SA_GOLEM_ID, golem_id), SearchAttributePair(SA_TICK, tick)]),
    )
    return new_id, result


class ResetRefused(ValueError):
    """A reset the history cannot take (no such step in this run); the message says what to do."""


def reset_point(history: WorkflowHistory, step: str) -> int:
    """The event a reset to "just before `step`" goes to: the WorkflowTaskCompleted that scheduled the step's first
    activity. The reset run fails that workflow task, replays up to it and schedules `step` again (and all after)."""
    from temporalio.api.enums.v1 import EventType

    events = list(history.events)
    scheduled = [i for i, e in enumerate(events) if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                 and e.activity_task_scheduled_event_attributes.activity_type.name == step]
    if not scheduled:
        steps = list(dict.fromkeys(e.activity_task_scheduled_event_attributes.activity_type.name for e in events
                                   if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED))
        raise ResetRefused(f"this run never ran `{step}`; its steps: {', '.join(steps) or 'none'}")
    done = [e.event_id for e in events[:scheduled[0]] if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED]
    if not done:
        raise ResetRefused(f"no workflow task completed before `{step}`: reset the whole tick with --before the "
                           "first step")
    return done[-1]


async def reset_tick(client: Client, golem_id: str, tick: int, before: str, reason: str,
                     run_id: str | None = None) -> tuple[str, int]:
    """Temporal's reset of tick `tick` (its latest run, or `run_id`) to just before step `before`, as the Web UI's
    Reset does it; returns (the new run's id, the event reset to). The new run records beside the first and never
    sends an action another run sent (docs/how-to/replay-and-reset.md)."""
    import uuid

    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

    wid = tick_workflow_id(golem_id, tick)
    handle = client.get_workflow_handle(wid, run_id=run_id)
    history = await handle.fetch_history()
    point = reset_point(history, before)
    run = run_id or (await handle.describe()).run_id
    resp = await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
        namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=wid, run_id=run),
        reason=reason, workflow_task_finish_event_id=point, request_id=str(uuid.uuid4())))
    return resp.run_id, point
