"""Hybrid retrieval over episodes and semantic entries (revisions Rev. 9; grimoire "Four-factor retrieval scoring").

Pipeline, per store (episodes table, semantic mirror):
  1. vector + BM25 in one LanceDB hybrid query (native FTS index on the text column), top-20 each,
     fused by LanceDB's `RRFReranker(K=60)`: rrf = Σ 1/(60 + rank_i)                                (Rev. 9 steps 1–2)
  2. semantic-score floor: a candidate whose cosine to the query is below SEMANTIC_FLOOR is dropped, so a
     query with nothing relevant returns nothing (abstention; ours, calibrated on WordLlama-256)
  3. multi-factor rerank: final = rrf·0.30 + effective_confidence·0.25 + quality·0.20 + recency·0.15
     + regime_match·0.10                                                                             (Rev. 9 step 3)
     rrf is normalised by its maximum 2/61 (first in both lists) so every factor is in [0, 1].
     With a PAD mood vector: final = 0.85·final + 0.15·mood_congruence (grimoire four-factor score,
     emotional weight 0.15); every 100th tick the mood is inverted (contrarian retrieval).
     Bloodstain entries ×1.2 (grimoire "Bloodstain Retrieval Boost").
  4. MMR (λ = 0.7) over the top 10 (Rev. 9 step 4; LanceDB has no MMR, so it is ours)
  5. token budget (default 500): entries are shortened to SUMMARY_CHARS, then taken in order while they
     fit ("more entries at shorter length > fewer at full length", Rev. 9 step 5).
Before all this, `should_retrieve` is the Self-RAG style decision whether to retrieve at all.
"""

from __future__ import annotations

import math
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from lancedb.index import FTS
from lancedb.rerankers import RRFReranker
from pydantic import BaseModel, Field

from golem.grimoire.decay import EntryKind, effective_confidence, retention_at_tick
from golem.grimoire.episodes import DEFAULT_TICK_SECONDS, EpisodeStore, tag_pad
from golem.grimoire.semantic import SemanticStore

RRF_K = 60  # Rev. 9 step 2
TOP_PER_SOURCE = 20  # Rev. 9 step 1
WEIGHTS = {"rrf": 0.30, "effective_confidence": 0.25, "quality": 0.20, "recency": 0.15, "regime_match": 0.10}
MOOD_WEIGHT = 0.15  # grimoire four-factor score: emotional 0.15
CONTRARIAN_EVERY = 100  # grimoire "Anti-Rumination: Contrarian Retrieval"
BLOODSTAIN_BOOST = 1.2  # grimoire "Bloodstain Retrieval Boost"
MMR_LAMBDA = 0.7  # Rev. 9 step 4
MMR_POOL = 10  # Rev. 9 step 4: MMR on top-10
DEFAULT_TOKEN_BUDGET = 500  # Rev. 9 step 5
# Ours: cosine floor on WordLlama-256 vectors. Unrelated DeFi sentences sit around 0.0–0.25, paraphrases
# of the same situation at 0.45+; 0.3 keeps the first out.
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


class RetrievalResult(BaseModel):
    retrieved: bool  # False when should_retrieve said no
    reason: str
    abstained: bool = False  # retrieved, but nothing cleared the semantic floor
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


_FTS_READY = "_golem_fts_ready"  # attribute on the table object: columns known to have an FTS index


def ensure_fts(table, column: str) -> bool:
    """Create the native FTS index on `column` once the table has rows; True when it exists.

    Remembered on the table object once true (an index is never dropped, only replaced), so the
    per-query path skips the list_indices round trip."""
    if column in getattr(table, _FTS_READY, ()):
        return True
    if any(column in idx.columns and idx.index_type == "FTS" for idx in table.list_indices()):
        try:
            setattr(table, _FTS_READY, {*getattr(table, _FTS_READY, ()), column})
        except AttributeError:  # a table class with __slots__: just ask again next time
            pass
        return True
    if table.count_rows() == 0:
        return False
    table.create_index(column, config=FTS(), replace=True)
    return True


# ANN (ours, measured by bench/grimoire.py --big 100000): below ANN_MIN_ROWS an exact scan is fast enough;
# above it the delta cycle builds an IVF index and queries probe ANN_NPROBES partitions and re-rank
# ANN_REFINE × k candidates on full vectors (what keeps recall@10 >= 0.95 against exact search).
# Measured at 100k WordLlama episodes, 200 queries, two index trainings: refine 10 gave recall@10 0.943-0.945
# (IVF_PQ training varies run to run), refine 20 gave 0.988-0.996 for ~1.5 ms more; nprobes 48→96 changed nothing.
ANN_MIN_ROWS = 50_000
ANN_NPROBES = 48
ANN_REFINE = 20


def vector_index(table) -> str | None:
    """Name of the ANN index on `vector`, or None."""
    for idx in table.list_indices():
        if "vector" in idx.columns and idx.index_type != "FTS":
            return idx.name
    return None


