"""An in-memory index over the episodes' vectors and summary terms for retrieval (ours, issue 15: retrieval p50
≤ 30 ms at 10k episodes + 2k entries in bench/grimoire.py).

LanceDB's hybrid query (vector leg + BM25 leg + RRF rerank) cost 1.5–2.5× an exact vector query on the same table;
the vectors of 10k WordLlama-256 episodes are 10 MB and an exact scan is one matrix-vector product (~0.1 ms). So the
retrieve step keeps, per episodes table, the ids, ticks, vectors and term postings of every episode, and asks
the scalar fields retrieval scores with (SCALARS: tier, confidence, strength, last access, …), so a query reads
nothing from disk.

Kept current cheaply: the store reports its own writes (`note_merge` with the rows it wrote, `note_update` with the
scalar changes it made) and the index applies them in place when nothing else moved the table in between; any other
version change (another process, compaction, an overwrite) rebuilds it whole on the next query (about 0.1 s per
10k rows, most of it reading the table). Above MAX_ROWS episodes retrieval goes back to LanceDB (ANN).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from golem.grimoire.entry_index import summary_terms

# what retrieval scores an episode with, besides id, tick, summary and vector
SCALARS = ("tier", "regime", "confidence", "quality", "strength", "decay_class", "last_accessed_tick",
           "dream_validated", "pnl_impact", "emotional_tag")
MAX_ROWS = 250_000  # ours: 250k × 256 float32 = 256 MB; beyond it the ANN index (retrieval.ANN_MIN_ROWS) serves


@dataclass
class EpisodeIndex:
    version: int
    ids: list[str]
    pos: dict[str, int]
    ticks: np.ndarray  # (n,) int64
    vectors: np.ndarray  # (n, dim) float32, L2-normalised
    summaries: list[str]
    postings: dict[str, list[int]] = field(default_factory=dict)  # term → rows holding it
    scalars: dict[str, list] = field(default_factory=dict)  # SCALARS column → values by row

    def row(self, k: int) -> dict:
        """Episode `k`'s scalar fields, id and tick (what retrieval scores with)."""
        return {c: v[k] for c, v in self.scalars.items()} | {"id": self.ids[k], "tick": int(self.ticks[k])}

    @property
    def n(self) -> int:
        return len(self.ids)

    def coverage(self, idf: dict[str, float]) -> np.ndarray:
        """Per episode, the share of the question's idf mass (`idf`: term → weight) its summary holds."""
        out = np.zeros(self.n, dtype=np.float64)
        total = sum(idf.values())
        if total <= 0 or not self.n:
            return out
        for t, w in idf.items():
            rows = self.postings.get(t)
            if rows is not None:
                out[rows] += w
        return out / total


_CACHE: dict[str, EpisodeIndex] = {}
_LOCK = threading.Lock()
builds = 0  # full builds so far in this process (tests check writes are applied in place)


def _postings(summaries: list[str], start: int = 0) -> dict[str, list[int]]:
    lists: defaultdict[str, list[int]] = defaultdict(list)
    for n, s in enumerate(summaries, start):
        for t in summary_terms(s):
            lists[t].append(n)
    return dict(lists)


def _vectors(col, dim: int) -> np.ndarray:
    flat = col.combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(np.asarray(flat, dtype=np.float32).reshape(-1, dim))


def build(table) -> EpisodeIndex:
    global builds
    builds += 1
    version = table.version
    n = table.count_rows()
    dim = table.schema.field("vector").type.list_size
    data = table.search().select(["id", "tick", "summary", "vector", *SCALARS]).limit(max(1, n)).to_arrow() if n else None
    ids = data.column("id").to_pylist() if n else []
    summaries = data.column("summary").to_pylist() if n else []
    ticks = np.asarray(data.column("tick").to_numpy(zero_copy_only=False), dtype=np.int64) if n else np.zeros(0, np.int64)
    vectors = _vectors(data.column("vector"), dim) if n else np.zeros((0, dim), np.float32)
    postings = _postings(summaries)
    scalars = {c: data.column(c).to_pylist() if n else [] for c in SCALARS}
    return EpisodeIndex(version=version, ids=ids, pos={i: k for k, i in enumerate(ids)}, ticks=ticks, vectors=vectors,
                        summaries=summaries, postings=postings, scalars=scalars)


