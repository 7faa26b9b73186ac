"""Self-steers (golem.life.self_steer): once on each edge, with the source and severity the design names."""

from __future__ import annotations

from golem.cognition.system1 import synthetic_snapshot
from golem.cognition.threshold import gate
from golem.life.self_steer import REFUSAL_STREAK, risk_band, self_steers
from golem.models.enums import ActionStatus, BehavioralPhase, MarketRegime, SteerSeverity, Tier
from golem.models.interventions import Steer, parse_intervention
from golem.models.observation import Observation
from golem.models.record import ActionRecord, DecisionCycleRecord
from golem.models.state import GolemState


def _record(tick: int = 7, *, dd_used: float = 0.1, phase=BehavioralPhase.THRIVING, blocked: bool = False):
    obs = Observation(snapshot=synthetic_snapshot(2000.0, 0), regime=MarketRegime.RANGE_BOUND, observed_at="t")
    actions = [ActionRecord(action_index=0, action_type="swap", tool_name="swap", status=ActionStatus.BLOCKED,
                            block_reason="max_trade_size_usd: $6,000 > $5,000")] if blocked else []
    return DecisionCycleRecord(tick=tick, timestamp="2026-01-01T00:00:00+00:00", golem_id="g", observation=obs,
                               regime=obs.regime, prediction_error=0.0, deliberation_threshold=0.3, tier=Tier.T0,
                               gating_reason="T0", inference_cost=0.0, gas_cost=0.0, total_cost=0.0, phase=phase,
                               actions=actions,
                               risk={"drawdown_pct": 20 * dd_used, "drawdown_used": dd_used, "max_drawdown_pct": 20.0})


def test_the_risk_daemon_steers_once_per_band_entered():
    assert [risk_band(x) for x in (0.0, 0.49, 0.5, 0.79, 0.8, 1.3)] == [0, 0, 1, 1, 2, 2]
    rec = _record(dd_used=0.55)
    [steer] = self_steers(rec, band_before=0, band_now=1, streak_now=0, phase_before=BehavioralPhase.THRIVING)
    assert (steer.id, steer.source, steer.severity) == ("self-risk-7", "risk-daemon", SteerSeverity.MEDIUM)
    assert "55% of the 20% limit" in steer.message
    assert self_steers(rec, band_before=1, band_now=1, streak_now=0, phase_before=BehavioralPhase.THRIVING) == []
    assert self_steers(rec, band_before=2, band_now=1, streak_now=0, phase_before=BehavioralPhase.THRIVING) == []
    [high] = self_steers(_record(dd_used=0.9), band_before=0, band_now=2, streak_now=0,
                         phase_before=BehavioralPhase.THRIVING)
    assert high.severity == SteerSeverity.HIGH  # a jump over both bands steers at the higher one


def test_the_mortality_engine_steers_when_the_phase_worsens_and_the_cage_after_a_run_of_refusals():
    rec = _record(phase=BehavioralPhase.DECLINING)
    [steer] = self_steers(rec, band_before=0, band_now=0, streak_now=0, phase_before=BehavioralPhase.STABLE)
    assert (steer.source, steer.severity) == ("mortality-engine", SteerSeverity.HIGH)
    assert "stable -> declining" in steer.message
    # a recovery, a phase held, or a phase that never steers: nothing
    assert self_steers(_record(phase=BehavioralPhase.CONSERVATION), band_before=0, band_now=0, streak_now=0,
                       phase_before=BehavioralPhase.DECLINING) == []
    assert self_steers(rec, band_before=0, band_now=0, streak_now=0, phase_before=BehavioralPhase.DECLINING) == []
    assert self_steers(_record(phase=BehavioralPhase.STABLE), band_before=0, band_now=0, streak_now=0,
                       phase_before=BehavioralPhase.THRIVING) == []
    blocked = _record(blocked=True)
    for streak in (1, REFUSAL_STREAK - 1, REFUSAL_STREAK + 1):
        assert self_steers(blocked, band_before=0, band_now=0, streak_now=streak,
                           phase_before=BehavioralPhase.THRIVING) == []
    [cage] = self_steers(blocked, band_before=0, band_now=0, streak_now=REFUSAL_STREAK,
                         phase_before=BehavioralPhase.THRIVING)
    assert (cage.source, cage.severity) == ("policy-cage", SteerSeverity.LOW) and "max_trade_size_usd" in cage.message


def test_a_self_steer_is_a_steer_the_gate_names_by_source():
    steer = Steer(id="self-risk-7", message="risk daemon: drawdown", source="risk-daemon")
    assert parse_intervention("steer", steer.model_dump(mode="json")) == steer  # the signal's payload round-trips
    state = GolemState(golem_id="g", pending_steers=[steer, Steer(id="s-1", message="repay")])
    tier, reason, forced = gate(0.0, 0.3, state, [])
    assert (tier, forced) == (Tier.T2, True)
    assert "steer(s) self-risk-7 from the risk-daemon, s-1 active" in reason
    owner_only = GolemState(golem_id="g", pending_steers=[Steer(id="s-1", message="repay")])
    assert "owner steer(s) s-1 active" in gate(0.0, 0.3, owner_only, [])[1]
