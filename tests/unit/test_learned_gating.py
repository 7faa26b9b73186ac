"""Learned gating (docs/design/gate.md#learned-gating), the newer
probes, and a pure simulation of the whole System 1 over simulator price paths."""

from __future__ import annotations

import json
import math
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.cognition.fold import fold_tick_result
from golem.cognition.learned_gating import (
    GatingSection,
    PackageError,
    apply_outcome_feedback,
    arousal_bucket,
    epsilon_select,
    export_package,
    gate_tick,
    hedge_combine,
    hedge_update,
    import_package,
    learn_at_delta,
    note_gating_outcome,
    required_tier,
    sample_boundaries,
    thompson_update,
    tick_seed,
)
from golem.cognition.probes import probe_credit_balance, probe_homeostatic_deviation
from golem.cognition.system1 import simulate, synthetic_snapshot, system1_tick
from golem.models.config import ClockSection, GolemConfig, HeartbeatSection, ProbeThresholds
from golem.models.enums import MarketRegime, ProbeSeverity, Tier
from golem.models.interventions import Steer
from golem.models.observation import Observation, ProbeResult
from golem.models.state import (
    GATING_EXPERTS,
    GatingDecision,
    GolemState,
    HedgeState,
    LearnedGatingState,
    PADVector,
    ThompsonBoundaries,
    VitalityState,
)
from golem.models.tick import TickResult
from golem.world.simulator.paths import oracle_path

G = GatingSection()
HB = HeartbeatSection()
PT = ProbeThresholds()
N = len(GATING_EXPERTS)
unit = st.floats(0.0, 1.0)
signals_st = st.lists(unit, min_size=N, max_size=N)


# ---- Hedge -----------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(signals_st, unit), min_size=1, max_size=60), st.floats(0.01, 5.0), st.floats(0.5, 1.0))
def test_hedge_weights_stay_a_distribution(rounds, eta, discount):
    h = HedgeState()
    for signals, outcome in rounds:
        h = hedge_update(h, signals, outcome, eta, discount)
        assert all(w >= 0 and math.isfinite(w) for w in h.weights)
        assert math.fsum(h.weights) == pytest.approx(1.0)
        assert 0.0 <= hedge_combine(h, signals) <= 1.0
    assert h.rounds == len(rounds)


def test_hedge_moves_weight_to_the_expert_that_predicts_the_outcome():
    h = HedgeState()
    for i in range(200):
        y = float(i % 2)
        h = hedge_update(h, [y, 1 - y, 0.5, 0.0, 1.0], y, eta=0.1, discount=0.99)
    assert h.weights[0] == max(h.weights)
    assert h.weights[1] == min(h.weights)


def test_discount_pulls_back_toward_uniform():
    """Fixed share 0.99: with no information (equal losses) a skewed distribution relaxes to uniform,
    the deviation halving in ~69 rounds."""
    h = HedgeState(weights=[0.96, 0.01, 0.01, 0.01, 0.01])
    for _ in range(69):
        h = hedge_update(h, [0.5] * N, 0.5, eta=0.1, discount=0.99)
    assert h.weights[0] - 0.2 == pytest.approx((0.96 - 0.2) / 2, rel=0.02)


def test_hedge_rejects_wrong_signal_count_and_survives_nan():
    with pytest.raises(ValueError, match="5 experts"):
        hedge_combine(HedgeState(), [0.1, 0.2])
    bad = HedgeState(weights=[float("nan")] * N)
    assert hedge_combine(bad, [1.0] * N) == pytest.approx(1.0)  # degenerate weights read as uniform


# ---- Thompson --------------------------------------------------------------------------------

beta_st = st.tuples(st.floats(0.05, 500), st.floats(0.05, 500))


@settings(max_examples=300, deadline=None)
@given(st.lists(beta_st, min_size=3, max_size=3), st.floats(-1.5, 1.5), st.floats(-1.5, 1.5),
       st.integers(0, 2**63 - 1))
def test_thompson_boundaries_stay_ordered_and_bounded(pairs, arousal, dominance, seed):
    tb = ThompsonBoundaries.model_validate({"boundaries": [{"alpha": a, "beta": b} for a, b in pairs]})
    b = sample_boundaries(tb, arousal, dominance, random.Random(seed), G)
    assert b[0] >= b[1] >= b[2]
    assert all(0.05 <= x <= 0.95 for x in b)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(unit, st.integers(0, 2), st.integers(0, 2**32)), min_size=1, max_size=80))
