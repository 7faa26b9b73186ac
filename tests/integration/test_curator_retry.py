"""A Curator step retried after a crash between applying its votes and marking the credit curated votes
once (the votes are keyed by the cycle in the heuristics file), and the delta's PLAYBOOK step compiles the learned
rule only through the admission gate. Real SQLite/LanceDB stores of a worker's Services (rig with Anvil)."""

from __future__ import annotations

import pytest

from activities.consolidation import ConsolidationActivities
from golem.learning.reflexion import verdict_of
from golem.models.enums import MarketRegime, Tier
from golem.models.golem import ConsolidationInput
from golem.models.record import (
    CreditGiven,
    DecisionCycleRecord,
    DeliberationRecord,
    ExpectedOutcome,
    OutcomeRecord,
    Reflexion,
    RuleApplied,
)
from golem.models.state import GolemState
from golem.models.tick import ObserveInput, TickContext
from activities.tick import TickActivities
from tests.integration.golem_rig import make_rig

pytestmark = pytest.mark.integration

OWNER = "WHEN health_factor < 1.6 THEN repay 25% debt"  # the example STRATEGY.md's line 21


def _outcome(obs, tick, rule: RuleApplied, good: bool) -> DecisionCycleRecord:
    return DecisionCycleRecord(
        tick=tick, timestamp="2026-11-22T00:00:00+00:00", golem_id="retry-golem", observation=obs,
        regime=MarketRegime.VOLATILE, tier=Tier.T1, prediction_error=0.5, deliberation_threshold=0.3,
        gating_reason="test", deliberation=DeliberationRecord(model="offline-deliberator", tier=Tier.T1,
                                                               rules_applied=[rule]),
        outcome=OutcomeRecord(verified=True, health_factor_before=1.5, health_factor_after=1.9 if good else 1.4),
        episodes_written=[f"retry-golem:tick:{tick}"])


async def test_a_retried_curator_step_votes_once_and_the_playbook_admits_the_learned_rule(tmp_path):
    rig = make_rig(tmp_path, "retry-golem", "calm")
    try:
        services = rig.services()
        ctx = TickContext(golem_id="retry-golem", tick=1, config=rig.config, state=GolemState(golem_id="retry-golem"),
                          started_at="2026-11-22T00:00:00+00:00")
        obs = TickActivities(services).observe(ObserveInput(ctx=ctx))
        owner = RuleApplied(action_index=0, rule="STRATEGY.md:21", origin="owner", text=OWNER)
        for t in range(1, 6):
            rec = _outcome(obs, t, owner, True)
            services.learning.record(rec, Reflexion(verdict=verdict_of(rec.outcome), expected=ExpectedOutcome()), [])
        cons = ConsolidationActivities(services)
        first = cons._curate(ConsolidationInput(golem_id="retry-golem", tick=10, config=rig.config))
        (add,) = [op for op in first["operations"] if op["op"] == "ADD"]
        hid = add["entry_id"]
        # the PLAYBOOK step offers the learned rule to the admission gate, then compiles it from the admitted entry
        revision, view = cons._playbook(ConsolidationInput(golem_id="retry-golem", tick=10, config=rig.config))
        assert view.offered[hid] == "admitted" and hid not in view.excluded
        assert hid in services.playbook_path.read_text() and services.semantic.get(hid).content == add["text"]

        # two good outcomes of the learned rule → net +2 at the next cycle
        learned = RuleApplied(action_index=0, rule="PLAYBOOK.md:7", origin="learned", entry_id=hid, text=add["text"])
        for t in (11, 12):
            rec = _outcome(obs, t, learned, True)
            services.learning.record(rec, Reflexion(verdict="positive", expected=ExpectedOutcome()),
                                     [CreditGiven(entry_id=hid, kind="heuristic", delta=1, reason="test")])
        before = services.heuristics.get(hid)
        close = services.learning.close_cycle

        def crash(tick, report):  # the worker dies after the votes, before the ledger marks the credit curated
            raise RuntimeError("worker lost")

        services.learning.close_cycle = crash
        inp = ConsolidationInput(golem_id="retry-golem", tick=20, config=rig.config)
        with pytest.raises(RuntimeError):
            cons._curate(inp)
        services.learning.close_cycle = close
        retried = cons._curate(inp)  # Temporal retries the step
        assert [(op["op"], op["net"]) for op in retried["operations"] if op["op"] != "ADD"] == [("UPVOTE", 2)]
        after = services.heuristics.get(hid)
        assert round(after.confidence - before.confidence, 6) == 0.1 * 2 or after.confidence == 1.0
        assert after.importance == before.importance + 2, (before, after)  # once, not twice
        assert cons._curate(inp) == retried  # the closed cycle returns its report
    finally:
        rig.stop()
