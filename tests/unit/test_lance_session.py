"""The Grimoire's LanceDB stores share one session with bounded caches (golem/grimoire/store/lance.py): without it
every per-tick write cached another table version's metadata and the soak's worker grew ~35 MB per 100 ticks."""

from __future__ import annotations

import lancedb

from golem.grimoire.store import lance
from golem.grimoire.store.embeddings import default_embedder
from golem.grimoire.episodes.model import Episode
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.semantic.store import SemanticStore


def test_stores_cache_in_the_shared_bounded_session(tmp_path, monkeypatch):
    cap = 4 << 20
    small = lancedb.Session(index_cache_size_bytes=cap, metadata_cache_size_bytes=cap)
    monkeypatch.setattr(lance, "_session", small)
    emb = default_embedder()
    store = EpisodeStore(tmp_path / "episodes.lance", emb)
    SemanticStore(tmp_path / "semantic.sqlite", tmp_path / "semantic.lance", emb)
    items = small.approx_num_items
    for i in range(80):
        store.upsert(Episode(id=f"g:tick:{i}", golem_id="g", tick=i, created_at="2026-03-01T00:00:01Z",
                             regime="volatile", tier="T0", summary=f"tick {i}: price moved {i % 17} bps, held"))
        store.search(f"price moved {i % 13}", k=3)
    # the episode store's writes and reads cache here, not in a default session of its own ...
    assert small.approx_num_items > items + 100, (items, small.approx_num_items)
    # ... and the cache stays at its cap (unbounded, 80 versions cache ~10 MB)
    assert small.size_bytes <= cap * 1.1, small.size_bytes


def test_the_caps_come_from_the_workers_environment(monkeypatch):
    import pytest

    monkeypatch.delenv(lance.INDEX_CACHE_ENV, raising=False)
    monkeypatch.delenv(lance.METADATA_CACHE_ENV, raising=False)
    assert lance.cache_sizes() == (lance.INDEX_CACHE_BYTES, lance.METADATA_CACHE_BYTES)
    monkeypatch.setenv(lance.INDEX_CACHE_ENV, "32")
    monkeypatch.setenv(lance.METADATA_CACHE_ENV, "0.5")
    assert lance.cache_sizes() == (32 << 20, 512 << 10)
    monkeypatch.setenv(lance.METADATA_CACHE_ENV, "lots")
    with pytest.raises(ValueError, match="GOLEM_LANCE_METADATA_CACHE_MB='lots': give the cache size in MB"):
        lance.cache_sizes()
    monkeypatch.setenv(lance.METADATA_CACHE_ENV, "-1")
    with pytest.raises(ValueError, match="a number >= 0"):
        lance.cache_sizes()
