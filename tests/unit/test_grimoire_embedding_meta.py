"""Embedding integrity: every vector carries {model, version, dim}; a model switch re-embeds everything in
one commit (never part of it); `[grimoire] embedder` config and the nomic/fastembed option's error path; the
drift check's pause of writes, the pending queue, `golem grimoire reembed | resume | stats`.

Real LanceDB and SQLite in tmp dirs; the second model is a real one: WordLlama truncated to 64 dimensions."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import wordllama

from cli.main import main
from golem.grimoire.store.embeddings import (
    EMBEDDERS,
    REFERENCE_TEXTS,
    Embedder,
    EmbedderUnavailable,
    EmbeddingIdentity,
    FastEmbedEmbedder,
    WordLlamaEmbedder,
    default_embedder,
    embedder_by_name,
    identity_of,
    make_embedder,
    pinned_identity,
    scheduled_drift_check,
)
from golem.grimoire.episodes.model import Episode, episode_id
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.store.guard import WriteGuard
from golem.grimoire.integrity import apply_drift_report, drift_reference_path, reembed_stores
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore
from golem.models.config import EMBEDDER_CHOICES, ConfigError, GolemConfig, load_config

HOME = Path(__file__).resolve().parents[2] / "examples" / "golem-home"
TEXTS = ["health factor fell to 1.04 during the crash", "gas spiked to 80 gwei and the swap reverted",
         "quiet range-bound market, nothing to do", "oracle lagged the pool price by two percent"]


@pytest.fixture(scope="module")
def wl():
    return default_embedder()


@pytest.fixture(scope="module")
def wl64():
    return WordLlamaEmbedder(trunc_dim=64)


def ep(t: int, summary: str, **kw) -> Episode:
    return Episode(id=episode_id("g1", t), golem_id="g1", tick=t, created_at="2026-03-01T00:00:00+00:00",
                   regime="volatile", tier="T1", summary=summary, **kw)


def entry(content: str, **kw) -> GrimoireEntry:
    return GrimoireEntry(category=EntryType.INSIGHT, content=content, source=EntrySource(golem_id="g1"), **kw)


def stores(root: Path, emb, **kw):
    return (EpisodeStore(root / "episodes.lance", emb, **kw),
            SemanticStore(root / "semantic.sqlite", root / "semantic.lance", emb, **kw))


def vectors(table, ids):
    rows = {r["id"]: r["vector"] for r in table.search().select(["id", "vector"]).limit(10_000).to_list()}
    return np.array([rows[i] for i in ids], dtype=np.float32)


# ---- identity ---------------------------------------------------------------------------------------------
def test_wordllama_identity_and_matryoshka_variant(wl, wl64):
    weights = Path(wordllama.__file__).parent / "weights" / "l2_supercat_256.safetensors"
    sha = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
    assert identity_of(wl) == EmbeddingIdentity("wordllama-l2_supercat-256", f"{wordllama.__version__}+{sha}", 256)
    assert identity_of(wl64) == EmbeddingIdentity("wordllama-l2_supercat-256-trunc64", wl.model_version, 64)
    assert isinstance(wl, Embedder) and isinstance(wl64, Embedder)
    full, small = wl.embed(TEXTS), wl64.embed(TEXTS)
    # Matryoshka: the 64-d vectors are the normalised first 64 dimensions of the 256-d ones
    prefix = full[:, :64] / np.linalg.norm(full[:, :64], axis=1, keepdims=True)
    assert small.shape == (4, 64) and np.allclose(small, prefix, atol=1e-5)
    assert np.allclose(wl.embed_query(TEXTS), full)
    with pytest.raises(ValueError, match="trunc_dim"):
        WordLlamaEmbedder(trunc_dim=300)


def test_rows_and_tables_carry_identity(tmp_path, wl):
    eps, sem = stores(tmp_path, wl)
    eps.upsert_many([ep(i, t) for i, t in enumerate(TEXTS)])
    sem.put_many([entry(t) for t in TEXTS])
    ident = identity_of(wl)
    for table in (eps.table, sem.table):
        meta = table.schema.metadata
        assert (meta[b"golem.embedder"].decode(), meta[b"golem.embedder_version"].decode(),
                int(meta[b"golem.dim"])) == tuple(ident)
        rows = table.search().select(["embedding_model", "embedding_version", "embedding_dim"]).limit(10).to_list()
        assert len(rows) == 4 and {(r["embedding_model"], r["embedding_version"], r["embedding_dim"]) for r in rows} \
            == {tuple(ident)}
    assert eps.row_identities() == {ident: 4} and sem.row_identities() == {ident: 4}
    assert eps.embedding_stats()["matches_embedder"] and sem.embedding_stats()["matches_embedder"]


# ---- model switch: full re-embed, one commit --------------------------------------------------------------
def test_switch_reembeds_everything_in_one_commit(tmp_path, wl, wl64):
    eps, sem = stores(tmp_path, wl)
    eps.upsert_many([ep(i, t) for i, t in enumerate(TEXTS)])
    sem.put_many([entry(t, id=f"e{i}") for i, t in enumerate(TEXTS)])
    v_eps, v_sem = eps.table.version, sem.table.version

    eps2, sem2 = stores(tmp_path, wl64)  # the worker restarted with [grimoire] embedder = "wordllama-64"
    assert (eps2.reembedded, sem2.reembedded) == (4, 4)
    assert eps2.table.version == v_eps + 1 and sem2.table.version == v_sem + 1  # one commit each, no partial state
    ids = [episode_id("g1", i) for i in range(4)]
    assert np.allclose(vectors(eps2.table, ids), wl64.embed(TEXTS), atol=1e-6)
    assert np.allclose(vectors(sem2.table, [f"e{i}" for i in range(4)]), wl64.embed(TEXTS), atol=1e-6)
    assert eps2.row_identities() == {identity_of(wl64): 4} and sem2.row_identities() == {identity_of(wl64): 4}
    assert eps2.search("liquidation risk in a crash", k=1)[0][0].tick == 0
    # a process still running the old model may neither write nor search the re-embedded tables
    with pytest.raises(ValueError, match="never mix models"):
        eps.upsert(ep(9, "late write from the old worker"))
    with pytest.raises(ValueError, match="never mix models"):
        sem.put(entry("late entry from the old worker"))
    with pytest.raises(ValueError, match="never mix models"):
        eps.search("crash", k=1)
    assert eps2.count() == 4 and sem2.table.count_rows() == 4


def test_failed_reembed_leaves_the_old_table_whole(tmp_path, wl, wl64, monkeypatch):
    """A failure half-way through embedding (the crash case) writes nothing: the old table stays, whole."""
    from golem.grimoire.episodes import store as episodes_mod

    eps, _ = stores(tmp_path, wl)
    eps.upsert_many([ep(i, f"{TEXTS[i % 4]} (tick {i})") for i in range(10)])
    version = eps.table.version
    monkeypatch.setattr(episodes_mod, "REEMBED_BATCH", 3)
    calls = []
    real = wl64.embed

    def embed_then_die(texts):
        calls.append(len(texts))
        if len(calls) == 3:
            raise MemoryError("killed half-way")
        return real(texts)

    monkeypatch.setattr(wl64, "embed", embed_then_die)
    with pytest.raises(MemoryError):
        EpisodeStore(tmp_path / "episodes.lance", wl64)
    monkeypatch.undo()
    assert calls == [3, 3, 3]
    old = EpisodeStore(tmp_path / "episodes.lance", wl, on_model_switch="error")
    assert old.table.version == version and old.count() == 10 and old.row_identities() == {identity_of(wl): 10}
    assert not WriteGuard(tmp_path).paused  # the re-embed's hold was released
    assert EpisodeStore(tmp_path / "episodes.lance", wl64).reembedded == 10  # and the next try goes through


def test_reembed_keeps_a_concurrent_update(tmp_path, wl, wl64, monkeypatch):
    """Another process marks an episode accessed while this one re-embeds: the overwrite must not lose it."""
    eps, _ = stores(tmp_path, wl)
    eps.upsert_many([ep(i, TEXTS[i]) for i in range(4)])
    worker = EpisodeStore(tmp_path / "episodes.lance", wl)  # a second handle, as another process has
    real = wl64.embed

    def embed_while_worker_writes(texts):
        if len(texts) == 4:  # the re-embed's batch: the worker's retrieval and reflect run meanwhile
            worker.mark_accessed([episode_id("g1", 2)], tick=77)  # a scalar update: commits at once
            worker.upsert(ep(9, "reflected during the re-embed"))  # needs a vector: queued under the hold
            assert [e.tick for e in worker.pending()] == [9]
        return real(texts)

    monkeypatch.setattr(wl64, "embed", embed_while_worker_writes)
    switched = EpisodeStore(tmp_path / "episodes.lance", wl64)
    monkeypatch.undo()
    got = switched.get(episode_id("g1", 2))
    assert (got.last_accessed_tick, got.access_count) == (77, 1)
    assert switched.count() == 5 and switched.get(episode_id("g1", 9)).summary == "reflected during the re-embed"
    assert switched.row_identities() == {identity_of(wl64): 5}  # the queued row was embedded by the new model
    assert not WriteGuard(tmp_path).paused and worker.pending() == []


def test_legacy_semantic_mirror_is_rebuilt(tmp_path, wl):
    import lancedb
    import pyarrow as pa

    sem = SemanticStore(tmp_path / "s.sqlite", tmp_path / "s.lance", wl)
    sem.put_many([entry(t, id=f"e{i}") for i, t in enumerate(TEXTS)])
    # the mirror as the previous code wrote it: (id, content, vector), model name only
    old = pa.schema([pa.field("id", pa.string(), nullable=False), pa.field("content", pa.string(), nullable=False),
                     pa.field("vector", pa.list_(pa.float32(), 256), nullable=False)],
                    metadata={"golem.embedder": wl.model_name, "golem.dim": "256"})
    data = pa.table({"id": [f"e{i}" for i in range(2)], "content": TEXTS[:2],
                     "vector": pa.FixedSizeListArray.from_arrays(pa.array(wl.embed(TEXTS[:2]).reshape(-1)), 256)},
                    schema=old)
    lancedb.connect(str(tmp_path / "s.lance")).create_table("semantic", data=data, mode="overwrite")
    with pytest.raises(ValueError, match="before vectors carried"):
        SemanticStore(tmp_path / "s.sqlite", tmp_path / "s.lance", wl, on_model_switch="error")
    rebuilt = SemanticStore(tmp_path / "s.sqlite", tmp_path / "s.lance", wl)
    assert rebuilt.reembedded == 4 and rebuilt.table.count_rows() == 4  # all of SQLite, not just the old mirror
    assert rebuilt.row_identities() == {identity_of(wl): 4}


# ---- configuration -------------------------------------------------------------------------------------------
def _home(tmp_path: Path, grimoire: str) -> Path:
    home = tmp_path / "home"
    shutil.copytree(HOME, home)
    text = (home / "golem.toml").read_text()
    text = text[:text.index("[grimoire]")] + grimoire
    (home / "golem.toml").write_text(text)
    return home


def test_embedder_config_validation(tmp_path, wl, wl64):
    assert GolemConfig().grimoire.embedder == "wordllama"
    assert set(EMBEDDERS) == set(EMBEDDER_CHOICES)  # the config accepts exactly what the factory builds
    assert make_embedder(load_config(HOME / "golem.toml")) is wl  # the example golem.toml: the offline default
    cfg = load_config(_home(tmp_path / "a", '[grimoire]\nembedder = "wordllama-64"\n') / "golem.toml")
    assert identity_of(make_embedder(cfg)) == identity_of(wl64)
    with pytest.raises(ConfigError, match=r"\[grimoire.embedder\].*unknown embedder 'bert'.*nomic-embed-text-v1.5"):
        load_config(_home(tmp_path / "b", '[grimoire]\nembedder = "bert"\n') / "golem.toml")
    with pytest.raises(ConfigError, match=r"\[grimoire.cache\] unknown key"):
        load_config(_home(tmp_path / "c", '[grimoire]\ncache = "x"\n') / "golem.toml")
    with pytest.raises(ValueError, match="unknown embedder 'bert'"):
        embedder_by_name("bert")


def test_nomic_without_fastembed_or_cached_model_is_a_clear_error(tmp_path):
    """fastembed is an optional extra and is not installed here; with it installed, an empty cache is the error."""
    cfg = load_config(_home(tmp_path, '[grimoire]\nembedder = "nomic-embed-text-v1.5"\nmodel_cache_dir = "models"\n')
                      / "golem.toml")
    with pytest.raises(EmbedderUnavailable) as err:
        make_embedder(cfg)
    msg = str(err.value)
    assert 'embedder = "wordllama"' in msg and "offline default" in msg
    assert str(tmp_path / "home" / "models") in msg  # model_cache_dir resolved against the golem home
    if importlib.util.find_spec("fastembed") is None:
        assert "pip install 'golem[nomic]'" in msg and "fastembed" in msg
    else:
        assert "not in the local fastembed cache" in msg
    with pytest.raises(EmbedderUnavailable):
        FastEmbedEmbedder(tmp_path / "empty-cache")
    # the CLI says the same instead of a traceback
    with pytest.raises(SystemExit, match="wordllama"):
        main(["--home", str(tmp_path / "home"), "--data", str(tmp_path / "data"), "grimoire", "stats"])


# ---- drift: pause writes, queue, resume ------------------------------------------------------------------------
def _critical_report(wl, grimoire: Path):
    pinned = drift_reference_path(grimoire)
    scheduled_drift_check(wl, pinned)  # pins on the first check
    moved = np.load(pinned)
    moved[[0, 3]] = -moved[[0, 3]]  # as if the model's output had moved under us
    np.save(pinned, moved)
    report = scheduled_drift_check(wl, pinned)
    assert report.status == "critical" and not report.repinned
    return report


def test_critical_drift_pauses_writes_and_loses_nothing(tmp_path, wl):
    grimoire = tmp_path / "grimoire"
    eps, sem = stores(grimoire, wl)
    eps.upsert_many([ep(1, TEXTS[0]), ep(2, TEXTS[1])])
    sem.put(entry(TEXTS[2], id="e1"))
    healthy = scheduled_drift_check(wl, drift_reference_path(grimoire))
    assert apply_drift_report(healthy, grimoire)["paused"] is False
    status = apply_drift_report(_critical_report(wl, grimoire), grimoire)
    assert status["paused"] and status["reasons"]["drift"]["detail"]["status"] == "critical"

    eps, sem = stores(grimoire, wl)  # persistent: a restarted worker is still paused
    eps.upsert(ep(3, "new episode while paused"))
    eps.upsert(ep(1, TEXTS[0], confidence=0.9))  # same text: no new vector needed, written at once
    sem.put(entry("new entry while paused", id="e2"))
    assert eps.count() == 2 and eps.get(episode_id("g1", 1)).confidence == 0.9
    assert eps.get(episode_id("g1", 3)).summary == "new episode while paused"  # served from the queue
    assert [e.tick for e in eps.pending()] == [3]
    assert sem.get("e2") is not None and sem.table.count_rows() == 1  # SQLite has it; its vector waits
    assert WriteGuard(grimoire).status()["pending"] == {"episodes": 1, "semantic": 1}
    eps.upsert(ep(3, "new episode while paused, retried"))  # a retried write replaces its queued row
    assert WriteGuard(grimoire).pending_counts()["episodes"] == 1
    # a later healthy report does not lift the pause: only a full re-embed does
    assert apply_drift_report(scheduled_drift_check(wl, tmp_path / "other.npy"), grimoire)["paused"]

    out = reembed_stores(eps, sem, grimoire)
    assert (out["episodes"], out["entries"], out["flushed"]) == (2, 2, {"episodes": 1, "semantic": 1})
    assert out["status"] == {"paused": False, "reasons": {}, "pending": {"episodes": 0, "semantic": 0}}
    assert eps.count() == 3 and eps.get(episode_id("g1", 3)).summary.endswith("retried")
    assert sem.table.count_rows() == 2
    assert np.allclose(vectors(eps.table, [episode_id("g1", 3)]), wl.embed(["new episode while paused, retried"]))
    assert pinned_identity(drift_reference_path(grimoire)) == identity_of(wl)
    assert scheduled_drift_check(wl, drift_reference_path(grimoire)).status == "healthy"  # re-pinned
    eps.upsert(ep(4, "writes flow again"))
    assert eps.count() == 4


def test_drift_reference_repins_on_model_switch(tmp_path, wl, wl64):
    pinned = tmp_path / "drift-reference.npy"
    assert scheduled_drift_check(wl, pinned).repinned
    report = scheduled_drift_check(wl64, pinned)  # another model: nothing to compare, pin it anew
    assert report.repinned and report.status == "healthy" and np.load(pinned).shape == (len(REFERENCE_TEXTS), 64)
    assert pinned_identity(pinned) == identity_of(wl64) and report.as_dict()["embedding"]["dim"] == 64


def test_cli_stats_resume_and_reembed(tmp_path, wl, wl64, capsys):
    home = _home(tmp_path, '[grimoire]\nembedder = "wordllama"\n')
    data = tmp_path / "data"
    grimoire = data / "grimoire"
    eps, sem = stores(grimoire, wl)
    eps.upsert_many([ep(i, TEXTS[i]) for i in range(3)])
    sem.put(entry(TEXTS[3], id="e1"))
    common = ["--home", str(home), "--data", str(data)]

    assert main([*common, "grimoire", "resume"]) == 0
    assert "not paused" in capsys.readouterr().out
    apply_drift_report(_critical_report(wl, grimoire), grimoire)
    eps.upsert(ep(5, "queued while paused"))
    assert main([*common, "grimoire", "stats"]) == 0
    stats = json.loads(capsys.readouterr().out)["embeddings"]
    assert stats["episodes"]["model"] == wl.model_name and stats["episodes"]["dim"] == 256
    assert stats["episodes"]["version"] == wl.model_version and stats["semantic"]["matches_embedder"]
    assert stats["write_pause"]["paused"] and stats["write_pause"]["pending"]["episodes"] == 1

    assert main([*common, "grimoire", "resume", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["episodes"] == 3 and out["flushed"]["episodes"] == 1 and not out["status"]["paused"]

    # switch the configured model: read-only commands say so, `reembed` moves everything
    (home / "golem.toml").write_text((home / "golem.toml").read_text().replace('"wordllama"', '"wordllama-64"'))
    with pytest.raises(SystemExit, match="golem grimoire reembed"):
        main([*common, "grimoire", "search", "crash health factor"])
    assert main([*common, "grimoire", "reembed"]) == 0
    line = capsys.readouterr().out
    assert "re-embedded 4 episodes and 1 entries with wordllama-l2_supercat-256-trunc64" in line and "(64-d)" in line
    assert main([*common, "grimoire", "stats"]) == 0
    stats = json.loads(capsys.readouterr().out)["embeddings"]
    assert stats["episodes"]["dim"] == 64 and stats["semantic"]["dim"] == 64 and stats["drift_reference"]["dim"] == 64
    assert stats["embedder"] == identity_of(wl64).as_dict() and not stats["write_pause"]["paused"]
    assert main([*common, "grimoire", "search", "crash health factor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["retrieved"]
