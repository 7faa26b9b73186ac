"""Future-utility scoring through the real anthropic SDK, faked only at the HTTP boundary,
feeding the admission gate over a real SQLite + LanceDB semantic store in a temp dir."""

from __future__ import annotations

import asyncio

import pytest

from golem.grimoire.semantic.admission import AdmissionAction, admit, assess, estimate_future_utility
from golem.grimoire.store.embeddings import default_embedder
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore
from golem.inference.admission_utility import RATING_MAX_TOKENS, RATING_TOOL, FutureUtilityScorer
from golem.models.config import HeartbeatSection
from golem.models.golem import AdmissionStats
from tests.unit.inference_fakes import FakeMessagesAPI, error, message, router, tool_use

HAIKU = "claude-haiku-4-5"  # InferenceConfig's default t1_model: $1 in / $5 out per MTok
SRC = EntrySource(golem_id="g1")
USEFUL = "When DAI borrow rates exceed 9% during a volatile regime, repay a quarter of the loan before the next tick"
USELESS = "Markets did some things on a Tuesday and then other things happened later on"


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


@pytest.fixture
def store(tmp_path, embedder):
    return SemanticStore(tmp_path / "semantic.sqlite", tmp_path / "semantic.lance", embedder)


def old_insight(content: str, **kw) -> GrimoireEntry:
    # created at tick 0 and admitted at tick 10,000: recency ~0, so the utility factor decides the outcome
    return GrimoireEntry(category=EntryType.INSIGHT, content=content, source=SRC, created_tick=0, **kw)


def rating(utility, reason="specific and conditioned", *, input_tokens=420, output_tokens=38):
    async def reply(body):
        return message([tool_use(RATING_TOOL, {"utility": utility, "reason": reason})], model=body["model"],
                       input_tokens=input_tokens, output_tokens=output_tokens)
    return reply


def haiku_cost(input_tokens, output_tokens):
    return (input_tokens * 1.0 + output_tokens * 5.0) / 1e6


async def test_llm_rating_decides_admission_and_cost_is_summed(store):
    async def reply(body):
        text = body["messages"][0]["content"][0]["text"]
        if "DAI borrow" in text:
            return message([tool_use(RATING_TOOL, {"utility": 0.92, "reason": "actionable threshold"})],
                           model=body["model"], input_tokens=450, output_tokens=41)
        return message([tool_use(RATING_TOOL, {"utility": 0.04, "reason": "says nothing"})],
                       model=body["model"], input_tokens=430, output_tokens=35)

    api = FakeMessagesAPI(reply, reply)
    useful, useless = old_insight(USEFUL), old_insight(USELESS)
    batch = await FutureUtilityScorer(router(api)).score_many([useful, useless, useful], daily_spend=0.0)

    assert len(api.requests) == 2, "one call per distinct candidate"
    for body in api.requests:
        assert body["model"] == HAIKU and body["max_tokens"] == RATING_MAX_TOKENS
        assert body["tool_choice"] == {"type": "tool", "name": RATING_TOOL}
        assert [t["name"] for t in body["tools"]] == [RATING_TOOL]
        assert "<candidate" in body["messages"][0]["content"][0]["text"]
    assert batch.cost_usd == pytest.approx(haiku_cost(450, 41) + haiku_cost(430, 35))
    assert batch.calls == 2 and batch.model == HAIKU and batch.fallbacks == []

    d_useful = admit(store, useful, tick=10_000, utility_fn=batch.utility_fn())
    d_useless = admit(store, useless, tick=10_000, utility_fn=batch.utility_fn())
    assert d_useful.factors["future_utility"] == 0.92 and d_useful.action == AdmissionAction.ADMITTED
    assert d_useless.factors["future_utility"] == 0.04 and d_useless.action == AdmissionAction.REJECTED
    assert store.get(useful.id) is not None and store.get(useless.id) is None
    stats = batch.fill(AdmissionStats())
    assert (stats.utility_source, stats.utility_llm, stats.utility_estimate, stats.llm_calls) == ("llm", 2, 0, 2)


@pytest.mark.parametrize("content, why", [
    ([tool_use(RATING_TOOL, {"utility": "high", "reason": "x"})], "utility is not a number"),
    ([tool_use(RATING_TOOL, {"utility": 1.7, "reason": "x"})], "outside [0, 1]"),
    ([tool_use(RATING_TOOL, {"utility": -0.2, "reason": "x"})], "outside [0, 1]"),
    ([tool_use(RATING_TOOL, {"reason": "forgot the number"})], "has no utility"),
    ([tool_use(RATING_TOOL, {"utility": True, "reason": "x"})], "utility is not a number"),
    ([{"type": "text", "text": "I think it is quite useful, maybe 0.8"}], f"no {RATING_TOOL} call"),
    ([tool_use("something_else", {"utility": 0.9})], f"no {RATING_TOOL} call"),
])
async def test_malformed_answer_falls_back_to_the_estimate_with_the_reason(store, content, why):
    api = FakeMessagesAPI(message(content, model=HAIKU, input_tokens=400, output_tokens=30))
    cand = old_insight(USEFUL)
    batch = await FutureUtilityScorer(router(api)).score_many([cand], daily_spend=0.0)
    [fb] = batch.fallbacks
    assert why in fb.reason and "malformed answer" in fb.reason and fb.candidate == USEFUL[:120]
    assert batch.utility(cand) == estimate_future_utility(cand)
    assert batch.cost_usd == pytest.approx(haiku_cost(400, 30)), "a malformed answer was still paid for"
    d = admit(store, cand, tick=10_000, utility_fn=batch.utility_fn())
    assert d.factors["future_utility"] == estimate_future_utility(cand)
    assert batch.fill(AdmissionStats()).utility_source == "estimate"


