"""The Event Fabric's store: append-only by id, ordered by seq, filtered by kind/subsystem/time, retention."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from golem.errors import UserError
from cli.events import check_kinds, parse_since
from golem.events.models import make_event
from golem.events.store import EventSink, EventStore


def _ev(tick, kind, key="", when=None, **payload):
    when = when or datetime.now(timezone.utc).isoformat()
    return make_event("g", tick, when, kind, key, **payload)


def test_append_is_idempotent_by_id_and_ordered(tmp_path):
    store = EventStore(tmp_path)
    first = store.append([_ev(1, "heartbeat.tick_started"), _ev(1, "actions.blocked", "0", reason="cap")])
    again = store.append([_ev(1, "heartbeat.tick_started"), _ev(1, "heartbeat.tick_finished", tier="T0")])
    assert [e.kind for e in first] == ["heartbeat.tick_started", "actions.blocked"]
    assert [e.kind for e in again] == ["heartbeat.tick_finished"]  # the retried emit was ignored
    got = store.read()
    assert [e.seq for e in got] == sorted(e.seq for e in got) and len(got) == 3
    assert [e.kind for e in store.read(kinds=["actions"])] == ["actions.blocked"]
    assert [e.kind for e in store.read(kinds=["heartbeat.tick_finished"])] == ["heartbeat.tick_finished"]
    assert [e.kind for e in store.read(after=got[0].seq, limit=1)] == ["actions.blocked"]
    assert [e.kind for e in store.read(limit=1, newest=True)] == ["heartbeat.tick_finished"]
    assert store.read()[1].payload == {"reason": "cap"}


def test_retention_drops_old_and_excess(tmp_path):
    store = EventStore(tmp_path, retention_days=1, max_events=3)
    old = (datetime.now(timezone.utc) - timedelta(days=2)).isoformat()
    store.append([_ev(0, "heartbeat.tick_started", when=old)] + [_ev(t, "heartbeat.tick_started") for t in range(1, 6)])
    assert store.prune() == 3  # the 2-day-old one, then the oldest past 3
    assert [e.tick for e in store.read()] == [3, 4, 5]


def test_sink_tells_listeners_only_new_events_and_survives_a_broken_one(tmp_path):
    sink = EventSink(EventStore(tmp_path))
    seen = []
    sink.listeners += [lambda e: 1 / 0, seen.append]
    sink.emit([_ev(1, "heartbeat.tick_started")])
    sink.emit([_ev(1, "heartbeat.tick_started")])
    assert len(seen) == 1 and seen[0].seq is not None


def test_unknown_kind_and_bad_since_are_one_line_errors():
    with pytest.raises(ValueError, match="unknown event kind"):
        make_event("g", 1, "t", "heartbeat.nope")
    with pytest.raises(UserError, match="golem events --kinds"):
        check_kinds(["nope"])
    with pytest.raises(UserError, match="duration"):
        parse_since("yesterday")
    now = datetime(2026, 1, 2, tzinfo=timezone.utc)
    assert parse_since("1d", now) == "2026-01-01T00:00:00+00:00"
    assert parse_since("2026-01-01T12:00:00") == "2026-01-01T12:00:00+00:00"


def test_series_reads_one_numeric_field_of_one_kind_since_a_time(tmp_path):
    store = EventStore(tmp_path)
    t = datetime(2026, 3, 1, tzinfo=timezone.utc)
    at = lambda h: (t + timedelta(hours=h)).isoformat()  # noqa: E731
    store.append([_ev(1, "heartbeat.tick_finished", when=at(0), equity_usd=1000),
                  _ev(2, "heartbeat.tick_finished", when=at(1), equity_usd=990.5),
                  _ev(3, "heartbeat.tick_finished", when=at(2), equity_usd=None),  # not measured: left out
                  _ev(4, "heartbeat.tick_finished", when=at(3), equity_usd="n/a"),  # not a number: left out
                  _ev(5, "actions.blocked", "0", when=at(4), equity_usd=5),  # another kind
                  _ev(6, "heartbeat.tick_finished", when=at(5), equity_usd=1001.25)])
    assert store.series("heartbeat.tick_finished", "equity_usd", since=at(0)) == [
        (at(0), 1000.0), (at(1), 990.5), (at(5), 1001.25)]
    assert store.series("heartbeat.tick_finished", "equity_usd", since=at(1)) == [(at(1), 990.5), (at(5), 1001.25)]
    assert EventStore(tmp_path / "none").series("heartbeat.tick_finished", "equity_usd", since=at(0)) == []
    with pytest.raises(ValueError, match="plain payload key"):
        store.series("heartbeat.tick_finished", "x') OR 1=1 --", since=at(0))
