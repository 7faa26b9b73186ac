"""all-MiniLM-L6-v2 in NumPy (golem/grimoire/store/embeddings.py MiniLMEmbedder) against the model card's reference
similarities (sentence-transformers quickstart for all-MiniLM-L6-v2: 0.2838, -0.0327, 0.8939)."""

from __future__ import annotations

import numpy as np
import pytest

from golem.grimoire.store.embeddings import EmbedderUnavailable, embedder_by_name, identity_of


@pytest.fixture(scope="module")
def minilm():
    try:
        return embedder_by_name("all-minilm-l6-v2")
    except EmbedderUnavailable as err:  # make setup installs it; say so rather than pass silently
        pytest.fail(f"{err}")


def test_reproduces_reference_similarities(minilm):
    a = minilm.embed(["The cat sits outside", "A man is playing guitar", "The new movie is awesome"])
    b = minilm.embed(["The dog plays in the garden", "A woman watches TV", "The new movie is so great"])
    np.testing.assert_allclose((a * b).sum(1), [0.2838, -0.0327, 0.8939], atol=2e-3)


def test_batches_pad_without_changing_vectors(minilm):
    texts = ["short", "a much longer sentence about repaying USDC debt before the health factor falls under 1.3"]
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert together.dtype == np.float32 and together.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    ident = identity_of(minilm)
    assert ident.model == "all-minilm-l6-v2" and ident.dim == 384 and "+" in ident.version
