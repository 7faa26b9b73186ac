"""The delta steps' wires for regime-matched evaluation, on a worker's real stores (rig with Anvil): a loop-2 retune is
recorded as a learning change, judged at a later cycle on the records' per-tick outcomes, rolled back as a new
ContextPolicy revision holding the allocations before it (a retried step does nothing twice); the outcomes' change
point is stored and both reach the Event Fabric and `golem status`."""

from __future__ import annotations

import random
from argparse import Namespace

import pytest

from activities.consolidation import ConsolidationActivities
from activities.tick import TickActivities
from cli.status import learning_line
from golem.events.bridge import consolidation_events
from golem.learning import cybernetics
from golem.learning.loop import allocation_defaults
from golem.models.enums import MarketRegime, Tier
from golem.models.golem import ConsolidationInput, ConsolidationResult
from golem.models.record import DecisionCycleRecord
from golem.models.regime_tag import RegimeTag
from golem.models.state import GolemState
from golem.models.tick import ObserveInput, TickContext
from tests.integration.golem_rig import make_rig

pytestmark = pytest.mark.integration

GOLEM = "regime-steps"


def _record(obs, tick: int, usdc: float) -> DecisionCycleRecord:
    snap = obs.snapshot.model_copy(update={"balances": {**obs.snapshot.balances, "USDC": usdc}})
    tag = RegimeTag(volatility_quintile=3, trend="range", gas_band="normal", liquidity_band="normal")
    return DecisionCycleRecord(
        tick=tick, timestamp="2026-11-27T00:00:00+00:00", golem_id=GOLEM,
        observation=obs.model_copy(update={"snapshot": snap, "regime_tag": tag}), regime=MarketRegime.RANGE_BOUND,
        tier=Tier.T0, prediction_error=0.1, deliberation_threshold=0.3, gating_reason="test")


def test_a_loop2_retune_that_made_ticks_lose_is_rolled_back_to_the_allocations_before_it(tmp_path):
    rig = make_rig(tmp_path, GOLEM, "calm")
    try:
        services = rig.services()
        config = rig.config.model_copy(update={"learning": rig.config.learning.model_copy(
            update={"regime_window_ticks": 20, "regime_min_matched": 5})})
        ctx = TickContext(golem_id=GOLEM, tick=1, config=config, state=GolemState(golem_id=GOLEM),
                          started_at="2026-11-27T00:00:00+00:00")
        obs = TickActivities(services).observe(ObserveInput(ctx=ctx))
        cons = ConsolidationActivities(services)
        defaults = allocation_defaults(config)
        # loop 1's samples: ticks with retrieved memory went well, those without badly → loop 2 moves tokens
        for i in range(10):
            services.learning.add_context_sample(i, "", cybernetics.ContextSample(
                tick=i, tier="T1", quality=1.0 if i % 2 else 0.0,
                categories={"invariants": 50, "observation": 80, "retrieved": 120 if i % 2 else 0}))
        retune = cons._retune(ConsolidationInput(golem_id=GOLEM, tick=50, config=config))
        assert retune["changed"] and retune["revision"] == 1
        (change,) = services.learning.changes()
        assert (change.id, change.op, change.status, change.before["allocations"]) == (
            "context_policy:1", "retune", "pending", defaults)

        # the records: flat before the retune, then every tick loses about $3 (same regime cells throughout)
        r = random.Random(7)
        usdc = 20000.0
        for t in range(80):
            usdc += r.gauss(0, 0.5) - (3.0 if t >= 50 else 0.0)
            services.cycles.persist(_record(obs, t, usdc))
        too_soon = cons._regime_eval(ConsolidationInput(golem_id=GOLEM, tick=52, config=config))
        assert too_soon["judged"] == [] and too_soon["pending"] == 1  # 2 ticks after: waits for 5 matched
        inp = ConsolidationInput(golem_id=GOLEM, tick=70, config=config)
        report = cons._regime_eval(inp)
        (judged,) = report["judged"]
        assert judged["status"] == "rolled_back" and "worse in matched regimes" in judged["reason"], judged
        policy = services.learning.context_policy(defaults)
        assert policy.revision == 2 and policy.allocations == defaults
        assert policy.reason.startswith("rollback of loop-2 revision 1: worse in matched regimes")
        (done,) = services.learning.changes()
        assert done.status == "rolled_back" and done.figures["comparison"]["effect_usd"] < -2
        # the outcomes shifted at the retune: the CUSUM places it there (inside the grace, so the window is not cut)
        assert report["change_points"] and abs(report["change_points"][0] - 50) <= 5, report
        # a retried step returns its report and undoes nothing twice
        assert cons._regime_eval(inp) == report and services.learning.context_policy(defaults).revision == 2

        kinds = [e.kind for e in consolidation_events(GOLEM, "2026-11-27T00:00:00+00:00",
                                                      ConsolidationResult(tick=70, regime_eval=report))]
        assert kinds == ["grimoire.change_rolled_back", "quality.outcome_change_point"]
        line = learning_line(Namespace(data=str(rig.data_dir)))
        assert line is not None and "1 changes: 1 rolled back" in line and "context_policy 1 (retune)" in line
        assert f"outcomes shifted down at tick {report['change_points'][0]}" in line
    finally:
        rig.stop()
