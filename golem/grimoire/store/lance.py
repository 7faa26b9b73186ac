"""LanceDB plumbing shared by the Grimoire's stores: one session per process with bounded caches, and how many
table versions are kept.

Every write makes a table version whose manifest the default session caches without bound; the two stores share one
session capped at 16 MB of metadata (mostly stale manifests; retrieval was no slower than at 64 MB) and 128 MB of
index pages (what retrieval reads). GOLEM_LANCE_INDEX_CACHE_MB / GOLEM_LANCE_METADATA_CACHE_MB move the caps.
The measurements behind the caps: docs/design/grimoire.md#the-lancedb-session.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import lancedb

log = logging.getLogger("golem.grimoire")

INDEX_CACHE_BYTES = 128 << 20  # ANN / FTS index pages
METADATA_CACHE_BYTES = 16 << 20  # manifests, fragment and file metadata (why 16: the module's docstring)
INDEX_CACHE_ENV = "GOLEM_LANCE_INDEX_CACHE_MB"
METADATA_CACHE_ENV = "GOLEM_LANCE_METADATA_CACHE_MB"


def _cache_bytes(env: str, default: int) -> int:
    raw = os.environ.get(env)
    if raw is None or raw.strip() == "":
        return default
    try:
        mb = float(raw)
    except ValueError:
        raise ValueError(f"{env}={raw!r}: give the cache size in MB, a number >= 0") from None
    if mb < 0:
        raise ValueError(f"{env}={raw!r}: give the cache size in MB, a number >= 0")
    return int(mb * (1 << 20))


def cache_sizes() -> tuple[int, int]:
    """(index cache, metadata cache) in bytes for this process's LanceDB session."""
    return _cache_bytes(INDEX_CACHE_ENV, INDEX_CACHE_BYTES), _cache_bytes(METADATA_CACHE_ENV, METADATA_CACHE_BYTES)


def session_bytes() -> int | None:
    """What this process's LanceDB caches hold now (None before the first store opened them)."""
    return None if _session is None else int(_session.size_bytes)

_session: lancedb.Session | None = None


def lance_session() -> lancedb.Session:
    global _session
    if _session is None:
        index, metadata = cache_sizes()
        _session = lancedb.Session(index_cache_size_bytes=index, metadata_cache_size_bytes=metadata)
    return _session


# ---- table versions ------------------------------------------------------------------------------------------------
# Every LanceDB write is a table version, and a version keeps every file it references until it is cleaned up. The
# delta cycle rewrites the episodes table whole (decay rewrites nearly every row's retention, compaction merges every
# fragment), so the versions around each delta cycle hold a copy of the table each: at the soak's theta (0.1 s) ten
# minutes of versions were hundreds of them and the Grimoire grew 28 MB per 1,000 ticks. So versions are
# kept by count as well as by age, and the stores clean up on a cadence of their own writes, not only in DELTA.
MIN_VERSION_AGE = timedelta(minutes=1)  # ours: a reader in another process (`golem grimoire search`, an export) that
#                                         opened a version this recent keeps its files; reads take well under it
KEEP_VERSIONS = 20  # ours: the newest versions survive however old (a slow golem's last minutes of history)
UPKEEP_EVERY_WRITES = 50  # ours: a store's own writes between two upkeeps; LanceDB's guide says optimize after ~20
#                           modifications, and 50 is the default delta cadence (delta_theta_ticks), so in a golem
#                           ticking one write per tick the stores clean up about twice per delta cycle
# LanceDB measures age when it prunes, after the optimize's compaction: versions up to this much older than the
# oldest one kept by count also stay. A compaction slower than this can drop one or two more of the versions kept by
# count (never one younger than min_age: the window is at least min_age whenever LanceDB measures it).
_AGE_MARGIN = timedelta(milliseconds=200)


@dataclass(frozen=True)
class VersionRetention:
    """Which versions of a LanceDB table cleanup keeps: the newest `keep_versions` (as of the upkeep's start, see
    _AGE_MARGIN), and every version younger than `min_age`; the latest is never removed (LanceDB).
    `every_writes`: a store runs its upkeep (compaction, new rows into the indexes, this cleanup) after that many of
    its own writes; 0 = only when asked (the delta cycle)."""

    keep_versions: int = KEEP_VERSIONS
    min_age: timedelta = MIN_VERSION_AGE
    every_writes: int = UPKEEP_EVERY_WRITES

    def __post_init__(self) -> None:
        if self.keep_versions < 1:
            raise ValueError(f"keep_versions must be >= 1 (the latest version is always kept), got {self.keep_versions}")
        if self.min_age <= timedelta(0):
            raise ValueError(f"min_age must be > 0 (a reader in another process may be on a recent version), "
                             f"got {self.min_age}")
        if self.every_writes < 0:
            raise ValueError(f"every_writes must be >= 0 (0: upkeep only when asked), got {self.every_writes}")

    def older_than(self, table: Any, now: datetime | None = None) -> timedelta:
        """`cleanup_older_than` for LanceDB's optimize: versions older than this go. At least `min_age`, and old
        enough to keep the newest `keep_versions` (list_versions' timestamps are local times, as `now`)."""
        stamps = sorted(v["timestamp"] for v in table.list_versions())
        now = now or datetime.now()
        if not stamps:
            return self.min_age
        oldest_kept = stamps[-self.keep_versions] if len(stamps) >= self.keep_versions else stamps[0]
        age: timedelta = max(self.min_age, now - oldest_kept + _AGE_MARGIN)
        return age


DEFAULT_RETENTION = VersionRetention()


_UPKEEP_LOCKS: dict[str, threading.Lock] = {}
_UPKEEP_LOCKS_LOCK = threading.Lock()


def upkeep_lock(table: Any) -> threading.Lock:
    """The process's lock for one table's upkeep, by its location: two compactions of one table at once (a store's
    own upkeep after its writes, the delta cycle's on another thread) preempt each other in LanceDB ("Retryable
    commit conflict"). One lock per table: other tables, other golems' among them, compact in parallel."""
    key = str(getattr(table, "uri", None) or id(table))
    with _UPKEEP_LOCKS_LOCK:
        return _UPKEEP_LOCKS.setdefault(key, threading.Lock())


def optimize(table: Any, retention: VersionRetention = DEFAULT_RETENTION) -> None:
    """LanceDB's optimize: compact small fragments, fold new rows into the indexes, clean up versions by `retention`.
    Only files no kept version references are removed, so a reader on a kept version keeps working. One at a time
    per table in this process (upkeep_lock)."""
    with upkeep_lock(table):
        table.optimize(cleanup_older_than=retention.older_than(table))


class UpkeepCadence:
    """Mixed into a store of a LanceDB table: counts the store's writes and runs its `upkeep()` every
    `retention.every_writes` of them. The write has happened whatever the upkeep does: a failed upkeep is logged and
    left to the next one (or the delta cycle's)."""

    retention: VersionRetention = DEFAULT_RETENTION
    _writes = 0  # writes since the last upkeep

    def upkeep(self) -> None:
        raise NotImplementedError

    def _wrote(self) -> None:
        self._writes += 1
        if self.retention.every_writes and self._writes >= self.retention.every_writes:
            self._writes = 0
            try:
                self.upkeep()
            except Exception as e:  # noqa: BLE001 — housekeeping must not fail the write it follows
                log.warning("%s: upkeep after %d writes failed (%s); the next one retries", self,
                            self.retention.every_writes, e)
