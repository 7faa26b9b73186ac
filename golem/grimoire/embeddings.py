"""Offline text embeddings for the Grimoire (grimoire "Episodes": local inference, no network call).

The spec names nomic-embed-text-v1.5 (768-d); we ship WordLlama's 256-d `l2_supercat` weights,
which come inside the installed `wordllama` wheel, so embedding never downloads anything.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    dim: int
    model_name: str

    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim), each row L2-normalised."""
        ...


def normalise_rows(vectors: np.ndarray, texts: list[str]) -> np.ndarray:
    """L2-normalise each row; a zero row (text with no known tokens) is an error naming the text."""
    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    bad = [i for i in range(len(texts)) if not np.isfinite(norms[i, 0]) or norms[i, 0] == 0.0]
    if bad:
        i = bad[0]
        raise ValueError(f"cannot embed text #{i} {texts[i]!r}: it has no embeddable tokens; pass non-empty text")
    return out / norms


class WordLlamaEmbedder:
    """WordLlama `l2_supercat` at 256 dimensions, loaded from the wheel's own `weights/` folder."""

    CONFIG = "l2_supercat"

    def __init__(self, dim: int = 256) -> None:
        # Defensive: the tokenizer's Hugging Face fallback must never be tried.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import wordllama
        from wordllama import WordLlama

        package_dir = Path(wordllama.__file__).parent
        weights = package_dir / "weights" / WordLlama.get_filename(self.CONFIG, dim)
        if not weights.exists():
            raise FileNotFoundError(
                f"WordLlama weights {weights} are not in the installed wordllama package; "
                f"only the shipped dimension works offline (reinstall wordllama==0.4.0.post1 or use dim=256)"
            )
        # cache_dir = the package folder: resolve_file finds weights/ and tokenizers/ there;
        # disable_download turns a missing file into an error instead of an HTTP request.
        self._model = WordLlama.load(self.CONFIG, cache_dir=package_dir, dim=dim, disable_download=True)
        self.dim = dim
        self.model_name = f"wordllama-{self.CONFIG}-{dim}"
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        if isinstance(texts, str) or not isinstance(texts, list):
            raise TypeError(f"embed takes a list of strings, got {type(texts).__name__}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"text #{i} is {type(t).__name__}, expected str")
        with self._lock:  # the tokenizer's batch state is not documented as thread-safe
            raw = self._model.embed(texts, norm=False)
        return normalise_rows(raw, texts)


_default: WordLlamaEmbedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> WordLlamaEmbedder:
    """The process-wide embedder (weights are ~30 MB; load once)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = WordLlamaEmbedder()
        return _default


# ---- rev. 8 embedding drift check ---------------------------------------------------------------
DRIFT_HEALTHY = 0.02  # revisions Rev. 8: cosine distance week-to-week healthy < 0.02
DRIFT_CRITICAL = 0.05  # ... warning 0.02–0.05, critical > 0.05 → pause writes
NN_K = 5  # Rev. 8: "top-5 same as last week?"
NN_DRIFTING = 0.60  # Rev. 8: nearest-neighbour stability < 60 % = drifting


class DriftReport:
    """Outcome of `drift_check`. `status`: healthy | warning | critical (critical → pause writes, rev. 8)."""

    def __init__(self, distances: list[float], nn_stability: float, model: str) -> None:
        self.model = model
        self.distances = distances  # cosine distance per reference text, stored → fresh
        self.max_distance = max(distances)
        self.mean_distance = sum(distances) / len(distances)
        self.min_cosine = 1.0 - self.max_distance
        self.drifted = [i for i, d in enumerate(distances) if d > DRIFT_CRITICAL]
        self.nn_stability = nn_stability  # mean overlap of top-k neighbour sets within the reference set
        if self.max_distance > DRIFT_CRITICAL or nn_stability < NN_DRIFTING:
            self.status = "critical"
        elif self.max_distance >= DRIFT_HEALTHY:
            self.status = "warning"
        else:
            self.status = "healthy"

    @property
    def ok(self) -> bool:
        return self.status != "critical"

    def as_dict(self) -> dict:
        return {"model": self.model, "status": self.status, "max_distance": self.max_distance,
                "mean_distance": self.mean_distance, "nn_stability": self.nn_stability, "drifted": self.drifted}


def _neighbours(v: np.ndarray, k: int) -> list[set[int]]:
    sims = v @ v.T
    np.fill_diagonal(sims, -np.inf)
    return [set(np.argsort(-row, kind="stable")[:k].tolist()) for row in sims]


def drift_check(embedder: Embedder, reference_texts: list[str], stored_vectors: np.ndarray) -> DriftReport:
    """Re-embed the reference set and compare with the vectors stored when it was last embedded (rev. 8):
    cosine distance per text and top-5 nearest-neighbour stability within the set."""
    if not reference_texts:
        raise ValueError("drift_check needs at least one reference text (rev. 8 uses 20)")
    stored = np.asarray(stored_vectors, dtype=np.float32)
    if stored.shape != (len(reference_texts), embedder.dim):
        raise ValueError(f"stored_vectors must have shape ({len(reference_texts)}, {embedder.dim}), got {stored.shape}")
    fresh = embedder.embed(list(reference_texts))
    stored = normalise_rows(stored, list(reference_texts))
    distances = [float(max(0.0, 1.0 - float(np.dot(a, b)))) for a, b in zip(stored, fresh)]
    k = min(NN_K, len(reference_texts) - 1)
    if k < 1:
        stability = 1.0
    else:
        before, after = _neighbours(stored, k), _neighbours(fresh, k)
        stability = sum(len(a & b) / k for a, b in zip(before, after)) / len(before)
    return DriftReport(distances, stability, embedder.model_name)


# rev. 8: a fixed reference set, embedded once and re-checked at every delta cycle.
REFERENCE_TEXTS = [
    "health factor falling toward liquidation", "repay debt to protect the loan", "pool price diverges from the oracle",
    "volatile market with large price swings", "range bound market, nothing to do", "gas price spike on the network",
    "swap WETH to USDC to reduce exposure", "owner asked to reduce exposure", "liquidity added to the pool",
    "trend turned down after a breakout", "oracle price stale for several blocks", "slippage exceeded the limit",
    "transaction reverted in simulation", "chain reorganisation removed a block", "budget nearly spent for today",
    "strategy constraint breached", "heuristic validated by outcome", "episode replayed during the dream cycle",
    "collateral value dropped sharply", "calm market, low volatility",
]


def scheduled_drift_check(embedder: Embedder, pinned_path) -> DriftReport:
    """Compare today's embeddings of REFERENCE_TEXTS with those pinned the first time (saved as .npy)."""
    from pathlib import Path

    path = Path(pinned_path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, embedder.embed(list(REFERENCE_TEXTS)))
    return drift_check(embedder, REFERENCE_TEXTS, np.load(path))
