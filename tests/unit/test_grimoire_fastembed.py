"""The fastembed route (`[grimoire] embedder = "nomic-embed-text-v1.5"`) through the real fastembed library.

nomic-embed-text-v1.5 itself cannot be fetched here (no model hub), so these tests run fastembed's own
pipeline — tokenizer, ONNX Runtime session, mean pooling, normalisation — on a tiny ONNX model built in
the test (a token-embedding table; 32-d) and registered with `TextEmbedding.add_custom_model`, loaded from
its folder with `local_files_only`. What is under test is our FastEmbedEmbedder around fastembed: task
prefixes, identity {model, version, dim}, shape checks, and a store switching to it re-embedding in full.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

fastembed = pytest.importorskip("fastembed")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers  # noqa: E402

from golem.grimoire.store.embeddings import (  # noqa: E402
    EmbedderUnavailable,
    FastEmbedEmbedder,
    default_embedder,
    file_sha256,
    identity_of,
)
from golem.grimoire.episodes.model import Episode, episode_id  # noqa: E402
from golem.grimoire.episodes.store import EpisodeStore  # noqa: E402

TINY = "golem-test/tiny-embed"
DIM = 32
WORDS = ("search_document search_query health factor falling toward liquidation repay debt swap weth usdc gas price "
         "spike oracle pool calm market volatile the a to of tick regime range bound").split()


def build_tiny_model(folder: Path) -> Path:
    """A WordLevel tokenizer + an ONNX graph that gathers one random 32-d row per token (a real ONNX model,
    just a very small one)."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(dict.fromkeys(WORDS))}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 64, "pad_token": "[PAD]"}))
    (folder / "special_tokens_map.json").write_text(json.dumps({"pad_token": "[PAD]", "unk_token": "[UNK]"}))
    table = np.random.default_rng(0).standard_normal((len(vocab), DIM)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"])], "tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["b", "s", DIM])],
        initializer=[numpy_helper.from_array(table, "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(folder / "model.onnx"))
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    folder = build_tiny_model(tmp_path_factory.mktemp("tiny-embed"))
    if TINY not in {m["model"] for m in TextEmbedding.list_supported_models()}:
        TextEmbedding.add_custom_model(model=TINY, pooling=PoolingType.MEAN, normalization=True,
                                       sources=ModelSource(hf=TINY), dim=DIM, model_file="model.onnx")
    return folder


def make(tiny: Path, **kw) -> FastEmbedEmbedder:
    return FastEmbedEmbedder(model_name=TINY, dim=DIM, model_path=tiny, **kw)


def test_documents_and_queries_carry_their_task_prefixes(tiny):
    from fastembed import TextEmbedding

    e = make(tiny)
    raw = TextEmbedding(TINY, specific_model_path=str(tiny), local_files_only=True)
    text = "health factor falling toward liquidation"
    direct = np.stack(list(raw.embed(["search_document: " + text, "search_query: " + text])))
    doc, query = e.embed([text])[0], e.embed_query([text])[0]
    assert doc.shape == (DIM,) and doc.dtype == np.float32
    assert np.allclose(doc, direct[0] / np.linalg.norm(direct[0]), atol=1e-6)
    assert np.allclose(query, direct[1] / np.linalg.norm(direct[1]), atol=1e-6)
    assert not np.allclose(doc, query), "nomic's search_document/search_query prefixes change the vector"
    assert np.linalg.norm(e.embed(["swap weth to usdc", "gas price spike"]), axis=1) == pytest.approx([1, 1], abs=1e-6)
    with pytest.raises(ValueError, match="non-empty"):
        e.embed(["   "])
    with pytest.raises(TypeError):
        e.embed("not a list")


def test_identity_names_fastembed_and_the_onnx_file(tiny):
    e = make(tiny)
    ident = identity_of(e)
    assert ident.model == "tiny-embed" and ident.dim == DIM
    assert ident.version == f"fastembed-{fastembed.__version__}+{file_sha256(tiny / 'model.onnx')}"


def test_a_wrong_dimension_is_refused(tiny):
    e = FastEmbedEmbedder(model_name=TINY, dim=768, model_path=tiny)
    with pytest.raises(ValueError, match="returned 32-d vectors, expected 768"):
        e.embed(["calm market"])


def test_switching_a_store_to_the_fastembed_model_re_embeds_everything(tmp_path, tiny):
    """A model switch re-embeds every row in one commit, with the new identity on every row."""
    path = tmp_path / "episodes.lance"
    old = EpisodeStore(path, default_embedder())
    old.upsert_many([Episode(id=episode_id("g", t), golem_id="g", tick=t, created_at="2026-11-01T00:00:00+00:00",
                             regime="range_bound", tier="T0", summary=f"tick {t}: calm market, range bound regime")
                     for t in range(12)])
    e = make(tiny)
    new = EpisodeStore(path, e)
    rows = new.table.to_arrow()
    assert rows.num_rows == 12
    assert new.table.schema.field("vector").type.list_size == DIM
    assert set(rows.column("embedding_model").to_pylist()) == {"tiny-embed"}
    assert set(rows.column("embedding_version").to_pylist()) == {e.model_version}
    hits = new.search("calm market range bound", k=3)
    assert len(hits) == 3 and all(score > 0.5 for _, score in hits)


def test_without_fastembed_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "fastembed", None)  # import fastembed → ImportError, as on a machine without it
    with pytest.raises(EmbedderUnavailable, match=r"pip install 'golem\[nomic\]'.*wordllama"):
        FastEmbedEmbedder()


def test_an_uncached_nomic_model_is_a_clear_error_not_a_download(tmp_path):
    with pytest.raises(EmbedderUnavailable, match="not in the local fastembed cache.*wordllama"):
        FastEmbedEmbedder(cache_dir=tmp_path / "empty-cache")
