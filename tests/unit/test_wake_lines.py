"""The lines of STRATEGY.md, the health-factor forecast and the rule preview (golem.cognition.lines)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.cognition.lines import (
    HEALTH_HISTORY_LEN,
    forecast,
    live_lines,
    next_health_history,
    preview_rules,
    strategy_lines,
)
from golem.cognition.system1 import synthetic_snapshot
from golem.inference.strategy import metrics_from, parse_strategy
from golem.models.config import ProbeThresholds, WakeSection
from golem.models.enums import MarketRegime
from golem.models.observation import Observation

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = parse_strategy((REPO / "examples/golem-home/STRATEGY.md").read_text())
WAKE = WakeSection()
PROBES = ProbeThresholds()


def _example_lines(**metrics: object):
    """The example's lines as they stand in a market where its conditional sell rule cannot act (no downtrend)."""
    return live_lines(strategy_lines(EXAMPLE, PROBES, WAKE), EXAMPLE,
                      {"regime": "range_bound", "balance.WETH": 20.0, **metrics})


def _strategy(rules: str, constraints: str = "") -> object:
    return parse_strategy(f"# S\n## Rules\n{rules}\n## Constraints\n{constraints}\n")


def test_the_example_strategy_draws_its_repay_line_and_floor():
    lines = strategy_lines(EXAMPLE, PROBES, WAKE)
    assert lines.trigger == 1.6 and lines.floor == 1.3
    assert lines.probe_low == pytest.approx(1.7) and lines.probe_high == pytest.approx(1.4)
    # the downtrend sell at 1.9 is a line, but the repay at 1.6 places the probe: it protects the loan
    assert [ln.value for ln in lines.lines] == [1.9, 1.6, 1.3, 1.0]
    assert [ln.protects_loan for ln in lines.lines if ln.kind == "rule"] == [False, True]
    assert _example_lines().lines[1].kind == "must"  # the floor and the 50 % repay share 1.3: the MUST wins the label
    # the steer-only rule "steer contains … AND health_factor < 2.5" is no line the market can cross
    assert 2.5 not in [ln.value for ln in lines.lines]
    probes = lines.probe_thresholds(PROBES)
    assert (probes.health_factor_low, probes.health_factor_high) == (pytest.approx(1.7), pytest.approx(1.4))


def test_without_lines_the_probe_defaults_stand():
    lines = strategy_lines(_strategy("- WHEN price_change_bps <= -300 THEN swap 10% WETH to USDC"), PROBES, WAKE)
    assert (lines.probe_low, lines.probe_high, lines.source) == (1.5, 1.2, "defaults")
    assert [ln.value for ln in lines.lines] == [1.5, 1.2, 1.0]
    assert strategy_lines(None, PROBES, WAKE).probe_low == 1.5


def test_margins_are_configurable_and_high_never_above_low():
    s = _strategy("- WHEN health_factor < 1.4 THEN repay 10% debt", "- MUST keep health_factor >= 1.35")
    lines = strategy_lines(s, PROBES, WakeSection(probe_low_margin=0.0, probe_high_margin=0.3))
    assert lines.probe_low == 1.4 and lines.probe_high == 1.4


def test_a_steady_bleed_is_forecast_before_the_line():
    lines = _example_lines()
    history = [1.80 - 0.02 * i for i in range(8)]  # 1.80 … 1.66, falling 0.02 a tick
    f = forecast(history, 1.64, lines, WAKE)
    assert f is not None and f.line == 1.6 and f.line_label.startswith("STRATEGY.md:")
    assert f.slope == pytest.approx(-0.02) and f.worst_move == pytest.approx(-0.02)
    assert f.ticks_at_slope == pytest.approx(2.0) and f.within_horizon
    higher = [1.90 - 0.02 * i for i in range(8)]  # 1.90 … 1.76
    far = forecast(higher, 1.74, lines, WAKE)  # 7 ticks away at 0.02 a tick: beyond a 4-tick horizon
    assert far is not None and not far.within_horizon and far.ticks_at_slope == pytest.approx(7.0, rel=1e-3)


