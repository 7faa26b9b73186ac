"""The retrieve activity runs hybrid retrieval over both stores and reports per-factor scores."""

from __future__ import annotations

import pytest

from activities.tick import TickActivities
from golem.grimoire.episodes import Episode
from golem.models.enums import MarketRegime, Tier
from golem.models.state import GolemState
from golem.models.tick import ObserveInput, RetrieveInput, TickContext
from tests.integration.golem_rig import make_rig

pytestmark = pytest.mark.integration


@pytest.fixture
def rig(tmp_path):
    rig = make_rig(tmp_path, "mem-golem", "calm")
    yield rig
    rig.stop()


async def test_retrieve_finds_the_relevant_episode_with_scores_and_abstains_at_t0(rig):
    services = rig.services()
    acts = TickActivities(services)
    services.episodes.upsert(Episode(
        id="mem-golem:tick:1", golem_id="mem-golem", tick=1, created_at="2026-11-22T00:00:00+00:00",
        regime=MarketRegime.RANGE_BOUND, tier=Tier.T2, prediction_error=0.8, utility=0.9,
        summary="Tick 1: range bound regime, price 2000, health factor 2.00; repaid debt to protect the loan.",
    ))
    services.episodes.upsert(Episode(
        id="mem-golem:tick:2", golem_id="mem-golem", tick=2, created_at="2026-11-22T00:01:00+00:00",
        regime=MarketRegime.VOLATILE, tier=Tier.T0, prediction_error=0.0, utility=0.1,
        summary="Gas auction on an unrelated NFT mint; nothing to do with lending.",
    ))
    ctx = TickContext(golem_id="mem-golem", tick=3, config=rig.config, state=GolemState(golem_id="mem-golem"),
                      started_at="2026-11-22T00:02:00+00:00")
    obs = acts.observe(ObserveInput(ctx=ctx)).model_copy(update={"regime": MarketRegime.RANGE_BOUND})
    got = acts.retrieve(RetrieveInput(ctx=ctx, observation=obs, tier=Tier.T2))
    assert got.entries and got.entries[0].id == "mem-golem:tick:1", got
    assert "rrf" in got.entries[0].scores and got.summary.total_tokens > 0
    t0 = acts.retrieve(RetrieveInput(ctx=ctx, observation=obs, tier=Tier.T0))
    assert t0.entries == [] and t0.reason  # Self-RAG: a T0 tick does not retrieve
