"""Retrieval's calibrated abstention, a quantity crossing a line, a market described in plain words, regime scopes as
terms and a fee that is gas — on real LanceDB + SQLite stores with the default embedder
(docs/design/grimoire.md#retrieval)."""

from __future__ import annotations

import json

import pytest

from golem.grimoire.access import search
from golem.grimoire.episodes.model import Episode, episode_id
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.retrieval import ABSTAIN_PROBABILITY, retrieve_for_tick
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore
from golem.grimoire.store.embeddings import default_embedder

SRC = EntrySource(golem_id="g33")
NOW = 300
# (tick, regime, lowest health factor) of a life's episodes
LIFE = [(t, "volatile" if t % 3 else "trending_down", round(2.4 - t / 150, 3)) for t in range(10, NOW, 7)]


def entry(id, content, cat=EntryType.INSIGHT, **kw):
    return GrimoireEntry(id=id, category=cat, content=content, source=SRC, **kw)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("g33")
    emb = default_embedder()
    eps = EpisodeStore(d / "e.lance", emb)
    sem = SemanticStore(d / "s.sqlite", d / "s.lance", emb)
    eps.upsert_many([Episode(id=episode_id("g33", t), golem_id="g33", tick=t, created_at="2026-01-01T00:00:00+00:00",
                             regime=r, tier="T1",
                             summary=f"Tick {t}: {r.replace('_', ' ')} regime, gate chose T1; price {1900 - 3 * t}. "
                                     f"Lowest health factor {hf}. Decision: hold.")
                     for t, r, hf in LIFE])
    sem.put_many([
        entry("gas-spike", "At health factor 1.73, dream rehearsal of gas_spike (base fee x50): gas $14.59 on the "
              "crisis fork exceeds the whole day's $10.00 gas partition.", EntryType.WARNING, created_tick=50),
        entry("pool-drained", "At health factor 1.73, dream rehearsal of pool_drained (90% of the WETH/USDC pair's "
              "liquidity removed): a swap out of the pair loses 40%.", EntryType.WARNING, created_tick=50),
        entry("guard", "PLAYBOOK guard candidate from a dream rehearsal (pool drained): WHEN price_change_bps <= -150 "
              "THEN swap 5% WETH to USDC", EntryType.HEURISTIC, created_tick=60),
        # the same rule per regime; the scoped ones do not repeat their regime in the text
        entry("t1-range", "When the gate escalates to T1, hold for 3 ticks before acting.", EntryType.HEURISTIC,
              market_regime="range_bound", created_tick=80),
        entry("t1-volatile", "When the gate escalates to T1, hold for 8 ticks before acting.",
              EntryType.HEURISTIC, market_regime="volatile", created_tick=80),
        entry("t1-down", "When the gate escalates to T1, hold for 5 ticks before acting.", EntryType.HEURISTIC,
              market_regime="trending_down", created_tick=80),
        entry("reflexion", "In a volatile regime, acting (swap) at health factor 2.02 was negative.", created_tick=90),
        entry("reflexion-calm", "In a sleepy regime, acting (swap) at health factor 2.02 was positive.", created_tick=90),
        *(entry(f"obs-{n}", f"The WETH/USDC pool held {300 + 17 * n} WETH of reserves; a swap of {n % 3 + 1} WETH "
                f"filled with {0.1 * n:.1f}% slippage.", created_tick=1 + n) for n in range(12)),
    ])
    return eps, sem


def ids(res):
    return [i.id for i in res.items]


def test_the_last_time_a_quantity_crossed_a_line_is_that_episode(stores):
    eps, sem = stores
    res = search(eps, sem, "What happened the last time my health factor fell below 1.5 while the market was "
                 "trending down?", regime="range_bound", tick=NOW, k=10)
    want = max(t for t, r, hf in LIFE if r == "trending_down" and hf < 1.5)
    earlier = max(t for t, r, hf in LIFE if r == "trending_down" and hf < 1.5 and t < want)
    got = ids(res)
    assert got[0] == episode_id("g33", want), got
    assert episode_id("g33", earlier) not in got[:1]
    # the first time: the oldest such episode
    first = ids(search(eps, sem, "What happened the first time the health factor dropped under 1.5 in a trending "
                       "down market?", regime="range_bound", tick=NOW, k=10))
    assert first[0] == episode_id("g33", min(t for t, r, hf in LIFE if r == "trending_down" and hf < 1.5)), first
    # as of a past tick: nothing after it
    then = ids(search(eps, sem, "As of tick 200, what happened the last time the health factor fell below 1.5 "
                      "while the market was trending down?", regime="range_bound", tick=NOW, k=10))
    assert then[0] == episode_id("g33", max(t for t, r, hf in LIFE if r == "trending_down" and hf < 1.5
                                            and t <= 200)), then


