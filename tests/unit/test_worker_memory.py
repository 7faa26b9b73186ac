"""The worker's memory split (workers/memory.py) on its /metrics, and the soak reading it from there (issue 14)."""

from __future__ import annotations

from golem.grimoire import lance
from golem.grimoire.embeddings import default_embedder
from golem.grimoire.episodes import Episode, EpisodeStore
from infra.soak import MEMORY_PARTS, Sample, SoakReport, worker_memory_mb
from workers.memory import memory_parts, rss_bytes
from workers.metrics import GolemMetrics, MetricsServer


def test_the_split_is_served_on_metrics_and_the_soak_reads_it(tmp_path, monkeypatch):
    import lancedb

    monkeypatch.setattr(lance, "_session", lancedb.Session(index_cache_size_bytes=4 << 20,
                                                           metadata_cache_size_bytes=4 << 20))
    store = EpisodeStore(tmp_path / "episodes.lance", default_embedder())
    for i in range(5):
        store.upsert(Episode(id=f"g:tick:{i}", golem_id="g", tick=i, created_at="2026-03-01T00:00:01Z",
                             regime="volatile", tier="T0", summary=f"tick {i}: held"))
        store.search("held", k=2)
    parts = memory_parts()
    assert parts["rss"] > 50 << 20 and abs(parts["rss"] - rss_bytes()) < 32 << 20
    assert 0 < parts["lance_cache"] <= (8 << 20) * 1.1 and parts["lance_cache"] == lance.session_bytes()
    assert parts["malloc_in_use"] > 1 << 20 and parts["malloc_free"] >= 0  # glibc, as on every machine we run
    server = MetricsServer(GolemMetrics("g1"), 0).start()
    try:
        seen = worker_memory_mb(server.port)
    finally:
        server.stop()
    assert set(seen) == {"rss", *MEMORY_PARTS}
    assert abs(seen["lance_cache"] - parts["lance_cache"] / 2**20) < 4
    assert worker_memory_mb(None) == {} and worker_memory_mb(1) == {}  # no endpoint: no split, the soak goes on
    report = SoakReport(samples=[Sample(100, 5.0, 400.0, {"temporal": 1.0}, seen)])
    line = report.summary().splitlines()[2]
    assert f"({seen['lance_cache']:.0f} {seen['malloc_in_use']:.0f} {seen['malloc_free']:.0f})" in line, line
