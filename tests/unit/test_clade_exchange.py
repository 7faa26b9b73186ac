"""The clade's entry exchange, its pure parts and a golem's own stores (docs/design/clade.md): which entries leave a
golem, the bus's once-only and warnings-first order, quarantine keyed by words, consensus from the golem's own
learning, the sandbox replay, and the consolidator's cross-golem patterns."""

from __future__ import annotations

import pytest

from golem.clade.bus import apply_share, parse_share, since
from golem.clade.consolidator import patterns, proposals
from golem.clade.exchange import CladeLedger, consensus, propagation, receive, sandbox
from golem.grimoire.episodes.model import Episode
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, Provenance, SemanticStore
from golem.grimoire.store.embeddings import default_embedder
from golem.models.clade import BusState, Inbound, ShareBatch, SharedEntry, SinceQuery, content_key
from golem.models.enums import MarketRegime, Tier

WARN = "Avoid borrowing when the oracle lags the pool by more than 300 bps"


def entry(category: EntryType, confidence: float, provenance: Provenance = Provenance.SELF_LEARNED,
          content: str = WARN, **kw) -> GrimoireEntry:
    return GrimoireEntry(category=category, content=content, confidence=confidence, provenance=provenance,
                         source=EntrySource(golem_id="golem-a"), **kw)


def se(origin: str, eid: str, category: str = "warning", content: str = WARN, **kw) -> SharedEntry:
    return SharedEntry(origin=origin, entry_id=eid, category=category, content=content, confidence=0.7, **kw)


@pytest.fixture
def semantic(tmp_path):
    return SemanticStore(tmp_path / "semantic.sqlite", tmp_path / "semantic.lance", default_embedder())


def test_what_leaves_a_golem():
    assert propagation(entry(EntryType.WARNING, 0.1)) == "clade"  # any confidence
    assert propagation(entry(EntryType.INSIGHT, 0.59)) == "private"
    assert propagation(entry(EntryType.INSIGHT, 0.6)) == "clade"
    assert propagation(entry(EntryType.HEURISTIC, 0.69)) == "private"
    assert propagation(entry(EntryType.CAUSAL_LINK, 0.7)) == "clade"
    assert propagation(entry(EntryType.STRATEGY_FRAGMENT, 0.9)) == "private"
    assert propagation(entry(EntryType.WARNING, 0.9, Provenance.CLADE)) == "private"  # never echoed back
    assert propagation(entry(EntryType.WARNING, 0.9, Provenance.PREDECESSOR)) == "private"
    assert propagation(entry(EntryType.WARNING, 0.9, Provenance.DREAM)) == "private"  # a dream not yet validated
    assert propagation(entry(EntryType.WARNING, 0.9, Provenance.DREAM, dream_validated=True)) == "clade"
    assert propagation(entry(EntryType.WARNING, 0.9, valid_until=5)) == "private"  # superseded


def test_the_bus_carries_an_entry_once_warnings_first_and_never_back_to_its_origin():
    state = BusState(clade="c")
    batch = ShareBatch(id="a/1", entries=[se("golem-a", "i1", "insight", "Range markets paid 2% on rebalancing"),
                                          se("golem-a", "w1"), se("golem-a", "d1", legacy=True, content="Never x")])
    state, n = apply_share(state, batch)
    assert n == 3 and [b.entry.entry_id for b in state.entries] == ["d1", "w1", "i1"]
    assert apply_share(state, batch) == (state, 0)  # the same batch again
    state2, n = apply_share(state, ShareBatch(id="a/2", entries=[se("golem-a", "w1"), se("golem-b", "w1")]))
    assert n == 1 and state2.seq == 4  # a:w1 carried already; b:w1 is another golem's entry
    assert [b.seq for b in since(state2, SinceQuery(after=1, me="golem-b"))] == [2, 3]
    assert since(state2, SinceQuery(after=0, me="golem-a"))[0].entry.origin == "golem-b"


def test_a_malformed_share_says_what_is_wrong():
    with pytest.raises(ValueError, match=r"entries\.0\.category"):
        parse_share({"id": "x", "entries": [{"origin": "golem-a", "entry_id": "1", "category": "rumour",
                                             "content": "x", "confidence": 0.5}]})


def test_quarantine_is_keyed_by_words_and_counts_origins(tmp_path):
    ledger = CladeLedger(tmp_path / "x.sqlite")
    new = receive(ledger, [se("golem-a", "1"), se("golem-c", "9", content=WARN.upper() + "  !")], 3, "golem-b")
    assert len(new) == 1 and content_key(WARN) == content_key(WARN.upper() + " !")
    [item] = ledger.inbound()
    assert item.stage == "quarantine" and item.origins == ["golem-a", "golem-c"]
    assert receive(ledger, [se("golem-a", "1")], 4, "golem-b") == []  # the same entry again adds nothing
    assert ledger.inbound()[0].entry_ids == ["golem-a:1", "golem-c:9"]
    assert receive(ledger, [se("golem-b", "7", content="Mine")], 4, "golem-b") == []  # its own: not taken back


def test_consensus_from_its_own_learning_and_rejection_by_it(semantic):
    item = Inbound(content_key="k", category="warning", content=WARN, confidence=0.7, origins=["golem-a"])
    assert consensus(item, semantic)[0] == "quarantine"
    semantic.put(entry(EntryType.WARNING, 0.6, content="Avoid borrowing when the oracle lags the pool by over 300 bps"))
    stage, why = consensus(item, semantic)
    assert stage == "consensus" and "says the same" in why
    other = Inbound(content_key="k2", category="insight", confidence=0.5, origins=["golem-a"],
                    content="Borrowing when the oracle lags the pool by more than 300 bps always paid, prefer it")
    assert consensus(other, semantic)[0] == "rejected"


def test_sandbox_without_a_path_passes_and_says_so(semantic):
    item = Inbound(content_key="k", category="warning", content=WARN, confidence=0.7, origins=["golem-a"])
    r = sandbox(item, [], semantic, 50)
    assert r.passed and r.ticks == 0 and "no recent ticks" in r.reason


def ep(golem: str, i: int, regime: MarketRegime, pnl: float) -> Episode:
    return Episode(id=f"{golem}-{regime.value}-{i}", golem_id=golem, tick=i, created_at="2026-11-27T00:00:00+00:00",
                   regime=regime, tier=Tier.T1, summary="s", actions=1, pnl_impact=pnl)


def test_the_consolidator_keeps_what_recurs_across_golems_only():
    eps = {"golem-a": [ep("golem-a", i, MarketRegime.RANGE_BOUND, -2.0) for i in range(3)]
           + [ep("golem-a", i, MarketRegime.TRENDING_UP, 1.0) for i in range(10, 16)],
           "golem-b": [ep("golem-b", i, MarketRegime.RANGE_BOUND, -3.0) for i in range(2)],
           "golem-c": []}
    [p] = patterns(eps)
    assert "range bound" in p.text and p.episodes == 5 and sorted(p.support) == ["golem-a", "golem-b"]
    assert patterns(eps, min_support=6) == []  # 5 episodes: under a support of 6
    offers = proposals([p], ["golem-a", "golem-c"], "mc")
    assert offers["golem-a"][0].id == offers["golem-c"][0].id  # one proposal id per pattern and consolidator
    assert len(offers["golem-a"][0].parent_episode_ids) == 3 and offers["golem-c"][0].parent_episode_ids == []