def test_thompson_feedback_keeps_beliefs_valid_and_ordered_samples(events):
    tb = ThompsonBoundaries()
    for composite, required, seed in events:
        sampled = sample_boundaries(tb, 0.0, 0.0, random.Random(seed), G)
        tb, correct = thompson_update(tb, composite, sampled, required, G)
        assert len(correct) == 2
        assert all(b.alpha > 0 and b.beta > 0 for b in tb.boundaries)
        s = sample_boundaries(tb, 0.5, 0.3, random.Random(seed + 1), G)
        assert s == sorted(s, reverse=True)


def test_arousal_lowers_and_dominance_raises_boundaries():
    tb = ThompsonBoundaries()
    calm = sample_boundaries(tb, 0.0, 0.0, random.Random(7), G)
    aroused = sample_boundaries(tb, 1.0, 0.0, random.Random(7), G)
    dominant = sample_boundaries(tb, 0.0, 1.0, random.Random(7), G)
    assert all(a < c or a == 0.05 for a, c in zip(aroused, calm))
    assert aroused[0] < calm[0]
    assert all(d > c or d == 0.95 for d, c in zip(dominant, calm))
    assert [arousal_bucket(x) for x in (0.1, -0.5, 0.7, 0.99)] == ["low", "medium", "high", "high"]


def test_missed_events_lower_the_boundary_and_wasted_escalations_raise_it():
    sampled = [0.8, 0.5, 0.2]
    down, ok = thompson_update(ThompsonBoundaries(), 0.3, sampled, 1, G)  # needed T1, composite under T1 line
    assert ok == [True, False] and down.boundaries[1].mean < 0.5
    up, ok = thompson_update(ThompsonBoundaries(), 0.6, sampled, 0, G)  # escalated to T1, quiet window
    assert ok == [True, False] and up.boundaries[1].mean > 0.5
    same, ok = thompson_update(ThompsonBoundaries(), 0.1, sampled, 0, G)  # correct T0: mean holds, belief tightens
    assert ok == [True, True]
    b0, b1 = ThompsonBoundaries().boundaries[1], same.boundaries[1]
    assert b1.mean == pytest.approx(b0.mean) and b1.alpha + b1.beta > b0.alpha + b0.beta


def test_sampling_is_deterministic_per_seed():
    tb = ThompsonBoundaries()
    assert sample_boundaries(tb, 0.2, 0.1, random.Random(42), G) == sample_boundaries(tb, 0.2, 0.1, random.Random(42), G)
    assert tick_seed("demo", 5) == tick_seed("demo", 5) != tick_seed("demo", 6)


# ---- gate ------------------------------------------------------------------------------------

def _obs(state: GolemState, price: float, regime=MarketRegime.RANGE_BOUND, severity=ProbeSeverity.NONE) -> Observation:
    return Observation(snapshot=synthetic_snapshot(price, state.tick), regime=regime,
                       probes=[ProbeResult(probe="price_delta", severity=severity)])


def _state(tick=0, **kw) -> GolemState:
    return GolemState(golem_id="g", tick=tick, price_history=[2000.0] * 30, regime=MarketRegime.RANGE_BOUND, **kw)


def _gate(state, pe, obs=None, steers=(), spend=0.0, seed=1, threshold=0.3):
    return gate_tick(pe, threshold, state, list(steers), obs or _obs(state, 2000.0), probe_thresholds=PT,
                     heartbeat=HB, gating=G, daily_spend=spend, seed=seed)


def test_cold_start_uses_fixed_thresholds_then_learned_takes_over():
    cold = _gate(_state(tick=99), 0.35)
    assert (cold.tier, cold.decision.mode) == (Tier.T1, "fixed") and "cold start 99/100" in cold.reason
    assert cold.decision.learned_tier is not None and cold.decision.shadow_tier is not None  # shadow-logged
    warm = _gate(_state(tick=100), 0.35)
    assert warm.decision.mode == "learned" and "composite" in warm.reason
    # 0.35 PE alone, every other expert silent: the composite (0.07) is far below any T1 boundary
    assert warm.tier == Tier.T0


def test_learned_gate_escalates_a_crash_tick():
    s = _state(tick=500)
    crash = _obs(s, 2000 * 0.94, regime=MarketRegime.TRENDING_DOWN, severity=ProbeSeverity.HIGH)
    out = _gate(s, 0.65, obs=crash)
    assert out.decision.signals[:2] == [1.0, 1.0] and out.decision.signals[3] == 1.0
    assert out.tier in (Tier.T1, Tier.T2)


