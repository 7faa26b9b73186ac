"""The worker's memory split (workers/memory.py) on its /metrics, and the soak reading it from there."""

from __future__ import annotations

import time

from golem.grimoire.store import lance
from golem.grimoire.store.embeddings import default_embedder
from golem.grimoire.episodes.model import Episode
from golem.grimoire.episodes.store import EpisodeStore
from infra.soak import MEMORY_PARTS, Sample, SoakReport, worker_memory_mb
from workers.memory import memory_parts, rss_bytes
from workers.metrics import GolemMetrics, MetricsServer


def test_the_split_is_served_on_metrics_and_the_soak_reads_it(tmp_path, monkeypatch):
    import lancedb

    monkeypatch.setattr(lance, "_session", lancedb.Session(index_cache_size_bytes=4 << 20,
                                                           metadata_cache_size_bytes=4 << 20))
    store = EpisodeStore(tmp_path / "episodes.lance", default_embedder())
    for i in range(5):
        store.upsert(Episode(id=f"g:tick:{i}", golem_id="g", tick=i, created_at="2026-03-01T00:00:01Z",
                             regime="volatile", tier="T0", summary=f"tick {i}: held"))
        store.search("held", k=2)
    parts = memory_parts()
    assert parts["rss"] > 50 << 20 and abs(parts["rss"] - rss_bytes()) < 32 << 20
    assert 0 < parts["lance_cache"] <= (8 << 20) * 1.1 and parts["lance_cache"] == lance.session_bytes()
    assert parts["malloc_in_use"] > 1 << 20 and parts["malloc_free"] >= 0  # glibc, as on every machine we run
    server = MetricsServer(GolemMetrics("g1"), 0).start()
    try:
        seen = worker_memory_mb(server.port)
    finally:
        server.stop()
    assert set(seen) >= {"rss", "lance_cache", "malloc_in_use", "malloc_free"}
    assert abs(seen["lance_cache"] - parts["lance_cache"] / 2**20) < 4
    assert worker_memory_mb(None) == {} and worker_memory_mb(1) == {}  # no endpoint: no split, the soak goes on
    report = SoakReport(samples=[Sample(100, 5.0, 400.0, {"temporal": 1.0}, seen)])
    line = report.summary().splitlines()[2]
    cols = " ".join("-" if seen.get(k) is None else f"{seen[k]:.0f}" for k in MEMORY_PARTS)
    assert f"400.0 ({cols})" in line and cols.count(" ") == 3, line


def test_the_trimmer_gives_mallocs_free_pages_back():
    """Freed memory glibc keeps in its arenas (a hole under live blocks: no automatic trim reaches it) goes back to
    the OS with malloc_trim, and the trimmer counts it."""
    import ctypes

    from workers.memory import MallocTrimmer, memory_parts

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: free() alone never trims in this test
    try:
        blocks = [libc.malloc(4096) for _ in range(40_000)]  # ~160 MB in 4 KB blocks, below the mmap threshold
        for b in blocks:
            ctypes.memset(b, 1, 4096)  # resident
        for b in blocks[:-1]:
            libc.free(b)  # all but the last: a hole of ~160 MB under it
        held = memory_parts()["malloc_free"]
        assert held > 100 << 20, held
        trimmer = MallocTrimmer(every=3600)
        released = trimmer.trim()
        assert released > 100 << 20 and trimmer.released == released and trimmer.trims == 1, released
        libc.free(blocks[-1])
    finally:
        libc.mallopt(-1, 128 * 1024)  # glibc's default M_TRIM_THRESHOLD


def test_the_trim_interval_comes_from_the_environment(monkeypatch):
    import pytest

    from workers import memory

    monkeypatch.setattr(memory, "_trimmer", None)
    monkeypatch.setenv(memory.TRIM_ENV, "0")
    assert memory.start_trimmer() is None and "malloc_released" not in memory.memory_parts()
    monkeypatch.setenv(memory.TRIM_ENV, "often")
    with pytest.raises(ValueError, match="GOLEM_MALLOC_TRIM_SECONDS='often': give the interval in seconds"):
        memory.start_trimmer()
    monkeypatch.setenv(memory.TRIM_ENV, "3600")
    t = memory.start_trimmer()
    try:
        assert t is not None and t.every == 3600 and memory.start_trimmer() is t  # one per process
        deadline = time.monotonic() + 10
        while t.trims == 0 and time.monotonic() < deadline:  # the first trim runs at once
            time.sleep(0.05)
        assert t.trims == 1 and "malloc_released" in memory.memory_parts()
    finally:
        t.stop()


