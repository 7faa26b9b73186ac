"""Where the worker's memory is (issue 14): the process's resident set, what LanceDB's session caches hold, and what
glibc's malloc has handed out and keeps free. Read at each /metrics scrape (`golem_worker_memory_bytes`) and by the
soak, which prints the split beside the RSS so that growth can be told apart: caches filling to their caps, live
heap, or freed memory the allocator keeps (fragmentation)."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

from golem.grimoire.lance import session_bytes

log = logging.getLogger("golem.metrics")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _mallinfo2():
    """glibc's mallinfo2 (2.33+), or None where there is none (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    return fn


_MALLINFO = _mallinfo2()


def rss_bytes(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS in /proc/{pid}/status")


def memory_parts() -> dict[str, int]:
    """rss; lance_cache (absent before a Grimoire store opened the session); malloc_in_use / malloc_free (bytes
    malloc has handed out, and holds free in its arenas; absent without glibc). Python's small objects live in
    its own arenas, outside malloc's figures."""
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
    return parts
