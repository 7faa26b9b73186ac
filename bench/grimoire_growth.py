"""How fast the Grimoire's files grow per 1,000 ticks, from the store writes a tick and a delta cycle make.

    python bench/grimoire_growth.py [--ticks 1500] [--warmup 500] [--delta-every 50] [--soak-rate 0.55] [--without STEP]

Per tick the reflect step's episode upsert and, on one tick in three, a retrieval and its access marks; every
`--delta-every` ticks the delta cycle's Grimoire steps. Age windows are scaled to the soak's tick rate. Prints the
size by part every 100 ticks with the process's memory (RSS, malloc in use and free, LanceDB's caches), and the growth
after warm-up; `--without STEP` leaves a step out (STEPS). See docs/development/tests.md#what-each-benchmark-measures.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from golem.grimoire.store import lance  # noqa: E402
from golem.grimoire import upkeep  # noqa: E402
from golem.grimoire.store.embeddings import default_embedder  # noqa: E402
from golem.grimoire.episodes.model import Episode, episode_id  # noqa: E402
from golem.grimoire.episodes.store import EpisodeStore  # noqa: E402
from golem.grimoire.retrieval import retrieve_for_tick  # noqa: E402
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore  # noqa: E402
from workers.memory import memory_parts  # noqa: E402

RETENTION = getattr(lance, "VersionRetention", None)  # None: code before retention by count
OLD_WINDOW = timedelta(minutes=10)  # upkeep.maintain's version window before it
REGIMES = ["volatile", "range_bound", "trending_up", "trending_down"]
WORDS = ["gas", "swap", "liquidity", "oracle", "health factor", "borrow", "repay", "slippage", "crash", "rally"]
GOLEM = "growth"
STEPS = {"retrieval": "the deciding tick's retrieval (and its marks)", "marks": "the access marks after a retrieval",
         "delta": "the delta cycle's steps (decay, consolidated marks, entries, upkeep.maintain)",
         "upkeep": "the stores' own upkeep every N writes (compaction, index update, version cleanup)",
         "decay": "the delta cycle's decay (a merge of every row whose retention moved)",
         "maintain": "the delta cycle's upkeep.maintain (FTS index, optimize, stats)"}


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def parts(root: Path) -> dict[str, float]:
    """MB by part of the grimoire directory."""
    table = root / "episodes.lance" / "episodes.lance"
    out = {k: size(table / d) / 1e6 for k, d in
           [("data", "data"), ("versions", "_versions"), ("txns", "_transactions"), ("indices", "_indices"),
            ("deletions", "_deletions")]}
    out["semantic.lance"] = size(root / "semantic.lance") / 1e6
    out["sqlite"] = sum(size(p) for p in root.glob("*.sqlite*")) / 1e6
    out["other"] = size(root) / 1e6 - sum(out.values())
    return out


def summary(rng: random.Random, t: int) -> str:
    """About the length of a real episode's summary (episodes/model.py's episode_from_record: 350–700 characters)."""
    regime = rng.choice(REGIMES)
    return (f"Tick {t}: {regime.replace('_', ' ')} regime, gate chose T{rng.randint(0, 2)} (prediction error "
            f"{rng.uniform(0, 1):.3f} vs threshold 0.{rng.randint(20, 60)}); prediction error {rng.uniform(0, 1):.3f}, "
            f"price {rng.uniform(1500, 4000):.4g}. Anomalies: price_move (medium): {rng.choice(WORDS)} moved "
            f"{rng.randint(20, 300)} bps in one block; gas_spike (low): base fee {rng.randint(1, 90)} gwei. "
            f"Lowest health factor {rng.uniform(1.05, 2.5):.3f}. Decision: hold, {rng.choice(WORDS)} and "
            f"{rng.choice(WORDS)} within limits.")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=1500)
    ap.add_argument("--warmup", type=int, default=500, help="growth is measured from this tick")
    ap.add_argument("--delta-every", type=int, default=50, help="ticks per delta cycle (the example golem's)")
    ap.add_argument("--soak-rate", type=float, default=0.55, help="ticks/s of the live run the windows stand for")
    ap.add_argument("--sample-every", type=int, default=100)
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--keep", action="store_true", help="keep the directory")
    ap.add_argument("--without", action="append", default=[], choices=list(STEPS),
                    help="leave one step out (repeatable), to tell which LanceDB operation grows the heap")
    a = ap.parse_args()
    if not 0 < a.warmup < a.ticks:
        raise SystemExit("need 0 < --warmup < --ticks")
    rng = random.Random(a.seed)
    emb = default_embedder()
    root = Path(tempfile.mkdtemp(prefix="grimoire-growth-")) / "grimoire"
    eps = EpisodeStore(root / "episodes.lance", emb)
    sem = SemanticStore(root / "semantic.sqlite", root / "semantic.lance", emb)
    default = RETENTION() if RETENTION else None
    if default and "upkeep" in a.without:
        default = replace(default, every_writes=0)
    scales: list[float] = []  # wall seconds here per second of the live run, per delta period
    print(f"code: {'versions kept by count and age, upkeep every %d writes' % default.every_writes if default else 'versions kept by age (10 min), upkeep in DELTA only'}")
    src = EntrySource(golem_id=GOLEM)
    t_start = t_last_delta = time.perf_counter()
    samples: list[tuple[int, float, dict[str, float]]] = []
    mems: list[tuple[int, dict[str, float]]] = []  # the process's memory by part (workers/memory.py), MB
    header = f"{'tick':>6} {'s':>6} {'MB':>7}  " + " ".join(f"{k:>14}" for k in parts(root))
    print(header)
    for t in range(1, a.ticks + 1):
        eps.upsert(Episode(id=episode_id(GOLEM, t), golem_id=GOLEM, tick=t, created_at="2026-03-01T00:00:00+00:00",
                           regime=rng.choice(REGIMES), tier="T1", summary=summary(rng, t),
                           prediction_error=rng.uniform(0, 1), pnl_impact=rng.choice([None, rng.uniform(-20, 20)])))
        if t % 3 == 0 and "retrieval" not in a.without:  # a deciding tick retrieves and marks what it used
            q = f"should I {rng.choice(['repay', 'swap', 'borrow'])} given {rng.choice(WORDS)} in a {rng.choice(REGIMES)} market"
            res = retrieve_for_tick(eps, sem, q, regime=rng.choice(REGIMES), tick=t, tier="T1", log=True)
            used = [i.id for i in res.items if i.source == "episode"]
            if used and "marks" not in a.without:
                eps.mark_accessed(used, t)
            entries = [i.id for i in res.items if i.source != "episode"]
            if entries and "marks" not in a.without:
                sem.mark_accessed(entries, t)
        if t % a.delta_every == 0 and "delta" not in a.without:
            # the seconds a tick takes here grow with the table: rescale to the last delta period's pace
            now = time.perf_counter()
            scale = a.soak_rate * (now - t_last_delta) / a.delta_every
            t_last_delta = now
            scales.append(scale)
            if default:
                for s in (eps, sem):
                    s.retention = replace(default, min_age=default.min_age * scale)
            if "decay" not in a.without:
                eps.apply_decay(now_tick=t, tick_seconds=60.0)
            eps.mark_consolidated([e.id for e in eps.unconsolidated()])
            sem.put_many([GrimoireEntry(category=rng.choice([EntryType.INSIGHT, EntryType.HEURISTIC]),
                                        content=summary(rng, t)[:200], source=src, created_tick=t) for _ in range(2)])
            sem.curator_decay(t, 60.0)
            if "maintain" in a.without:
                pass
            elif default:
                upkeep.maintain(eps, sem)
            else:
                upkeep.maintain(eps, sem, keep_versions_newer_than=OLD_WINDOW * scale)
        if t % a.sample_every == 0 or t == a.ticks:
            p = parts(root)
            samples.append((t, time.perf_counter() - t_start, p))
            mem = {k: v / 2**20 for k, v in memory_parts().items()}
            mems.append((t, mem))
            print(f"{t:>6} {samples[-1][1]:>6.0f} {sum(p.values()):>7.2f}  " + " ".join(f"{v:>14.2f}" for v in p.values())
                  + "   memory MB: " + " ".join(f"{k} {v:.1f}" for k, v in mem.items()))
    first = next(s for s in samples if s[0] >= a.warmup)
    last = samples[-1]
    per_1k = lambda k: (last[2][k] - first[2][k]) / (last[0] - first[0]) * 1000  # noqa: E731
    total = (sum(last[2].values()) - sum(first[2].values())) / (last[0] - first[0]) * 1000
    print(f"grimoire growth per 1,000 ticks (ticks {first[0]}..{last[0]}): {total:.2f} MB  ("
          + ", ".join(f"{k} {per_1k(k):.2f}" for k in last[2]) + f"); {eps.count()} episodes, "
          f"{len(eps.table.list_versions())} episode-table versions kept at the end")
    m0, m1 = next(m for m in mems if m[0] >= a.warmup), mems[-1]
    print("memory growth per 1,000 ticks (ticks %d..%d): " % (m0[0], m1[0]) + ", ".join(
        f"{k} {(m1[1][k] - m0[1][k]) / (m1[0] - m0[0]) * 1000:+.1f} MB" for k in m1[1] if k in m0[1]))
    kept = default.min_age if default else OLD_WINDOW
    print(f"time scale: one second of a golem ticking {a.soak_rate}/s = {min(scales) * 1000:.1f}–{max(scales) * 1000:.1f} ms "
          f"here, so the {kept.total_seconds():.0f} s window stood for ~{kept.total_seconds() * a.soak_rate:.0f} ticks")
    if default:  # what the rows themselves take: every version but the latest dropped (nobody else reads this table)
        time.sleep(0.01)
        eps.retention = RETENTION(keep_versions=1, min_age=timedelta(milliseconds=1), every_writes=0)
        eps.upkeep()
        print(f"the episode table with only its latest version: {size(root / 'episodes.lance') / 1e6:.2f} MB "
              f"({size(root / 'episodes.lance') / eps.count():.0f} bytes per episode)")
    if a.keep:
        print(f"kept: {root}")
    else:
        shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
