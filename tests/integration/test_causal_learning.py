"""The delta cycle puts edges from the records into the causal graph (real SQLite, real records), and a
T2 tick's retrieve puts the causal chain from its current anomaly into the workspace's "Causal edges" section;
a next-curator follow-up changes what that cycle's Curator distils."""

from __future__ import annotations

import pytest

from activities.consolidation import ConsolidationActivities
from activities.tick import TickActivities
from golem.grimoire.semantic.graph import CausalGraph
from golem.inference.config import DEFAULT_ALLOCATIONS
from golem.inference.strategy import load_strategy
from golem.inference.workspace import WorkspaceSources, assemble_workspace
from golem.models.enums import MarketRegime, ProbeSeverity, Tier
from golem.models.golem import ConsolidationInput
from golem.models.observation import Anomaly
from golem.learning.reflexion import verdict_of
from golem.models.interventions import FollowUp
from golem.models.record import (
    DecisionCycleRecord,
    DeliberationRecord,
    ExpectedOutcome,
    OutcomeRecord,
    Reflexion,
    RuleApplied,
)
from golem.models.state import GolemState
from golem.models.tick import DecideInput, ObserveInput, RetrieveInput, TickContext
from tests.integration.golem_rig import EXAMPLE_HOME, make_rig

pytestmark = pytest.mark.integration

OWNER = "WHEN health_factor < 1.6 THEN repay 25% debt"  # the example STRATEGY.md's line 21
ORACLE = Anomaly(probe="oracle_deviation", severity=ProbeSeverity.HIGH, description="pool 3 % off the oracle")


async def test_delta_learns_causal_edges_a_t2_workspace_shows_the_chain_and_a_followup_focuses_the_curator(tmp_path):
    rig = make_rig(tmp_path, "causal-golem", "calm")
    try:
        services = rig.services()
        acts = TickActivities(services)
        ctx = TickContext(golem_id="causal-golem", tick=1, config=rig.config, state=GolemState(golem_id="causal-golem"),
                          started_at="2026-11-22T00:00:00+00:00")
        obs = acts.observe(ObserveInput(ctx=ctx)).model_copy(update={"regime": MarketRegime.VOLATILE})
        hf = obs.min_health_factor()
        for t in range(1, 21):  # an oracle anomaly every 4 ticks; the health factor falls 2 ticks after each
            anomalies = [ORACLE] if t % 4 == 1 else []
            if t % 4 == 3:
                hf *= 0.95
            snap = obs.snapshot.model_copy(update={"positions": [p.model_copy(update={"health_factor": hf})
                                                                 for p in obs.snapshot.positions]})
            services.cycles.persist(DecisionCycleRecord(
                tick=t, timestamp="2026-11-22T00:00:00+00:00", golem_id="causal-golem",
                observation=obs.model_copy(update={"snapshot": snap, "anomalies": anomalies}), anomalies=anomalies,
                regime=MarketRegime.VOLATILE, tier=Tier.T0, prediction_error=0.1, deliberation_threshold=0.5,
                gating_reason="test"))
        graph = CausalGraph(services.semantic.db_path)
        assert graph.edges() == []
        cons = ConsolidationActivities(services)
        inp = ConsolidationInput(golem_id="causal-golem", tick=21, config=rig.config)
        assert cons._causal(inp) >= 1 and cons._causal(inp) == cons._causal(inp)  # once per cycle tick
        edge = next(e for e in graph.edges() if e["source_id"] == "anomaly:oracle_deviation"
                    and e["target_id"] == "effect:health_factor_fell")
        assert edge["weight"] == 1.0 and edge["evidence"] == 1

        later = ctx.model_copy(update={"tick": 22})
        now = obs.model_copy(update={"anomalies": [ORACLE]})
        got = acts.retrieve(RetrieveInput(ctx=later, observation=now, tier=Tier.T2))
        chain = [e for e in got.entries if e.kind == "causal"]
        assert chain and "anomaly:oracle_deviation → effect:health_factor_fell, lag 2 ticks, weight 1.00" \
            in chain[0].summary, got.entries
        assert not [e for e in acts.retrieve(RetrieveInput(ctx=later, observation=now, tier=Tier.T1)).entries
                    if e.kind == "causal"]  # the causal search is a T2 step
        ws = assemble_workspace(
            DecideInput(ctx=later, observation=now, tier=Tier.T2, prediction_error=0.9, retrieved=got),
            WorkspaceSources(strategy=load_strategy(EXAMPLE_HOME / "STRATEGY.md")),
            dict(DEFAULT_ALLOCATIONS[Tier.T2]))
        text = "".join(m["content"] if isinstance(m["content"], str) else str(m["content"]) for m in ws.messages)
        assert "Causal edges" in text and "anomaly:oracle_deviation → effect:health_factor_fell" in text

        # a next-curator follow-up reaches the Curator at the delta cycle and changes what it distils
        for t, regime in [(t, r) for r in (MarketRegime.VOLATILE, MarketRegime.TRENDING_DOWN) for t in range(5)]:
            tick_no = 100 + t + (10 if regime == MarketRegime.TRENDING_DOWN else 0)
            rec = DecisionCycleRecord(
                tick=tick_no, timestamp="2026-11-22T00:00:00+00:00", golem_id="causal-golem", observation=obs,
                regime=regime, tier=Tier.T1, prediction_error=0.5, deliberation_threshold=0.3, gating_reason="test",
                deliberation=DeliberationRecord(model="offline-deliberator", tier=Tier.T1, rules_applied=[
                    RuleApplied(action_index=0, rule="STRATEGY.md:21", origin="owner", text=OWNER)]),
                outcome=OutcomeRecord(verified=True, health_factor_before=1.5, health_factor_after=1.9),
                episodes_written=[f"causal-golem:tick:{tick_no}"])
            services.learning.record(rec, Reflexion(verdict=verdict_of(rec.outcome), expected=ExpectedOutcome()), [])
        note = FollowUp(id="f-focus", message="Curator: focus on what the trending down regime taught",
                        window="next-curator")
        focused = cons._curate(ConsolidationInput(golem_id="causal-golem", tick=120, config=rig.config, followups=[note]))
        assert focused["focus"] == "distillation focused on trending_down (follow-up f-focus)"
        assert [(op["op"], op["text"]) for op in focused["operations"]] == [
            ("ADD", "WHEN health_factor < 1.76 AND regime == trending_down THEN repay 25% debt")]
        plain = cons._curate(ConsolidationInput(golem_id="causal-golem", tick=130, config=rig.config))
        assert plain["focus"] is None and any("regime == volatile" in op["text"] for op in plain["operations"])
    finally:
        rig.stop()


