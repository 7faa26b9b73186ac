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
