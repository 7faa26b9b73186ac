"""A backtest's replay clock (workflows/clock.py): what it refuses and when a tick falls due, in path time."""

from __future__ import annotations

import pytest

from golem.models.golem import WorldTime
from workflows.clock import ReplayClock


def started(at: str | None = "2026-01-01T00:00:00+00:00", last_tick: str | None = None) -> ReplayClock:
    clock = ReplayClock()
    clock.start(at, last_tick)
    return clock


def test_a_row_needs_an_offset_and_never_goes_back():
    clock = started()
    with pytest.raises(ValueError, match="needs a UTC offset"):
        clock.check(WorldTime(row=1, at="2026-01-01T00:05:00"))
    with pytest.raises(ValueError, match="before the path time already reached"):
        clock.check(WorldTime(row=1, at="2025-12-31T23:59:00+00:00"))
    clock.check(WorldTime(row=1, at="2026-01-01T00:00:00+00:00"))  # the same time again is fine


def test_a_tick_falls_due_once_theta_has_elapsed_in_path_time():
    assert started().tick_due(60)  # no tick yet
    clock = started("2026-01-01T00:00:30+00:00", last_tick="2026-01-01T00:00:00+00:00")
    assert not clock.tick_due(60) and clock.tick_due(30)
    assert clock.gamma_due()  # none pulsed yet
    clock.gamma_in(10)
    assert not clock.gamma_due()
    assert clock.carried() == ("2026-01-01T00:00:30+00:00", "2026-01-01T00:00:00+00:00")
