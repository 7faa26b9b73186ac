"""How big a workflow's history is, as the Temporal server stores it.

Sizes are serialized protobuf bytes: the whole History, and per activity type the largest input payload
(the soak and the history-size test assert on both)."""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client


@dataclass
class HistorySizes:
    total: int = 0  # bytes of every event
    events: int = 0
    start_input: int = 0  # the workflow's own input
    inputs: dict[str, int] = field(default_factory=dict)  # activity type / "child:<type>" → largest input bytes
    results: dict[str, int] = field(default_factory=dict)  # activity type → largest result bytes
    result_json: dict[str, bytes] = field(default_factory=dict)  # activity type → its largest result's payload
    by_event: dict[str, int] = field(default_factory=dict)  # "<event type>[:<activity>]" → bytes


async def history_sizes(client: Client, workflow_id: str, run_id: str | None = None) -> HistorySizes:
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    out = HistorySizes()
    scheduled: dict[int, str] = {}
    for event in history.events:
        out.events += 1
        out.total += event.ByteSize()
        key = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_").lower()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            key += ":" + event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            key += ":" + scheduled.get(event.activity_task_completed_event_attributes.scheduled_event_id, "?")
        out.by_event[key] = out.by_event.get(key, 0) + event.ByteSize()
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            out.start_input = event.workflow_execution_started_event_attributes.input.ByteSize()
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attrs.activity_type.name
            _keep_max(out.inputs, attrs.activity_type.name, attrs.input.ByteSize())
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            name = scheduled.get(attrs.scheduled_event_id, "?")
            if attrs.result.ByteSize() > out.results.get(name, 0) and attrs.result.payloads:
                out.result_json[name] = attrs.result.payloads[0].data
            _keep_max(out.results, name, attrs.result.ByteSize())
        elif event.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            attrs = event.start_child_workflow_execution_initiated_event_attributes
            _keep_max(out.inputs, f"child:{attrs.workflow_type.name}", attrs.input.ByteSize())
    return out


def _keep_max(sizes: dict[str, int], key: str, size: int) -> None:
    sizes[key] = max(sizes.get(key, 0), size)
