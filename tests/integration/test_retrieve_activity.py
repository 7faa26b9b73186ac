"""The retrieve activity runs hybrid retrieval over both stores and reports per-factor scores."""

from __future__ import annotations

import pytest

from activities.tick import TickActivities
from golem.grimoire.episodes.model import Episode
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry
from golem.models.enums import MarketRegime, Tier
from golem.models.interventions import FollowUp, Steer
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


async def test_an_owner_question_about_an_earlier_tick_is_asked_as_of_that_tick(rig):
    """"the retrieve activity when a question concerns the past" passes as_of — a steer asking about tick
    8,000 gets the repay line in force then (superseded since) and not the one written later."""
    services = rig.services()
    acts = TickActivities(services)
    src = EntrySource(golem_id="mem-golem")
    services.semantic.put_many([
        GrimoireEntry(id="repay-1.5", category=EntryType.HEURISTIC, source=src, valid_from=1_000, valid_until=12_000,
                      created_tick=1_000, content="Repay 20% of the USDC debt when the health factor falls below 1.5."),
        GrimoireEntry(id="repay-1.6", category=EntryType.HEURISTIC, source=src, valid_from=12_000, created_tick=12_000,
                      content="Repay 20% of the USDC debt when the health factor falls below 1.6."),
    ])
    steer = Steer(id="s-past", message="At tick 8,000 what health factor line made the strategy repay USDC debt?")
    note = FollowUp(id="f-now", message="check the DAI balance")
    state = GolemState(golem_id="mem-golem", pending_steers=[steer], pending_followups=[note])
    ctx = TickContext(golem_id="mem-golem", tick=40_000, config=rig.config, state=state,
                      started_at="2026-11-22T00:02:00+00:00")
    obs = acts.observe(ObserveInput(ctx=ctx)).model_copy(update={"regime": MarketRegime.RANGE_BOUND})
    got = acts.retrieve(RetrieveInput(ctx=ctx, observation=obs, tier=Tier.T2))
    assert [(p.id, p.as_of) for p in got.past_questions] == [("s-past", 8_000)], got.past_questions
    then = {e.id: e for e in got.entries if e.as_of == 8_000}
    assert "repay-1.5" in then and "repay-1.6" not in then, got.entries
    assert got.past_questions[0].entry_ids[0] == "repay-1.5"
    assert got.entries[0].id == "repay-1.5", "the owner's question leads"

    # the same tick without a question about the past: the superseded line never comes back
    plain = ctx.model_copy(update={"state": GolemState(golem_id="mem-golem", pending_steers=[
        Steer(id="s-now", message="What health factor line makes the strategy repay USDC debt?")])})
    now = acts.retrieve(RetrieveInput(ctx=plain, observation=obs, tier=Tier.T2))
    assert now.past_questions == [] and all(e.as_of is None for e in now.entries)
    assert "repay-1.5" not in [e.id for e in now.entries]
