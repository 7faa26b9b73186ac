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
