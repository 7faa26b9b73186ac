"""The delta cycle's Curator reads what holding lost from the golem's own decision records: a window read as
trending_down whose price bled gives the owner's downtrend sell, one step earlier, before that rule ever fired.
Real SQLite/LanceDB stores of a worker's Services (rig with Anvil); the records are persisted as a tick does."""

from __future__ import annotations

import pytest

from activities.consolidation import ConsolidationActivities
from activities.tick import TickActivities
from golem.models.enums import MarketRegime, Tier
from golem.models.golem import ConsolidationInput
from golem.models.record import DecisionCycleRecord
from golem.models.state import GolemState
from golem.models.tick import ObserveInput, TickContext
from tests.integration.golem_rig import make_rig

pytestmark = pytest.mark.integration

LEARNED = "WHEN health_factor < 2.09 AND balance.WETH > 10 AND regime == trending_down THEN swap 30% WETH to USDC"


def _held(obs, tick: int, price: float) -> DecisionCycleRecord:
    snap = obs.snapshot.model_copy(update={"oracle_price": price})
    seen = obs.model_copy(update={"snapshot": snap, "regime": MarketRegime.TRENDING_DOWN})
    return DecisionCycleRecord(
        tick=tick, timestamp="2026-11-27T00:00:00+00:00", golem_id="hold-golem", observation=seen,
        regime=MarketRegime.TRENDING_DOWN, tier=Tier.T0, prediction_error=0.1, deliberation_threshold=0.3,
        gating_reason="test")


async def test_the_curator_learns_the_downtrend_hedge_from_what_holding_lost_in_the_records(tmp_path):
    rig = make_rig(tmp_path, "hold-golem", "calm")
    try:
        services = rig.services()
        ctx = TickContext(golem_id="hold-golem", tick=1, config=rig.config, state=GolemState(golem_id="hold-golem"),
                          started_at="2026-11-27T00:00:00+00:00")
        obs = TickActivities(services).observe(ObserveInput(ctx=ctx))
        assert obs.snapshot.balances["WETH"] > 10  # the dev world's wallet: the owner's floor leaves room to sell
        for t in range(1, 50):  # 0.2 % a tick, never an action: the owner's rule waits for health factor 1.9
            services.cycles.persist(_held(obs, t, 2000.0 * (1 - 0.002) ** t))
        report = ConsolidationActivities(services)._curate(
            ConsolidationInput(golem_id="hold-golem", tick=50, config=rig.config))
        (add,) = [op for op in report["operations"] if op["op"] == "ADD"]
        assert add["text"] == LEARNED and "holding WETH in trending_down lost" in add["reason"]
        assert services.heuristics.get(add["entry_id"]).text == LEARNED
    finally:
        rig.stop()


async def test_a_learned_rule_in_the_playbook_wakes_the_tick_it_would_fire_on(tmp_path):
    """The gate previews PLAYBOOK.md's learned rules with STRATEGY.md's: decide applies them, so a tick on which one
    would fire is at least T1 (a learned line is not crossed in silence); without the file's rule the tick sleeps."""
    from golem.models.enums import Tier
    from golem.models.tick import GateInput

    rig = make_rig(tmp_path, "wake-golem", "calm")
    try:
        services = rig.services()
        ctx = TickContext(golem_id="wake-golem", tick=1, config=rig.config, state=GolemState(golem_id="wake-golem"),
                          started_at="2026-11-27T00:00:00+00:00")
        ticks = TickActivities(services)
        obs = ticks.observe(ObserveInput(ctx=ctx))
        calm = ticks.gate(GateInput(ctx=ctx, observation=obs, prediction_error=0.0))
        assert calm.tier == Tier.T0 and calm.wake is not None and calm.wake.rule_hits == []
        learned = "WHEN health_factor < 3 AND balance.WETH > 10 THEN swap 30% WETH to USDC"  # HF ~2.06, 20 WETH
        services.playbook_path.write_text(f"# PLAYBOOK\n\n## Global\n\n- {learned} _(confidence 0.90, h-test)_\n")
        woke = ticks.gate(GateInput(ctx=ctx, observation=obs, prediction_error=0.0))
        assert woke.tier == Tier.T1 and [h.text for h in woke.wake.rule_hits] == [learned]
        assert woke.wake.rule_hits[0].rule.startswith("PLAYBOOK.md:") and "wake: T0→T1" in woke.reason
    finally:
        rig.stop()


async def test_a_rule_promoted_without_a_trial_is_judged_at_the_next_cycle_not_the_kth(tmp_path):
    """`trial_every = 2`: a rule that reached PLAYBOOK.md by its votes and was never measured is a trial candidate at
    the next cycle, not only on a re-judging one; a measured rule waits for the k-th cycle."""
    rig = make_rig(tmp_path, "cand-golem", "calm")
    try:
        services = rig.services()
        for i in range(5):
            h = services.heuristics.add_or_reinforce(LEARNED, "global", f"ep-{i}")
        assert h.status == "active" and h.trial_verdict is None
        cfg = rig.config.model_copy(update={"learning": rig.config.learning.model_copy(update={"trial_every": 2})})
        cons = ConsolidationActivities(services)
        odd = ConsolidationInput(golem_id="cand-golem", tick=50, config=cfg)  # cycle 1: not a re-judging one
        assert [(c.id, occasion) for c, occasion in cons._trial_candidates(odd)] == [(h.id, "rejudge")]
        services.heuristics.record_trial(h.id, 50, "rejudge", "kept", "{}")
        assert cons._trial_candidates(odd) == []
    finally:
        rig.stop()