def test_inherited_parameters_skip_the_cold_start():
    s = _state(tick=3, learned_gating=LearnedGatingState(inherited_from="elder@900"))
    assert _gate(s, 0.1).decision.mode == "learned"


steer = Steer(id="s-1", message="reduce exposure")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 400), unit, st.floats(-1, 1), st.floats(-1, 1), st.floats(0, 8.99), st.integers(0, 2**40))
def test_forced_t2_always_wins_below_the_soft_cap(tick, pe, arousal, dominance, spend, seed):
    s = _state(tick=tick, pad=PADVector(arousal=arousal, dominance=dominance))
    out = _gate(s, pe, steers=[steer], spend=spend, seed=seed)
    assert (out.tier, out.forced, out.decision.mode) == (Tier.T2, True, "forced")
    dying = _state(tick=tick, vitality=VitalityState(economic=0.05))  # Terminal: phase transition forces T2
    assert _gate(dying, pe, spend=spend, seed=seed).tier == Tier.T2


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 400), unit, st.booleans(), st.floats(9.0, 100.0), st.integers(0, 2**40))
def test_budget_never_lets_t2_through_at_90_percent(tick, pe, steered, spend, seed):
    s = _state(tick=tick)
    out = _gate(s, pe, steers=[steer] if steered else [], spend=spend, seed=seed)
    assert out.tier == Tier.T0 and out.decision.tier == Tier.T0
    assert ("budget" in out.reason) == (out.decision.gated_tier != Tier.T0)


# ---- outcome feedback ------------------------------------------------------------------------

def _decision(tick, tier=Tier.T0, pe=0.0, composite=0.0, mode="learned", boundaries=(0.8, 0.5, 0.2), signals=None):
    return GatingDecision(tick=tick, mode=mode, gated_tier=tier, tier=tier, prediction_error=pe, composite=composite,
                          signals=signals or [composite] * N, boundaries=list(boundaries), learned_tier=tier,
                          shadow_tier=Tier.T0)


def _log(*entries):
    lg = LearnedGatingState()
    prev = MarketRegime.RANGE_BOUND
    for e, regime, actions in entries:
        lg = note_gating_outcome(lg, e, regime_before=prev, regime_after=regime, actions=actions)
        prev = regime
    return lg


RB, TD = MarketRegime.RANGE_BOUND, MarketRegime.TRENDING_DOWN


def test_required_tier_reads_the_next_window():
    quiet, event = _decision(1), _decision(2, pe=0.45)
    assert required_tier(quiet, [_decision(2)], G) == 0  # T0 correct: next window quiet
    assert required_tier(quiet, [event], G) == 1  # T0 missed a significant event
    assert required_tier(quiet, [_decision(2, pe=0.7)], G) == 2
    acted = _decision(1, tier=Tier.T2).model_copy(update={"actions": 1})
    # T2 led to an action: escalation was needed, but an action is no evidence T1 would not have found it
    # (counting it as "T2 was needed" fed a loop that sent 54 % of a volatile market's ticks to T2)
    assert required_tier(acted, [_decision(2)], G) == 1
    steered = acted.model_copy(update={"mode": "forced"})
    assert required_tier(steered, [_decision(2)], G) == 0  # the steer, not the market, asked for it


def test_feedback_judges_closed_windows_only_and_counts():
    lg = _log((_decision(0), RB, 0), (_decision(1, tier=Tier.T1, composite=0.6), RB, 0),
              (_decision(2), RB, 0), (_decision(3, pe=0.7), TD, 0))
    new, rep = apply_outcome_feedback(lg, G)
    # tick 3's window is still open; 0 quiet T0 ✓, 1 T1 over a quiet window ✗ (unnecessary), 2 T0 before a crash ✗
    assert (rep.judged, rep.correct, rep.unnecessary, rep.insufficient) == (3, 1, 1, 1)
    assert new.judged_through_tick == 2 and [e.tick for e in new.log] == [3]
    assert new.hedge.rounds == 3 and new.feedback_rounds == 1
    again, rep2 = apply_outcome_feedback(new, G)
    assert rep2.judged == 0 and again.hedge.rounds == 3  # nothing judged twice