def build_ann_index(table, index_type: str = "IVF_PQ") -> None:
    """IVF_PQ (or IVF_HNSW_SQ) over `vector`, cosine, ~sqrt(rows) partitions, 8 dims per PQ sub-vector."""
    if index_type not in ("IVF_PQ", "IVF_HNSW_SQ"):
        raise ValueError(f"index_type must be IVF_PQ or IVF_HNSW_SQ, got {index_type!r}")
    n = table.count_rows()
    if n < 256:
        raise ValueError(f"an ANN index needs at least 256 rows to train, the table has {n}")
    dim = table.schema.field("vector").type.list_size
    kw = {"num_sub_vectors": max(1, dim // 8)} if index_type == "IVF_PQ" else {}
    table.create_index(metric="cosine", vector_column_name="vector", index_type=index_type,
                       num_partitions=max(1, int(math.sqrt(n))), replace=True, **kw)


def ann_query(builder):
    """Apply the ANN search parameters to a vector or hybrid query builder (ignored without an index)."""
    return builder.nprobes(ANN_NPROBES).refine_factor(ANN_REFINE)


def hybrid_query(table, column: str, text: str, vector: np.ndarray, k: int = TOP_PER_SOURCE,
                 select: list[str] | None = None) -> list[dict[str, Any]]:
    """LanceDB hybrid (vector + BM25) fused by RRFReranker(K=60); each row carries `_relevance_score`
    (the RRF score) and `_cosine` (computed from the row's vector, for the floor and MMR)."""
    has_fts = ensure_fts(table, column)
    if not has_fts and table.count_rows() == 0:
        return []
    cols = [*(select or []), column, "vector"]
    if has_fts:
        q = ann_query(table.search(query_type="hybrid").vector(vector).text(text).distance_type("cosine")
                      .rerank(RRFReranker(K=RRF_K, return_score="all")).select([*cols, "_distance", "_score"]).limit(k))
        try:
            rows = q.to_list()
        except ValueError:  # a query with no indexable tokens (stop words only): vector leg alone
            rows = None
    else:
        rows = None
    if rows is None:
        rows = ann_query(table.search(vector, vector_column_name="vector").distance_type("cosine")).select([*cols, "_distance"]) \
            .limit(k).to_list()
        for rank, r in enumerate(rows, 1):
            r["_relevance_score"] = 1.0 / (RRF_K + rank)
    for r in rows:
        r["_cosine"] = float(np.dot(np.asarray(r["vector"], dtype=np.float32), vector))
    return rows


def _pad_cosine(a, b) -> float:
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    if na == 0 or nb == 0:
        return 0.0
    return sum(x * y for x, y in zip(a, b)) / (na * nb)


def mmr(candidates: list[tuple[float, np.ndarray]], n: int, lam: float = MMR_LAMBDA) -> list[int]:
    """Maximal marginal relevance: indices picked greedily by lam·rel − (1−lam)·max sim to those picked."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda must be in [0, 1], got {lam}")
    picked: list[int] = []
    left = list(range(len(candidates)))
    while left and len(picked) < n:
        def value(i: int) -> float:
            rel, v = candidates[i]
            red = max((float(np.dot(v, candidates[j][1])) for j in picked), default=0.0)
            return lam * rel - (1.0 - lam) * red
        best = max(left, key=lambda i: (value(i), -i))
        picked.append(best)
        left.remove(best)
    return picked


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="grimoire-retrieval")
        return _POOL


def retrieve_for_tick(
    episodes: EpisodeStore,
    semantic: SemanticStore | None,
    query: str,
    *,
    regime: str,
    tick: int,
    pad: tuple[float, float, float] | None = None,
    k: int = 5,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    tier: str | None = None,
    steered: bool = False,
    tick_seconds: float = DEFAULT_TICK_SECONDS,
    floor: float | None = None,
    log: bool = True,
) -> RetrievalResult:
    """What the retrieve activity calls: hybrid retrieval over both stores, reranked, diversified, budgeted.

    Read-only on the entries (call `mark_accessed` on the ids the decision used); logs one retrieval_log
    row per tick when `log` and a semantic store is given (Rev. 12 retrieval hit rate).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if token_budget < 1:
        raise ValueError(f"token_budget must be >= 1, got {token_budget}")
    go, reason = should_retrieve(query, tier=tier, steered=steered)
    if not go:
        return RetrievalResult(retrieved=False, reason=reason)
    qv = episodes.embedder.embed_query([query])[0]  # nomic needs its search_query prefix
    if floor is None:  # the embedder's own calibrated floor (cosine scales differ between models)
        floor = getattr(episodes.embedder, "semantic_floor", SEMANTIC_FLOOR)
    mood = None
    if pad is not None:
        mood = tuple(-x for x in pad) if tick > 0 and tick % CONTRARIAN_EVERY == 0 else tuple(pad)

    cands: list[dict[str, Any]] = []
    ep_cols = ["id", "tier", "regime", "confidence", "quality", "strength", "decay_class", "last_accessed_tick",
               "tick", "dream_validated", "pnl_impact", "emotional_tag"]
    # The two stores are queried in parallel: LanceDB runs its queries in Rust without the GIL.
    sem_future = (_pool().submit(hybrid_query, semantic.table, "content", query, qv, select=["id"])
                  if semantic is not None else None)
    ep_rows = hybrid_query(episodes.table, "summary", query, qv, select=ep_cols)
    sem_rows = sem_future.result() if sem_future is not None else []
    for r in ep_rows:
        if r["_cosine"] < floor:
            continue
        ret = retention_at_tick(tick, r["last_accessed_tick"], kind=EntryKind.EPISODE, decay_class=r["decay_class"],
                                strength=r["strength"], quality=r["quality"], tick_seconds=tick_seconds,
                                dream_validated=bool(r["dream_validated"]))
        # the golem's PAD octant when the episode was recorded; older rows without one: the P&L's sign as valence
        entry_pad = tag_pad(r.get("emotional_tag"))
        if entry_pad is None and r.get("emotional_tag") != "neutral":
            pnl = r.get("pnl_impact")
            entry_pad = (0.0 if pnl is None else (1.0 if pnl > 0 else -1.0 if pnl < 0 else 0.0), 0.0, 0.0)
        cands.append(dict(id=r["id"], source="episode", kind=r["tier"], text=r["summary"], rrf=r["_relevance_score"],
                          cosine=r["_cosine"], vector=np.asarray(r["vector"], np.float32),
                          eff=effective_confidence(r["confidence"], ret), quality=r["quality"],
                          age=max(0, tick - r["tick"]), regime=r["regime"], entry_pad=entry_pad,
                          bloodstain=False))
    if semantic is not None:
        rows = [r for r in sem_rows if r["_cosine"] >= floor]
        entries = semantic.get_many([r["id"] for r in rows])
        for r in rows:
            e = entries.get(r["id"])
            if e is None or not e.active:
                continue  # superseded (valid_until set) or archived
            ret = semantic.retention_now(e, tick, tick_seconds)
            cands.append(dict(id=e.id, source="entry", kind=e.category.value, text=e.content, rrf=r["_relevance_score"],
                              cosine=r["_cosine"], vector=np.asarray(r["vector"], np.float32),
                              eff=effective_confidence(e.confidence, ret), quality=e.quality_score,
                              age=max(0, tick - e.created_tick), regime=e.market_regime,
                              entry_pad=e.emotional_tag.pad if e.emotional_tag else None, bloodstain=e.is_bloodstain))

    result = RetrievalResult(retrieved=True, reason=reason, candidates=len(cands))
    if not cands:
        result.abstained = True
        result.reason = f"abstained: nothing within cosine {floor} of the query"
        if log and semantic is not None:
            semantic.log_retrieval(tick, True, 0, True)
        return result

    rrf_max = 2.0 / (RRF_K + 1)
    scored = []
    for c in cands:
        f = {
            "rrf": min(1.0, c["rrf"] / rrf_max),
            "effective_confidence": c["eff"],
            "quality": c["quality"],
            "recency": math.exp(-c["age"] / RECENCY_TIME_CONSTANT_TICKS),
            "regime_match": 0.5 if c["regime"] is None else (1.0 if c["regime"] == regime else 0.0),
        }
        final = sum(WEIGHTS[name] * f[name] for name in WEIGHTS)
        f["semantic"] = c["cosine"]
        if mood is not None:
            f["mood_congruence"] = (1.0 + _pad_cosine(c["entry_pad"], mood)) / 2 if c["entry_pad"] else 0.5
            final = (1.0 - MOOD_WEIGHT) * final + MOOD_WEIGHT * f["mood_congruence"]
        if c["bloodstain"]:
            final *= BLOODSTAIN_BOOST
            f["bloodstain_boost"] = BLOODSTAIN_BOOST
        scored.append((final, f, c))
    scored.sort(key=lambda t: (-t[0], t[2]["id"]))
    pool = scored[:MMR_POOL]
    order = mmr([(s[0], s[2]["vector"]) for s in pool], n=min(k, len(pool)))

    used = 0
    for i in order:
        final, f, c = pool[i]
        text = " ".join(c["text"].split())
        summary = text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS - 1].rstrip() + "…"
        cost = estimate_tokens(summary)
        if used + cost > token_budget:
            continue
        used += cost
        result.items.append(RetrievedItem(id=c["id"], source=c["source"], kind=c["kind"], summary=summary,
                                          final=round(final, 6), scores={n: round(v, 6) for n, v in f.items()}))
    result.tokens = used
    if log and semantic is not None:
        semantic.log_retrieval(tick, True, len(result.items), False)
    return result
