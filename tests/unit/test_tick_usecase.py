"""A theta tick as GolemWorkflow starts and folds it (golem.usecases.tick), without Temporal."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from golem.cognition.fold import new_golem_state
from golem.models.config import GolemConfig
from golem.models.state import TICK_SLICE
from golem.usecases.tick import missed_triggers, queue_missed, tick_context

CFG = GolemConfig.model_validate({"golem": {"id": "g1"}, "heartbeat": {"step_timeout_seconds": 42}})
T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def ctx(version="", change="", **kw):
    s = new_golem_state(CFG).model_copy(update={"tick": 4})
    args = {"started_at": T0.isoformat(), "carried": [], "settlement": False, "local_steps": False} | kw
    return tick_context(s, CFG, version=version, change=change, **args)


def test_a_versioned_config_travels_by_its_hash_with_the_ticks_state_slice():
    lean = ctx(version="v" * 64, change="config v applied")
    assert lean.config is None and lean.config_version == "v" * 64 and lean.config_change == "config v applied"
    assert (lean.state_slice, lean.wire, lean.step_timeout_seconds) == (TICK_SLICE, 2, 42)
    assert lean.tick == 4 and not lean.local_steps


def test_an_unversioned_config_travels_whole():
    whole = ctx(change="", local_steps=True)
    assert whole.config == CFG and whole.config_version == "" and whole.wire == 0 and whole.state_slice == ""
    assert whole.local_steps
    assert ctx(change="edited").config_change == "edited" and ctx(change="edited").config is not None


def test_missed_triggers_queue_at_most_three_and_say_what_was_dropped_once_per_kind():
    assert missed_triggers(T0, T0 + timedelta(seconds=9.5), 2.0) == 4
    s = new_golem_state(CFG)
    same, lines = queue_missed(s, 0, T0.timestamp())
    assert same is s and lines == []
    queued, lines = queue_missed(s, 5, T0.timestamp())
    assert len(queued.tick_queue.pending) == 3 and queued.tick_queue.dropped == 2
    dropped = [line for line in lines if line.startswith("heartbeat.tick_dropped")]
    assert len(dropped) == 1 and dropped[0].endswith("(x2 this tick)")


def _queue_one_by_one(s, missed, now, trigger):
    """What queue_missed did before it counted the steady part: every missed trigger through enqueue."""
    from golem.cognition.backpressure import enqueue
    from golem.models.state import PendingTick

    queue, seen = s.tick_queue, {}
    for _ in range(missed):
        queue, events = enqueue(queue, PendingTick(trigger=trigger, enqueued_at=now))
        for event in events:
            seen.setdefault(event.kind, []).append(event)
    lines = [f"{kind}: {events[-1].detail}" + (f" (x{len(events)} this tick)" if len(events) > 1 else "")
             for kind, events in seen.items()]
    return s.model_copy(update={"tick_queue": queue}), lines


def test_many_missed_triggers_give_the_state_and_lines_one_by_one_did_without_building_each():
    from golem.cognition import backpressure
    from golem.models.enums import ProbeSeverity
    from golem.models.observation import ProbeResult
    from golem.models.state import PendingTick, TickQueue

    base = new_golem_state(CFG)
    probe = ProbeResult(probe="price_delta", severity=ProbeSeverity.HIGH, value=3.0)
    queues = [TickQueue(),
              TickQueue(pending=[PendingTick(trigger="steer", probes=[probe])], dropped=4, warnings=2),
              TickQueue(pending=[PendingTick(trigger="dream"), PendingTick(trigger="theta", probes=[probe]),
                                 PendingTick(trigger="theta")], carried_probes=[probe], dropped_during_dream=1)]
    for queue in queues:
        s = base.model_copy(update={"tick_queue": queue})
        for trigger in ("theta", "dream"):
            for missed in (*range(0, 9), 57, 1000):
                assert queue_missed(s, missed, 7.0, trigger) == _queue_one_by_one(s, missed, 7.0, trigger), \
                    (queue, trigger, missed)
    built = 0
    real = backpressure.HeartbeatEvent

    class Counted(real):  # type: ignore[misc, valid-type]
        def __init__(self, **kw):
            nonlocal built
            built += 1
            super().__init__(**kw)

    backpressure.HeartbeatEvent = Counted
    try:
        queue_missed(base, 100_000, 7.0)
    finally:
        backpressure.HeartbeatEvent = real
    assert built <= 2 * (backpressure.MAX_PENDING + 1), built  # a handful, not 2 per missed trigger