def test_feedback_skips_over_failed_ticks():
    lg = _log((_decision(0), RB, 0), (_decision(2), RB, 0), (_decision(3), RB, 0))  # tick 1 failed: never logged
    _, rep = apply_outcome_feedback(lg, G)
    assert rep.judged == 2


def test_learning_from_missed_events_lowers_the_t1_boundary_of_that_arousal_bucket():
    entries = []
    for i in range(0, 60, 2):  # a T0 tick with composite 0.3, then a surprise
        entries += [(_decision(i, composite=0.3), RB, 0), (_decision(i + 1, pe=0.45, composite=0.3), RB, 0)]
    new, rep = apply_outcome_feedback(_log(*entries), G)
    assert rep.insufficient > 20
    assert new.thompson["low"].boundaries[1].mean < 0.4
    assert new.thompson["high"].boundaries[1].mean == pytest.approx(0.5)  # other buckets untouched


def test_fold_logs_the_decision_with_its_outcome():
    s = _state(tick=4)
    out = _gate(s, 0.1)
    res = TickResult(tick=4, tier=out.tier, regime="trending_down", prediction_error=0.1, threshold=0.3, price=2000,
                     gas_price_gwei=1, tvl=1, oracle_price=2000, actions_executed=2)
    s2 = fold_tick_result(s, res, "2025-01-01T00:00:00+00:00", ClockSection(), HB, out.decision, G)
    e = s2.learned_gating.log[-1]
    assert (e.tick, e.regime, e.regime_changed, e.actions) == (4, MarketRegime.TRENDING_DOWN, True, 2)
    s3, rep = learn_at_delta(s2, G)
    assert rep.judged == 0 and s3.learned_gating.log == s2.learned_gating.log  # needs the next window


def test_epsilon_greedy_shadow_explores_then_exploits():
    from golem.models.state import EpsilonGreedyState
    eg = EpsilonGreedyState(epsilon=0.0, arm_means=[0.2, 0.9, 0.1])
    assert {epsilon_select(eg, random.Random(i)) for i in range(50)} == {Tier.T1}
    eg = EpsilonGreedyState(epsilon=1.0)
    assert {epsilon_select(eg, random.Random(i)) for i in range(50)} == set(Tier)


# ---- inheritance package ---------------------------------------------------------------------

def test_export_import_round_trip_is_a_few_kb():
    entries = [(_decision(i, pe=0.45 if i % 7 == 0 else 0.0, composite=0.2), RB, 0) for i in range(50)]
    learned, _ = apply_outcome_feedback(_log(*entries), G)
    pkg = export_package(learned, "elder", 900)
    text = json.dumps(pkg)
    assert len(text.encode()) < 4096  # spec: ~3.7 KB budget
    back = import_package(json.loads(text))
    assert back.hedge.weights == pytest.approx(learned.hedge.weights)
    assert back.thompson["low"].boundaries[1].alpha == pytest.approx(learned.thompson["low"].boundaries[1].alpha)
    assert back.inherited_from == "elder@900" and back.log == []


@pytest.mark.parametrize("mutate,match", [
    (lambda p: p.update(format="other/9"), "unknown package format"),
    (lambda p: p.update(experts=["a"]), "do not match"),
    (lambda p: p["hedge"].update(weights=[0, 0, 0, 0, 0]), "not all 0"),
    (lambda p: p["thompson"].update(low=[[1, 1]]), "three"),
    (lambda p: p.pop("thompson"), "malformed"),
])
def test_import_rejects_bad_packages_with_a_reason(mutate, match):
    pkg = export_package(LearnedGatingState(), "g", 1)
    mutate(pkg)
    with pytest.raises(PackageError, match=match):
        import_package(pkg)


# ---- new probes ------------------------------------------------------------------------------

@pytest.mark.parametrize("spend,sev", [(0.0, ProbeSeverity.NONE), (8.5, ProbeSeverity.LOW),
                                       (9.5, ProbeSeverity.HIGH), (20.0, ProbeSeverity.HIGH)])
def test_credit_balance_probe(spend, sev):
    r = probe_credit_balance(spend, HB)
    assert r.severity == sev and r.value == pytest.approx(max(0.0, 1 - spend / 10.0))
    assert "skipped" in probe_credit_balance(None, None).detail