def episode_index(store) -> EpisodeIndex | None:
    """The index for `store`'s table, current with its version; None above MAX_ROWS."""
    table = store.table
    key = str(store.path)
    version = table.version
    with _LOCK:
        idx = _CACHE.get(key)
        if idx is not None and idx.version == version:
            return idx
    if table.count_rows() > MAX_ROWS:
        return None
    idx = build(table)
    with _LOCK:
        _CACHE[key] = idx
    return idx


def note_update(store, ids: list[str], changes: dict, before: int, after: int) -> None:
    """The store changed scalar fields of `ids` (no id, tick, summary or vector) from version `before` to `after`;
    `changes`: column → function of the old value giving the new one (the SQL it ran, in Python)."""
    key = str(store.path)
    with _LOCK:
        idx = _CACHE.get(key)
        if idx is None or idx.version != before:
            _CACHE.pop(key, None)
            return
        cols = {c: idx.scalars[c][:] for c in changes if c in idx.scalars}
        for i in ids:
            k = idx.pos.get(i)
            if k is None:
                continue
            for c, f in changes.items():
                if c in cols:
                    cols[c][k] = f(cols[c][k])
        _CACHE[key] = EpisodeIndex(version=after, ids=idx.ids, pos=idx.pos, ticks=idx.ticks, vectors=idx.vectors,
                                   summaries=idx.summaries, postings=idx.postings, scalars=idx.scalars | cols)


def note_merge(store, data, before: int, after: int) -> None:
    """The store merged `data` (rows with id, tick, summary, vector) into its table, from version `before` to
    `after`: apply it in place (a new snapshot of the arrays; readers keep the one they hold)."""
    key = str(store.path)
    with _LOCK:
        idx = _CACHE.get(key)
        if idx is None or idx.version != before:
            _CACHE.pop(key, None)  # something else moved the table: rebuild on the next query
            return
        ids = data.column("id").to_pylist()
        summaries = data.column("summary").to_pylist()
        ticks = np.asarray(data.column("tick").to_numpy(zero_copy_only=False), dtype=np.int64)
        vecs = _vectors(data.column("vector"), idx.vectors.shape[1])
        replaced = [k for k, i in enumerate(ids) if i in idx.pos]
        if any(idx.summaries[idx.pos[ids[k]]] != summaries[k] for k in replaced):
            _CACHE.pop(key, None)  # an episode rewritten with another summary: its postings move; rebuild
            return
        new = [k for k, i in enumerate(ids) if i not in idx.pos]
        vectors, tick_arr = idx.vectors.copy() if replaced else idx.vectors, idx.ticks.copy() if replaced else idx.ticks
        for k in replaced:
            vectors[idx.pos[ids[k]]] = vecs[k]
            tick_arr[idx.pos[ids[k]]] = ticks[k]
        start = idx.n
        new_ids = idx.ids + [ids[k] for k in new]
        new_summaries = idx.summaries + [summaries[k] for k in new]
        postings = dict(idx.postings)
        for t, rows in _postings([summaries[k] for k in new], start).items():
            old = postings.get(t)
            postings[t] = rows if old is None else old + rows
        scalars = {}
        for c, old_vals in idx.scalars.items():
            vals = data.column(c).to_pylist()
            col = old_vals[:] if replaced else old_vals
            for k in replaced:
                col[idx.pos[ids[k]]] = vals[k]
            scalars[c] = col + [vals[k] for k in new]
        _CACHE[key] = EpisodeIndex(
            version=after, ids=new_ids, pos={**idx.pos, **{ids[k]: start + j for j, k in enumerate(new)}},
            ticks=np.concatenate([tick_arr, ticks[new]]) if new else tick_arr,
            vectors=np.concatenate([vectors, vecs[new]]) if new else vectors,
            summaries=new_summaries, postings=postings, scalars=scalars)