def test_the_worst_move_wakes_a_gap_the_slope_hides():
    lines = _example_lines()
    history = [2.0, 2.05, 2.1, 2.15, 2.2]  # rising, then one −0.22 row
    f = forecast(history, 1.98, lines, WAKE)
    assert f is not None and f.slope is not None and f.slope < 0
    assert f.worst_move == pytest.approx(-0.22)
    assert f.ticks_at_worst == pytest.approx((1.98 - 1.6) / 0.22, rel=1e-3)
    assert f.within_horizon


def test_below_a_line_is_within_and_the_next_line_is_the_target():
    lines = _example_lines()
    f = forecast([1.7, 1.65], 1.55, lines, WAKE)
    assert f is not None and f.crossed == [1.6] and f.line == 1.3 and f.within_horizon
    under_all = forecast([], 0.95, lines, WAKE)
    assert under_all is not None and under_all.line == 1.0 and under_all.within_horizon


def test_no_loan_no_forecast_and_a_calm_loan_sleeps():
    lines = _example_lines()
    assert forecast([2.0], None, lines, WAKE) is None
    calm = forecast([2.06, 2.055, 2.06, 2.058], 2.057, lines, WAKE)
    assert calm is not None and not calm.within_horizon


@settings(max_examples=200, deadline=None)
@given(history=st.lists(st.floats(0.5, 5.0), max_size=20), hf=st.floats(0.5, 5.0),
       horizon=st.floats(0.0, 20.0), window=st.integers(2, 16))
def test_forecast_properties(history, hf, horizon, window):
    wake = WakeSection(horizon_ticks=horizon, window_ticks=window)
    lines = strategy_lines(EXAMPLE, PROBES, wake)
    f = forecast(history, hf, lines, wake)
    assert f is not None
    assert f.samples <= window
    # the target is the nearest line strictly below, or the lowest line when under all of them
    below = [ln.value for ln in lines.lines if ln.value < hf]
    assert f.line == (max(below) if below else min(ln.value for ln in lines.lines))
    assert f.crossed == [ln.value for ln in lines.lines if hf <= ln.value]
    for t in (f.ticks_at_slope, f.ticks_at_worst):
        assert t is None or t >= 0
    # the worst move is never gentler than the mean slope, so it never forecasts later
    if f.ticks_at_slope is not None:
        assert f.ticks_at_worst is not None and f.ticks_at_worst <= f.ticks_at_slope + 1e-6
    soon = [t for t in (f.ticks_at_slope, f.ticks_at_worst) if t is not None and t <= horizon]
    assert f.within_horizon == (bool(f.crossed) or bool(soon))


@given(st.lists(st.one_of(st.none(), st.floats(0.5, 5.0)), max_size=40))
def test_health_history_stays_small_and_restarts_without_a_loan(hfs):
    history: list[float] = []
    for hf in hfs:
        history = next_health_history(history, hf)
        assert len(history) <= HEALTH_HISTORY_LEN
        if hf is None:
            assert history == []
        else:
            assert history[-1] == pytest.approx(hf)


def _observation(price: float, *, debt: float = 8000.0, regime: MarketRegime = MarketRegime.UNKNOWN) -> Observation:
    return Observation(snapshot=synthetic_snapshot(price, 0, debt_usdc=debt), regime=regime, observed_at="t")


