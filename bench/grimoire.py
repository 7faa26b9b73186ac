"""Grimoire benchmark: hybrid retrieval latency vs the raw LanceDB exact vector query, write throughput, size.

    python bench/grimoire.py [--episodes 10000] [--entries 2000] [--queries 50] [--big 100000] [--index IVF_PQ]

--big N adds an ANN-indexed run of N episodes with its recall@10 against the exact search. Never fails.
Targets (p50 <= 30 ms at 10k, <= 60 ms at 100k; recall@10 >= 0.95):
docs/development/tests.md#what-each-benchmark-measures.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from golem.grimoire.store.embeddings import WordLlamaEmbedder, default_embedder  # noqa: E402
from golem.grimoire.episodes.model import Episode, episode_id  # noqa: E402
from golem.grimoire.episodes.store import EpisodeStore  # noqa: E402
from golem.grimoire.store.lance import INDEX_CACHE_ENV, METADATA_CACHE_ENV, cache_sizes, session_bytes  # noqa: E402
from golem.grimoire.store.indexes import ann_query, build_ann_index  # noqa: E402
from golem.grimoire.retrieval import retrieve_for_tick  # noqa: E402
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore  # noqa: E402
from golem.grimoire.upkeep import maintain, table_stats  # noqa: E402

REGIMES = ["volatile", "range_bound", "trending_up", "trending_down"]
WORDS = ["gas", "swap", "liquidity", "oracle", "health factor", "borrow", "repay", "slippage", "crash", "rally"]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--entries", type=int, default=2_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--big", type=int, default=100_000, help="episodes for the ANN run (0 = skip)")
    ap.add_argument("--index", default="IVF_PQ", choices=["IVF_PQ", "IVF_HNSW_SQ"])
    a = ap.parse_args()
    rng = random.Random(1)
    emb = default_embedder()
    d = Path(tempfile.mkdtemp(prefix="grimoire-bench-"))
    eps = EpisodeStore(d / "e.lance", emb)
    sem = SemanticStore(d / "s.sqlite", d / "s.lance", emb)

    def summary(t):
        return (f"Tick {t}: {rng.choice(REGIMES)} regime, {rng.choice(WORDS)} and {rng.choice(WORDS)}, price "
                f"{rng.uniform(1500, 4000):.1f}, gas {rng.randint(1, 90)} gwei, pnl {rng.uniform(-50, 50):+.2f}")

    # per-tick writes (one upsert per tick, as the reflect activity does) for the throughput figure
    n_single = 300
    t0 = time.perf_counter()
    for t in range(n_single):
        eps.upsert(Episode(id=episode_id("b", t), golem_id="b", tick=t, created_at="2026-01-01T00:00:00+00:00",
                           regime=rng.choice(REGIMES), tier="T1", summary=summary(t)))
    per_tick = (time.perf_counter() - t0) / n_single
    bytes_before = table_stats(eps.table, "summary")["bytes"]
    maintain(eps, None)
    size_per_1k = table_stats(eps.table, "summary")["bytes"] / n_single * 1000
    print(f"episode writes: {1 / per_tick:.0f} ticks/s ({per_tick * 1000:.1f} ms each, one upsert per tick); "
          f"store {size_per_1k / 1e6:.2f} MB per 1,000 ticks after compaction (before: {bytes_before / n_single * 1000 / 1e6:.2f})")

    batch = [Episode(id=episode_id("b", t), golem_id="b", tick=t, created_at="2026-01-01T00:00:00+00:00",
                     regime=rng.choice(REGIMES), tier="T1", summary=summary(t)) for t in range(n_single, a.episodes)]
    for i in range(0, len(batch), 2000):
        eps.upsert_many(batch[i:i + 2000])
    src = EntrySource(golem_id="b")
    sem.put_many([GrimoireEntry(category=rng.choice(list(EntryType)), content=summary(i), source=src)
                  for i in range(a.entries)])
    maintain(eps, sem)

    queries = [f"{rng.choice(WORDS)} during a {rng.choice(REGIMES)} market with {rng.choice(WORDS)}" for _ in range(a.queries)]
    qv = emb.embed(queries)
    # the first query builds retrieval's in-memory episode index (episodes/index.py); reported apart
    t0 = time.perf_counter()
    retrieve_for_tick(eps, sem, queries[0], regime="volatile", tick=a.episodes, tier="T2", log=False)
    first = time.perf_counter() - t0
    raw, hyb = [], []
    for q, v in zip(queries, qv):
        t0 = time.perf_counter()
        eps.table.search(v, vector_column_name="vector").distance_type("cosine").limit(20).select(["id", "_distance"]).to_list()
        raw.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        retrieve_for_tick(eps, sem, q, regime="volatile", tick=a.episodes, tier="T2", log=False)
        hyb.append(time.perf_counter() - t0)
    ms = lambda x: x * 1000  # noqa: E731
    print(f"{a.episodes} episodes + {a.entries} entries, {a.queries} queries:")
    print(f"  raw exact vector query (floor): p50 {ms(pct(raw, 50)):.1f} ms  p99 {ms(pct(raw, 99)):.1f} ms")
    print(f"  hybrid retrieve_for_tick:       p50 {ms(pct(hyb, 50)):.1f} ms  p99 {ms(pct(hyb, 99)):.1f} ms  "
          f"(x{statistics.median(hyb) / statistics.median(raw):.2f} the floor; target p50 <= 30 ms at 10k)")
    # as in a live tick: the previous tick's episode is written and the used ones marked, then retrieval runs
    live = []
    for n, q in enumerate(queries):
        t = a.episodes + n
        eps.upsert(Episode(id=episode_id("b", t), golem_id="b", tick=t, created_at="2026-01-01T00:00:00+00:00",
                           regime=rng.choice(REGIMES), tier="T1", summary=summary(t)))
        t0 = time.perf_counter()
        res = retrieve_for_tick(eps, sem, q, regime="volatile", tick=t + 1, tier="T2", log=False)
        live.append(time.perf_counter() - t0)
        eps.mark_accessed([i.id for i in res.items if i.source == "episode"], t + 1)
    print(f"  retrieve after each tick's writes: p50 {ms(pct(live, 50)):.1f} ms  p99 {ms(pct(live, 99)):.1f} ms; "
          f"first query (builds the in-memory episode index) {ms(first):.0f} ms")
    print(f"  LanceDB session caches now hold {session_bytes() / 2**20:.1f} MB (caps: index "
          f"{cache_sizes()[0] / 2**20:.0f} MB, metadata {cache_sizes()[1] / 2**20:.0f} MB; {INDEX_CACHE_ENV} / "
          f"{METADATA_CACHE_ENV} move them)")
    # switching the embedding model re-embeds the whole table and writes it in one commit
    t0 = time.perf_counter()
    switched = EpisodeStore(d / "e.lance", WordLlamaEmbedder(trunc_dim=64))
    print(f"model switch (WordLlama 256-d -> 64-d): full re-embed of {switched.reembedded} episodes in one commit "
          f"+ FTS rebuild: {time.perf_counter() - t0:.2f} s")
    if a.big:
        big_run(a, emb, sem, queries, qv, summary, d)


def big_run(a, emb, sem, queries, qv, summary, d) -> None:
    """N episodes, real embeddings, an ANN index; recall@10 vs exact search and hybrid latency."""
    rng = random.Random(2)
    eps = EpisodeStore(d / "big.lance", emb)
    t0 = time.perf_counter()
    texts = [summary(t) for t in range(a.big)]
    vecs = emb.embed(texts)
    t_embed = time.perf_counter() - t0
    t0 = time.perf_counter()
    step = 25_000
    for i in range(0, a.big, step):
        eps.upsert_many([Episode(id=episode_id("b", t), golem_id="b", tick=t, created_at="2026-01-01T00:00:00+00:00",
                                 regime=rng.choice(REGIMES), tier="T1", summary=texts[t])
                         for t in range(i, min(a.big, i + step))], vectors=vecs[i:i + step])
    t_write = time.perf_counter() - t0
    t0 = time.perf_counter()
    maintain(eps, None)  # FTS index over the summaries, compaction
    t_fts = time.perf_counter() - t0
    t0 = time.perf_counter()
    build_ann_index(eps.table, a.index)
    t_ann = time.perf_counter() - t0
    print(f"{a.big} episodes (real WordLlama embeddings of {a.big} distinct generated summaries, no perturbation): "
          f"embed {t_embed:.1f} s, write {t_write:.1f} s, FTS+compaction {t_fts:.1f} s, {a.index} index {t_ann:.1f} s")

    exact, ann, hits = [], [], []
    for v in qv:
        t0 = time.perf_counter()
        want = eps.table.search(v, vector_column_name="vector").distance_type("cosine").bypass_vector_index() \
            .limit(10).select(["id", "_distance"]).to_list()
        exact.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = ann_query(eps.table.search(v, vector_column_name="vector").distance_type("cosine")) \
            .limit(10).select(["id", "_distance"]).to_list()
        ann.append(time.perf_counter() - t0)
        hits.append(len({r["id"] for r in want} & {r["id"] for r in got}) / 10)
    hyb = []
    for q in queries:
        t0 = time.perf_counter()
        retrieve_for_tick(eps, sem, q, regime="volatile", tick=a.big, tier="T2", log=False)
        hyb.append(time.perf_counter() - t0)
    ms = lambda x: x * 1000  # noqa: E731
    print(f"  raw exact vector query (floor): p50 {ms(pct(exact, 50)):.1f} ms  p99 {ms(pct(exact, 99)):.1f} ms")
    print(f"  ANN vector query ({a.index}):   p50 {ms(pct(ann, 50)):.1f} ms  p99 {ms(pct(ann, 99)):.1f} ms  "
          f"recall@10 vs exact {statistics.mean(hits):.3f} (min {min(hits):.1f}; target >= 0.95)")
    print(f"  hybrid retrieve_for_tick:       p50 {ms(pct(hyb, 50)):.1f} ms  p99 {ms(pct(hyb, 99)):.1f} ms  "
          f"(x{statistics.median(hyb) / statistics.median(exact):.2f} the exact floor; target p50 <= 60 ms at 100k)")


if __name__ == "__main__":
    main()