async def test_the_causal_link_probe_feeds_prediction_error_when_a_learned_effect_fails_to_follow(tmp_path):
    """The causal-link probe (docs/design/learning.md#the-causal-graph): an edge learned at weight 1.0 (oracle
    anomaly → health factor falls within 5 ticks) whose cause fires and whose effect does not follow → High, "causal
    link invalidated", an anomaly that raises the tick's prediction error."""
    from golem.cognition.prediction_error import compute_prediction_error
    from golem.learning.causal import CAUSAL_LINK_PROBE

    rig = make_rig(tmp_path, "probe-golem", "calm")
    try:
        services = rig.services()
        acts = TickActivities(services)
        ctx = TickContext(golem_id="probe-golem", tick=1, config=rig.config, state=GolemState(golem_id="probe-golem"),
                          started_at="2026-11-22T00:00:00+00:00")
        obs = acts.observe(ObserveInput(ctx=ctx))
        assert CAUSAL_LINK_PROBE not in {p.probe for p in obs.probes}, "absent while nothing is learned"
        hf = obs.min_health_factor()

        def persist(t, anomalies, hf):
            snap = obs.snapshot.model_copy(update={"positions": [p.model_copy(update={"health_factor": hf})
                                                                 for p in obs.snapshot.positions]})
            services.cycles.persist(DecisionCycleRecord(
                tick=t, timestamp="2026-11-22T00:00:00+00:00", golem_id="probe-golem",
                observation=obs.model_copy(update={"snapshot": snap, "anomalies": anomalies}), anomalies=anomalies,
                regime=MarketRegime.VOLATILE, tier=Tier.T0, prediction_error=0.1, deliberation_threshold=0.5,
                gating_reason="test"))

        level = hf * 0.7  # below the chain's: the real reading at tick 26 is no fall
        for t in range(1, 21):  # learn: every oracle anomaly is followed by a falling health factor 2 ticks later
            if t % 4 == 3:
                level *= 0.95
            persist(t, [ORACLE] if t % 4 == 1 else [], level)
        cons = ConsolidationActivities(services)
        assert cons._causal(ConsolidationInput(golem_id="probe-golem", tick=21, config=rig.config)) >= 1
        # now the cause fires at tick 21 and the health factor holds for five ticks
        for t in range(21, 26):
            persist(t, [ORACLE] if t == 21 else [], level)
        at = ctx.model_copy(update={"tick": 26})
        seen = acts.observe(ObserveInput(ctx=at))
        (probe,) = [p for p in seen.probes if p.probe == CAUSAL_LINK_PROBE]
        assert probe.severity == ProbeSeverity.HIGH and probe.value == 1.0, probe
        assert "invalidated: anomaly:oracle_deviation at tick 21 → effect:health_factor_fell did not follow" in probe.detail
        assert any(a.probe == CAUSAL_LINK_PROBE for a in seen.anomalies)
        without = seen.model_copy(update={"anomalies": [a for a in seen.anomalies if a.probe != CAUSAL_LINK_PROBE]})
        pe, sources = compute_prediction_error(at.state, seen)
        pe0, _ = compute_prediction_error(at.state, without)
        assert round(pe - pe0, 6) == 0.05, (pe, pe0, sources)
        # one tick earlier the window was still open: the probe ran, and did not fire
        early = acts.observe(ObserveInput(ctx=ctx.model_copy(update={"tick": 25})))
        (quiet,) = [p for p in early.probes if p.probe == CAUSAL_LINK_PROBE]
        assert quiet.severity == ProbeSeverity.NONE
    finally:
        rig.stop()
