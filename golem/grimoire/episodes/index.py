"""An in-memory index over the episodes' vectors and summary terms for retrieval.

An exact scan of the vectors is one matrix-vector product, cheaper than LanceDB's hybrid query, so the retrieve step
keeps per episodes table the ids, ticks, vectors, term postings and scored scalars, and a query reads nothing from
disk. The store reports its own writes and the index applies them in place; any other version change rebuilds it.
Above MAX_ROWS, or when the process's indexes together would pass TOTAL_ROWS (a fleet worker keeps one per golem),
retrieval goes back to LanceDB (ANN). Each version is a snapshot of its own `n` rows over shared,
append-only storage, so a query keeps reading its snapshot while a write appends. See docs/design/grimoire.md#retrieval.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from golem.grimoire.store.terms import terms
from golem.layout import drop_under


class EpisodeStore(Protocol):
    """What the index reads of the store (golem.grimoire.episodes.store.EpisodeStore): its table and path."""

    @property
    def table(self) -> Any: ...

    @property
    def path(self) -> Path: ...


# what retrieval scores an episode with, besides id, tick, summary and vector
SCALARS = ("tier", "regime", "confidence", "quality", "strength", "decay_class", "last_accessed_tick",
           "dream_validated", "pnl_impact", "emotional_tag")
MAX_ROWS = 250_000  # ours: 250k × 256 float32 = 256 MB; beyond it the ANN index (store/indexes.py: ANN_MIN_ROWS) serves
# Ours: all the process's indexes together (a fleet worker's golems share it, first come first kept); a store that
# would pass it is searched in LanceDB instead, so the worker's memory does not grow with every golem's episodes.
TOTAL_ROWS = 250_000
TOTAL_ROWS_ENV = "GOLEM_EPISODE_INDEX_ROWS"


def total_rows() -> int:
    """TOTAL_ROWS, or GOLEM_EPISODE_INDEX_ROWS (0: no in-memory index at all)."""
    import os

    raw = os.environ.get(TOTAL_ROWS_ENV, "").strip()
    try:
        return int(raw) if raw else TOTAL_ROWS
    except ValueError:
        raise ValueError(f"{TOTAL_ROWS_ENV}={raw!r}: give a number of rows (0: episodes searched in LanceDB)") from None


@dataclass
class EpisodeIndex:
    version: int
    n: int  # rows in this snapshot; the shared storage below may hold more (appended for a newer one)
    ids: list[str]
    pos: dict[str, int]
    tick_buf: np.ndarray  # (capacity,) int64
    vec_buf: np.ndarray  # (capacity, dim) float32, L2-normalised
    summaries: list[str]
    postings: dict[str, list[int]] = field(default_factory=dict)  # term → rows holding it, ascending
    scalars: dict[str, list[Any]] = field(default_factory=dict)  # SCALARS column → values by row

    @property
    def ticks(self) -> np.ndarray:
        return self.tick_buf[:self.n]

    @property
    def vectors(self) -> np.ndarray:
        return self.vec_buf[:self.n]

    def row(self, k: int) -> dict[str, Any]:
        """Episode `k`'s scalar fields, id and tick (what retrieval scores with)."""
        return {c: v[k] for c, v in self.scalars.items()} | {"id": self.ids[k], "tick": int(self.tick_buf[k])}

    def coverage(self, idf: dict[str, float]) -> np.ndarray:
        """Per episode, the share of the question's idf mass (`idf`: term → weight) its summary holds."""
        out = np.zeros(self.n, dtype=np.float64)
        total = sum(idf.values())
        if total <= 0 or not self.n:
            return out
        for t, w in idf.items():
            rows = self.postings.get(t)
            if rows:
                if rows[-1] >= self.n:  # rows appended for a newer snapshot
                    rows = rows[:bisect_left(rows, self.n)]
                out[rows] += w
        return out / total


_CACHE: dict[str, EpisodeIndex] = {}
_LOCK = threading.Lock()
builds = 0  # full builds so far in this process (tests check writes are applied in place)


