"""As-of retrieval honours valid time from both ends: an entry recorded before it became valid (a rule scheduled
for later, a fact learned about a later period) is not returned for a time when it was not yet true — neither
by what was known then nor by what is known now. Real LanceDB + SQLite stores, the default embedder."""

from __future__ import annotations

import pytest

from golem.grimoire.store.embeddings import default_embedder
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.retrieval import retrieve_for_tick
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore

SRC = EntrySource(golem_id="gvf")
Q = "At what health factor does the strategy repay the USDC debt?"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("gvf")
    emb = default_embedder()
    eps = EpisodeStore(d / "e.lance", emb)
    sem = SemanticStore(d / "s.sqlite", d / "s.lance", emb)
    sem.put_many([
        GrimoireEntry(id="repay-1.5", category=EntryType.HEURISTIC, source=SRC, valid_from=1_000, valid_until=6_000,
                      created_tick=1_000, content="Repay 20% of the USDC debt when the health factor falls below 1.5."),
        # written down at tick 3,000, in force from tick 6,000 on (the owner announced the change ahead)
        GrimoireEntry(id="repay-1.7", category=EntryType.HEURISTIC, source=SRC, valid_from=6_000, created_tick=3_000,
                      content="Repay 20% of the USDC debt when the health factor falls below 1.7."),
    ])
    return eps, sem


def ids(res) -> list[str]:
    return [i.id for i in res.items]


@pytest.mark.parametrize("known_now", [False, True])
def test_an_entry_not_yet_valid_is_not_returned_as_of_before_its_valid_from(stores, known_now):
    eps, sem = stores
    before = retrieve_for_tick(eps, sem, Q, regime="range_bound", tick=10_000, as_of=4_000, as_known_now=known_now,
                               steered=True, log=False, k=10)
    assert "repay-1.5" in ids(before)
    assert "repay-1.7" not in ids(before), "recorded at 3,000 but valid only from 6,000: not true at 4,000"
    after = retrieve_for_tick(eps, sem, Q, regime="range_bound", tick=10_000, as_of=7_000, as_known_now=known_now,
                              steered=True, log=False, k=10)
    assert "repay-1.7" in ids(after) and "repay-1.5" not in ids(after)
