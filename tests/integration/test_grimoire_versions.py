"""The Grimoire's LanceDB tables keep versions by count as well as by age, and the stores clean up on a cadence of
their own writes (golem/grimoire/store/lance.py: VersionRetention; the soak's growth bound). Real LanceDB tables.

Before: versions were kept ten minutes and cleaned only in the delta cycle, so at a fast theta hundreds of versions
— several of them a whole copy of the table (decay, consolidation, compaction rewrite it) — stayed on disk and the
Grimoire grew 28 MB per 1,000 soak ticks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from datetime import timedelta

import pytest

from golem.grimoire.episodes import index as episode_index
from golem.grimoire.store.embeddings import default_embedder
from golem.grimoire.episodes.model import Episode, episode_id
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.store.lance import VersionRetention
from golem.grimoire.retrieval import retrieve_for_tick
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore
from golem.grimoire.upkeep import maintain

REGIMES = ["volatile", "range_bound", "trending_up"]


def _ep(t: int) -> Episode:
    return Episode(id=episode_id("g", t), golem_id="g", tick=t, created_at="2026-03-01T00:00:00Z",
                   regime=REGIMES[t % 3], tier="T1",
                   summary=f"Tick {t}: gas {t % 40} gwei, health factor {1 + t % 7 / 10:.1f}, price moved {t % 13} bps")


def _size(path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def emb():
    return default_embedder()


def test_retention_is_validated():
    with pytest.raises(ValueError, match="keep_versions"):
        VersionRetention(keep_versions=0)
    with pytest.raises(ValueError, match="min_age"):
        VersionRetention(min_age=timedelta(0))
    with pytest.raises(ValueError, match="every_writes"):
        VersionRetention(every_writes=-1)


def test_upkeep_keeps_the_newest_versions_and_every_young_one(tmp_path, emb):
    store = EpisodeStore(tmp_path / "e.lance", emb, retention=VersionRetention(every_writes=0))
    for t in range(12):
        store.upsert(_ep(t))
        time.sleep(0.25)  # versions further apart than the upkeep's clock margin (lance._AGE_MARGIN)
    before = [v["version"] for v in store.table.list_versions()]
    # every version is younger than a minute: the default keeps them all
    store.upkeep()
    after = {v["version"] for v in store.table.list_versions()}
    assert set(before) <= after

    store.retention = VersionRetention(keep_versions=4, min_age=timedelta(milliseconds=100), every_writes=0)
    newest = sorted(v["version"] for v in store.table.list_versions())[-4:]
    store.upkeep()
    left = sorted(v["version"] for v in store.table.list_versions())
    assert set(newest) <= set(left)  # the newest four survive, with what the upkeep itself committed
    assert min(left) == newest[0], left  # and nothing older
    assert [e.tick for e in store.all()] == list(range(12))  # no row lost
    old = store.table.to_arrow().num_rows
    store.table.checkout(newest[0])  # the oldest kept version still reads
    assert store.table.count_rows() == old - 1
    store.table.checkout_latest()


def test_the_store_cleans_up_on_its_own_writes(tmp_path, emb):
    """Cut `self._wrote()` from EpisodeStore._merge and the versions pile up: this test fails."""
    fast = VersionRetention(keep_versions=5, min_age=timedelta(milliseconds=50), every_writes=10)
    cadenced = EpisodeStore(tmp_path / "a.lance", emb, retention=fast)
    unkept = EpisodeStore(tmp_path / "b.lance", emb, retention=VersionRetention(every_writes=0))
    for t in range(80):
        for store in (cadenced, unkept):
            store.upsert(_ep(t))
        if t % 3 == 0:
            time.sleep(0.02)  # let versions age past min_age
    assert len(unkept.table.list_versions()) >= 80
    kept = len(cadenced.table.list_versions())
    assert kept <= 5 + 10 + 6, kept  # the newest 5, the writes since the last upkeep, the last minute's (~50 ms)
    assert _size(tmp_path / "a.lance") < 0.5 * _size(tmp_path / "b.lance")
    assert [e.tick for e in cadenced.all()] == list(range(80))
    assert [e.summary for e in cadenced.all()] == [e.summary for e in unkept.all()]
    hit = cadenced.search(_ep(42).summary, k=1)[0][0]
    assert hit.id == episode_id("g", 42)


def test_delta_rewrites_do_not_stay_on_disk(tmp_path, emb):
    """The delta cycle rewrites the episodes table whole (decay, mark consolidated); after the stores' next upkeeps
    those copies are gone, so the table stays near the size of its rows."""
    fast = VersionRetention(keep_versions=3, min_age=timedelta(milliseconds=50), every_writes=10)
    eps = EpisodeStore(tmp_path / "g" / "e.lance", emb, retention=fast)
    sem = SemanticStore(tmp_path / "g" / "s.sqlite", tmp_path / "g" / "s.lance", emb, retention=fast)
    eps.upsert_many([_ep(t) for t in range(400)])
    maintain(eps, sem)
    for cycle in range(4):
        for t in range(400 + 30 * cycle, 430 + 30 * cycle):
            eps.upsert(_ep(t))
        eps.apply_decay(now_tick=430 + 30 * cycle, tick_seconds=60.0)
        eps.mark_consolidated([e.id for e in eps.unconsolidated()])
        maintain(eps, sem)
        time.sleep(0.1)
    for t in range(520, 545):  # the next ticks' writes run the store's own upkeep
        eps.upsert(_ep(t))
    rows = _size(tmp_path / "g" / "e.lance")
    eps.retention = VersionRetention(keep_versions=1, min_age=timedelta(milliseconds=1), every_writes=0)
    time.sleep(0.05)
    eps.upkeep()  # everything but the latest version dropped: the rows themselves
    floor = _size(tmp_path / "g" / "e.lance")
    assert rows < 3 * floor, (rows, floor)
    assert eps.count() == 545
    assert [e.tick for e in eps.unconsolidated()] == list(range(520, 545))  # the delta's marks were kept


def test_reads_keep_working_while_the_stores_compact(tmp_path, emb):
    """Retrieval in the writing process and a reader in another process (like `golem grimoire search`) run while the
    store writes and compacts every few writes and drops versions older than half a second: no read fails, every
    read sees whole rows, and the in-process retrieval index follows the new versions."""
    retention = VersionRetention(keep_versions=3, min_age=timedelta(milliseconds=500), every_writes=4)
    path = tmp_path / "g" / "e.lance"
    eps = EpisodeStore(path, emb, retention=retention)
    sem = SemanticStore(tmp_path / "g" / "s.sqlite", tmp_path / "g" / "s.lance", emb, retention=retention)
    sem.put_many([GrimoireEntry(category=EntryType.WARNING, content=f"gas above {g} gwei: defer swaps",
                                source=EntrySource(golem_id="g")) for g in (40, 60, 80)])
    eps.upsert_many([_ep(t) for t in range(50)])
    maintain(eps, sem)
    stop = tmp_path / "stop"
    reader = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import pathlib, sys
        from golem.grimoire.store.embeddings import default_embedder
        from golem.grimoire.episodes.store import EpisodeStore
        store = EpisodeStore(pathlib.Path({str(path)!r}), default_embedder(), on_model_switch="ignore")
        n, last = 0, 0
        while not pathlib.Path({str(stop)!r}).exists() or n < 5:
            rows = store.count()
            assert rows >= last, (rows, last)
            last = rows
            hits = store.search("gas gwei health factor", k=5)
            assert hits and all(e.summary.startswith("Tick ") for e, _ in hits)
            assert len(store.all()) >= rows
            n += 1
        print("reads", n, "rows", last)
    """)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    errors: list[BaseException] = []
    reads = 0
    done = threading.Event()

    def retrieve() -> None:
        nonlocal reads
        try:
            while not done.is_set():
                res = retrieve_for_tick(eps, sem, "should I swap with gas at 70 gwei and health factor 1.3",
                                        regime="volatile", tick=1000, tier="T1", log=False)
                assert res.items
                reads += 1
        except BaseException as e:  # noqa: BLE001 — reported below
            errors.append(e)

    th = threading.Thread(target=retrieve)
    th.start()
    try:
        for t in range(50, 170):
            eps.upsert(_ep(t))
            if t % 2:
                eps.mark_accessed([episode_id("g", t - 1)], t)
            if t % 40 == 0:
                eps.apply_decay(now_tick=t, tick_seconds=60.0)
            time.sleep(0.02)
    finally:
        done.set()
        th.join()
        stop.touch()
        out, err = reader.communicate(timeout=300)
    assert not errors, errors
    assert reader.returncode == 0, err[-3000:]
    assert reads > 5 and "reads" in out, (reads, out)
    assert eps.count() == 170
    assert len(eps.table.list_versions()) < 60  # it did clean up meanwhile (120+ writes)
    idx = episode_index.episode_index(eps)
    assert idx.version == eps.table.version and idx.n == 170
