"""A LanceDB table whose vectors carry the identity of the model that embedded them, as both Grimoire stores keep
one: the identity in the schema and on every row, opening the table, what to do when another model embedded
it, and the refusal to mix two models in one table (see docs/concepts/grimoire.md)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa

from golem.grimoire.store.embeddings import Embedder, EmbeddingIdentity
from golem.grimoire.store.lance import UpkeepCadence, lance_session

# What a store does when its table was embedded with another {model, version, dim} than its embedder: a full
# re-embed (the worker), a clear error naming both, or nothing (read-only inspection; writes still refuse).
ON_MODEL_SWITCH = ("reembed", "error", "ignore")


# Keys of a LanceDB table's schema metadata holding the identity its vectors were embedded with.
META_MODEL, META_VERSION, META_DIM = b"golem.embedder", b"golem.embedder_version", b"golem.dim"


def identity_metadata(ident: EmbeddingIdentity) -> dict[str, str]:
    return {META_MODEL.decode(): ident.model, META_VERSION.decode(): ident.version, META_DIM.decode(): str(ident.dim)}


def table_identity(schema: pa.Schema) -> EmbeddingIdentity:
    """The {model, version, dim} a LanceDB table's schema says its vectors have (version "unknown" for tables
    written before versions were recorded)."""
    meta = schema.metadata or {}
    dim = getattr(schema.field("vector").type, "list_size", 0)
    return EmbeddingIdentity(meta.get(META_MODEL, b"unknown").decode(), meta.get(META_VERSION, b"unknown").decode(),
                             int(dim))


EMBEDDING_COLUMNS = ("embedding_model", "embedding_version", "embedding_dim")  # per-row identity


def vector_fields(ident: EmbeddingIdentity) -> list[pa.Field]:
    """The Arrow fields every vector table ends with: the row's embedding identity and the vector."""
    import pyarrow as pa

    return [pa.field("embedding_model", pa.string(), nullable=False),
            pa.field("embedding_version", pa.string(), nullable=False),
            pa.field("embedding_dim", pa.int64(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), ident.dim), nullable=False)]


def row_identities(table: Any) -> dict[EmbeddingIdentity, int]:
    """How many rows of a LanceDB table carry each {model, version, dim} (empty: no rows or no identity columns)."""
    n = table.count_rows()
    if not n or not set(EMBEDDING_COLUMNS) <= set(table.schema.names):
        return {}
    data = table.search().select(list(EMBEDDING_COLUMNS)).limit(n).to_arrow()
    out: dict[EmbeddingIdentity, int] = {}
    for m, v, d in zip(*(data.column(c).to_pylist() for c in EMBEDDING_COLUMNS)):
        key = EmbeddingIdentity(m, v, int(d))
        out[key] = out.get(key, 0) + 1
    return out


def identity_mismatch(table: Any, identity: EmbeddingIdentity) -> str | None:
    """Why a table's vectors cannot be compared with `identity`'s (None: they can): the table's own identity
    or any row's differs."""
    stored = table_identity(table.schema)
    if stored != identity:
        return f"it is embedded with {stored.as_dict()}, the embedder is {identity.as_dict()}"
    other = {i: n for i, n in row_identities(table).items() if i != identity}
    if other:
        return (f"{sum(other.values())} rows carry another embedding identity "
                f"({', '.join(str(i.as_dict()) for i in other)})")
    return None


def embedding_stats(table: Any, mismatch: str | None) -> dict[str, Any]:
    """For `golem grimoire stats`: a table's identity, its rows per identity, and whether they match."""
    return {**table_identity(table.schema).as_dict(),
            "rows_by_identity": [{**i.as_dict(), "rows": n} for i, n in row_identities(table).items()],
            "matches_embedder": mismatch is None}


class VectorTable(UpkeepCadence):
    """What EpisodeStore and SemanticStore share about their LanceDB table: `_open_table` connects and opens (or
    creates) it; `identity` is the embedder's; `_where` names the table in errors."""

    embedder: Embedder
    identity: EmbeddingIdentity
    _db: Any
    _table: Any
    _where: str

    @property
    def table(self) -> Any:
        """The LanceDB table (for upkeep, hybrid queries and stats; write through the store)."""
        return self._table

    @table.setter
    def table(self, value: Any) -> None:
        self._table = value

    def _open_table(self, path: Path, name: str, schema: pa.Schema) -> None:
        # read_consistency_interval=0: every read checks for newer versions, so a reader sees rows another
        # process (the worker) committed after this store was opened.
        self._db = lancedb.connect(str(path), read_consistency_interval=timedelta(0), session=lance_session())
        try:
            self._table = self._db.open_table(name)
        except ValueError:  # "Table ... was not found"
            try:
                self._table = self._db.create_table(name, schema=schema, exist_ok=True)
            except ValueError:  # another process created it first, with a different schema
                self._table = self._db.open_table(name)

    def stored_identity(self) -> EmbeddingIdentity:
        return table_identity(self._table.schema)

    def row_identities(self) -> dict[EmbeddingIdentity, int]:
        """How many rows carry each {model, version, dim}."""
        return row_identities(self._table)

    def identity_mismatch(self) -> str | None:
        """Why the stored vectors cannot be compared with this store's embedder (None: they can)."""
        return identity_mismatch(self._table, self.identity)

    def embedding_stats(self) -> dict[str, Any]:
        """For `golem grimoire stats`: the table's identity, rows per identity, and whether they match."""
        return embedding_stats(self._table, self.identity_mismatch())

    def _settle_model_switch(self, on_model_switch: str, reembed: Callable[[], int]) -> int:
        """Act on a table embedded with another model, as `on_model_switch` says; the rows re-embedded (0: none)."""
        mismatch = self.identity_mismatch()
        if not mismatch or on_model_switch == "ignore":
            return 0
        if on_model_switch == "reembed":
            return reembed()
        raise ValueError(f"{self._where}: {mismatch}; mixing embedding models makes similarity scores meaningless "
                         f"— run `golem grimoire reembed` (a full re-embed with the configured model) or open it "
                         f"with the embedder that built it")

    def _assert_same_space(self, what: str) -> None:
        stored = table_identity(self._table.schema)  # re-read: another process may have re-embedded it
        if stored != self.identity:
            raise ValueError(
                f"cannot {what}: the {self._where} is embedded with {stored.as_dict()} but this process embeds "
                f"with {self.identity.as_dict()} (never mix models); restart it with the embedder in golem.toml, "
                f"or run `golem grimoire reembed`")


def check_on_model_switch(on_model_switch: str) -> None:
    if on_model_switch not in ON_MODEL_SWITCH:
        raise ValueError(f"on_model_switch must be one of {', '.join(ON_MODEL_SWITCH)}, got {on_model_switch!r}")