def test_a_market_described_in_plain_words_names_its_regime(stores):
    eps, sem = stores
    for words, want in (("a wild market", "t1-volatile"), ("a falling market", "t1-down")):
        got = ids(search(eps, sem, f"What did my playbook say about acting when the gate escalates to T1 in {words}?",
                         regime="range_bound", tick=NOW, k=10))
        assert got[0] == want, (words, got)
    # a falling health factor names no regime: the tick's variant leads
    got = ids(search(eps, sem, "What did my playbook say about acting when the gate escalates to T1 while the health "
                     "factor is falling?", regime="range_bound", tick=NOW, k=10))
    assert got[0] == "t1-range", got


def test_an_entry_regime_scope_is_one_of_its_terms(stores):
    eps, sem = stores
    res = search(eps, sem, "volatile rule for T1", regime="range_bound", tick=NOW, k=10)
    by = {i.id: i for i in res.items}
    # the text of t1-volatile never says volatile; its scope does
    assert by["t1-volatile"].scores["lexical"] > by["t1-range"].scores["lexical"], \
        (by["t1-volatile"].scores, by["t1-range"].scores)


def test_fees_this_high_finds_the_gas_warning_for_an_action(stores):
    eps, sem = stores
    res = search(eps, sem, "Is now a good time to send a swap, with fees this high?", regime="range_bound", tick=NOW,
                 k=10)
    assert res.action and "gas-spike" in ids(res)[:3], ids(res)
    assert ids(res).index("gas-spike") < ids(res).index("pool-drained") if "pool-drained" in ids(res) else True


def test_abstention_is_decided_from_the_score_distribution(stores):
    eps, sem = stores
    miss = search(eps, sem, "How much did staking my ETH earn on the governance airdrop?", regime="range_bound",
                  tick=NOW, k=10)
    ev = miss.evidence
    assert miss.abstained and miss.items == [], (miss.reason, ev)
    assert {"cosine", "agreement", "unseen_words", "unknown_name", "p_unanswerable"} <= set(ev)
    assert ev["p_unanswerable"] >= ABSTAIN_PROBABILITY and "P(unanswerable)" in miss.reason
    hit = search(eps, sem, "What did the dream rehearsal of a gas spike show about the day's gas partition?",
                 regime="range_bound", tick=NOW, k=10)
    assert not hit.abstained and ids(hit)[0] == "gas-spike", (hit.reason, hit.evidence)
    assert hit.evidence["p_unanswerable"] < ABSTAIN_PROBABILITY
    # the evidence is part of what `golem grimoire search --json` prints
    assert "p_unanswerable" in json.loads(hit.model_dump_json())["evidence"]


def test_a_value_the_question_states_finds_the_episodes_that_state_it(stores):
    eps, sem = stores
    t, r, hf = LIFE[20]
    got = ids(search(eps, sem, f"Did my trade at a health factor around {hf:.2f} pay off?", regime="range_bound",
                     tick=NOW, k=10))
    assert got[0] == episode_id("g33", t), (hf, got)


def test_a_stated_number_the_memory_holds_is_not_abstained_on(stores):
    eps, sem = stores
    t, r, hf = LIFE[25]
    res = search(eps, sem, f"Tell me the zany anecdote of hf {hf:.2f}, with zeal and verve.", regime="range_bound",
                 tick=NOW, k=10)
    # words the memory never saw: the calibrated model alone would abstain ...
    assert res.evidence["p_unanswerable"] >= ABSTAIN_PROBABILITY
    # ... but an episode states that health factor
    assert not res.abstained and ids(res)[0] == episode_id("g33", t), (res.reason, res.evidence, ids(res))
    assert res.evidence["numeric_match"] == 1.0
    miss = search(eps, sem, "Tell me the zany anecdote of hf 5.55, with zeal and verve.", regime="range_bound",
                  tick=NOW, k=10)
    assert miss.abstained and miss.evidence["numeric_match"] == 0.0, (miss.reason, miss.evidence)


def test_a_regime_named_in_plain_words_asks_with_the_regimes_own_term(stores):
    eps, sem = stores
    res = search(eps, sem, "How did acting with a swap work out in a wild market?", regime="range_bound", tick=NOW,
                 k=10)
    by = {i.id: i.scores["lexical"] for i in res.items}
    # "wild" is no word of the memory's; "volatile" is, in one reflexion's text
    assert by.get("reflexion", 0.0) > by.get("reflexion-calm", 0.0) > 0, (by, res.reason)


