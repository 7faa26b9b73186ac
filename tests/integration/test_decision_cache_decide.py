"""The decision cache through the real decide activity: a pattern decided the same way three times is answered from
the cache the fourth time; a steer always gets fresh thought. The cache lives on the worker's disk, not in the
tick's input: the context carries no entries, and a new worker over the same data dir keeps them."""

from __future__ import annotations

import pytest

from activities.tick import TickActivities
from golem.models.enums import Tier
from golem.models.interventions import Steer
from golem.models.state import GolemState
from golem.models.tick import DecideInput, ObserveInput, TickContext
from tests.integration.golem_rig import make_rig

pytestmark = pytest.mark.integration


@pytest.fixture
def rig(tmp_path):
    rig = make_rig(tmp_path, "cache-golem", "calm")
    yield rig
    rig.stop()


async def test_consistent_decisions_are_cached_and_steers_bypass_the_cache(rig):
    acts = TickActivities(rig.services())
    state = GolemState(golem_id=rig.golem_id)
    ctx = TickContext(golem_id=rig.golem_id, tick=1, config=rig.config, state=state,
                      started_at="2026-11-22T00:00:00+00:00")
    obs = acts.observe(ObserveInput(ctx=ctx))
    models = []
    for tick in range(1, 5):
        ctx = ctx.model_copy(update={"tick": tick, "state": state})
        d = await acts.decide(DecideInput(ctx=ctx, observation=obs, tier=Tier.T1, prediction_error=0.4))
        models.append(d.record.model)
        assert d.decision_cache is None, "the cache itself stays on the worker"
    # a restarted worker (new services over the same data dir) still has the three consistent decisions
    acts = TickActivities(rig.services())
    ctx = ctx.model_copy(update={"tick": 5})
    d = await acts.decide(DecideInput(ctx=ctx, observation=obs, tier=Tier.T1, prediction_error=0.4))
    models.append(d.record.model)
    assert models[:3] == ["offline-deliberator"] * 3
    assert models[3:] == ["decision-cache"] * 2, models
    assert d.decision_cache_stats is not None
    assert d.decision_cache_stats["hits"] == 2 and d.decision_cache_stats["lookups"] == 5
    assert d.decision_cache_stats["entries"] == 1
    assert "decision_cache" not in ctx.for_step("decide").model_dump(mode="json")["state"]

    steer = Steer(id="s", message="reduce exposure", severity="high")
    ctx = ctx.model_copy(update={"tick": 6, "state": state})
    d = await acts.decide(DecideInput(ctx=ctx, observation=obs, tier=Tier.T2, prediction_error=0.4, steers=[steer]))
    assert d.record.model == "offline-deliberator" and d.actions, "the owner's steer is thought about afresh"


NO_RULES = """# Strategy: only learned rules act

## Settings
- collateral: WETH
- debt: USDC

## Rules

## Constraints
- MUST keep health_factor >= 1.3
- MUST NOT borrow
"""
LEARNED = ("<!-- golem PLAYBOOK revision: 1 -->\n# PLAYBOOK\n\n## Global\n\n"
           "- WHEN health_factor < 50 THEN repay 1% debt _(confidence 0.90, 5 episodes, h-0123456789abcdef)_\n")


async def test_a_learned_rule_reused_from_the_cache_still_names_its_entry_id(rig):
    """A System 1 hit carries the rules behind the cached decision, so the learned rule gets credit."""
    (rig.home / "STRATEGY.md").write_text(NO_RULES)
    rig.services().playbook_path.write_text(LEARNED)
    acts = TickActivities(rig.services())
    state = GolemState(golem_id=rig.golem_id)
    ctx = TickContext(golem_id=rig.golem_id, tick=1, config=rig.config, state=state,
                      started_at="2026-11-22T00:00:00+00:00")
    obs = acts.observe(ObserveInput(ctx=ctx))
    out = []
    for tick in range(1, 6):
        ctx = ctx.model_copy(update={"tick": tick, "state": state})
        out.append(await acts.decide(DecideInput(ctx=ctx, observation=obs, tier=Tier.T1, prediction_error=0.4)))
    assert [d.record.model for d in out] == ["offline-deliberator"] * 3 + ["decision-cache"] * 2
    for d in out:
        assert [(r.origin, r.entry_id) for r in d.record.rules_applied] == [("learned", "h-0123456789abcdef")], d.record
        assert d.actions and d.actions[0].tool == "repay"