def test_a_rule_line_stands_only_while_its_other_conditions_hold():
    """Sitting under the sell line at 1.9 wakes the golem only while the sell can act (a downtrend, WETH above 10):
    once it sold down to 10 WETH the position may sit under 1.9 for a whole bear without a T1 every tick."""
    from golem.cognition.lines import wake_check
    from golem.models.enums import Tier

    obs = _observation(1850.0, regime=MarketRegime.TRENDING_DOWN)  # HF 1.85: under 1.9, above 1.6
    assert obs.snapshot.balances["WETH"] > 10
    w = wake_check(EXAMPLE, obs, [1.86, 1.855], 1851.0, PROBES, WAKE)
    assert w.floor == Tier.T1 and w.forecast is not None and 1.9 in w.forecast.crossed
    sold = obs.model_copy(update={"snapshot": obs.snapshot.model_copy(
        update={"balances": {**obs.snapshot.balances, "WETH": 9.0}})})
    w = wake_check(EXAMPLE, sold, [1.86, 1.855], 1851.0, PROBES, WAKE)
    assert w.floor is None and w.forecast is not None and w.forecast.crossed == [] and w.forecast.line == 1.6
    ranging = obs.model_copy(update={"regime": MarketRegime.RANGE_BOUND})
    assert wake_check(EXAMPLE, ranging, [1.86, 1.855], 1851.0, PROBES, WAKE).floor is None
    m = metrics_from(sold, 1851.0)
    assert [ln.value for ln in live_lines(strategy_lines(EXAMPLE, PROBES, WAKE), EXAMPLE, m).lines] == [1.6, 1.3, 1.0]


def test_preview_fires_the_rules_the_offline_deliberator_would():
    # synthetic HF = 10 WETH × price × 0.8 / 8000 USDC debt: 1,550 → 1.55 (under the 1.6 repay line)
    hits = preview_rules(EXAMPLE, _observation(1550.0), last_price=1560.0)
    assert [h.text for h in hits] == ["WHEN health_factor < 1.6 THEN repay 25% debt"]
    assert hits[0].evidence == ["health_factor 1.55 < 1.6"]
    # a −10 % row also fires the swap rule; the steer rules never preview
    hits = preview_rules(EXAMPLE, _observation(1800.0), last_price=2000.0)
    assert [h.rule for h in hits] == [r.label for r in EXAMPLE.rules if "price_change_bps <= -300" in r.text]
    assert preview_rules(EXAMPLE, _observation(2100.0), last_price=2100.0) == []
    assert preview_rules(None, _observation(1000.0), last_price=2000.0) == []


def test_wake_check_floors_on_a_rule_hit_far_from_any_line_and_lift_applies_it():
    from golem.cognition.lines import lift, wake_check
    from golem.models.enums import Tier

    # HF 2.5 at 2,500, far from every line; a −5 % tick fires the swap rule: T1 at least
    obs = _observation(2500.0)
    w = wake_check(EXAMPLE, obs, [2.6, 2.6], 2632.0, PROBES, WAKE)
    assert w.floor == Tier.T1 and [h.text for h in w.rule_hits] == [
        "WHEN price_change_bps <= -300 THEN swap 10% WETH to USDC"]
    assert w.forecast is not None and not w.forecast.within_horizon
    tier, reason, lifted = lift(Tier.T0, "T0: PE 0.100 < θ 0.800", w)
    assert tier == Tier.T1 and lifted.lifted_from == Tier.T0
    assert reason.startswith("T0: PE 0.100 < θ 0.800; wake: T0→T1, rule STRATEGY.md:")
    assert lift(Tier.T2, "T2", w) == (Tier.T2, "T2", w)  # a floor never lowers
    # with the preview off, the same tick has no floor
    off = wake_check(EXAMPLE, obs, [2.6, 2.6], 2632.0, PROBES, WakeSection(preview_rules=False))
    assert off.floor is None and off.rule_hits == [] and lift(Tier.T0, "T0", off)[0] == Tier.T0


