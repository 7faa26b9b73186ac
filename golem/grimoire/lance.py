"""One LanceDB session per process, with bounded caches.

LanceDB's default session lets its metadata and index caches grow to gigabytes. Every write makes a table
version and, with read_consistency_interval=0, every read checks for the newest one, so a golem that upserts
an episode per tick caches one more manifest per tick: the soak (infra/soak.py) measured the worker's RSS
rising ~35 MB per 100 ticks (the episode store alone: its session at 72 MB after 300 writes, growing faster
with each). Bounded, the session stays at its cap and retrieval keeps its hot pages. The episode and semantic
stores share this one session.
"""

from __future__ import annotations

import lancedb

INDEX_CACHE_BYTES = 128 << 20  # ANN / FTS index pages
METADATA_CACHE_BYTES = 64 << 20  # manifests, fragment and file metadata

_session: lancedb.Session | None = None


def lance_session() -> lancedb.Session:
    global _session
    if _session is None:
        _session = lancedb.Session(index_cache_size_bytes=INDEX_CACHE_BYTES, metadata_cache_size_bytes=METADATA_CACHE_BYTES)
    return _session