def test_homeostatic_deviation_probe():
    s = GolemState(golem_id="g", price_history=[2000.0 + (i % 3) for i in range(30)], gas_history=[1.0] * 30)
    assert probe_homeostatic_deviation(synthetic_snapshot(2001.0, 0), s).severity == ProbeSeverity.NONE
    r = probe_homeostatic_deviation(synthetic_snapshot(2006.0, 0), s)  # a 0.2 % move: ~1.8σ of returns
    assert r.severity == ProbeSeverity.LOW and "max: return" in r.detail
    assert probe_homeostatic_deviation(synthetic_snapshot(2015.0, 0), s).severity == ProbeSeverity.HIGH
    assert probe_homeostatic_deviation(synthetic_snapshot(2001.0, 0, gas_gwei=1.5), s).severity == ProbeSeverity.HIGH
    assert "skipped" in probe_homeostatic_deviation(synthetic_snapshot(2000.0, 0), GolemState(golem_id="g")).detail


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 1e6), st.floats(0, 1e4))
def test_credit_balance_monotone_in_spend(spend, extra):
    a, b = probe_credit_balance(spend, HB), probe_credit_balance(spend + extra, HB)
    assert b.value <= a.value and b.severity.rank >= a.severity.rank


def test_all_of_system1_is_well_under_10ms():
    cfg = GolemConfig()
    run = simulate(oracle_path("volatile", 2000.0, 70, seed=3), cfg)
    s, snap = run.state, synthetic_snapshot(1900.0, 70)
    t0 = time.perf_counter()
    for _ in range(100):
        system1_tick(snap, s, cfg, G, now_iso="2025-01-02T00:00:00+00:00")
    per_tick_ms = (time.perf_counter() - t0) / 100 * 1000
    assert per_tick_ms < 10.0  # all probes < 10 ms; probes + regime + PE + gate together here


# ---- System 1 over simulator paths -------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1])
def test_calm_market_is_mostly_t0_before_and_after_the_cold_start(seed):
    run = simulate(oracle_path("calm", 2000.0, 260, seed=seed))
    assert run.modes[99] == "fixed" and run.modes[100] == "learned"
    assert run.share(Tier.T0) >= 0.8
    assert run.share(Tier.T0, start=100) >= 0.8
    assert run.state.learned_gating.feedback_rounds >= 4  # delta every 50 ticks closed the loop


@pytest.mark.parametrize("crash_after", [5, 150])  # during the cold start, and under learned gating
def test_crash_escalates_within_its_first_ticks(crash_after):
    run = simulate(oracle_path("crash", 2000.0, crash_after + 12, seed=2, crash_after=crash_after))
    assert run.modes[crash_after] == ("fixed" if crash_after < 100 else "learned")
    assert run.tiers[crash_after - 3:crash_after] == [Tier.T0] * 3  # quiet before it
    first = run.tiers[crash_after:crash_after + 3]
    assert any(t != Tier.T0 for t in first), first


def test_a_tick_needs_no_gating_log_so_its_context_leaves_it_out():
    """state_for_tick drops the learned-gating outcome log from the tick's snapshot (it is most of the state) and
    keeps the gate's parameters to six significant digits; System 1 picks the same tier for the same reason
    with the full state or the tick's, for every tick of a run past the cold start."""
    from golem.cognition.fold import state_for_tick
    from golem.models.config import GatingSection

    cfg, gating = GolemConfig(), GatingSection()
    prices = oracle_path("volatile", 2000.0, 160, seed=4)
    run = simulate(prices[:150], cfg, gating)
    state = run.state
    assert len(state.learned_gating.log) > 50 and state.tick > gating.cold_start_ticks
    slim = state_for_tick(state)
    assert slim.learned_gating.log == [] and state.learned_gating.log, "the golem's own state keeps its log"
    assert len(slim.model_dump_json()) < len(state.model_dump_json()) / 2
    for i, price in enumerate(prices[150:], start=150):
        snap = synthetic_snapshot(price, i)
        full = system1_tick(snap, state, cfg, gating, now_iso="2025-01-02T00:00:00+00:00")
        lean = system1_tick(snap, slim, cfg, gating, now_iso="2025-01-02T00:00:00+00:00")
        assert lean.observation == full.observation and lean.prediction_error == full.prediction_error
        assert (lean.gate.tier, lean.gate.reason) == (full.gate.tier, full.gate.reason)
        assert lean.gate.decision.composite == pytest.approx(full.gate.decision.composite, abs=1e-5)
    assert state_for_tick(GolemState(golem_id="g")) == GolemState(golem_id="g")
