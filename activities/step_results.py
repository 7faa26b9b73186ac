"""Earlier steps' results, read back from the tick run's own history.

A lean step input names the results it needs (`refs`: observation → "observe", ...) instead of carrying
them again: the tick's observation is written to history once, by observe's completion, and not re-sent to
the eight steps after it. The worker reads the run's history through its Temporal client, once per tick run
and result (cached), and decodes the payload the workflow itself received — the same bytes, so an activity
sees exactly what the workflow saw, on any worker, after a restart, in a reset run (its history holds the
events before the reset point) or a replay.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

MAX_RUNS = 32  # tick runs whose results are kept in memory (a tick's steps run within seconds of each other)


class StepResultMissing(LookupError):
    """The run's history has no completed result of that step (the workflow named a step it did not run)."""


class StepResults:
    def __init__(self, client: Client, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.client = client
        self.loop = loop
        self._runs: OrderedDict[tuple[str, str], dict[str, Payload]] = OrderedDict()

    async def _completed(self, workflow_id: str, run_id: str) -> dict[str, Payload]:
        """Activity type → the payload of its last completed result in this run."""
        history = await self.client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        scheduled: dict[int, str] = {}
        out: dict[str, Payload] = {}
        for ev in history.events:
            if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                scheduled[ev.event_id] = ev.activity_task_scheduled_event_attributes.activity_type.name
            elif ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                attrs = ev.activity_task_completed_event_attributes
                name = scheduled.get(attrs.scheduled_event_id)
                if name and attrs.result.payloads:
                    out[name] = attrs.result.payloads[0]
        return out

    async def fetch(self, workflow_id: str, run_id: str, wanted: dict[str, tuple[str, Any]]) -> dict[str, Any]:
        """{field: (activity type, type hint)} → {field: decoded result}."""
        key = (workflow_id, run_id)
        known = self._runs.get(key, {})
        if any(step not in known for step, _ in wanted.values()):
            known = await self._completed(workflow_id, run_id)
            self._runs[key] = known
            while len(self._runs) > MAX_RUNS:
                self._runs.popitem(last=False)
        self._runs.move_to_end(key)
        out: dict[str, Any] = {}
        for field, (step, hint) in wanted.items():
            payload = known.get(step)
            if payload is None:
                raise StepResultMissing(f"run {run_id} of {workflow_id} has no completed {step!r} step to read "
                                        f"{field} from")
            (out[field],) = await self.client.data_converter.decode([payload], [hint])
        return out

    def fetch_sync(self, workflow_id: str, run_id: str, wanted: dict[str, tuple[str, Any]]) -> dict[str, Any]:
        """fetch() from an activity thread: runs on the worker's event loop."""
        if self.loop is None:
            raise RuntimeError("StepResults needs the worker's event loop to serve sync activities")
        return asyncio.run_coroutine_threadsafe(self.fetch(workflow_id, run_id, wanted), self.loop).result(timeout=30)