def test_system1_keeps_no_tick_at_t0_near_a_line_whatever_the_threshold():
    """The in-process System 1 over a bleed (synthetic world, HF = price / 1000): a confident golem (base threshold at
    its ceiling) sleeps through it on gating alone; with STRATEGY.md the floor wakes every tick near a line."""
    from golem.cognition.system1 import simulate
    from golem.models.config import GolemConfig, HeartbeatSection
    from golem.models.enums import Tier

    prices = [2000.0 * 0.985 ** k for k in range(30)]  # HF 2.0 → ~1.3
    cfg = GolemConfig(heartbeat=HeartbeatSection(base_deliberation_threshold=0.8))
    asleep = simulate(prices, cfg)
    awake = simulate(prices, cfg, strategy=EXAMPLE)
    near = [i for i, p in enumerate(prices) if 1.6 <= p / 1000.0 < 1.6 + 3 * 0.03]
    assert near and all(asleep.tiers[i] == Tier.T0 for i in near)
    assert all(awake.tiers[i] != Tier.T0 for i in near)
    under = [i for i, p in enumerate(prices) if p / 1000.0 < 1.6]
    assert under and all(awake.tiers[i] != Tier.T0 for i in under)


def test_ticks_show_and_status_say_when_and_why_the_golem_woke(tmp_path, capsys):
    """A record whose tick the floor lifted, in a real cycle store: `golem ticks` ends its row with the wake note,
    `golem show` prints the summary on stderr, `golem status`'s wake line reads the newest record."""
    from argparse import Namespace

    from cli.records import cmd_show, cmd_ticks
    from cli.status import wake_line
    from golem.cognition.lines import lift, wake_check
    from golem.life.cycle_store import CycleStore
    from golem.models.enums import Tier
    from golem.models.record import DecisionCycleRecord

    obs = _observation(1590.0)  # HF 1.59: the repay rule fires
    wake = wake_check(EXAMPLE, obs, [1.65, 1.62], 1620.0, PROBES, WAKE)
    tier, reason, wake = lift(Tier.T0, "T0: PE 0.100 < θ 0.800", wake)
    rec = DecisionCycleRecord(tick=7, timestamp="2026-01-01T00:07:00+00:00", golem_id="g", observation=obs,
                              regime=obs.regime, prediction_error=0.1, deliberation_threshold=0.8, tier=tier,
                              gating_reason=reason, wake=wake)
    CycleStore(tmp_path).persist(rec)
    assert cmd_ticks(Namespace(data=str(tmp_path), n=5, json=False)) == 0
    row = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("7 ")][0]
    assert "woke T0→T1, rule STRATEGY.md:" in row
    assert cmd_show(Namespace(data=str(tmp_path), tick=7, run=None, runs=False)) == 0
    err = capsys.readouterr().err
    floor_line = next(c.line for c in EXAMPLE.constraints if c.metric == "health_factor")
    assert f"wake: HF 1.590, line 1.3 (STRATEGY.md:{floor_line}): 9.7 ticks at the recent slope" in err and "rules would fire: STRATEGY.md:" in err and "lifted T0→T1" in err
    line = wake_line(Namespace(data=str(tmp_path)), 8)
    assert line is not None and line.strip().startswith("wake:       tick 7: HF 1.590")
    assert wake_line(Namespace(data=str(tmp_path / "none")), 8) is None
    assert wake_line(Namespace(data=str(tmp_path)), 7) is None  # the golem's next tick is 7: tick 7 is a former golem's


def test_preview_reads_the_learned_rules_after_the_owners():
    from golem.inference.strategy import rules_in

    learned = rules_in("- WHEN health_factor < 1.7 THEN repay 25% debt\n", "PLAYBOOK.md", EXAMPLE)
    # HF 1.65: above the owner's 1.6 repay line, under the learned 1.7 one
    assert preview_rules(EXAMPLE, _observation(1650.0), last_price=1650.0) == []
    (hit,) = preview_rules(EXAMPLE, _observation(1650.0), last_price=1650.0, learned=learned)
    assert hit.rule.startswith("PLAYBOOK.md:") and hit.evidence == ["health_factor 1.65 < 1.7"]
