"""Store upkeep and the cognitive quality metrics behind `golem grimoire stats`.

LanceDB leaves new rows outside the FTS index until `optimize()` folds them in, and every write makes a
table version; `maintain` (the delta cycle's step) runs optimize = compaction + index update + version
cleanup on both tables, so neither the unindexed tail nor the version list grows without bound. The stores also
run that upkeep themselves every `retention.every_writes` of their writes, and keep versions by count as well as by
age (lance.VersionRetention).
"""

from __future__ import annotations

from contextlib import closing
from typing import Any

from golem.grimoire.episodes import index as episode_index
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.store.lance import optimize
from golem.grimoire.store.indexes import ANN_MIN_ROWS, build_ann_index, ensure_fts, vector_index
from golem.grimoire.semantic.store import EntryType, SemanticStore
from golem.storage import connect

HEURISTIC_SURVIVAL_TICKS = 100  # "% promoted heuristics active after 100 ticks"


def table_stats(table: Any, text_column: str) -> dict[str, Any]:
    s = table.stats()
    fs = s.fragment_stats if hasattr(s, "fragment_stats") else s["fragment_stats"]
    def get(o: Any, k: str) -> Any:
        return getattr(o, k) if hasattr(fs, "num_fragments") else o[k]
    unindexed = None
    for idx in table.list_indices():
        if text_column in idx.columns and idx.index_type == "FTS":
            unindexed = table.index_stats(idx.name).num_unindexed_rows
    return {
        "rows": table.count_rows(),
        "fragments": get(fs, "num_fragments"),
        "small_fragments": get(fs, "num_small_fragments"),
        "versions": len(table.list_versions()),
        "fts_unindexed_rows": unindexed,  # None: no FTS index yet
        "bytes": s.total_bytes if hasattr(s, "total_bytes") else s["total_bytes"],
    }


def maintain(episodes: EpisodeStore, semantic: SemanticStore | None) -> dict[str, Any]:
    """Delta-cycle upkeep: ensure FTS indexes, fold new rows in, compact, drop the versions each store's retention
    does not keep (the newest few and the last minute's survive, so a reader on one is never cut off).
    Returns before/after stats per table.
    """
    out: dict[str, Any] = {}
    for name, store, col in [("episodes", episodes, "summary"),
                             *([("semantic", semantic, "content")] if semantic is not None else [])]:
        table = store.table
        before = table_stats(table, col)
        ensure_fts(table, col)
        if table.count_rows():
            optimize(table, store.retention)  # also folds new rows into the ANN index
            if table.count_rows() >= ANN_MIN_ROWS and vector_index(table) is None:
                build_ann_index(table)  # exact scans get slow past ~50k rows (bench/grimoire.py --big)
        out[name] = {"before": before, "after": table_stats(table, col)}
    episode_index.refresh(episodes)  # new versions of the same rows: rebuilt here, not in the next tick's query
    return out


def cognitive_metrics(semantic: SemanticStore, now_tick: int) -> dict[str, Any]:
    """The quality metrics computable from the stores (the rest need other subsystems)."""
    with closing(connect(semantic.db_path)) as db:
        adm = dict(db.execute("SELECT action, COUNT(*) FROM admission_log GROUP BY action").fetchall())
        avg_q = db.execute("SELECT AVG(quality_score) FROM grimoire_entries WHERE valid_until IS NULL").fetchone()[0]
        rl = db.execute("SELECT COUNT(*), SUM(hits > 0), SUM(abstained) FROM retrieval_log WHERE retrieved = 1").fetchone()
        old_h = db.execute("SELECT COUNT(*), SUM(valid_until IS NULL) FROM grimoire_entries WHERE category = ? "
                           "AND created_tick <= ?", (EntryType.HEURISTIC.value, now_tick - HEURISTIC_SURVIVAL_TICKS)).fetchone()
        cold_h = db.execute("SELECT COUNT(*) FROM cold_entries WHERE json_extract(entry, '$.category') = ? "
                            "AND json_extract(entry, '$.created_tick') <= ?",
                            (EntryType.HEURISTIC.value, now_tick - HEURISTIC_SURVIVAL_TICKS)).fetchone()[0]
        quarantined = db.execute("SELECT COUNT(*) FROM quarantined_entries WHERE reviewed = 0").fetchone()[0]
        cold = db.execute("SELECT COUNT(*) FROM cold_entries").fetchone()[0]
    candidates = sum(adm.values())
    admitted = sum(adm.get(a, 0) for a in ("admitted", "admitted_low"))
    h_total = (old_h[0] or 0) + cold_h
    return {
        "admission_rate": admitted / candidates if candidates else None,  # healthy 40–60 %
        "admission_outcomes": adm,
        "average_quality": avg_q,  # healthy 0.5–0.8
        "grimoire_size": semantic.count(),
        "retrieval_hit_rate": (rl[1] or 0) / rl[0] if rl[0] else None,  # healthy > 30 % after 7 d
        "abstention_rate": (rl[2] or 0) / rl[0] if rl[0] else None,
        "heuristic_survival_rate": (old_h[1] or 0) / h_total if h_total else None,  # healthy 40–70 %
        "quarantined_pending": quarantined,
        "cold_storage": cold,
    }
