"""Where the worker's memory is: the process's resident set, what LanceDB's session caches hold, and what
glibc's malloc has handed out and keeps free. Read at each /metrics scrape (`golem_worker_memory_bytes`) and by the
soak, which prints the split beside the RSS so that growth can be told apart: caches filling to their caps, live
heap, or freed memory the allocator keeps (fragmentation)."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from golem.grimoire.store.lance import session_bytes

log = logging.getLogger("golem.metrics")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _libc_fn(name: str, restype: type, argtypes: Sequence[type] = ()) -> Callable[..., Any] | None:
    """A function of the C library (glibc's mallinfo2 is 2.33+), or None where there is none (musl, macOS).
    Its result is what restype says, which ctypes sets at run time (hence Any to the checker)."""
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")[name]
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = restype, list(argtypes)
    return fn


_MALLINFO = _libc_fn("mallinfo2", _MallInfo2)
_MALLOC_TRIM = _libc_fn("malloc_trim", ctypes.c_int, [ctypes.c_size_t])
_MALLOPT = _libc_fn("mallopt", ctypes.c_int, [ctypes.c_int, ctypes.c_int])
_M_ARENA_MAX = -8  # glibc's mallopt parameters
_M_MMAP_THRESHOLD = -3
# Ours: glibc gives each thread that allocates under contention an arena of its own, up to 8 per core; a worker
# runs ~50 threads (activities, LanceDB's and Temporal's runtimes), and freed memory scattered over 16 arenas stays
# resident (the fleet soak's malloc free space grew with the ticks). 2 arenas: MALLOC_ARENA_MAX=2, as often set for
# Python servers; measured in docs/how-to/fleet.md#memory-over-time.
ARENAS = 2
ARENAS_ENV = "GOLEM_MALLOC_ARENAS"  # 0 leaves glibc's default
# Ours: how often the worker hands malloc's free pages back to the OS. glibc keeps what the activities' threads
# (web3, LanceDB's Rust, pyarrow) freed in its arenas; in the soak that free space grew 28 -> 89 MB over 630 s and
# RSS with it. One malloc_trim walks the arenas in a few ms; every 30 s it is noise.
TRIM_EVERY_S = 30.0
TRIM_ENV = "GOLEM_MALLOC_TRIM_SECONDS"  # 0 turns it off


# Ours: malloc serves blocks this big or bigger with mmap, and munmap gives them back whole on free. glibc's default
# threshold (128 KB) rises each time such a block is freed, up to 32 MB, so after a while the worker's big buffers
# (Arrow tables read from LanceDB, the episode index's arrays) come from the arenas, and the holes they leave between
# longer-lived blocks stay resident: malloc's free space grew ~95 MB per golem per 1,000 ticks in the soak with the
# trimmer running. Setting the threshold fixes it (glibc stops moving it). Measured in docs/how-to/fleet.md.
MMAP_THRESHOLD_KB = 128
MMAP_THRESHOLD_ENV = "GOLEM_MALLOC_MMAP_THRESHOLD_KB"  # 0 leaves glibc's moving threshold


class MallocTrimmer:
    """A daemon thread calling glibc's malloc_trim(0) every `every` seconds (the first at once). `released` counts the
    resident bytes the trims gave back (RSS before minus after each, never negative)."""

    def __init__(self, every: float = TRIM_EVERY_S) -> None:
        self.every = every
        self.trims = 0
        self.released = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="malloc-trim", daemon=True)

    def trim(self) -> int:
        if _MALLOC_TRIM is None:
            return 0
        before = rss_bytes()
        _MALLOC_TRIM(0)
        freed = max(0, before - rss_bytes())
        self.trims += 1
        self.released += freed
        return freed

    def _run(self) -> None:
        while True:
            try:
                self.trim()
            except (OSError, RuntimeError) as err:  # never the worker's problem: the next round tries again
                log.debug("malloc_trim skipped: %s", err)
            if self._stop.wait(self.every):
                return

    def start(self) -> "MallocTrimmer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()


def _env_mallopt(env: str, default: int, param: int, scale: int, what: str) -> int:
    """Set one mallopt parameter from `env` (unset: `default`; 0 or no glibc: leave glibc's own). Returns what was set
    in the env's unit (0: nothing)."""
    raw = os.environ.get(env, "").strip()
    try:
        n = int(raw) if raw else default
    except ValueError:
        raise ValueError(f"{env}={raw!r}: give {what} (0 leaves glibc's default)") from None
    if n <= 0 or _MALLOPT is None:
        return 0
    return n if _MALLOPT(param, n * scale) == 1 else 0


def limit_arenas() -> int:
    """Cap glibc's malloc arenas (GOLEM_MALLOC_ARENAS, default 2; 0 = glibc's own). Takes effect for arenas made from
    now on, so the worker calls it first thing, before its threads start. Returns the cap set (0: none)."""
    return _env_mallopt(ARENAS_ENV, ARENAS, _M_ARENA_MAX, 1, "a number of arenas")


def fix_mmap_threshold() -> int:
    """Pin malloc's mmap threshold (GOLEM_MALLOC_MMAP_THRESHOLD_KB, default 128; 0 = glibc's moving one): blocks of
    at least that many KB are mmap'd and go back to the OS when freed. Returns the threshold set in KB (0: none)."""
    return _env_mallopt(MMAP_THRESHOLD_ENV, MMAP_THRESHOLD_KB, _M_MMAP_THRESHOLD, 1 << 10, "a size in KB")


def arrow_on_malloc() -> str:
    """Arrow's buffers from malloc (its system pool) instead of its bundled mimalloc, unless ARROW_DEFAULT_MEMORY_POOL
    chose one: mimalloc kept the pages of freed buffers (its 1 GB region's resident part grew ~7 MB a minute in the
    fleet soak while Arrow held no bytes), where malloc's are capped and trimmed here. Returns the pool's backend."""
    import pyarrow as pa

    if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        pa.set_memory_pool(pa.system_memory_pool())
    return str(pa.default_memory_pool().backend_name)


_trimmer: MallocTrimmer | None = None
_trimmer_lock = threading.Lock()


def start_trimmer() -> MallocTrimmer | None:
    """The process's trimmer, started once (GOLEM_MALLOC_TRIM_SECONDS: the interval, 0 = off; None without glibc)."""
    global _trimmer
    raw = os.environ.get(TRIM_ENV, "").strip()
    try:
        every = float(raw) if raw else TRIM_EVERY_S
    except ValueError:
        raise ValueError(f"{TRIM_ENV}={raw!r}: give the interval in seconds (0 turns trimming off)") from None
    limit_arenas()  # (a worker's command already did, earlier; arenas made since then are bounded from here)
    fix_mmap_threshold()
    arrow_on_malloc()
    if every <= 0 or _MALLOC_TRIM is None:
        return None
    with _trimmer_lock:
        if _trimmer is None:
            _trimmer = MallocTrimmer(every).start()
        return _trimmer


def rss_bytes(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def memory_parts() -> dict[str, int]:
    """rss; lance_cache (absent before a Grimoire store opened the session); malloc_in_use / malloc_free (bytes
    malloc has handed out, and holds free in its arenas; absent without glibc); malloc_released (what the worker's
    trimmer gave back to the OS so far; absent when it is off). Python's small objects live in its own arenas,
    outside malloc's figures."""
    parts: dict[str, int] = {}
    try:
        parts["rss"] = rss_bytes()
    except (OSError, RuntimeError) as err:  # no /proc: the other parts still count
        log.debug("rss not read: %s", err)
    lance = session_bytes()
    if lance is not None:
        parts["lance_cache"] = lance
    if _MALLINFO is not None:
        mi = _MALLINFO()
        parts["malloc_in_use"] = int(mi.uordblks + mi.hblkhd)
        parts["malloc_free"] = int(mi.fordblks)
    if _trimmer is not None:
        parts["malloc_released"] = _trimmer.released  # cumulative: what the trims gave back to the OS
    return parts
