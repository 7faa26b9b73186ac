"""What retrieval's in-memory episode index (golem/grimoire/episodes/index.py) costs per episode: its terms do not also
go into the process's summary cache, and a rebuild after an upkeep carries the postings over instead of splitting
every summary again."""

from __future__ import annotations

import random

import pytest

from golem.grimoire.episodes import index
from golem.grimoire.episodes.model import Episode
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.store import terms as terms_mod
from golem.grimoire.store.embeddings import default_embedder
from golem.grimoire.store.lance import VersionRetention

WORDS = ["gas", "swap", "liquidity", "oracle", "borrow", "repay", "slippage", "crash", "rally", "funding", "basis",
         "spread", "depeg", "bridge", "vault", "collateral", "leverage", "hedge", "rebalance", "drawdown"]


def summary(rng: random.Random, t: int) -> str:
    """An episode summary of the usual length (350-700 characters), its words drawn from a small vocabulary."""
    words = " ".join(rng.choice(WORDS) for _ in range(60))
    return f"Tick {t}: {words}. Lowest health factor {rng.uniform(1.05, 2.5):.3f}."


def episodes(n: int, start: int = 0) -> list[Episode]:
    rng = random.Random(start)
    return [Episode(id=f"g:tick:{t}", golem_id="g", tick=t, created_at="2026-03-01T00:00:01Z", regime="volatile",
                    tier="T1", summary=summary(rng, t)) for t in range(start, start + n)]


@pytest.fixture
def store(tmp_path):
    s = EpisodeStore(tmp_path / "episodes.lance", default_embedder(),
                     retention=VersionRetention(every_writes=0))  # upkeep only when the test asks
    s.upsert_many(episodes(400))
    yield s
    index.forget(tmp_path)


def as_lists(postings: dict) -> dict[str, list[int]]:
    return {t: list(rows) for t, rows in postings.items()}


def test_the_index_does_not_fill_the_summary_cache(store):
    terms_mod._SUMMARY_TERMS.clear()
    idx = index.episode_index(store)
    assert idx is not None and idx.n == 400
    store.upsert_many(episodes(5, start=400))  # applied in place (note_merge)
    idx = index.episode_index(store)
    assert idx is not None and idx.n == 405 and "crash" in idx.postings
    assert len(terms_mod._SUMMARY_TERMS) == 0


def test_an_upkeep_carries_the_postings_over(store, monkeypatch):
    calls = []

    def counted(text: str) -> list[str]:
        calls.append(text)
        return terms_mod.terms(text)

    first = index.episode_index(store)
    assert first is not None
    builds = index.builds
    monkeypatch.setattr(index, "terms", counted)
    store.upkeep()  # compaction and cleanup: a new version of the same rows, rebuilt by refresh
    again = index.episode_index(store)
    assert again is not None and again is not first and index.builds == builds + 1
    assert calls == []  # no summary split again
    fresh = index._postings(again.summaries)
    assert as_lists(again.postings) == as_lists(fresh)
    # rows that are no longer a prefix of the old ones (a delete): built whole, and right
    store.delete_many(["g:tick:3"])
    calls.clear()
    rebuilt = index.episode_index(store)
    assert rebuilt is not None and rebuilt.n == 399 and len(calls) == 399
    assert as_lists(rebuilt.postings) == as_lists(index._postings(rebuilt.summaries))
    assert "g:tick:3" not in rebuilt.ids
