"""An in-memory index over the semantic entries for retrieval (ours, issue 15): every entry's vector, its
lexical terms (content + tags + type, lightly stemmed) and its valid/record times, so one question is scored
against *all* entries exactly — no top-20 cut-off before the time filter or the rerank can lose the right entry.

Scale: the spec's Grimoire holds a few thousand entries (grimoire "Three-Store Split"); 2,000 × 256 floats is
2 MB and a full scan is a matrix-vector product. The index is rebuilt when the store changes (a cheap SQLite
change counter, semantic.py migration v7); dynamic fields (confidence, last access, strength) are read from SQLite
for the shortlist only, so a `mark_accessed` never invalidates it.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field

import numpy as np

_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
# Function words that carry no topic (a question's "what should I ..." must not match every entry).
STOPWORDS = frozenset(
    "a an the and or but if of to in on at by for with from into over under about as is are was were be been being "
    "do does did doing have has had i me my we our you your it its this that these those there here what which who "
    "whom whose when where why how should would could can will shall may might must not no so than then too very "
    "just any all each some more most such only own same other get got right now still back time point ago "
    "many much really".split())
# `must`/`not` are stop words for matching; a MUST constraint is recognised from the raw text (retrieval.is_safety_entry).


def stem(w: str) -> str:
    """A light suffix stripper (repaying → repay, prices → pric, liquidations → liquidation, hedged → hedg); enough to
    join a question's inflection to an entry's, and identical on both sides. A final e goes too, so price / prices /
    priced and hedge / hedged meet. Short words keep all but a plural s (fees → fee; gas, bus stay)."""
    if w[0].isdigit():
        return w
    if len(w) <= 4:
        return w[:-1] if len(w) == 4 and w.endswith("s") and not w.endswith(("ss", "us", "is")) else w
    for suf in ("ings", "ing", "ies", "ied", "ed", "es", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 3 and not w.endswith(("ss", "us", "is")):
            w = w[: -len(suf)] + ("y" if suf in ("ies", "ied") else "")
            break
    return w[:-1] if len(w) > 4 and w.endswith("e") else w


# The golem's domain vocabulary (ours, issue 15): a few DeFi synonyms folded to one term on both sides, so a
# paraphrase that shares no word with an entry still shares a term ("pay down what I owe" ~ "repay the debt").
# Written from the world's vocabulary (README "The world"), kept small and generic.
_PHRASES = [(re.compile(p), r) for p, r in (
    (r"\bpa(?:y|ys|ying|id) (?:down|back|off)\b", "repay"),
    (r"\b(?:base|priority|transaction|network|tx) fees?\b", "gas"),
    (r"\bblock ?space\b", "gas"),
)]
_ALIASES = {
    "eth": "weth", "ether": "weth",
    "owe": "debt", "owed": "debt", "owes": "debt", "owing": "debt", "loan": "debt", "loans": "debt",
    "post": "supply", "posting": "supply", "deposit": "supply", "deposits": "supply", "deposited": "supply",
    "liquidate": "liquidation", "liquidated": "liquidation", "liquidator": "liquidation",
    "liquidators": "liquidation", "liquidating": "liquidation",
    "feed": "oracle", "feeds": "oracle",
    "hf": "health factor",
    "tx": "transaction", "txs": "transaction",
}


def terms(text: str) -> list[str]:
    """Lexical terms of a text: lower-cased words (and decimals like 1.6), stop words dropped, stemmed."""
    low = text.lower()
    if "pa" in low or "fee" in low or "block" in low:  # what the phrases start with: skip three regexes otherwise
        for pat, rep in _PHRASES:
            low = pat.sub(rep, low)
    out: list[str] = []
    cache = _WORD_TERMS
    for w in _WORD.findall(low):
        if w[0].isdigit():
            out.append(w)  # numbers are kept as they are (and not cached: mostly unique)
            continue
        got = cache.get(w)
        if got is None:
            if len(cache) >= _WORD_TERMS_MAX:
                cache.clear()
            if w in STOPWORDS or len(w) < 2:
                got = ()
            else:
                alias = _ALIASES.get(w)
                got = (stem(w),) if alias is None else tuple(stem(a) for a in alias.split())
            cache[w] = got
        out += got
    return out


_WORD_TERMS: dict[str, tuple[str, ...]] = {}  # word → its terms (stop word: none; alias; stem)
_WORD_TERMS_MAX = 200_000


# Words spelled with a capital that name no entity: calendar words, the pronoun.
_NOT_ENTITIES = frozenset(
    "i monday tuesday wednesday thursday friday saturday sunday january february march april may june july august "
    "september october november december".split())
_CAPWORD = re.compile(r"(?<![\w/.-])([A-Za-z][A-Za-z0-9]*)")


def named_entities(text: str) -> list[str]:
    """Proper names a question mentions: capitalised or mixed-case words other than the first (Solana, Arbitrum,
    stETH, dYdX). All-capitals acronyms (USD, TVL, WETH) and calendar words are not counted — the golem's own
    queries are full of the former."""
    out = []
    for sentence in re.split(r"[.?!;:]\s+", text or ""):
        for n, m in enumerate(_CAPWORD.finditer(sentence)):
            w = m.group(1)
            if n == 0 or len(w) < 3 or w.isupper() or w.islower() or w.lower() in _NOT_ENTITIES:
                continue
            out.append(w)
    return out


_SUMMARY_TERMS: dict[str, frozenset[str]] = {}
_SUMMARY_TERMS_MAX = 50_000  # episode summaries are immutable and re-scored every query: cache their terms


def summary_terms(text: str) -> frozenset[str]:
    """terms() of an episode summary, cached (cleared whole when it grows past _SUMMARY_TERMS_MAX)."""
    got = _SUMMARY_TERMS.get(text)
    if got is None:
        if len(_SUMMARY_TERMS) >= _SUMMARY_TERMS_MAX:
            _SUMMARY_TERMS.clear()
        got = _SUMMARY_TERMS[text] = frozenset(terms(text))
    return got


def entry_text(content: str, tags: list[str], category: str) -> str:
    """What the lexical side indexes for an entry: its content, tags and type (issue 15: 'index tags and type')."""
    return " ".join([content, " ".join(t.replace("-", " ").replace("_", " ") for t in tags), category.replace("_", " ")])


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

    def bm25(self, q_terms: list[str], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
        """Okapi BM25 of every entry for the query terms (each distinct term once)."""
        out = np.zeros(self.n, dtype=np.float64)
        if not self.n:
            return out
        avg = float(self.lengths.mean()) or 1.0
        for t in set(q_terms):
            post = self.postings.get(t)
            if post is None:
                continue
            rows, tf = post
            norm = k1 * (1.0 - b + b * self.lengths[rows] / avg)
            out[rows] += self.idf(t) * tf * (k1 + 1.0) / (tf + norm)
        return out

    def coverage(self, q_terms: list[str]) -> np.ndarray:
        """Share of the query's idf mass each entry contains, in [0, 1]: absolute (comparable across questions),
        so a question whose rare words no entry has scores low everywhere — the lexical side of abstention."""
        uniq = set(q_terms)
        total = sum(self.idf(t) for t in uniq)
        out = np.zeros(self.n, dtype=np.float64)
        if total <= 0:
            return out
        for t in uniq:
            post = self.postings.get(t)
            if post is not None:
                out[post[0]] += self.idf(t)
        return out / total

    def text_coverage(self, q_terms: list[str], text_terms: frozenset[str]) -> float:
        """The same share for a text outside the index (an episode summary, as `summary_terms`), with the entries'
        idf."""
        uniq = set(q_terms)
        idf = {t: self.idf(t) for t in uniq}
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
_CACHE: dict[str, tuple[tuple, EntryIndex]] = {}
_LOCK = threading.Lock()


def _fingerprint(semantic) -> tuple:
    # the store's change counter (semantic.py v7 triggers) and the mirror table object (reembed_all replaces it)
    return semantic.change_count(), id(semantic.table)


def build_index(semantic) -> EntryIndex:
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
        tf = Counter(terms(entry_text(r[1], tags[n], r[3])))
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


# While the mirror lags SQLite (writes paused by the drift guard, rev. 8) some entries have no vector yet; their
# rows are flushed without touching SQLite, so such an index is rebuilt at most this often to pick them up.
MISSING_VECTOR_REBUILD_SECONDS = 30.0


def entry_index(semantic) -> EntryIndex:
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
