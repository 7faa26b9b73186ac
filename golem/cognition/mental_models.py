"""Domain mental models: Grimoire entries tagged `mental-model`, offered to a T2 decision beside the thirteen core ones
when one scores higher than every core model against the tick's situation (docs/design/inference.md#mental-models).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from golem.grimoire.semantic.store import GrimoireEntry, SemanticStore
from golem.inference.mental_models import CORE_MODELS
from golem.models.record import RetrievedEntrySummary

TAG = "mental-model"
MAX_DOMAIN_MODELS = 3
_CORE_VECTORS: dict[Any, np.ndarray] = {}  # embedder identity → the core models' vectors (they never change)


def _unit(vectors: Any) -> np.ndarray:
    m = np.asarray(vectors, dtype=np.float32)
    out: np.ndarray = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    return out


def core_vectors(semantic: SemanticStore) -> np.ndarray:
    key = semantic.identity
    if key not in _CORE_VECTORS:
        _CORE_VECTORS[key] = _unit(semantic.embedder.embed([f"{name}: {question}"
                                                            for name, question in CORE_MODELS.values()]))
    return _CORE_VECTORS[key]


def rank_domain_models(semantic: SemanticStore, query: str, tick: int) -> list[tuple[GrimoireEntry, float, float]]:
    """(entry, its cosine to `query`, the best core model's) for each domain model in force at `tick` that outranks
    every core model, best first, at most MAX_DOMAIN_MODELS."""
    domain = [e for e in semantic.all() if TAG in e.tags and e.valid_from <= tick
              and (e.valid_until is None or e.valid_until > tick)]
    if not domain or not query.strip():
        return []
    q = _unit(semantic.embedder.embed_query([query]))[0]
    core_best = float(np.max(core_vectors(semantic) @ q))
    scored = [(e, float(v @ q)) for e, v in zip(domain, _unit(semantic.embedder.embed([e.content for e in domain])))]
    ranked = sorted(((e, s) for e, s in scored if s > core_best), key=lambda t: (-t[1], t[0].id))
    return [(e, s, core_best) for e, s in ranked[:MAX_DOMAIN_MODELS]]


def domain_model_entries(semantic: SemanticStore, query: str, tick: int) -> list[RetrievedEntrySummary]:
    """The outranking domain models as retrieved entries (kind mental-model): the workspace shows them first and
    `decide` may name them in `mental_models`."""
    return [RetrievedEntrySummary(id=e.id, kind=TAG, source="entry", summary=e.content[:400], score=round(s, 4),
                                  scores={"relevance": round(s, 4), "best_core": round(core, 4)})
            for e, s, core in rank_domain_models(semantic, query, tick)]
