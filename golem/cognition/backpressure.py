"""FSM backpressure: at most 3 pending ticks, a warning at depth 2, and a trigger arriving at a full queue
drops the oldest, whose probe results merge into the next tick that runs (the highest severity wins).
A pure function over GolemState.tick_queue; events are returned, never emitted from here.
Why: docs/design/gate.md#backpressure.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from golem.cognition.probes import merge_probe_results
from golem.models.observation import ProbeResult
from golem.models.state import PendingTick, TickQueue

MAX_PENDING = 3
WARN_DEPTH = 2
DREAM_TRIGGER = "dream"  # a theta trigger that fell due while the golem dreamt


class HeartbeatEvent(BaseModel):
    kind: Literal["heartbeat.queue_warning", "heartbeat.tick_dropped", "heartbeat.tick_dropped_during_dream"]
    depth: int
    trigger: str = ""
    detail: str = ""


def enqueue(queue: TickQueue, trigger: PendingTick, *, max_pending: int = MAX_PENDING,
            warn_depth: int = WARN_DEPTH) -> tuple[TickQueue, list[HeartbeatEvent]]:
    """Queue a trigger; returns the new queue and the events to record."""
    if max_pending < 1:
        raise ValueError(f"max_pending must be ≥ 1, got {max_pending}")
    pending = list(queue.pending)
    carried = list(queue.carried_probes)
    events: list[HeartbeatEvent] = []
    dropped, during_dream = queue.dropped, queue.dropped_during_dream
    while len(pending) >= max_pending:
        old = pending.pop(0)
        carried = merge_probe_results(carried, old.probes)
        dropped += 1
        dreamt = old.trigger == DREAM_TRIGGER  # fell due while the golem dreamt (the heartbeat was suspended)
        during_dream += dreamt
        events.append(HeartbeatEvent(
            kind="heartbeat.tick_dropped_during_dream" if dreamt else "heartbeat.tick_dropped",
            depth=len(pending) + 1, trigger=old.trigger,
            detail=f"dropped the oldest queued {old.trigger} tick; "
                   f"{len(old.probes)} probe results carried into the next tick"))
    pending.append(trigger)
    warnings = queue.warnings
    if len(pending) >= warn_depth:
        warnings += 1
        events.append(HeartbeatEvent(kind="heartbeat.queue_warning", depth=len(pending), trigger=trigger.trigger,
                                     detail=f"{len(pending)} ticks pending (max {max_pending})"))
    return TickQueue(pending=pending, carried_probes=carried, dropped=dropped, warnings=warnings,
                     dropped_during_dream=during_dream), events


def dequeue(queue: TickQueue) -> tuple[TickQueue, PendingTick | None]:
    """The next tick to execute, with the dropped ticks' probes merged into its own (highest severity
    wins); the carried probes are consumed."""
    if not queue.pending:
        return queue, None
    head, rest = queue.pending[0], list(queue.pending[1:])
    merged = head.model_copy(update={"probes": merge_probe_results(queue.carried_probes, head.probes)})
    return queue.model_copy(update={"pending": rest, "carried_probes": []}), merged


def merge_into_observation(own: list[ProbeResult], carried: list[ProbeResult]) -> list[ProbeResult]:
    """The executing tick's probes with carried ones merged in, in the tick's own probe order first."""
    merged = {r.probe: r for r in merge_probe_results(carried, own)}
    order = [r.probe for r in own] + [r.probe for r in carried if r.probe not in {o.probe for o in own}]
    return [merged[name] for name in order]
