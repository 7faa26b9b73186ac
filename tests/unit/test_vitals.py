"""The heartbeat monitor's vitals against their thresholds (docs/design/life.md#the-heartbeat-monitor)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from golem.life.vitals import TickFact, evaluate_vitals

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _ticks(n: int, every: float = 30.0, **kw) -> list[TickFact]:
    return [TickFact(tick=i, time=(T0 + timedelta(seconds=every * i)).isoformat(), **kw) for i in range(n)]


def _at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def _vitals(alerts) -> dict:
    return {a.vital: a for a in alerts}


def test_regular_clean_ticks_raise_nothing():
    assert evaluate_vitals(_ticks(20), _at(19 * 30 + 31), 30.0, last_playbook_tick=10) == []


def test_a_stall_past_twice_the_expected_interval():
    ticks = _ticks(20)
    assert "tick_stalled" not in _vitals(evaluate_vitals(ticks, _at(19 * 30 + 59), 30.0, 10))
    a = _vitals(evaluate_vitals(ticks, _at(19 * 30 + 61), 30.0, 10))["tick_stalled"]
    assert a.severity == "high" and a.value == 61 and a.threshold == 60
    paused = _vitals(evaluate_vitals(ticks, _at(19 * 30 + 61), 30.0, 10, paused="pause by cli"))["tick_stalled"]
    assert paused.severity == "low" and "paused" in paused.detail


def test_success_rate_errors_runway_playbook_and_gas():
    ticks = _ticks(20)
    for t in ticks[:13]:
        t.errors = 1  # 7 of 20 clean = 35 % < 40 %
    v = _vitals(evaluate_vitals(ticks, _at(19 * 30 + 1), 30.0, 10))
    assert v["success_rate"].value == 0.35 and "errors" not in v  # 3 errors in the last 10: within 5
    for t in ticks[-6:]:
        t.errors = 1
    assert _vitals(evaluate_vitals(ticks, _at(19 * 30 + 1), 30.0, 10))["errors"].value == 9  # ticks 10-12 and 14-19

    burn = _ticks(11, every=8640.0, usdc=100.0, inference_usd=1.0)  # $10 over a day: 10 days of USDC
    assert _vitals(evaluate_vitals(burn, _at(86400 + 1), 8640.0, 0))["usdc_runway"].value == 10.0
    rich = _ticks(11, every=8640.0, usdc=1000.0, inference_usd=1.0)  # 100 days
    assert "usdc_runway" not in _vitals(evaluate_vitals(rich, _at(86400 + 1), 8640.0, 0))

    long = _ticks(101)
    assert _vitals(evaluate_vitals(long, _at(100 * 30 + 1), 30.0, None))["playbook_stale"].value == 100
    assert "playbook_stale" not in _vitals(evaluate_vitals(long, _at(100 * 30 + 1), 30.0, 50))

    gas = _ticks(3, gas_usd=2.0)
    for i, t in enumerate(gas):
        t.equity_usd = 1000.0 + 10.0 * i  # $20 income, $4 gas = 20 % > 15 %
    assert _vitals(evaluate_vitals(gas, _at(61), 30.0, 0))["gas_vs_income"].value == 0.2


def test_hayflick_distance_warns_in_the_declining_band_and_is_high_in_the_terminal_one():
    def at(lived: int):
        ticks = _ticks(5)
        for i, t in enumerate(ticks):
            t.ticks_lived, t.hayflick_ticks = lived - 4 + i, 100
        return _vitals(evaluate_vitals(ticks, _at(4 * 30 + 1), 30.0, 3))

    assert "hayflick" not in at(70)  # 30 left: the stochastic clock at 0.30, not below
    low = at(71)["hayflick"]
    assert low.severity == "low" and low.value == 29 and low.threshold == 30 and "71 of 100 ticks lived" in low.detail
    high = at(95)["hayflick"]
    assert high.severity == "high" and high.value == 5
    assert "hayflick" not in _vitals(evaluate_vitals(_ticks(5), _at(4 * 30 + 1), 30.0, 3))  # no limit configured


def test_tick_events_carry_the_hayflick_counter_the_lifespan_folds():
    """The heartbeat-monitor reads the Hayflick distance from the tick's event: ticks lived after the tick (the
    lifespan's own fold) and the configured limit; nothing when no limit is configured."""
    from golem.events.bridge import tick_context
    from golem.life.lifespan import lived_after
    from golem.models.config import GolemConfig, LifespanSection
    from golem.models.life import LifeState
    from golem.models.record import DecisionCycleRecord
    from golem.models.state import GolemState
    from golem.models.tick import TickContext

    state = GolemState(golem_id="g", life=LifeState(ticks_lived=40))
    record = DecisionCycleRecord.model_construct(inference_cost=0.0, gas_cost=0.0)
    ctx = TickContext(golem_id="g", tick=41, config=GolemConfig(lifespan=LifespanSection(hayflick_ticks=50)),
                      state=state)
    budgets = tick_context(ctx, record)["budgets"]
    assert budgets["ticks_lived"] == lived_after(state.life) == 41 and budgets["hayflick_ticks"] == 50
    plain = TickContext(golem_id="g", tick=41, config=GolemConfig(), state=state)
    assert "ticks_lived" not in tick_context(plain, record)["budgets"]


def test_a_stack_that_was_stopped_is_not_a_stall_until_the_new_worker_waited_too():
    """The last tick is hours old because the owner stopped `golem run`: the worker that reads the vitals started a
    few seconds ago, so the stall clock starts there; once it too waits past the threshold, the stall is reported."""
    ticks = _ticks(20)
    hours_later = 19 * 30 + 6 * 3600
    assert "tick_stalled" not in _vitals(evaluate_vitals(ticks, _at(hours_later), 30.0, 10,
                                                         serving_since=_at(hours_later - 5)))
    a = _vitals(evaluate_vitals(ticks, _at(hours_later), 30.0, 10, serving_since=_at(hours_later - 61)))["tick_stalled"]
    assert a.value == 61.0 and a.detail.startswith("no tick for 61.0s since the worker started")
    # the worker has been up all along: the clock runs from the last tick, as before
    b = _vitals(evaluate_vitals(ticks, _at(19 * 30 + 61), 30.0, 10, serving_since=_at(0)))["tick_stalled"]
    assert b.value == 61.0 and "since the worker started" not in b.detail
