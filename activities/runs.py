"""What Temporal knows about a tick's run that its workflow code cannot see: a reset's reason and the
run it forked from, written in the run's history when the reset happened."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client

from golem.models.record import TickRun


async def reset_origin(client: Client, workflow_id: str, run: TickRun) -> TickRun:
    """The run with its reset's reason and base run filled in from its history: a reset leaves a
    WorkflowTaskFailed event with cause RESET_WORKFLOW carrying both. A run without one (a retry that
    the workflow took for a reset) keeps what it had."""
    history = await client.get_workflow_handle(workflow_id, run_id=run.run_id).fetch_history()
    resets = [
        e.workflow_task_failed_event_attributes for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
        and e.workflow_task_failed_event_attributes.cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW
    ]
    # A reset of a reset run carries the earlier reset's event too: the one that made this run wins.
    mine = [a for a in resets if a.new_run_id == run.run_id] or resets[-1:]
    if not mine:
        return run
    return run.model_copy(update={
        "reset_reason": mine[-1].failure.message or "(no reason given)",
        "reset_from_run_id": mine[-1].base_run_id or None,
    })
