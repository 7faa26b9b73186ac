"""An in-memory index over the semantic entries for retrieval (ours): every entry's vector, its
lexical terms (content + tags + type, lightly stemmed) and its valid/record times, so one question is scored
against *all* entries exactly — no top-20 cut-off before the time filter or the rerank can lose the right entry.

Scale: a Grimoire holds a few thousand entries; 2,000 × 256 floats is
2 MB and a full scan is a matrix-vector product. The index is rebuilt when the store changes (a cheap SQLite
change counter, semantic/migrations.py v7); dynamic fields (confidence, last access, strength) are read from SQLite
for the shortlist only, so a `mark_accessed` never invalidates it."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from golem.grimoire.store.terms import terms
from golem.layout import drop_under

if TYPE_CHECKING:
    from golem.grimoire.semantic.store import SemanticStore


def entry_text(content: str, tags: list[str], category: str, regime: str | None = None) -> str:
    """What the lexical side indexes for an entry: its content, tags, type and regime scope ("trending up"), so a
    question naming a regime matches the entries scoped to it whatever their text says."""
    return " ".join([content, " ".join(t.replace("-", " ").replace("_", " ") for t in tags), category.replace("_", " "),
                     (regime or "").replace("_", " ")])


@dataclass
class EntryIndex:
    ids: list[str]
    vectors: np.ndarray  # (n, dim) L2-normalised; zero rows where the mirror has no vector yet
    has_vector: np.ndarray  # (n,) bool
    valid_from: np.ndarray  # (n,) int64 ticks
    valid_until: np.ndarray  # (n,) int64 ticks; INT64 max = still in force
    created: np.ndarray  # (n,) int64 ticks (record time)
    postings: dict[str, tuple[np.ndarray, np.ndarray]]  # term → (rows, term frequencies)
    lengths: np.ndarray  # (n,) terms per entry
    df: dict[str, int] = field(default_factory=dict)
    tags: list[frozenset[str]] = field(default_factory=list)
    parents: list[frozenset[str]] = field(default_factory=list)  # parent_episode_ids
    categories: list[str] = field(default_factory=list)  # entry type
    regimes: list[str | None] = field(default_factory=list)  # market_regime scope (None: unscoped)
    built_at: float = 0.0  # time.monotonic() of the build

    @property
    def n(self) -> int:
        return len(self.ids)

    def idf(self, term: str) -> float:
        """BM25's idf, log(1 + (N − df + 0.5)/(df + 0.5)); a term no entry has gets the largest value."""
        d = self.df.get(term, 0)
        return math.log(1.0 + (self.n - d + 0.5) / (d + 0.5))

    def idf_of(self, q_terms: list[str]) -> dict[str, float]:
        """The query's distinct terms → idf, in ascending (idf, term) order. Sums over it are the same in every
        process (a set's order follows the interpreter's hash seed, and floating-point sums follow their order), and
        two candidates holding the same idf values tie exactly instead of by a rounding error."""
        return dict(sorted(((t, self.idf(t)) for t in set(q_terms)), key=lambda p: (p[1], p[0])))

    def bm25(self, q_terms: list[str], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
        """Okapi BM25 of every entry for the query terms (each distinct term once)."""
        out = np.zeros(self.n, dtype=np.float64)
        if not self.n:
            return out
        avg = float(self.lengths.mean()) or 1.0
        for t, w in self.idf_of(q_terms).items():
            post = self.postings.get(t)
            if post is None:
                continue
            rows, tf = post
            norm = k1 * (1.0 - b + b * self.lengths[rows] / avg)
            out[rows] += w * tf * (k1 + 1.0) / (tf + norm)
        return out

    def coverage(self, q_terms: list[str]) -> np.ndarray:
        """Share of the query's idf mass each entry contains, in [0, 1]: absolute (comparable across questions),
        so a question whose rare words no entry has scores low everywhere — the lexical side of abstention."""
        idf = self.idf_of(q_terms)
        total = sum(idf.values())
        out = np.zeros(self.n, dtype=np.float64)
        if total <= 0:
            return out
        for t, w in idf.items():
            post = self.postings.get(t)
            if post is not None:
                out[post[0]] += w
        return out / total

    def text_coverage(self, q_terms: list[str], text_terms: frozenset[str]) -> float:
        """The same share for a text outside the index (an episode summary, as `summary_terms`), with the entries'
        idf."""
        idf = self.idf_of(q_terms)
        total = sum(idf.values())
        if total <= 0:
            return 0.0
        return sum(v for t, v in idf.items() if t in text_terms) / total

    def known(self, word: str) -> bool:
        """Whether any entry's lexical terms include all of `word`'s."""
        ts = terms(word)
        return bool(ts) and all(t in self.df for t in ts)

    def in_force(self, at: int, *, include_later_records: bool = False) -> np.ndarray:
        """Bi-temporal mask: valid at tick `at` (valid_from ≤ at < valid_until) and, unless asked for what is known
        now, recorded by then (created ≤ at) — an as-of question sees what the golem could have known then."""
        m = (self.valid_from <= at) & (at < self.valid_until)
        if not include_later_records:
            m &= self.created <= at
        return m


_NO_END = np.iinfo(np.int64).max
_CACHE: dict[str, tuple[tuple[Any, ...], EntryIndex]] = {}
_LOCK = threading.Lock()


def _fingerprint(semantic: SemanticStore) -> tuple[Any, ...]:
    # the store's change counter (semantic/store.py v7 triggers) and the mirror table object (reembed_all replaces it)
    return semantic.change_count(), id(semantic.table)


def build_index(semantic: SemanticStore) -> EntryIndex:
    with closing(semantic._conn()) as db:
        rows = db.execute("SELECT id, content, tags, category, valid_from, valid_until, created_tick, "
                          "parent_episode_ids, market_regime FROM grimoire_entries ORDER BY rowid").fetchall()
    ids = [r[0] for r in rows]
    pos = {i: n for n, i in enumerate(ids)}
    dim = int(semantic.embedder.dim)
    vectors = np.zeros((len(ids), dim), dtype=np.float32)
    has = np.zeros(len(ids), dtype=bool)
    n_mirror = semantic.table.count_rows()
    if n_mirror:
        data = semantic.table.search().select(["id", "vector"]).limit(n_mirror).to_arrow()
        mids = data.column("id").to_pylist()
        if mids:
            flat = data.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            mv = np.asarray(flat, dtype=np.float32).reshape(len(mids), -1)
            if mv.shape[1] == dim:
                for j, i in enumerate(mids):
                    n = pos.get(i)
                    if n is not None:
                        vectors[n] = mv[j]
                        has[n] = True
    lists: dict[str, list[tuple[int, int]]] = {}
    lengths = np.zeros(len(ids), dtype=np.float64)
    tags = [json.loads(r[2] or "[]") for r in rows]
    for n, r in enumerate(rows):
        tf = Counter(terms(entry_text(r[1], tags[n], r[3], r[8])))
        lengths[n] = sum(tf.values())
        for t, f in tf.items():
            lists.setdefault(t, []).append((n, f))
    postings = {t: (np.array([r for r, _ in p], dtype=np.int64), np.array([f for _, f in p], dtype=np.float64))
                for t, p in lists.items()}
    return EntryIndex(
        ids=ids, vectors=vectors, has_vector=has,
        valid_from=np.array([r[4] or 0 for r in rows], dtype=np.int64),
        valid_until=np.array([_NO_END if r[5] is None else r[5] for r in rows], dtype=np.int64),
        created=np.array([r[6] or 0 for r in rows], dtype=np.int64),
        postings=postings, lengths=lengths, df={t: len(p) for t, p in lists.items()},
        tags=[frozenset(t) for t in tags], parents=[frozenset(json.loads(r[7] or "[]")) for r in rows],
        categories=[r[3] for r in rows], regimes=[r[8] for r in rows],
        built_at=time.monotonic())


# While the mirror lags SQLite (writes paused by the drift guard) some entries have no vector yet; their
# rows are flushed without touching SQLite, so such an index is rebuilt at most this often to pick them up.
MISSING_VECTOR_REBUILD_SECONDS = 30.0


def entry_index(semantic: SemanticStore) -> EntryIndex:
    """The index for this store, rebuilt only when its fingerprint changed."""
    key = str(semantic.db_path)
    fp = _fingerprint(semantic)
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None and hit[0] == fp:
        idx = hit[1]
        if idx.has_vector.all() or time.monotonic() - idx.built_at < MISSING_VECTOR_REBUILD_SECONDS:
            return idx
    idx = build_index(semantic)
    with _LOCK:
        _CACHE[key] = (fp, idx)
    return idx


def forget(root: str | Path) -> int:
    """Drop the cached indexes of the stores under `root` (a golem's data dir, when a fleet worker closes the golem):
    the cache is keyed by store path, so a closed golem's would stay for the life of the process. Returns how many."""
    with _LOCK:
        return drop_under(_CACHE, root)
