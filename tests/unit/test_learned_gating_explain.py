"""`golem gating show` explains the experts' current weights (learned_gating.explain_experts)."""

from __future__ import annotations

from golem.cognition.learned_gating import apply_outcome_feedback, explain_experts
from golem.models.config import GatingSection
from golem.models.enums import MarketRegime, Tier
from golem.models.state import GatingDecision, LearnedGatingState


def test_explanation_follows_the_feedback():
    cfg = GatingSection()
    # quiet T0 ticks in a quiet market: every expert said 0 but risk_severity said 1 → it loses weight
    log = [GatingDecision(tick=t, mode="learned", tier=Tier.T0, signals=[0.0, 0.0, 0.0, 1.0, 0.0], composite=0.2,
                          boundaries=[0.8, 0.5, 0.2], arousal_bucket="low", learned_tier=Tier.T0,
                          regime=MarketRegime.RANGE_BOUND) for t in range(40)]
    learned, report = apply_outcome_feedback(LearnedGatingState(log=log), cfg)
    assert report.judged > 0
    lines = explain_experts(learned, log[-1])
    assert lines[0].startswith("hedge weights per expert (uniform 0.200)") and f"over {report.judged}" in lines[0]
    risk = next(x for x in lines if x.strip().startswith("risk_severity"))
    oracle = next(x for x in lines if x.strip().startswith("oracle_residual"))
    assert "trusted less" in risk and "mean loss 1.000" in risk and "| signal 1.000 →" in risk
    assert "trusted more" in oracle and "mean loss 0.000" in oracle
    assert lines[-1].startswith("  composite 0.200 vs sampled boundaries T2 0.800 / T1 0.500")
    fresh = explain_experts(LearnedGatingState())
    assert all("no feedback yet" in x and "as uniform" in x for x in fresh[1:])