async def test_overload_falls_back_and_the_rest_of_the_cycle_is_not_sent(store):
    api = FakeMessagesAPI(error(529, "overloaded_error", "Overloaded"))
    cands = [old_insight(USEFUL), old_insight(USELESS),
             old_insight("Gas above 80 gwei during a crash makes small swaps cost more than they save")]
    batch = await FutureUtilityScorer(router(api), concurrency=1).score_many(cands, daily_spend=0.0)
    assert len(api.requests) == 1
    first, *rest = batch.fallbacks
    assert "529" in first.reason and "unavailable" in first.reason
    assert len(rest) == 2 and all(r.reason.startswith("not sent:") and "529" in r.reason for r in rest)
    assert batch.cost_usd == 0.0 and batch.calls == 0
    decisions = [admit(store, c, tick=10_000, utility_fn=batch.utility_fn()) for c in cands]  # the cycle goes on
    assert [d.factors["future_utility"] for d in decisions] == [estimate_future_utility(c) for c in cands]


async def test_bad_request_falls_back_too(store):
    api = FakeMessagesAPI(error(400, "invalid_request_error", "tool_choice: bad"))
    batch = await FutureUtilityScorer(router(api)).score_many([old_insight(USEFUL)], daily_spend=0.0)
    [fb] = batch.fallbacks
    assert "refused the request" in fb.reason and "tool_choice: bad" in fb.reason


async def test_budget_refusal_falls_back_without_any_http_request():
    api = FakeMessagesAPI()  # any request would fail the test: no replies queued
    budget = HeartbeatSection(max_daily_cost_usd=1.0)
    batch = await FutureUtilityScorer(router(api, budget=budget)).score_many(
        [old_insight(USEFUL), old_insight(USELESS)], daily_spend=0.95)  # above the 90 % soft cap
    assert api.requests == []
    assert len(batch.fallbacks) == 2 and all("budget" in fb.reason and "soft cap" in fb.reason for fb in batch.fallbacks)
    assert batch.cost_usd == 0.0


async def test_the_batch_spends_against_the_budget_as_it_goes():
    # $0.01 cap; each reply costs $0.0055, so the third call would pass the cap and is refused before sending.
    api = FakeMessagesAPI(rating(0.8, input_tokens=5000, output_tokens=100), rating(0.7, input_tokens=5000,
                                                                                    output_tokens=100))
    cands = [old_insight(USEFUL), old_insight(USELESS),
             old_insight("Gas above 80 gwei during a crash makes small swaps cost more than they save")]
    budget = HeartbeatSection(max_daily_cost_usd=0.01)
    batch = await FutureUtilityScorer(router(api, budget=budget), concurrency=1).score_many(cands, daily_spend=0.0)
    assert len(api.requests) == 2
    assert batch.cost_usd == pytest.approx(2 * haiku_cost(5000, 100))
    [fb] = batch.fallbacks
    assert "budget" in fb.reason and fb.candidate == cands[2].content[:120]


async def test_deadline_cancels_a_slow_call_and_falls_back():
    async def slow(body):
        await asyncio.sleep(30)

    api = FakeMessagesAPI(slow)
    batch = await FutureUtilityScorer(router(api), deadline_s=0.3).score_many([old_insight(USEFUL)], daily_spend=0.0)
    [fb] = batch.fallbacks
    assert "scoring budget" in fb.reason
    await asyncio.wait_for(api.cancelled.wait(), 5)


async def test_offline_uses_the_estimate_and_records_no_fallback():
    cand = old_insight(USEFUL)
    batch = await FutureUtilityScorer(None).score_many([cand], daily_spend=0.0)
    assert batch.utility(cand) == estimate_future_utility(cand) and batch.fallbacks == [] and batch.cost_usd == 0
    stats = batch.fill(AdmissionStats())
    assert stats.utility_source == "estimate" and "no inference router" in stats.notes[0]
    with pytest.raises(ValueError, match="daily_spend"):
        await FutureUtilityScorer(None).score_many([cand], daily_spend=-1.0)


def test_no_utility_is_asked_for_merges_quarantines_or_warnings(store):
    def never(e):
        raise AssertionError(f"utility asked for {e.content!r}")

    base = GrimoireEntry(category=EntryType.HEURISTIC, content="When the regime is volatile and the gate "
                         "escalates to T2, acting has gained money over 12 trades", confidence=0.8, validated_count=4, source=SRC, created_tick=1)
    admit(store, base, tick=1)
    dup = base.model_copy(update={"id": "dup", "parent_episode_ids": ["e9"]})
    assert not assess(store, dup).needs_utility
    assert admit(store, dup, tick=2, utility_fn=never).action == AdmissionAction.SKIPPED
    warning = GrimoireEntry(category=EntryType.WARNING, content="The oracle lags the pool by 3 blocks in a crash",
                            source=SRC)
    assert not assess(store, warning).needs_utility
    assert admit(store, warning, tick=2, utility_fn=never).action == AdmissionAction.ADMITTED
    contra = GrimoireEntry(category=EntryType.HEURISTIC, content="When the regime is volatile and the gate "
                           "escalates to T2, acting has lost money over 12 trades", source=SRC, created_tick=3, parent_episode_ids=["e10"])
    assert assess(store, contra).firewalled and not assess(store, contra).needs_utility
    assert admit(store, contra, tick=3, utility_fn=never).action == AdmissionAction.QUARANTINED