@pytest.fixture(scope="module")
def busy_life(tmp_path_factory):
    """A life whose tick records share an action question's everyday words, beside two dream warnings."""
    d = tmp_path_factory.mktemp("g33-busy")
    emb = default_embedder()
    eps = EpisodeStore(d / "e.lance", emb)
    sem = SemanticStore(d / "s.sqlite", d / "s.lance", emb)
    eps.upsert_many([Episode(id=episode_id("g33b", t), golem_id="g33b", tick=t, created_at="2026-01-01T00:00:00+00:00",
                             regime="volatile", tier="T1",
                             summary=f"Tick {t}: volatile regime, a good time to send a swap now; fees were high, "
                                     f"the swap of {t % 4 + 1} WETH went through.")
                     for t in range(10, NOW, 5)])
    sem.put_many([
        entry("gas-spike", "At health factor 2.02, dream rehearsal of gas_spike (ETH/USD feed -48%, base fee x50): "
              "gas $18.69 on the crisis fork exceeds the whole day's $10.00 gas partition.", EntryType.WARNING,
              created_tick=50),
        entry("pool-drained", "At health factor 2.02, dream rehearsal of pool_drained (90% of the WETH/USDC pair's "
              "liquidity removed): the exit swap fills 107 bps below spot: the pool cannot carry it.",
              EntryType.WARNING, created_tick=50),
        entry("guard", "PLAYBOOK guard candidate from a dream rehearsal (pool drained): WHEN price_change_bps <= -150 "
              "THEN swap 5% WETH to USDC", EntryType.HEURISTIC, created_tick=60),
    ])
    return eps, sem


def test_a_warning_applies_by_the_memorys_lessons_not_its_tick_records(busy_life):
    eps, sem = busy_life
    res = search(eps, sem, "Is now a good time to send a swap, with fees this high?", regime="volatile", tick=NOW,
                 k=10)
    # both rehearsed hazards lead the answer to an action question ...
    assert res.action and {"gas-spike", "pool-drained"} <= set(ids(res)[:3]), ids(res)
    # ... though the tick records are far more alike to it than the gas warning (below half the best's relevance)
    scores = {i.id: i.scores for i in res.items}
    best_episode = max(s["relevance"] for n, s in scores.items() if n.startswith("g33b"))
    assert scores["gas-spike"]["relevance"] < 0.5 * best_episode, scores


@pytest.fixture(scope="module")
def small_life(tmp_path_factory):
    """A small life: templated tick records and a few dream warnings, one about a hazard no action was taken in."""
    d = tmp_path_factory.mktemp("g33-small")
    emb = default_embedder()
    eps = EpisodeStore(d / "e.lance", emb)
    sem = SemanticStore(d / "s.sqlite", d / "s.lance", emb)
    eps.upsert_many([Episode(id=episode_id("g33s", t), golem_id="g33s", tick=t, created_at="2026-01-01T00:00:00+00:00",
                             regime="range_bound", tier="T0",
                             summary=f"Tick {t}: range bound regime, gate chose T0; price {2000 + t % 9}. Lowest health "
                                     f"factor 1.9. Decision: hold.")
                     for t in range(10, NOW, 5)])
    sem.put_many([
        entry("cascade", "At health factor 1.84 and price 1811.20, dream rehearsal of liquidation_cascade (ETH/USD "
              "feed -41%): after the response the health factor is 0.962 on the crisis fork (liquidatable below 1).",
              EntryType.WARNING, created_tick=50),
        entry("gas-spike", "At health factor 1.84, dream rehearsal of gas_spike (base fee x50): gas $18.69 on the "
              "crisis fork exceeds the whole day's $10.00 gas partition.", EntryType.WARNING, created_tick=50),
        entry("guard", "PLAYBOOK guard candidate from a dream rehearsal (gas spike): WHEN health_factor < 1.8 THEN "
              "repay 25% debt", EntryType.HEURISTIC, created_tick=60),
    ])
    return eps, sem


def test_an_action_on_a_hazard_the_memory_warns_of_is_answered_with_the_warning(small_life):
    eps, sem = small_life
    res = search(eps, sem, "Should I add leverage while liquidations are piling up?", regime="range_bound", tick=NOW,
                 k=10)
    # most of its words are new to this memory: the calibrated model alone would abstain ...
    assert res.evidence["p_unanswerable"] >= ABSTAIN_PROBABILITY, res.evidence
    # ... but the one it knows is the whole of a warning's subject
    assert not res.abstained and ids(res)[0] == "cascade", (res.reason, res.evidence, ids(res))
    assert res.evidence["warning_match"] == 1.0
    # the same words asked as a question, not a proposal, abstain as before; so does a proposal naming the unknown
    assert search(eps, sem, "What is a pile of leverage?", regime="range_bound", tick=NOW, k=10).abstained
    assert search(eps, sem, "Should I add leverage on Solana while liquidations pile up?", regime="range_bound",
                  tick=NOW, k=10).abstained