_ARENAS_PROBE = """
import ctypes, threading
from workers.memory import limit_arenas
print("cap", limit_arenas(), flush=True)
start, keep = threading.Barrier(12), []
def work():
    start.wait()
    keep.extend(bytearray(100_000) for _ in range(50))  # malloc'd (not Python's small-object allocator)
threads = [threading.Thread(target=work) for _ in range(12)]
for t in threads: t.start()
for t in threads: t.join()
ctypes.CDLL("libc.so.6").malloc_stats()  # one 'Arena N:' block per arena, on stderr
"""


def _probe(script: str, env_name: str, glibc_name: str, env_value: str | None) -> tuple[str, str]:
    """Run `script` in a fresh interpreter with `env_name` set to env_value (None: unset; glibc's own variable
    `glibc_name` is always unset). Returns its stdout and stderr."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in (env_name, glibc_name)}
    if env_value is not None:
        env[env_name] = env_value
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                         check=True)
    return out.stdout, out.stderr


def _arenas(env_value: str | None) -> tuple[str, int]:
    out, err = _probe(_ARENAS_PROBE, "GOLEM_MALLOC_ARENAS", "MALLOC_ARENA_MAX", env_value)
    return out.strip(), err.count("Arena ")


def test_the_worker_caps_mallocs_arenas():
    """Twelve threads allocating at once: with the worker's cap they share 2 arenas (glibc's default would give
    each its own, up to 8 per core), so freed memory is not scattered over many arenas that stay resident."""
    said, capped = _arenas(None)
    assert said == "cap 2" and capped <= 3, (said, capped)  # (one more may predate the cap: made during the imports)
    said, free = _arenas("0")  # GOLEM_MALLOC_ARENAS=0: glibc's own
    assert said == "cap 0" and free >= capped + 5, (said, free, capped)


def test_the_worker_gives_arrow_malloc_memory():
    """Arrow's buffers come from malloc once the worker set its pool (so the arena cap and the trimmer cover them);
    from Arrow's bundled mimalloc they were outside malloc's figures and kept their pages after being freed."""
    import os

    import numpy as np
    import pyarrow as pa

    from workers.memory import _MALLINFO, arrow_on_malloc

    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return  # the owner chose Arrow's pool: the worker leaves it
    assert arrow_on_malloc() == "system"
    before = _MALLINFO().uordblks + _MALLINFO().hblkhd
    held = pa.array(np.arange(8_000_000, dtype=np.int64)).cast(pa.float64())  # 64 MB from Arrow's pool
    grown = _MALLINFO().uordblks + _MALLINFO().hblkhd - before
    assert pa.total_allocated_bytes() >= 60_000_000 and grown >= 60_000_000, (pa.total_allocated_bytes(), grown)
    del held


_MMAP_PROBE = """
import ctypes
from workers.memory import _MALLINFO, fix_mmap_threshold
print("kb", fix_mmap_threshold(), flush=True)
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
keep = [libc.malloc(64)]  # a live block, so the arena cannot shrink under the next ones
for _ in range(3):  # freeing an mmap'd block raises glibc's own threshold above its size
    block = libc.malloc(4 << 20)
    libc.free(block)
before = _MALLINFO().hblks
held = [libc.malloc(4 << 20) for _ in range(4)]
print("mmapped", _MALLINFO().hblks - before, flush=True)
"""


def _mmapped(env_value: str | None) -> tuple[str, str]:
    out, _ = _probe(_MMAP_PROBE, "GOLEM_MALLOC_MMAP_THRESHOLD_KB", "MALLOC_MMAP_THRESHOLD_", env_value)
    said, mmapped = out.split("\n")[:2]
    return said, mmapped


def test_the_worker_pins_mallocs_mmap_threshold():
    """Big blocks stay mmap'd (given back whole when freed) after others of their size were freed: with glibc's own
    moving threshold they come from the arenas, where the holes they leave stay resident."""
    said, mmapped = _mmapped(None)
    assert (said, mmapped) == ("kb 128", "mmapped 4"), (said, mmapped)
    said, mmapped = _mmapped("0")  # glibc's own
    assert (said, mmapped) == ("kb 0", "mmapped 0"), (said, mmapped)
