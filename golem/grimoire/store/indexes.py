"""LanceDB index helpers shared by the stores, retrieval and upkeep: the native FTS index, the ANN index on
`vector`, and the ANN search parameters.

Below the stores (episodes/store.py and semantic/store.py rebuild an index after an overwrite; retrieval queries with them;
upkeep builds them in the delta cycle): it imports only LanceDB, so none of those needs to import another.
"""

from __future__ import annotations

import math
from typing import Any

from lancedb.index import FTS

_FTS_READY = "_golem_fts_ready"  # attribute on the table object: columns known to have an FTS index


def ensure_fts(table: Any, column: str) -> bool:
    """Create the native FTS index on `column` once the table has rows; True when it exists.

    Remembered on the table object once true (an index is never dropped, only replaced), so the
    per-query path skips the list_indices round trip."""
    if column in getattr(table, _FTS_READY, ()):
        return True
    if any(column in idx.columns and idx.index_type == "FTS" for idx in table.list_indices()):
        try:
            setattr(table, _FTS_READY, {*getattr(table, _FTS_READY, ()), column})
        except AttributeError:  # a table class with __slots__: just ask again next time
            pass
        return True
    if table.count_rows() == 0:
        return False
    table.create_index(column, config=FTS(), replace=True)
    return True


def has_fts(table: Any, column: str) -> bool:
    """The table has a native FTS index on `column` (asked of the table, not remembered)."""
    return any(column in idx.columns and idx.index_type == "FTS" for idx in table.list_indices())


# ANN (ours, measured by bench/grimoire.py --big 100000): below ANN_MIN_ROWS an exact scan is fast enough;
# above it the delta cycle builds an IVF index and queries probe ANN_NPROBES partitions and re-rank
# ANN_REFINE × k candidates on full vectors (what keeps recall@10 >= 0.95 against exact search).
# Measured at 100k WordLlama episodes, 200 queries, two index trainings: refine 10 gave recall@10 0.943-0.945
# (IVF_PQ training varies run to run), refine 20 gave 0.988-0.996 for ~1.5 ms more; nprobes 48→96 changed nothing.
ANN_MIN_ROWS = 50_000
ANN_NPROBES = 48
ANN_REFINE = 20
ANN_MIN_TRAIN_ROWS = 256  # IVF needs rows to train on


def vector_index(table: Any) -> str | None:
    """Name of the ANN index on `vector`, or None."""
    for idx in table.list_indices():
        if "vector" in idx.columns and idx.index_type != "FTS":
            return str(idx.name)
    return None


def build_ann_index(table: Any, index_type: str = "IVF_PQ") -> None:
    """IVF_PQ (or IVF_HNSW_SQ) over `vector`, cosine, ~sqrt(rows) partitions, 8 dims per PQ sub-vector."""
    if index_type not in ("IVF_PQ", "IVF_HNSW_SQ"):
        raise ValueError(f"index_type must be IVF_PQ or IVF_HNSW_SQ, got {index_type!r}")
    n = table.count_rows()
    if n < ANN_MIN_TRAIN_ROWS:
        raise ValueError(f"an ANN index needs at least {ANN_MIN_TRAIN_ROWS} rows to train, the table has {n}")
    dim = table.schema.field("vector").type.list_size
    kw = {"num_sub_vectors": max(1, dim // 8)} if index_type == "IVF_PQ" else {}
    table.create_index(metric="cosine", vector_column_name="vector", index_type=index_type,
                       num_partitions=max(1, int(math.sqrt(n))), replace=True, **kw)


def ann_query(builder: Any) -> Any:
    """Apply the ANN search parameters to a vector or hybrid query builder (ignored without an index)."""
    return builder.nprobes(ANN_NPROBES).refine_factor(ANN_REFINE)