def _postings(summaries: list[str], start: int = 0, into: dict[str, list[int]] | None = None) -> dict[str, list[int]]:
    """Append rows start, start + 1, ... to the postings of their summaries' terms. The terms are computed here, not
    through the process's summary_terms cache: the postings keep them (a cache entry per episode, ~2.7 KB, doubled
    what an episode cost the worker)."""
    lists: dict[str, list[int]] = into if into is not None else {}
    for n, s in enumerate(summaries, start):
        for t in set(terms(s)):
            lists.setdefault(t, []).append(n)
    return lists


def _vectors(col: Any, dim: int) -> np.ndarray:
    flat = col.combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(np.asarray(flat, dtype=np.float32).reshape(-1, dim))


def _capacity(n: int) -> int:
    return n + max(1024, n // 4)


def _carried(prev: EpisodeIndex, ids: list[str], summaries: list[str]) -> tuple[int, dict[str, list[int]]] | None:
    """When the new version's first rows are `prev`'s, in order and with the same summaries (an upkeep's compaction,
    rows appended by another process): how many, and a copy of their postings, so that only the rows after them are
    split into terms. None otherwise. Under _LOCK: a write applied in place may be appending to `prev`."""
    with _LOCK:
        n0 = prev.n
        if n0 > len(ids) or ids[:n0] != prev.ids[:n0] or summaries[:n0] != prev.summaries[:n0]:
            return None
        kept = {t: rows[:bisect_left(rows, n0)] for t, rows in prev.postings.items()}
    return n0, {t: rows for t, rows in kept.items() if rows}


def build(table: Any, prev: EpisodeIndex | None = None) -> EpisodeIndex:
    """The index of `table`'s current version; `prev` (the same table's last one) lends its postings when they still
    hold (_carried), so an upkeep's rebuild does not split every summary into terms again."""
    global builds
    builds += 1
    version = table.version
    n = table.count_rows()
    dim = table.schema.field("vector").type.list_size
    data: Any = table.search().select(["id", "tick", "summary", "vector", *SCALARS]).limit(max(1, n)).to_arrow() if n else None
    n = data.num_rows if n else 0
    ids = data.column("id").to_pylist() if n else []
    summaries = data.column("summary").to_pylist() if n else []
    tick_buf = np.zeros(_capacity(n), dtype=np.int64)
    vec_buf = np.zeros((_capacity(n), dim), dtype=np.float32)
    if n:
        tick_buf[:n] = np.asarray(data.column("tick").to_numpy(zero_copy_only=False), dtype=np.int64)
        vec_buf[:n] = _vectors(data.column("vector"), dim)
    scalars = {c: data.column(c).to_pylist() if n else [] for c in SCALARS}
    carried = _carried(prev, ids, summaries) if prev is not None else None
    if carried is None:
        postings = _postings(summaries)
    else:
        postings = _postings(summaries[carried[0]:], carried[0], into=carried[1])
    return EpisodeIndex(version=version, n=n, ids=ids, pos={i: k for k, i in enumerate(ids)}, tick_buf=tick_buf,
                        vec_buf=vec_buf, summaries=summaries, postings=postings, scalars=scalars)


def _fits(key: str, n: int) -> bool:  # under _LOCK: n rows for `key` beside the other stores' keep the budget
    return n <= MAX_ROWS and n + sum(i.n for k, i in _CACHE.items() if k != key) <= total_rows()


def cached_rows() -> int:
    """Rows held by all the process's episode indexes."""
    with _LOCK:
        return sum(i.n for i in _CACHE.values())


def episode_index(store: EpisodeStore) -> EpisodeIndex | None:
    """The index for `store`'s table, current with its version; None above MAX_ROWS, or when it would take the
    process's indexes past TOTAL_ROWS (then it is dropped: LanceDB serves this store)."""
    table = store.table
    key = str(store.path)
    version = table.version
    with _LOCK:
        idx = _CACHE.get(key)
        if idx is not None and idx.version == version:
            if _fits(key, idx.n):
                return idx
            del _CACHE[key]  # grown by its writes past the budget
            return None
    n = table.count_rows()
    with _LOCK:
        if not _fits(key, n):
            _CACHE.pop(key, None)
            return None
        prev = _CACHE.get(key)
    idx = build(table, prev)
    with _LOCK:
        if not _fits(key, idx.n):
            _CACHE.pop(key, None)
            return None
        _CACHE[key] = idx
    return idx


def note_update(store: EpisodeStore, ids: list[str], changes: dict[str, Any], before: int, after: int) -> None:
    """The store changed scalar fields of `ids` (no id, tick, summary or vector) from version `before` to `after`;
    `changes`: column → function of the old value giving the new one (the SQL it ran, in Python)."""
    key = str(store.path)
    with _LOCK:
        idx = _CACHE.get(key)
        if idx is None or idx.version != before:
            _CACHE.pop(key, None)
            return
        for i in ids:
            k = idx.pos.get(i)
            if k is None:
                continue
            for c, f in changes.items():
                col = idx.scalars.get(c)
                if col is not None:
                    col[k] = f(col[k])
        _CACHE[key] = replace(idx, version=after)


def note_merge(store: EpisodeStore, data: Any, before: int, after: int) -> None:
    """The store merged `data` (rows with id, tick, summary, vector and SCALARS) into its table, from version
    `before` to `after`: appended to the shared storage (new rows) or written over (rewritten rows, same summary)."""
    key = str(store.path)
    with _LOCK:
        idx = _CACHE.get(key)
        if idx is None or idx.version != before or idx.n != len(idx.ids):
            _CACHE.pop(key, None)  # something else moved the table: rebuild on the next query
            return
        ids = data.column("id").to_pylist()
        summaries = data.column("summary").to_pylist()
        ticks = np.asarray(data.column("tick").to_numpy(zero_copy_only=False), dtype=np.int64)
        vecs = _vectors(data.column("vector"), idx.vec_buf.shape[1])
        values = {c: data.column(c).to_pylist() for c in SCALARS}
        if any(i in idx.pos and idx.summaries[idx.pos[i]] != summaries[k] for k, i in enumerate(ids)):
            _CACHE.pop(key, None)  # an episode rewritten with another summary: its postings move; rebuild
            return
        new = [k for k, i in enumerate(ids) if i not in idx.pos]
        tick_buf, vec_buf, n = idx.tick_buf, idx.vec_buf, idx.n
        if n + len(new) > len(tick_buf):  # grow: a fresh copy (readers keep the old buffers)
            tick_buf = np.zeros(_capacity(n + len(new)), dtype=np.int64)
            vec_buf = np.zeros((len(tick_buf), idx.vec_buf.shape[1]), dtype=np.float32)
            tick_buf[:n], vec_buf[:n] = idx.tick_buf[:n], idx.vec_buf[:n]
        for k, i in enumerate(ids):
            if i in idx.pos:  # rewritten, same text: new tick/vector/fields in place
                r = idx.pos[i]
                tick_buf[r], vec_buf[r] = ticks[k], vecs[k]
                for c in SCALARS:
                    idx.scalars[c][r] = values[c][k]
        for j, k in enumerate(new):
            r = n + j
            tick_buf[r], vec_buf[r] = ticks[k], vecs[k]
            idx.pos[ids[k]] = r
            idx.ids.append(ids[k])
            idx.summaries.append(summaries[k])
            for c in SCALARS:
                idx.scalars[c].append(values[c][k])
        _postings([summaries[k] for k in new], n, into=idx.postings)
        _CACHE[key] = replace(idx, version=after, n=n + len(new), tick_buf=tick_buf, vec_buf=vec_buf)


def refresh(store: EpisodeStore) -> None:
    """The store's upkeep (compaction, index fold-in, cleanup) made new versions of the same rows: when this process
    keeps an index for it, rebuild it now, in the writer's thread, so the next query does not pay for the build."""
    key = str(store.path)
    with _LOCK:
        cached = key in _CACHE
    if not cached:
        return
    n = store.table.count_rows()
    with _LOCK:
        if not _fits(key, n):
            _CACHE.pop(key, None)
            return
        prev = _CACHE.get(key)
    idx = build(store.table, prev)
    with _LOCK:
        if key in _CACHE and _fits(key, idx.n):
            _CACHE[key] = idx


def forget(root: str | Path) -> int:
    """Drop the cached indexes of the stores under `root` (a golem's data dir, when a fleet worker closes the golem):
    the cache is keyed by store path, so a closed golem's would stay for the life of the process. Returns how many."""
    with _LOCK:
        return drop_under(_CACHE, root)
