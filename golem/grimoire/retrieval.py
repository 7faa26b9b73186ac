"""Retrieval over semantic entries and episodes, answering the question asked.

Whether to retrieve at all; only what was in force at `as_of` and recorded by then; every entry scored exactly from
the in-memory index, episodes from theirs (RRF of dense and lexical ranks); relevance = DENSE_WEIGHT·cosine +
(1 − DENSE_WEIGHT)·lexical coverage, the other factors only breaking near-ties; calibrated abstention; MMR (λ = 0.7)
over the top 10 with warnings leading for action questions; summaries taken while they fit the token budget.
The steps, their constants and how they were tuned: docs/design/grimoire.md#retrieval.
"""

from __future__ import annotations

import math
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

import numpy as np
from lancedb.rerankers import RRFReranker
from pydantic import BaseModel, Field

from golem.grimoire.decay import DEFAULT_TICK_SECONDS, EntryKind, effective_confidence, retention_at_tick
from golem.grimoire.semantic.index import EntryIndex, entry_index, entry_text
from golem.grimoire.store.terms import named_entities, summary_terms, terms
from golem.grimoire.episodes.index import EpisodeIndex, episode_index
from golem.grimoire.episodes.model import tag_pad
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.store.indexes import ann_query, ensure_fts
from golem.grimoire.regimes import normalise_regime, regime_named_in
from golem.grimoire.semantic.store import SemanticStore
from golem.models.enums import MarketRegime

# A scored candidate: (final score, its factors, the candidate).
Scored = tuple[float, dict[str, Any], dict[str, Any]]

RRF_K = 60
TOP_PER_SOURCE = 20
MOOD_WEIGHT = 0.15  # grimoire four-factor score: emotional 0.15
CONTRARIAN_EVERY = 100  # anti-rumination: a contrarian pick now and then
BLOODSTAIN_BOOST = 1.2  # lessons of a death weigh more
MMR_LAMBDA = 0.7
MMR_POOL = 10  # MMR on top-10
DEFAULT_TOKEN_BUDGET = 500
# Ours: cosine floor on WordLlama-256 vectors (unrelated DeFi sentences 0.0–0.25, paraphrases 0.45+); the
# abstention evidence of other embedders is put on this scale (× this floor / theirs).
SEMANTIC_FLOOR = 0.30
SUMMARY_CHARS = 240
RECENCY_TIME_CONSTANT_TICKS = 1440.0  # ours: recency_boost = exp(-age/1 day of 60 s ticks)
_MIN_QUERY_WORDS = 2


def estimate_tokens(text: str) -> int:
    """~4 characters per token (the usual English estimate); at least 1."""
    return max(1, math.ceil(len(text) / 4))


class RetrievedItem(BaseModel):
    id: str
    source: str  # "episode" | "entry"
    kind: str  # episode tier or entry category
    summary: str
    final: float
    scores: dict[str, float]  # per factor, for the DecisionCycleRecord
    safety: bool = False  # a warning or MUST constraint


class RetrievalResult(BaseModel):
    retrieved: bool  # False when should_retrieve said no
    reason: str
    abstained: bool = False  # retrieved, but nothing was relevant enough (calibrated abstention)
    as_of: int | None = None  # the valid time the entries were in force at (default: the tick)
    action: bool = False  # read as a question about acting: applicable warnings got the top-3 slots
    # what the abstention decision read from the score distribution (abstention_evidence), and its P(unanswerable)
    evidence: dict[str, float] = Field(default_factory=dict)
    items: list[RetrievedItem] = Field(default_factory=list)
    tokens: int = 0
    candidates: int = 0

    @property
    def ids(self) -> list[str]:
        return [i.id for i in self.items]


def should_retrieve(query: str, *, tier: str | None = None, steered: bool = False) -> tuple[bool, str]:
    """Self-RAG style 'retrieve at all?' (Asai et al. 2023), deterministic: T0 ticks and contentless queries skip."""
    words = re.findall(r"[a-z0-9]{2,}", (query or "").lower())
    if steered:
        return True, "owner steer: always consult memory"
    if tier == "T0":
        return False, "T0 tick: nothing to decide"
    if len(words) < _MIN_QUERY_WORDS:
        return False, f"query has fewer than {_MIN_QUERY_WORDS} content words"
    return True, "deciding tick with a contentful query"


def hybrid_query(table: Any, column: str, text: str, vector: np.ndarray, k: int = TOP_PER_SOURCE,
                 select: list[str] | None = None, where: str | None = None) -> list[dict[str, Any]]:
    """LanceDB hybrid (vector + BM25) fused by RRFReranker(K=60); each row carries `_relevance_score`
    (the RRF score) and `_cosine` (computed from the row's vector, for the floor and MMR). `where` is a prefilter
    (e.g. `tick <= 500`: nothing recorded after an as-of tick)."""
    has_fts = ensure_fts(table, column)
    if not has_fts and table.count_rows() == 0:
        return []
    cols = [*(select or []), column, "vector"]
    if has_fts:
        q = table.search(query_type="hybrid").vector(vector).text(text).distance_type("cosine")
        if where:
            q = q.where(where, prefilter=True)
        q = ann_query(q.rerank(RRFReranker(K=RRF_K, return_score="all")).select([*cols, "_distance", "_score"]).limit(k))
        try:
            rows = q.to_list()
        except ValueError:  # a query with no indexable tokens (stop words only): vector leg alone
            rows = None
    else:
        rows = None
    if rows is None:
        q = table.search(vector, vector_column_name="vector").distance_type("cosine")
        if where:
            q = q.where(where, prefilter=True)
        rows = ann_query(q).select([*cols, "_distance"]).limit(k).to_list()
        for rank, r in enumerate(rows, 1):
            r["_relevance_score"] = 1.0 / (RRF_K + rank)
    for r in rows:
        r["_cosine"] = float(np.dot(np.asarray(r["vector"], dtype=np.float32), vector))
    found: list[dict[str, Any]] = rows
    return found


