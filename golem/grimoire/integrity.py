"""Embedding integrity: act on the drift check, re-embed in full, resume writes.

A critical drift report (store.embeddings.scheduled_drift_check, every delta cycle) pauses writes (store/guard.py);
`golem grimoire reembed | resume` re-embeds every episode and entry with the configured model (each table in one
commit), re-pins the drift reference, flushes the queued rows and lifts the pause. Nothing is written with a
drifting model while paused, and nothing is lost. See docs/design/grimoire.md#embeddings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from golem.grimoire.store.embeddings import DriftReport, identity_of, pin_reference, pinned_identity
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.store.guard import WriteGuard
from golem.grimoire.semantic.store import SemanticStore

DRIFT_REFERENCE = "drift-reference.npy"  # under the grimoire dir, beside the stores (+ .json with its identity)


def drift_reference_path(grimoire_dir: Path) -> Path:
    return Path(grimoire_dir) / DRIFT_REFERENCE


def apply_drift_report(report: DriftReport, grimoire_dir: Path) -> dict[str, Any]:
    """A critical report pauses the grimoire's vector writes
    (persistently, across restarts) until a full re-embed. Healthy and warning reports change nothing — in
    particular they never lift a pause: only `reembed_stores` does. Returns the guard status."""
    guard = WriteGuard(Path(grimoire_dir))
    if report.status == "critical":
        guard.pause("drift", report.as_dict())
    return guard.status()


def reembed_stores(episodes: EpisodeStore, semantic: SemanticStore | None, grimoire_dir: Path) -> dict[str, Any]:
    """Full re-embed of both stores with their (the configured) embedder, then re-pin the drift reference,
    flush the pending queue and lift the pause. Safe to run again after a crash at any step: the pause is
    lifted last, and only when the queue is empty.

    Returns {"episodes", "entries", "flushed": {"episodes", "semantic"}, "reference", "status"}."""
    grimoire_dir = Path(grimoire_dir)
    if semantic is not None and identity_of(semantic.embedder) != identity_of(episodes.embedder):
        raise ValueError("the episode and semantic stores must use the same embedder to be re-embedded together")
    guard = WriteGuard(grimoire_dir)
    for store in (episodes, semantic):
        if store is not None and store.guard.path.resolve() != guard.path.resolve():
            raise ValueError(f"{type(store).__name__} pauses through {store.guard.path}, not {guard.path}: "
                             f"open the stores inside {grimoire_dir}")
    out: dict[str, Any] = {"episodes": episodes.reembed(), "entries": semantic.reembed_all() if semantic else 0}
    out["reference"] = pin_reference(episodes.embedder, drift_reference_path(grimoire_dir)).as_dict()
    flushed = {"episodes": 0, "semantic": 0}
    for _ in range(20):  # writers in other processes may still be queueing while the drift pause holds
        flushed["episodes"] += episodes.flush_pending()
        if semantic is not None:
            flushed["semantic"] += semantic.flush_pending()
        if guard.lift(["drift"]):
            break
    else:
        raise RuntimeError(f"{guard.path}: writers keep queueing rows; the drift pause stays set (run the command "
                           f"again once the worker is idle)")
    out["flushed"] = flushed
    out["status"] = guard.status()
    return out


def integrity_status(episodes: EpisodeStore, semantic: SemanticStore | None, grimoire_dir: Path) -> dict[str, Any]:
    """For `golem grimoire stats`: the configured model, each table's stored identity, the drift reference's,
    and the write pause (paused, reasons, pending counts)."""
    ref = pinned_identity(drift_reference_path(grimoire_dir))
    return {
        "embedder": identity_of(episodes.embedder).as_dict(),
        "episodes": episodes.embedding_stats(),
        "semantic": semantic.embedding_stats() if semantic is not None else None,
        "drift_reference": ref.as_dict() if ref else None,
        "write_pause": episodes.guard.status(),
    }