def matvec(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """m @ v without BLAS. OpenBLAS spreads a 10k × 256 product over its thread pool, and beside LanceDB's threads on
    a busy 2-core machine that took 20 ms instead of 0.25 ms (measured); einsum's single-threaded loop
    takes ~0.4 ms at 10k rows whatever the load."""
    out: np.ndarray = np.einsum("ij,j->i", m, v)
    return out


def _pad_cosine(a: Sequence[float], b: Sequence[float]) -> float:
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    if na == 0 or nb == 0:
        return 0.0
    return float(sum(x * y for x, y in zip(a, b)) / (na * nb))


def mmr(candidates: list[tuple[float, np.ndarray]], n: int, lam: float = MMR_LAMBDA) -> list[int]:
    """Maximal marginal relevance: indices picked greedily by lam·rel − (1−lam)·max sim to those picked."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must be in [0, 1], got {lam}")
    if not candidates or n < 1:
        return []
    rel = np.array([c[0] for c in candidates], dtype=np.float64)
    vecs = np.vstack([np.asarray(c[1], dtype=np.float32) for c in candidates])
    sim = np.einsum("ik,jk->ij", vecs, vecs).astype(np.float64)  # one product instead of a dot per pair per step
    picked: list[int] = []
    red = np.full(len(candidates), -np.inf)  # max similarity to what is picked so far (none yet: 0 below)
    left = np.ones(len(candidates), dtype=bool)
    while left.any() and len(picked) < n:
        value = lam * rel - (1.0 - lam) * np.where(np.isfinite(red), red, 0.0)
        value = np.where(left, value, -np.inf)
        best = int(np.argmax(value))  # ties: the lowest index, as before
        picked.append(best)
        left[best] = False
        red = np.maximum(red, sim[best])
    return picked


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="grimoire-retrieval")
        return _POOL


_ACTION_VERBS = re.compile(
    r"\b(swap|swapping|borrow|borrowing|repay|repaying|pay|supply|supplying|withdraw|withdrawing|pull|approve|"
    r"approving|send|sending|trade|trading|buy|buying|sell|selling|give|skip|skipping|rebalance|add|adding|remove|"
    r"deposit|post|leverage|lever|hedge|close|open|exit|move|bridge|stake|lend|lending|increase|reduce|take)\b",
    re.IGNORECASE)
_PROPOSAL = re.compile(r"^\s*(should|shall|can|could|may|do|is it (ok|safe|wise|fine)|let's|let me|time to|"
                       r"is (now|this|it) (a |the )?(good|right|safe|bad) (time|moment)|"
                       r"swap|borrow|repay|supply|withdraw|pull|approve|send|trade|buy|sell|give|skip|rebalance|"
                       r"add|remove|deposit|post|close|open|exit|move|bridge|stake|lend|increase|reduce|take|rely)\b",
                       re.IGNORECASE)


_ASKS_TO_ACT = re.compile(r"\b(should|shall|can|could|may) (i|we|the golem)\b", re.IGNORECASE)
_CONSTRAINT = re.compile(r"\bMUST\b|\b(never|do not|don't|must not)\b", re.IGNORECASE)


def is_action_question(query: str) -> bool:
    """Text that proposes acting ("Borrow another 2,000 USDC?", "HF is 1.25; should I rebalance ...?"): it opens
    with a proposal or asks whether to act, and names an action. The decide step's own query is one by definition."""
    q = query or ""
    return bool(_PROPOSAL.search(q) or _ASKS_TO_ACT.search(q)) and bool(_ACTION_VERBS.search(q))


_AT_TICK = re.compile(r"\btick\s*#?\s*(\d[\d,_]*)", re.IGNORECASE)
_TICKS_AGO = re.compile(r"\b(\d[\d,_]*)\s+ticks?\s+(?:ago|back|earlier)\b", re.IGNORECASE)


def past_tick_of(text: str, now: int) -> int | None:
    """The earlier tick a question is about, when it names one: "what did you know at tick 8,000?", "why did you
    repay in tick 412", "the swap 30 ticks ago". None when it names none, or only the present or the future."""
    for m in _TICKS_AGO.finditer(text or ""):
        n = int(re.sub(r"[,_]", "", m.group(1)))
        if 0 < n <= now:
            return now - n
    for m in _AT_TICK.finditer(text or ""):
        t = int(re.sub(r"[,_]", "", m.group(1)))
        if t < now:
            return t
    return None


def is_safety_entry(category: str, content: str, tags: Collection[str]) -> bool:
    """A warning (what to avoid) or a constraint in any type: MUST / MUST NOT,
    never, do not."""
    return category == "warning" or "must" in tags or bool(_CONSTRAINT.search(content))


# ---- relevance-first ranking (ours; constants chosen on the tune part of bench/eval_memory.py) -----------------
# relevance = DENSE_WEIGHT · cosine + (1 − DENSE_WEIGHT) · lexical, lexical = the share of the question's idf mass an
# entry's content, tags and type hold (entry_index.coverage). Every other factor only breaks near-ties:
# final = relevance + TIE_MARGIN · tie + REGIME_WEIGHT · regime_match, tie in [0, 1] from the scoring factors
# (effective confidence 0.25, quality 0.20, recency 0.15, reliability 0.20: 1 − contradicted/(validated+contradicted+1)),
# renormalised. So an entry 0.1 less relevant cannot win on freshness or confidence.
DENSE_WEIGHT = 0.65
TIE_MARGIN = 0.1
TIE_WEIGHTS = {"effective_confidence": 0.25, "quality": 0.20, "recency": 0.15, "reliability": 0.20}
# regime_match: 1 scoped to the tick's regime, 0.5 unscoped, 0 another regime, weighted so the
# same advice for the current regime outranks the unscoped and other-regime variants (near-equal relevance).
REGIME_WEIGHT = 0.06
# ... and variants of the same advice (mostly the same tags, or entry vectors ≥ VARIANT_COSINE alike) are ordered by scope
# outright when their relevance is within REGIME_BAND: wording differs between a regime's advice and the default's.
REGIME_BAND = 0.45
VARIANT_COSINE = 0.55
VARIANT_TAG_OVERLAP = 0.5  # Jaccard of the tag sets: one shared broad tag ("aave") does not make a variant
# Variants are of one type (a heuristic is not a variant of an observation that shares its tags). When a returned
# entry is unscoped or another regime's and the memory holds its variant for the current regime, that variant is
# brought in even from below the shortlist (up to REGIME_EXPAND of the top entries are looked at), within REGIME_BAND.
REGIME_EXPAND = 5
# Warnings keep their undecayed confidence in the tie-break: "the cost of missing a risk exceeds the cost of a false
# alarm"; decay must not bury a valid warning.
# Action questions: up to SAFETY_SLOTS applicable warnings / MUST constraints lead the list (after a first-ranked rule
# scoped to the current regime, if any — so they are always in the top 3);
# applicable = relevance at least SAFETY_MIN_SHARE of the best candidate's, not scoped to another regime.
SAFETY_SLOTS = 2
SAFETY_MIN_SHARE = 0.5
# ... or, for a hard constraint (tag `must`, MUST / never / do not in the text), holding SAFETY_MIN_LEXICAL of the
# question's idf mass: a rule on the health factor applies to any action asked about at a given health factor,
# however differently the rest is worded ("HF is 1.25; rebalance the LP range first?").
SAFETY_MIN_LEXICAL = 0.14
# Episodes compete only as extra evidence: EPISODE_PENALTY below an entry of the same relevance, at most
# EPISODE_SHARE of the slots while entries can fill the rest, never one a returned entry already cites
# (parent_episode_ids).
EPISODE_PENALTY = 0.12
EPISODE_SHARE = 0.3
# Items: besides the best, a candidate is returned when its relevance reaches ITEM_RELEVANCE (or ITEM_MIN_SHARE of the
# best's); other embedders scale it by their floor / 0.30. (It was the abstention line until abstention became the
# calibrated decision below.)
ITEM_RELEVANCE = 0.19
# Abstention is a calibrated decision, not a line: P(unanswerable) = σ(ABSTAIN_BIAS + Σ ABSTAIN_COEF · evidence) from
# the score distribution (abstention_evidence), abstaining at ABSTAIN_PROBABILITY or above. Fitted by
# bench/memory_eval/abstention.py on the tune parts of both memory sets (logistic, feature subsets and the line chosen
# by leave-one-life-out cross-validation; cv on the tune parts: lives 0.81 abstained / 0.05 false, hand-written 1.00 /
# 0.00). What it reads: the best candidate's cosine (the dominant term), the share of the dense top 5 the lexical top 5
# agrees on, the share of the question's words no entry or episode holds, and a proper name no entry mentions.
ABSTAIN_BIAS = 1.50
ABSTAIN_COEF = {"cosine": -9.62, "agreement": -2.58, "unseen_words": 3.77, "unknown_name": 5.22}
ABSTAIN_PROBABILITY = 0.7
# The same fit for other embedders, on their own evidence (`abstention.py --embedder NAME`), by model name: (bias,
# coefficients, line). all-MiniLM-L6-v2 (int8 ONNX): cv lives 0.78 / 0.05, hand-written 1.00 / 0.00. An embedder
# without its own fit uses WordLlama's on the floor-scaled cosine.
ABSTAIN_MODELS: dict[str, tuple[float, dict[str, float], float]] = {
    "all-minilm-l6-v2-onnx-int8": (-2.22, {"cosine": -6.19, "margin": 4.53, "unseen_words": 6.78,
                                           "unknown_name": 4.60}, 0.6),
}
ITEM_MIN_SHARE = 0.5
WARNED_SHARE = 0.5  # see the abstention decision in retrieve_for_tick: a warning's share of the known idf mass
SHARE_EPSILON = 1e-9  # "at least half" holds at exactly half: two idf sums equal on paper differ in their last bits
ENTRY_SHORTLIST = 40  # candidates by relevance whose dynamic fields are read from SQLite
EPISODE_CANDIDATES = TOP_PER_SOURCE


def _episode_candidates(eidx: EpisodeIndex, qv: np.ndarray, q_terms: list[str], idx: EntryIndex | None,
                        at: int) -> list[tuple[int, float, float, float, float]]:
    """Hybrid over the in-memory episode index : the top TOP_PER_SOURCE recorded by `at` by
    cosine and by lexical share (the entries' idf, as for entries), fused. (row, cosine, lexical, rrf, relevance)."""
    if not eidx.n:
        return []
    live = eidx.ticks <= at
    cos = np.where(live, matvec(eidx.vectors, qv.astype(np.float32)), -np.inf)
    lex = (eidx.coverage(idx.idf_of(q_terms)) if idx is not None and idx.n
           else np.zeros(eidx.n))
    lex = np.where(live, lex, 0.0)
    k = min(TOP_PER_SOURCE, eidx.n)
    dense = [int(i) for i in sorted(np.argpartition(-cos, k - 1)[:k], key=lambda i: (-cos[i], i)) if live[i]]
    lexical = [int(i) for i in sorted(np.argpartition(-lex, k - 1)[:k], key=lambda i: (-lex[i], i)) if lex[i] > 0]
    rrf: dict[int, float] = {}
    for ranked in (dense, lexical):
        for r, i in enumerate(ranked, 1):
            rrf[i] = rrf.get(i, 0.0) + 1.0 / (RRF_K + r)
    return [(i, float(cos[i]), float(lex[i]), rrf[i], DENSE_WEIGHT * float(cos[i]) + (1.0 - DENSE_WEIGHT) * float(lex[i]))
            for i in rrf]


ABSTAIN_FEATURES = ("relevance", "margin", "agreement", "coverage", "unseen", "unknown_name", "unseen_words",
                    "cosine", "lexical", "spread", "cosine_z", "top_agree", "best_lexical", "known_coverage",
                    "key_coverage", "cosine_gap", "agreement_tied")


def abstention_model(model_name: str | None) -> tuple[float, dict[str, float], float]:
    """(bias, coefficients, probability line) fitted for this embedder; WordLlama's for any other."""
    return ABSTAIN_MODELS.get(model_name or "", (ABSTAIN_BIAS, ABSTAIN_COEF, ABSTAIN_PROBABILITY))


def unanswerable_probability(evidence: dict[str, float], model_name: str | None = None) -> float:
    """σ(bias + Σ coefficient[f] · evidence[f]) of the embedder's abstention model: the calibrated chance that
    nothing relevant exists."""
    bias, coef, _ = abstention_model(model_name)
    z = bias + sum(w * evidence.get(f, 0.0) for f, w in coef.items())
    return 1.0 / (1.0 + math.exp(-z))


def abstention_evidence(pool: list[tuple[float, float, float]], q_terms: list[str], best_terms: frozenset[str],
                        query: str, idx: EntryIndex | None, eidx: EpisodeIndex | None,
                        floor: float, entry_cosines: np.ndarray | None = None) -> dict[str, float]:
    """What the abstention decision reads from one question's candidates — `pool`: (relevance, cosine, lexical) of
    every scored entry and episode — on the WordLlama scale (relevance and cosine × SEMANTIC_FLOOR / floor):
    relevance: the best candidate's; margin: best − second best; agreement: share of the dense top 5 also in the
    lexical top 5; coverage: share of the question's distinct terms the best candidate holds; unseen: share of the
    question's idf mass in terms no entry and no episode holds; unknown_name: a proper name no entry mentions;
    cosine_z: how far the best entry's cosine stands above the question's cosine with every entry (z-score, so
    scale-free) — a vague question is close to everything, an answered one to a few entries; top_agree: the dense
    and the lexical leader are one candidate; best_lexical: the best candidate's idf share of the question;
    known_coverage: that share of the idf mass of the question's words the memory knows; key_coverage: the share of
    the question's two rarest words (unseen ones first) the best candidate holds; cosine_gap: the best cosine above
    the mean of the next four; agreement_tied: agreement with lexical ties left unbroken (_tied_agreement)."""
    scale = SEMANTIC_FLOOR / floor if floor > 0 else 1.0
    rel = sorted((p[0] for p in pool), reverse=True)
    uniq = set(q_terms)
    dense5 = {n for n, _ in sorted(enumerate(pool), key=lambda t: -t[1][1])[:5]}
    lex5 = {n for n, _ in sorted(enumerate(pool), key=lambda t: -t[1][2])[:5] if pool[n][2] > 0}
    idf = idx.idf_of(q_terms) if idx is not None and idx.n else {t: 1.0 for t in sorted(uniq)}
    seen = {t for t in uniq if (idx is not None and t in idx.df) or (eidx is not None and eidx.postings.get(t))}
    total = sum(idf.values())
    unknown = [w for w in named_entities(query) if idx is not None and idx.n and not idx.known(w)]
    top = max(range(len(pool)), key=lambda n: pool[n][0]) if pool else None
    best_lex = pool[top][2] if top is not None else 0.0
    unseen = sum(v for t, v in idf.items() if t not in seen) / total if total > 0 else 1.0
    key = sorted(uniq, key=lambda t: (t in seen, -idf[t], t))[:2]
    coss = sorted((p[1] for p in pool), reverse=True)
    return {"relevance": scale * rel[0] if rel else 0.0,
            "margin": scale * (rel[0] - rel[1]) if len(rel) > 1 else scale * rel[0] if rel else 0.0,
            "agreement": len(dense5 & lex5) / 5.0,
            "coverage": len(uniq & best_terms) / len(uniq) if uniq else 0.0,
            "unseen": unseen,
            "unknown_name": float(bool(unknown)),
            "unseen_words": len(uniq - seen) / len(uniq) if uniq else 1.0,
            "cosine": scale * max((p[1] for p in pool), default=0.0),
            "lexical": max((p[2] for p in pool), default=0.0),
            "spread": scale * (rel[0] - float(np.mean(rel[:10]))) if rel else 0.0,
            "cosine_z": _zscore_of_best(entry_cosines),
            "top_agree": float(bool(pool) and max(range(len(pool)), key=lambda n: pool[n][1])
                               == max(range(len(pool)), key=lambda n: pool[n][2])),
            "best_lexical": best_lex,
            "known_coverage": min(1.0, best_lex / (1.0 - unseen)) if unseen < 1.0 else 0.0,
            "key_coverage": len(set(key) & best_terms) / len(key) if key else 0.0,
            "cosine_gap": scale * (coss[0] - float(np.mean(coss[1:5]))) if len(coss) > 1 else 0.0,
            "agreement_tied": _tied_agreement(pool, dense5)}


def _tied_agreement(pool: list[tuple[float, float, float]], dense5: set[int]) -> float:
    """Share of the dense top 5 in the lexical top 5 with lexical ties left unbroken: a group tied across the fifth
    place holds each of its members the group's share of the places left, so a tie (one shared word) agrees with
    the dense list only by chance, not by the dense order that would otherwise break it."""
    lex = sorted((p[2] for p in pool if p[2] > 0), reverse=True)
    share: dict[float, float] = {}
    left = 5
    for v in sorted(set(lex), reverse=True):
        g = lex.count(v)
        share[v] = min(1.0, left / g) if left > 0 else 0.0
        left = max(0, left - g)
    return sum(share.get(pool[n][2], 0.0) for n in dense5 if pool[n][2] > 0) / 5.0


def _zscore_of_best(cos: np.ndarray | None) -> float:
    if cos is None or len(cos) < 2:
        return 0.0
    sd = float(cos.std())
    return (float(cos.max()) - float(cos.mean())) / sd if sd > 1e-9 else 0.0


# ---- numbers the question states for a quantity -------------------------------------------------------------------
# Text similarity does not compare numbers. A question that puts a quantity (health factor, price, gas, prediction
# error) past a line ("the last time the health factor fell below 1.5") or at a value ("my trade at a health factor
# around 1.82") names the events it asks about by that number: every episode whose summary states the quantity in that
# range (recorded by the as-of tick, in the regime the question names, if any), and every shortlisted entry whose text
# does, gets NUMERIC_BONUS of relevance; when it asks for the last (or first) time, the newest (or oldest) such episode
# gets NUMERIC_BONUS more. A value matches to the question's last digit (one unit of it after "around", "near", ...).
NUMERIC_BONUS = 0.15
_QUANTITY = {"health factor": r"health[ _]factor|\bhf", "price": r"price", "gas": r"gas(?: price)?",
             "prediction error": r"prediction[ _]error|\bpe"}
_Q_NAMES = r"health factor|hf|price|gas(?: price)?|prediction error|pe"
_CROSS_Q = re.compile(rf"\b({_Q_NAMES})\b[^.?!;]{{0,30}}?\b(below|under|beneath|less than|lower than|above|over|"
                      r"more than|higher than|past)\s+\$?(\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)
_APPROX = r"around|near|about|close to|roughly|approximately|~"
_VALUE_Q = re.compile(rf"(?:\b({_APPROX})\s+(?:an?\s+|the\s+|my\s+)?)?\b({_Q_NAMES})\b\s*(?:(?:of|at|was|is|=|:)\s+)?"
                      rf"(?:({_APPROX})\s+)?\$?(\d[\d,]*(?:\.\d+)?)", re.IGNORECASE)
_WHEN = re.compile(r"\b(last|latest|most recent|previous|first|earliest)\s+time\b", re.IGNORECASE)
_VALUES: dict[str, dict[str, tuple[float, ...]]] = {}
_VALUES_MAX = 50_000


class NumericAsk(NamedTuple):
    quantity: str
    low: float  # the values that match: low <= v <= high
    high: float
    when: str | None  # "last" | "first" | None


def _quantity(name: str) -> str:
    name = name.lower()
    return {"hf": "health factor", "pe": "prediction error", "gas price": "gas"}.get(name, name)


def numeric_ask(query: str) -> NumericAsk | None:
    """The quantity, range of values and last/first of a question that states a number for a quantity."""
    w = _WHEN.search(query or "")
    when = None if w is None else ("first" if w.group(1).lower() in ("first", "earliest") else "last")
    m = _CROSS_Q.search(query or "")
    if m:
        line = float(m.group(3).replace(",", ""))
        if m.group(2).lower() in ("below", "under", "beneath", "less than", "lower than"):
            return NumericAsk(_quantity(m.group(1)), -math.inf, math.nextafter(line, -math.inf), when)
        return NumericAsk(_quantity(m.group(1)), math.nextafter(line, math.inf), math.inf, when)
    v = _VALUE_Q.search(query or "")
    if v:
        text = v.group(4).replace(",", "")
        unit = 10.0 ** -(len(text.split(".")[1]) if "." in text else 0)
        tol = unit if (v.group(1) or v.group(3)) else unit / 2
        return NumericAsk(_quantity(v.group(2)), float(text) - tol, float(text) + tol, when)
    return None


def quantity_values(text: str) -> dict[str, tuple[float, ...]]:
    """The values a text states for each quantity ("health factor 1.328", "price 1288"), cached per text."""
    got = _VALUES.get(text)
    if got is None:
        if len(_VALUES) >= _VALUES_MAX:
            _VALUES.clear()
        got = {}
        for q, pat in _QUANTITY.items():
            vals = [float(x) for x in re.findall(rf"(?:{pat})\s*(?:is|was|of|at|=|:)?\s*\$?(\d+(?:\.\d+)?)\b", text,
                                                    flags=re.IGNORECASE)]
            if vals:
                got[q] = tuple(vals)
        _VALUES[text] = got
    return got


def stated_quantities(query: str) -> frozenset[str]:
    """Every quantity the text states a value or a line for ("regime volatile; price 1850.20; health factor 1.62"
    states price and health factor), where numeric_ask reads the first only."""
    return frozenset(_quantity(m.group(2)) for m in _VALUE_Q.finditer(query or "")) | frozenset(
        _quantity(m.group(1)) for m in _CROSS_Q.finditer(query or ""))


def line_quantities(text: str) -> frozenset[str]:
    """The quantities `text` puts a line on ("keep the health factor at or above 1.3", "gas above 50 gwei"): a rule
    a question binds when it states one of them, whatever else it asks."""
    return frozenset(_quantity(m.group(1)) for m in _CROSS_Q.finditer(text or ""))


def states(text: str, ask: NumericAsk) -> bool:
    """Whether `text` states the asked quantity at a value in the asked range."""
    return any(ask.low <= v <= ask.high for v in quantity_values(text).get(ask.quantity, ()))


def _stated_values(eidx: EpisodeIndex) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per quantity, (rows, values) of every value the index's summaries state: parsed once per index snapshot, so a
    question with a number costs a vector comparison (~0.1 ms at 10k episodes) instead of a loop (~7 ms)."""
    got = getattr(eidx, "_stated", None)  # kept on the snapshot itself: it goes with it
    if got is not None and got[0] == eidx.n:
        stated: dict[str, tuple[np.ndarray, np.ndarray]] = got[1]
        return stated
    pairs: dict[str, tuple[list[int], list[float]]] = {}
    for row in range(eidx.n):
        for q, vals in quantity_values(eidx.summaries[row]).items():
            rows, values = pairs.setdefault(q, ([], []))
            rows += [row] * len(vals)
            values += vals
    out = {q: (np.asarray(r, dtype=np.int64), np.asarray(v, dtype=np.float64)) for q, (r, v) in pairs.items()}
    setattr(eidx, "_stated", (eidx.n, out))
    return out


def _episodes_stating(eidx: EpisodeIndex, ask: NumericAsk | None, at: int, regime: str | None) -> dict[int, float]:
    """Episode rows (recorded by `at`, in `regime` when given) that state the asked quantity in the asked range →
    their relevance bonus (see NUMERIC_BONUS)."""
    if ask is None or not eidx.n:
        return {}
    rows, values = _stated_values(eidx).get(ask.quantity, (np.zeros(0, np.int64), np.zeros(0)))
    ticks = eidx.ticks
    hit = np.unique(rows[(values >= ask.low) & (values <= ask.high)])
    hit = hit[ticks[hit] <= at]
    regimes = eidx.scalars.get("regime")
    out = {int(r): NUMERIC_BONUS for r in hit.tolist()
           if regime is None or regimes is None or regimes[r] == regime}
    if out and ask.when is not None:
        pick = (max if ask.when == "last" else min)(out, key=lambda r: (int(ticks[r]), r))
        out[pick] += NUMERIC_BONUS
    return out


def _regime_match(entry_regime: str | None, regime: str) -> float:
    return 0.5 if entry_regime is None else (1.0 if entry_regime == regime else 0.0)


def _reliability(validated: int, contradicted: int) -> float:
    return 1.0 - contradicted / (validated + contradicted + 1.0)


def _tie(f: dict[str, float]) -> float:
    return sum(TIE_WEIGHTS[n] * f[n] for n in TIE_WEIGHTS) / sum(TIE_WEIGHTS.values())


def retrieve_for_tick(
    episodes: EpisodeStore,
    semantic: SemanticStore | None,
    query: str,
    *,
    regime: str,
    tick: int,
    as_of: int | None = None,
    as_known_now: bool = False,
    action: bool | None = None,
    pad: tuple[float, float, float] | None = None,
    k: int = 5,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    tier: str | None = None,
    steered: bool = False,
    tick_seconds: float = DEFAULT_TICK_SECONDS,
    floor: float | None = None,
    log: bool = True,
) -> RetrievalResult:
    """What the retrieve activity calls: relevance-first retrieval over both stores, bi-temporal, safety-aware.

    `tick` is now (decay and recency are measured from it); `as_of` (default `tick`) is the valid time asked about:
    only entries in force then (valid_from ≤ as_of < valid_until) and recorded by then (created_tick ≤ as_of), and
    only episodes recorded by then, are candidates — so an as-of question gets the entry superseded since and
    nothing written after; `as_known_now` drops the record-time condition (what we now know was in force then).
    `action` (None: read from the text) marks a question about acting: applicable warnings and MUST constraints
    get guaranteed slots in the top 3. Read-only on the entries (call `mark_accessed` on the ids the decision
    used); logs one retrieval_log row per tick when `log` and a semantic store is given (the retrieval hit rate metric).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    regime = normalise_regime(regime) or MarketRegime.UNKNOWN.value  # a foreign label maps, or says what is valid
    # a question naming a regime asks about that regime's variants, not the tick's
    named_regime = regime_named_in(query)
    regime = named_regime or regime
    at = tick if as_of is None else int(as_of)
    if at < 0:
        raise ValueError(f"as_of must be a tick >= 0, got {at}")
    go, reason = should_retrieve(query, tier=tier, steered=steered)
    if not go:
        return RetrievalResult(retrieved=False, reason=reason, as_of=at)
    acting = is_action_question(query) if action is None else bool(action)
    ask = numeric_ask(query)
    qv = episodes.embedder.embed_query([query])[0]  # nomic needs its search_query prefix
    owner_floor = floor  # [grimoire] semantic_floor: a hard cosine line on top of the calibrated decision
    if floor is None:  # the embedder's own calibrated floor (cosine scales differ between models)
        floor = getattr(episodes.embedder, "semantic_floor", SEMANTIC_FLOOR)
    abstain_line = ITEM_RELEVANCE * floor / SEMANTIC_FLOOR
    mood = None
    if pad is not None:
        mood = tuple(-x for x in pad) if tick > 0 and tick % CONTRARIAN_EVERY == 0 else tuple(pad)

    ep_cols = ["id", "tier", "regime", "confidence", "quality", "strength", "decay_class", "last_accessed_tick",
               "tick", "dream_validated", "pnl_impact", "emotional_tag"]
    # Episodes: from the in-memory index (episodes/index.py) — both legs exact, the scalar fields read for the few
    # relevant enough to score. Above its size limit, LanceDB's hybrid query runs in the pool while the entries are
    # scored (LanceDB works in Rust without the GIL); no prefilter there: at the present tick nothing is later, and
    # for a past tick a post-filter costs nothing (episodes are extra evidence).
    eidx = episode_index(episodes)
    ep_future = None if eidx is not None else _pool().submit(
        hybrid_query, episodes.table, "summary", query, qv, EPISODE_CANDIDATES, ep_cols)
    q_terms = terms(query)
    if named_regime is not None:  # "a wild market" asks about what the memory calls volatile
        q_terms += [t for t in terms(named_regime.replace("_", " ")) if t not in q_terms]
    cands: list[dict[str, Any]] = []
    entry_cosines: np.ndarray | None = None
    idx = entry_index(semantic) if semantic is not None else None
    if semantic is not None and idx is not None and idx.n:
        cos = matvec(idx.vectors, qv.astype(np.float32))
        entry_cosines = cos[idx.has_vector]
        cov = idx.coverage(q_terms)
        rel = DENSE_WEIGHT * np.where(idx.has_vector, cos, 0.0) + (1.0 - DENSE_WEIGHT) * cov
        rel = np.where(idx.in_force(at, include_later_records=as_known_now), rel, -np.inf)
        shortlist = np.argsort(-rel, kind="stable")[:ENTRY_SHORTLIST]
        order = [int(i) for i in shortlist if np.isfinite(rel[i])]
        variant_of = _congruent_variants(idx, order[:REGIME_EXPAND], rel, regime)
        order += [i for i in variant_of if i not in set(order)]
        # RRF of the dense and lexical ranks, reported beside the relevance that ranks
        dense_rank = {int(i): r for r, i in enumerate(np.argsort(-cos, kind="stable")[:TOP_PER_SOURCE], 1)}
        lex_rank = {int(i): r for r, i in enumerate(np.argsort(-cov, kind="stable")[:TOP_PER_SOURCE], 1) if cov[i] > 0}
        rows = semantic.scoring_rows([idx.ids[i] for i in order])
        for i in order:
            e = rows.get(idx.ids[i])
            if e is None:
                continue  # archived since the index was built
            ret = semantic.retention_of_row(e, tick, tick_seconds)
            eff = e["confidence"] if e["category"] == "warning" else effective_confidence(e["confidence"], ret)
            rrf = sum(1.0 / (RRF_K + r[i]) for r in (dense_rank, lex_rank) if i in r)
            pad_tag = (e["emotional_tag"] or {}).get("pad")
            numeric = bool(ask and states(e["content"], ask))
            cands.append(dict(id=e["id"], source="entry", kind=e["category"], text=e["content"],
                              relevance=float(rel[i]) + (NUMERIC_BONUS if numeric else 0.0), cosine=float(cos[i]), lexical=float(cov[i]), rrf=rrf,
                              vector=idx.vectors[i], eff=eff, quality=e["quality_score"],
                              reliability=_reliability(e["validated_count"], e["contradicted_count"]),
                              age=max(0, tick - e["created_tick"]), regime=e["market_regime"],
                              entry_pad=tuple(pad_tag) if pad_tag else None,
                              bloodstain=e["provenance"] == "death_reflection",
                              safety=is_safety_entry(e["category"], e["content"], idx.tags[i]),
                              hard="must" in idx.tags[i] or bool(_CONSTRAINT.search(e["content"])),
                              parents=idx.parents[i], tags=idx.tags[i], variant_of=variant_of.get(i),
                              numeric=numeric))
    n_candidates = len(cands)
    light: list[tuple[int, float, float, float, float]] = []
    if eidx is not None:
        light = _episode_candidates(eidx, qv, q_terms, idx, at)
        n_candidates += len(light)
        best_rel = max([c["relevance"] for c in cands] + [c[4] for c in light], default=None)
        keep = [] if best_rel is None else [c for c in light if c[4] >= min(abstain_line, ITEM_MIN_SHARE * best_rel)]
        # a question comparing a quantity with a number asks for the episodes where it happened, however worded
        crossed = _episodes_stating(eidx, ask, at, named_regime)
        if crossed:
            kept = {c[0] for c in keep}
            extra = [int(r) for r in crossed if r not in kept]
            if extra:
                xv = matvec(eidx.vectors[extra], qv.astype(np.float32))
                xl = (eidx.coverage(idx.idf_of(q_terms))[extra] if idx is not None and idx.n
                      else np.zeros(len(extra)))
                keep += [(r, float(c), float(lx), 0.0, DENSE_WEIGHT * float(c) + (1.0 - DENSE_WEIGHT) * float(lx))
                         for r, c, lx in zip(extra, xv, xl)]
        ep_rows = [eidx.row(row) | {"_cosine": c, "_lexical": lx, "_relevance_score": rrf,
                                    "summary": eidx.summaries[row], "vector": eidx.vectors[row],
                                    "_bonus": crossed.get(row, 0.0)}
                   for row, c, lx, rrf, _ in keep]
    else:
        assert ep_future is not None  # submitted above whenever there is no in-memory index
        ep_rows = [r for r in ep_future.result() if r["tick"] <= at]  # not recorded after the asked-about tick
        n_candidates += len(ep_rows)
    for r in ep_rows:
        ret = retention_at_tick(tick, r["last_accessed_tick"], kind=EntryKind.EPISODE, decay_class=r["decay_class"],
                                strength=r["strength"], quality=r["quality"], tick_seconds=tick_seconds,
                                dream_validated=bool(r["dream_validated"]))
        # the golem's PAD octant when the episode was recorded; older rows without one: the P&L's sign as valence
        entry_pad = tag_pad(r.get("emotional_tag"))
        if entry_pad is None and r.get("emotional_tag") != "neutral":
            pnl = r.get("pnl_impact")
            entry_pad = (0.0 if pnl is None else (1.0 if pnl > 0 else -1.0 if pnl < 0 else 0.0), 0.0, 0.0)
        lexical = r.get("_lexical")
        if lexical is None:
            lexical = idx.text_coverage(q_terms, summary_terms(r["summary"])) if idx is not None and idx.n else 0.0
        cands.append(dict(id=r["id"], source="episode", kind=r["tier"], text=r["summary"],
                          relevance=DENSE_WEIGHT * r["_cosine"] + (1.0 - DENSE_WEIGHT) * lexical
                          + r.get("_bonus", 0.0),
                          cosine=r["_cosine"], lexical=lexical, rrf=r["_relevance_score"],
                          vector=np.asarray(r["vector"], np.float32), eff=effective_confidence(r["confidence"], ret),
                          quality=r["quality"], reliability=1.0, age=max(0, tick - r["tick"]), regime=r["regime"],
                          entry_pad=entry_pad, bloodstain=False, safety=False, hard=False, parents=set(),
                          tags=set(), variant_of=None, numeric=r.get("_bonus", 0.0) > 0))

    result = RetrievalResult(retrieved=True, reason=reason, candidates=n_candidates, as_of=at, action=acting)
    best = max(cands, key=lambda c: c["relevance"], default=None)
    # every scored candidate, the episodes below the item line too (the in-memory index scored them all)
    pool = [(c["relevance"], c["cosine"], c["lexical"]) for c in cands
            if c["source"] == "entry" or eidx is None]
    pool += [(c[4], c[1], c[2]) for c in light] if eidx is not None else []
    best_terms = frozenset() if best is None else (
        summary_terms(best["text"]) if best["source"] == "episode"
        else frozenset(terms(entry_text(best["text"], sorted(best["tags"]), best["kind"], best["regime"]))))
    result.evidence = abstention_evidence(pool, q_terms, best_terms, query, idx, eidx, floor, entry_cosines)
    # Calibrated abstention: P(unanswerable) from the score distribution.
    model_name = getattr(episodes.embedder, "model_name", None)
    p_unanswerable = unanswerable_probability(result.evidence, model_name)
    line = abstention_model(model_name)[2]
    result.evidence["p_unanswerable"] = round(p_unanswerable, 4)
    below_owner_floor = owner_floor is not None and max((c["cosine"] for c in cands), default=0.0) < owner_floor
    # the memory states the number the question asks about: what it asks about happened, whatever the wording
    stated = ask is not None and any(c["numeric"] for c in cands)
    result.evidence["numeric_match"] = float(stated)
    # An action question about a hazard the memory warns of is answered with that warning, however unlike the rest
    # of the memory it is worded ("add leverage while liquidations are piling up?"): a warning, not scoped to another
    # regime, holding WARNED_SHARE of the idf mass of the question's words the memory knows, when the question names
    # nothing the memory does not know. Missing a risk costs more than a false alarm.
    known = 1.0 - result.evidence["unseen"]
    warned = ({c["id"] for c in cands if c["safety"] and c["source"] == "entry" and known > 0
               and c["lexical"] >= WARNED_SHARE * known - SHARE_EPSILON and _regime_match(c["regime"], regime) > 0}
              if acting and p_unanswerable >= line and not stated and not result.evidence["unknown_name"] else set())
    result.evidence["warning_match"] = float(bool(warned))
    if best is None or (p_unanswerable >= line and not stated and not warned) or below_owner_floor:
        ev = result.evidence
        unknown = [w for w in named_entities(query) if idx is not None and idx.n and not idx.known(w)]
        result.abstained = True
        result.reason = (f"abstained: nothing relevant enough (P(unanswerable) {p_unanswerable:.2f} ≥ "
                         f"{line}: best cosine {ev.get('cosine', 0.0):.3f} on the scale of cosine floor "
                         f"{SEMANTIC_FLOOR} (this embedder's floor {floor}), the best holds "
                         f"{ev.get('coverage', 0.0):.0%} of the question's words"
                         + (f"; the question names {', '.join(unknown)}, which no entry mentions" if unknown else "")
                         + (f"; no cosine reaches the configured semantic_floor {owner_floor}" if below_owner_floor
                            else "") + ")")
        if log and semantic is not None:
            semantic.log_retrieval(tick, True, 0, True)
        return result

    # What is returned besides the best: candidates that clear the abstention line on their own, or come within
    # ITEM_MIN_SHARE of the best's relevance (the rest is noise).
    item_line = min(abstain_line, ITEM_MIN_SHARE * best["relevance"])
    # A current-regime variant of a top entry stays in however it is worded (within REGIME_BAND of that entry).
    # So does, for an action question, a hard constraint on what the question names (see _safety_first).
    # For an action question a warning's applicability is measured against the best *entry* (the memory's lessons),
    # not the best candidate: the tick records a life piles up share an action's everyday words ("send a swap now")
    # and would hold a warning about the very hazard asked of ("fees this high") below the item line.
    best_entry = max((c["relevance"] for c in cands if c["source"] == "entry"), default=0.0)
    safety_need = max(SAFETY_MIN_SHARE * best_entry, abstain_line * SAFETY_MIN_SHARE)
    relevant = [c for c in cands if c["relevance"] >= item_line or c["variant_of"] is not None
                or acting and c["hard"] and c["lexical"] >= SAFETY_MIN_LEXICAL
                or acting and c["safety"] and c["relevance"] >= safety_need or c["id"] in warned]
    scored = []
    for c in relevant:
        f = {"relevance": c["relevance"], "semantic": c["cosine"], "lexical": c["lexical"], "rrf": c["rrf"],
             "effective_confidence": c["eff"], "quality": c["quality"], "reliability": c["reliability"],
             "recency": math.exp(-c["age"] / RECENCY_TIME_CONSTANT_TICKS),
             "regime_match": _regime_match(c["regime"], regime)}
        tie = _tie(f)
        if mood is not None:
            f["mood_congruence"] = (1.0 + _pad_cosine(c["entry_pad"], mood)) / 2 if c["entry_pad"] else 0.5
            tie = (1.0 - MOOD_WEIGHT) * tie + MOOD_WEIGHT * f["mood_congruence"]
        if c["bloodstain"]:
            tie = min(1.0, tie * BLOODSTAIN_BOOST)
            f["bloodstain_boost"] = BLOODSTAIN_BOOST
        final = c["relevance"] + TIE_MARGIN * tie + REGIME_WEIGHT * f["regime_match"]
        if c["source"] == "episode":
            final -= EPISODE_PENALTY
            f["episode_penalty"] = EPISODE_PENALTY
        scored.append((final, f, c))
    scored.sort(key=lambda t: (-t[0], t[2]["id"]))

    # MMR over the top 10 on relevance-scale scores.
    pool = scored[:MMR_POOL]
    ranked = [pool[i] for i in mmr([(s[0], s[2]["vector"]) for s in pool], n=len(pool))] + scored[MMR_POOL:]
    # Episodes only as extra evidence: not the ones a returned entry was distilled from, at most EPISODE_SHARE of k.
    cited = set().union(*(c["parents"] for _, _, c in ranked if c["source"] == "entry"))
    max_eps = max(1, int(EPISODE_SHARE * k))
    picked, spare, n_eps = [], [], 0
    for t in ranked:
        if t[2]["source"] == "episode":
            if t[2]["id"] in cited:
                continue
            if n_eps >= max_eps:
                spare.append(t)  # fills slots the entries leave empty, nothing more
                continue
            n_eps += 1
        picked.append(t)
    picked += spare[:max(0, k - len(picked))]
    # a variant brought in from below the line competes for a slot with the entry it varies
    shown = {t[2]["id"] for t in picked[:k]}
    promoted = [t for t in scored if t[2]["variant_of"] in shown and t[2]["id"] not in shown]
    moved = {t[2]["id"] for t in promoted}
    picked = _regime_first(picked[:k] + promoted + [t for t in picked[k:] if t[2]["id"] not in moved])
    if acting:
        picked = _safety_first(picked, scored, best_entry, abstain_line, warned, stated_quantities(query))

    used = 0
    for final, f, c in picked[:k]:
        text = " ".join(c["text"].split())
        summary = text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS - 1].rstrip() + "…"
        cost = estimate_tokens(summary)
        if used + cost > token_budget:
            continue
        used += cost
        result.items.append(RetrievedItem(id=c["id"], source=c["source"], kind=c["kind"], summary=summary,
                                          final=round(final, 6), scores={n: round(v, 6) for n, v in f.items()},
                                          safety=c["safety"]))
    result.tokens = used
    if log and semantic is not None:
        semantic.log_retrieval(tick, True, len(result.items), False)
    return result


def _variants(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two entries giving advice on the same thing: one type, and mostly the same tags or vectors at least
    VARIANT_COSINE alike."""
    if a["source"] != "entry" or b["source"] != "entry" or a["kind"] != b["kind"]:
        return False
    shared = len(a["tags"] & b["tags"]) / max(1, len(a["tags"] | b["tags"]))
    return shared >= VARIANT_TAG_OVERLAP or float(np.dot(a["vector"], b["vector"])) >= VARIANT_COSINE


def _congruent_variants(idx: EntryIndex, top: list[int], rel: np.ndarray, regime: str) -> dict[int, str]:
    """Index rows scoped to `regime` that are variants (one type, tag Jaccard ≥ VARIANT_TAG_OVERLAP or vectors
    ≥ VARIANT_COSINE alike) of an unscoped or other-regime entry among `top`, within REGIME_BAND of its relevance:
    row → the id it varies."""
    out: dict[int, str] = {}
    for i in top:
        if idx.regimes[i] == regime:
            continue
        floor = rel[i] - REGIME_BAND
        cand = np.flatnonzero((rel >= floor) & np.isfinite(rel))
        for j in cand.tolist():
            if j == i or j in out or idx.regimes[j] != regime or idx.categories[j] != idx.categories[i]:
                continue
            ti, tj = idx.tags[i], idx.tags[j]
            shared = len(ti & tj) / max(1, len(ti | tj))
            if shared >= VARIANT_TAG_OVERLAP or float(idx.vectors[i] @ idx.vectors[j]) >= VARIANT_COSINE:
                out[j] = idx.ids[i]
    return out


def _regime_first(picked: list[Scored]) -> list[Scored]:
    """Regime congruence: among variants of the same advice within REGIME_BAND of relevance, the entry
    scoped to the tick's regime comes first, unscoped next, another regime's last — whatever their wording.
    An entry moves just ahead of the first less congruent variant it has; entries moved to the same place keep
    scope order, then score order."""
    anchor: list[tuple[int, int, float, float]] = []
    for n, t in enumerate(picked):
        m, rel = t[1]["regime_match"], t[2]["relevance"]
        at = next((p for p, u in enumerate(picked[:n]) if u[1]["regime_match"] < m and _variants(u[2], t[2])
                   and rel >= u[2]["relevance"] - REGIME_BAND), None)
        anchor.append((n, 1, 0.0, 0.0) if at is None else (at, 0, -m, -t[0]))
    return [picked[n] for n in sorted(range(len(picked)), key=lambda n: anchor[n])]


def _safety_first(picked: list[Scored], scored: list[Scored], best_relevance: float,
                  abstain_line: float, warned: Collection[str] = (), quantities: Collection[str] = ()) -> list[Scored]:
    """Action question: the most relevant applicable warnings / MUST constraints (up to SAFETY_SLOTS) lead the list,
    so they hold slots in the top 3 — safety never loses to topical similarity or freshness. Those that draw a line
    on a quantity the question states (`quantities`: "HF is 1.25; ...?" and "health factor at or above 1.3") come
    first."""
    need = max(SAFETY_MIN_SHARE * best_relevance, abstain_line * SAFETY_MIN_SHARE)
    # applicable: relevant enough (or a hard constraint on what the question names), and not scoped to another
    # regime (a volatile-market rule is no rule when calm)
    safety = [t for t in scored if t[2]["safety"] and t[1]["regime_match"] > 0
              and (t[2]["relevance"] >= need or t[2]["hard"] and t[2]["lexical"] >= SAFETY_MIN_LEXICAL
                   or t[2]["id"] in warned)]
    if quantities:  # stable: by score within each group
        safety.sort(key=lambda t: not line_quantities(t[2]["text"]) & set(quantities))
    safety = safety[:SAFETY_SLOTS]
    if not safety:
        return picked
    ids = {t[2]["id"] for t in safety}
    rest = [t for t in picked if t[2]["id"] not in ids]
    # A rule scoped to the current regime that ranked first keeps rank 1 (the most applicable guidance there is);
    # SAFETY_SLOTS ≤ 2 keeps the warnings in the top 3 all the same.
    if rest and picked and rest[0] is picked[0] and rest[0][1]["regime_match"] == 1.0 \
            and rest[0][2]["source"] == "entry":
        return rest[:1] + safety + rest[1:]
    return safety + rest
