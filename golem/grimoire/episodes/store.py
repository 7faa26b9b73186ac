"""Episodic memory: the store keeping one Episode per tick in a LanceDB table (the model: episodes/model.py).

Writes are keyed by episode id (`<golem_id>:tick:<n>`) through `merge_insert`, so a retried activity overwrites its
own row. Every row and the table carry the embedding model's identity; a different model re-embeds the whole table
in one commit, and while the grimoire is paused rows needing a vector are queued. A table written by older code is
migrated when opened (every row kept) and re-embedded. See docs/design/grimoire.md#embeddings.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import BaseModel

from golem.grimoire.episodes import index as episode_index
from golem.grimoire.decay import (
    DEFAULT_TICK_SECONDS,
    PRUNE_FLOOR,
    DecayClass,
    EntryKind,
    effective_confidence,
    retention_at_tick,
)
from golem.grimoire.store.embeddings import Embedder, EmbeddingIdentity, embed_batched, identity_of
from golem.grimoire.store.mirror import VectorTable, check_on_model_switch, identity_metadata, table_identity, vector_fields
from golem.grimoire.episodes.model import Episode
from golem.grimoire.store.guard import WriteGuard
from golem.grimoire.store.lance import DEFAULT_RETENTION, VersionRetention, optimize
from golem.grimoire.store.indexes import ANN_MIN_TRAIN_ROWS, build_ann_index, ensure_fts, has_fts, vector_index

TABLE = "episodes"
REEMBED_BATCH = 2048  # rows embedded per batch during a full re-embed


class DecayReport(BaseModel):
    """GrimoireDecay { entries_decayed, avg_confidence_before, avg_confidence_after }."""

    now_tick: int
    scanned: int = 0
    decayed: int = 0
    below_prune_floor: int = 0
    avg_confidence_before: float = 0.0
    avg_confidence_after: float = 0.0




def episode_arrow_schema(dim: int | EmbeddingIdentity, embedder_name: str | None = None) -> pa.Schema:
    """The episodes table: every Episode field, the embedding identity per row, the vector. Takes an
    EmbeddingIdentity (or, as before, a dim and a model name, version unknown)."""
    ident = dim if isinstance(dim, EmbeddingIdentity) else EmbeddingIdentity(embedder_name or "unknown", "unknown", dim)
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("golem_id", pa.string(), nullable=False),
            pa.field("tick", pa.int64(), nullable=False),
            pa.field("created_at", pa.string(), nullable=False),
            pa.field("regime", pa.string(), nullable=False),
            pa.field("tier", pa.string(), nullable=False),
            pa.field("summary", pa.string(), nullable=False),
            pa.field("prediction_error", pa.float64(), nullable=False),
            pa.field("actions", pa.int64(), nullable=False),
            pa.field("pnl_impact", pa.float64(), nullable=True),
            pa.field("outcome_verified", pa.bool_(), nullable=True),
            pa.field("utility", pa.float64(), nullable=False),
            pa.field("confidence", pa.float64(), nullable=False),
            pa.field("strength", pa.float64(), nullable=False),
            pa.field("decay_class", pa.string(), nullable=False),
            pa.field("quality", pa.float64(), nullable=False),
            pa.field("last_accessed_tick", pa.int64(), nullable=False),
            pa.field("retention", pa.float64(), nullable=False),
            pa.field("access_count", pa.int64(), nullable=False),
            pa.field("strategy", pa.string(), nullable=True),
            pa.field("dream_validated", pa.bool_(), nullable=False),
            pa.field("last_replayed_tick", pa.int64(), nullable=True),
            pa.field("episode_type", pa.string(), nullable=False),
            pa.field("tool", pa.string(), nullable=False),
            pa.field("outcome", pa.string(), nullable=False),
            pa.field("chain", pa.string(), nullable=True),
            pa.field("token_pair", pa.string(), nullable=True),
            pa.field("timestamp_ms", pa.int64(), nullable=False),
            pa.field("importance", pa.string(), nullable=False),
            pa.field("consolidated", pa.bool_(), nullable=False),
            pa.field("action_tools", pa.list_(pa.string()), nullable=False),
            pa.field("emotional_tag", pa.string(), nullable=True),
            pa.field("gain", pa.float64(), nullable=False),
            pa.field("regime_tag", pa.string(), nullable=True),
            *vector_fields(ident),
        ],
        metadata=identity_metadata(ident),
    )


_SCALAR_FIELDS = [name for name in Episode.model_fields]


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"




def _vectors_of(column: pa.ChunkedArray | pa.Array, dim: int) -> np.ndarray:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return np.asarray(arr.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)


class EpisodeStore(VectorTable):
    """The `episodes` table of a LanceDB database at `path`.

    `guard`: the write pause + pending queue (default: the one of the folder holding `path`, i.e. the
    grimoire directory shared with the semantic store). `on_model_switch`: what to do when the table was
    embedded with another {model, version, dim} than `embedder` — "reembed" (the worker: a full re-embed),
    "error" (a clear error naming both), or "ignore" (read-only inspection such as stats; searches
    and writes still refuse to mix). `retention`: which table versions cleanup keeps, and after how many of this
    store's writes it runs its upkeep (store/lance.py).
    """

    def __init__(self, path: Path, embedder: Embedder, *, guard: WriteGuard | None = None,
                 on_model_switch: str = "reembed", retention: VersionRetention = DEFAULT_RETENTION) -> None:
        check_on_model_switch(on_model_switch)
        self.path = Path(path)
        self.embedder = embedder
        self.identity = identity_of(embedder)
        self.guard = guard if guard is not None else WriteGuard(self.path.parent)
        self.retention = retention
        self._where = f"episodes table at {self.path}"
        self.path.mkdir(parents=True, exist_ok=True)
        self._schema = episode_arrow_schema(self.identity)
        self._open_table(self.path, TABLE, self._schema)
        self.migrated = self._migrate()  # rows carried over from an older schema (0: none needed)
        self.reembedded = self._settle_model_switch(on_model_switch, self.reembed)  # rows re-embedded: model changed

    # ---- table rewrites (migration, full re-embed) ----------------------------------------------
    def _build(self, episodes: list[Episode], vectors: np.ndarray, ident: EmbeddingIdentity) -> pa.Table:
        schema = self._schema if ident == self.identity else episode_arrow_schema(ident)
        rows = [ep.model_dump(mode="json") for ep in episodes]
        for r in rows:
            r["embedding_model"], r["embedding_version"], r["embedding_dim"] = ident
        table = pa.Table.from_pylist(rows, schema=pa.schema([f for f in schema if f.name != "vector"]))
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
        vec = pa.FixedSizeListArray.from_arrays(flat, ident.dim)
        return table.append_column(schema.field("vector"), vec).replace_schema_metadata(schema.metadata)

    def _read_all(self, table: Any = None) -> tuple[list[Episode], np.ndarray]:
        table = table if table is not None else self._table
        data = table.to_arrow()
        dim = table.schema.field("vector").type.list_size
        rows = data.drop_columns(["vector"]).to_pylist()
        return [self._to_episode(r) for r in rows], _vectors_of(data.column("vector"), dim)

    def _indexes(self) -> tuple[bool, bool]:
        return has_fts(self._table, "summary"), vector_index(self._table) is not None

    def _overwrite(self, data: pa.Table, base_version: int, indexes: tuple[bool, bool], *, reembed: bool) -> None:
        """Replace the table by `data` in one commit (a crash leaves the old table or the new one), then
        re-apply rows another process committed between our read at `base_version` and that commit,
        and rebuild the indexes the old table had (an overwrite drops them)."""
        new = self._db.create_table(TABLE, data=data, mode="overwrite")
        self._table = new
        if new.version > base_version + 1:  # someone committed in between: their rows are in version - 1
            ours = {ep.id: ep for ep in (self._to_episode(r) for r in data.drop_columns(["vector"]).to_pylist())}
            before = self._db.open_table(TABLE)
            before.checkout(new.version - 1)
            theirs, vecs = self._read_all(before)
            missed = [i for i, ep in enumerate(theirs) if ours.get(ep.id) != ep]
            if missed:
                eps = [theirs[i] for i in missed]
                ident = table_identity(new.schema)
                keep = vecs[missed] if not reembed and vecs.shape[1] == ident.dim else self.embedder.embed(
                    [ep.summary for ep in eps])
                self._merge(self._build(eps, keep, ident))
        had_fts, had_ann = indexes
        if had_fts and self._table.count_rows():
            ensure_fts(self._table, "summary")
        if had_ann and self._table.count_rows() >= ANN_MIN_TRAIN_ROWS:
            build_ann_index(self._table)

    def _migrate(self) -> int:
        """Bring a table written by older code to this schema: every row kept, new fields derived by Episode,
        vectors untouched (their identity: the old metadata's model, version unknown). One commit."""
        missing = [f.name for f in self._schema if f.name not in self._table.schema.names]
        if not missing:
            return 0
        base, indexes = self._table.version, self._indexes()
        legacy = table_identity(self._table.schema)
        episodes, vectors = self._read_all()
        self._overwrite(self._build(episodes, vectors, legacy), base, indexes, reembed=False)
        return len(episodes)

    def reembed(self, *, hold: bool = True) -> int:
        """Re-embed every episode from its summary with this store's embedder and rewrite the table in one
        commit (a model switch re-embeds everything, never part of it). While it runs the store is
        paused (`reembed-episodes`) so writers in other processes queue instead of being overwritten; the
        queue is flushed before the pause is lifted. Returns the number of rows re-embedded."""
        with self.guard.holding("reembed-episodes", {"model": self.identity.as_dict()}, self.flush_pending,
                                enabled=hold):
            base, indexes = self._table.version, self._indexes()
            episodes = self.all()
            vectors = embed_batched(self.embedder, [ep.summary for ep in episodes], REEMBED_BATCH)
            self._overwrite(self._build(episodes, vectors, self.identity), base, indexes, reembed=True)
        return len(episodes)

    # ---- writes -------------------------------------------------------------------------
    def _merge(self, data: pa.Table) -> None:
        if data.num_rows:
            before = self._table.version
            self._table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)
            episode_index.note_merge(self, data, before, self._table.version)  # retrieval's in-memory index
            self._wrote()

    def _stored(self, ids: list[str]) -> dict[str, tuple[str, np.ndarray]]:
        """id → (summary, vector) of rows already in the table."""
        out: dict[str, tuple[str, np.ndarray]] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            rows = (self._table.search().where(f"id IN ({', '.join(_sql_str(x) for x in chunk)})")
                    .select(["id", "summary", "vector"]).limit(len(chunk)).to_list())
            out.update({r["id"]: (r["summary"], np.asarray(r["vector"], dtype=np.float32)) for r in rows})
        return out

    def upsert_many(self, episodes: list[Episode], vectors: np.ndarray | None = None) -> None:
        """Insert or overwrite by id. `vectors` (one row per episode, from this store's embedder) skips
        re-embedding when the caller already has them (bulk loads, the benchmark).

        While the grimoire is paused, episodes whose summary (so whose vector) is unchanged are written
        with their stored vector; the others are queued (store/guard.py) and written by the next flush."""
        if not episodes:
            return
        ids = [ep.id for ep in episodes]
        if len(set(ids)) != len(ids):
            raise ValueError("upsert_many got the same episode id twice in one batch")
        if vectors is not None and np.shape(vectors) != (len(episodes), self.embedder.dim):
            raise ValueError(f"vectors must have shape ({len(episodes)}, {self.embedder.dim}), got {np.shape(vectors)}")
        self._assert_same_space("write episodes")
        if self.guard.paused_for("episodes"):
            stored = self._stored(ids)
            queued = {r["id"] for r in self.guard.pending("episodes", ids)}
            same = [ep for ep in episodes if ep.id not in queued and ep.id in stored and stored[ep.id][0] == ep.summary]
            same_ids = {ep.id for ep in same}
            changed = [ep for ep in episodes if ep.id not in same_ids]
            if not changed or self.guard.divert("episodes", [(ep.id, ep.model_dump_json()) for ep in changed]):
                if same:
                    self._merge(self._build(same, np.stack([stored[ep.id][1] for ep in same]), self.identity))
                return
            # the pause was lifted meanwhile: write normally
        self._write(episodes, vectors)

    def _write(self, episodes: list[Episode], vectors: np.ndarray | None = None) -> None:
        if not episodes:
            return
        if vectors is None:
            vectors = self.embedder.embed([ep.summary for ep in episodes])
        self._merge(self._build(episodes, vectors, self.identity))

    def upsert(self, ep: Episode) -> None:
        self.upsert_many([ep])

    def pending(self) -> list[Episode]:
        """Episodes queued while the grimoire is paused, oldest first (not yet in the table)."""
        return [Episode.model_validate_json(r["payload"]) for r in self.guard.pending("episodes")]

    def flush_pending(self) -> int:
        """Write the queued episodes (embedding them now) and drop them from the queue; returns how many.
        The caller decides when: after a full re-embed, before lifting the pause (integrity.py)."""
        rows = self.guard.pending("episodes")
        if not rows:
            return 0
        self._assert_same_space("flush queued episodes")
        for i in range(0, len(rows), REEMBED_BATCH):
            chunk = rows[i:i + REEMBED_BATCH]
            self._write([Episode.model_validate_json(r["payload"]) for r in chunk])
            self.guard.ack([r["seq"] for r in chunk])
        return len(rows)

    def _update(self, ids: list[str], values_sql: dict[str, str], extra_where: str = "", *, py: dict[str, Any]) -> int:
        """`values_sql` on rows `ids`; `py` says the same in Python (column → old value → new value) for the columns
        retrieval's in-memory index keeps (episode_index.SCALARS)."""
        if {"id", "tick", "summary", "vector"} & set(values_sql):
            raise ValueError("_update changes scalar fields only; write id, tick, summary or vector with upsert")
        before, n = self._table.version, 0
        for i in range(0, len(ids), 500):
            where = f"id IN ({', '.join(_sql_str(x) for x in ids[i:i + 500])})" + extra_where
            res = self._table.update(where=where, values_sql=values_sql)
            n += int(getattr(res, "rows_updated", 0))
        episode_index.note_update(self, ids, py, before, self._table.version)
        self._wrote()
        return n

    def delete_many(self, ids: list[str]) -> int:
        """Remove rows by id (NREM compression folds near-duplicates into one; the caller keeps the audit).
        Retrieval's in-memory index rebuilds on the version change. Returns how many rows went."""
        if not ids:
            return 0
        before = self.count()
        for i in range(0, len(ids), 500):
            self._table.delete(f"id IN ({', '.join(_sql_str(x) for x in ids[i:i + 500])})")
        self._wrote()
        return before - self.count()

    def mark_accessed(self, ids: list[str], tick: int) -> int:
        """A DECIDING retrieval used these episodes: reset their decay clock.

        Strength is untouched: it only grows on retrieval + positive outcome (`reinforce`).
        Returns the number of rows touched.
        """
        if not ids:
            return 0
        return self._update(ids, {"last_accessed_tick": str(int(tick)), "access_count": "access_count + 1",
                                  "retention": "1.0"}, py={"last_accessed_tick": lambda _: int(tick)})

    def mark_consolidated(self, ids: list[str]) -> int:
        """The delta cycle's distillation (ExpeL) has processed these episodes (its
        `consolidated` flag). Idempotent; returns how many rows changed from false to true."""
        if not ids:
            return 0
        return self._update(list(dict.fromkeys(ids)), {"consolidated": "true"}, " AND consolidated = false", py={})

    def reinforce(self, ids: list[str], tick: int, increment: float) -> list[Episode]:
        """Retrieved AND positive outcome: strength += increment and the decay clock restarts.
        A scalar update: the summary and so the vector are untouched."""
        if increment <= 0 or not math.isfinite(increment):
            raise ValueError(f"increment must be a finite number > 0, got {increment}")
        if not ids:
            return []
        self._update(ids, {"strength": f"strength + {float(increment)!r}", "last_accessed_tick": str(int(tick)),
                           "retention": "1.0"},
                     py={"strength": lambda v: (v or 0.0) + float(increment), "last_accessed_tick": lambda _: int(tick)})
        return self.get_many(ids)

    def __repr__(self) -> str:
        return f"episodes table at {self.path}"

    # ---- reads --------------------------------------------------------------------------
    @staticmethod
    def _to_episode(row: dict[str, Any]) -> Episode:
        d = {k: row[k] for k in _SCALAR_FIELDS if k in row}
        if d.get("action_tools") is None:
            d.pop("action_tools", None)
        return Episode.model_validate(d)

    def _scalar_rows(self, where: str | None = None) -> list[dict[str, Any]]:
        q = self._table.search().select(_SCALAR_FIELDS)
        if where:
            q = q.where(where)
        n = self._table.count_rows()
        return q.limit(max(n, 1)).to_list() if n else []

    def get(self, id: str) -> Episode | None:
        """The episode with this id: from the table, or from the pending queue while the grimoire is paused."""
        rows = self._scalar_rows(f"id = {_sql_str(id)}")
        if rows:
            return self._to_episode(rows[0])
        queued = self.guard.pending("episodes", [id])
        return Episode.model_validate_json(queued[-1]["payload"]) if queued else None

    def get_many(self, ids: list[str]) -> list[Episode]:
        if not ids:
            return []
        rows = self._scalar_rows(f"id IN ({', '.join(_sql_str(i) for i in ids)})")
        by_id = {r["id"]: r for r in rows}
        return [self._to_episode(by_id[i]) for i in ids if i in by_id]

    def count(self) -> int:
        return int(self._table.count_rows())

    def all(self) -> list[Episode]:
        """Every episode, oldest tick first. For small stores (tests, DELTA over a few thousand rows)."""
        return sorted((self._to_episode(r) for r in self._scalar_rows()), key=lambda e: (e.tick, e.id))

    def unconsolidated(self, limit: int | None = None) -> list[Episode]:
        """Episodes the delta cycle's distillation has not processed yet, oldest tick first."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        eps = sorted((self._to_episode(r) for r in self._scalar_rows("consolidated = false")),
                     key=lambda e: (e.tick, e.id))
        return eps if limit is None else eps[:limit]

    def top_utility(self, n: int) -> list[Episode]:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        eps = sorted(self.all(), key=lambda e: (-e.utility, -e.tick, e.id))
        return eps[:n]

    def search(self, text: str, k: int = 5, min_score: float = 0.0) -> list[tuple[Episode, float]]:
        """Nearest episodes by cosine similarity of their summaries, best first.

        Read-only: call `mark_accessed` for the hits the decision actually uses.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not text or not text.strip():
            raise ValueError("search text must be non-empty")
        if self.count() == 0:
            return []
        self._assert_same_space("search episodes")
        query = self.embedder.embed_query([text])[0]
        rows = (
            self._table.search(query, vector_column_name="vector")
            .distance_type("cosine")
            .select([*_SCALAR_FIELDS, "_distance"])
            .limit(k)
            .to_list()
        )
        out = []
        for row in rows:
            # cosine distance = 1 − cosine similarity; clamp float32 rounding (1.0000001)
            score = min(1.0, max(-1.0, 1.0 - float(row["_distance"])))
            if score >= min_score:
                out.append((self._to_episode(row), score))
        return out

    # ---- decay ---------------------------------------------------------------------------
    def apply_decay(
        self,
        now_tick: int,
        tick_seconds: float = DEFAULT_TICK_SECONDS,
        prune_floor: float = PRUNE_FLOOR,
    ) -> DecayReport:
        """Recompute retention of every episode as of `now_tick`.

        `decayed` counts rows whose retention went down; `below_prune_floor` counts non-structural
        episodes whose effective confidence is under the Curator's 0.1 prune threshold.
        """
        report = DecayReport(now_tick=now_tick)
        data = self._table.to_arrow()
        report.scanned = data.num_rows
        if not data.num_rows:
            return report
        cols = {name: data.column(name).to_pylist() for name in
                ("last_accessed_tick", "decay_class", "strength", "quality", "dream_validated", "retention", "confidence")}
        new_retention: list[float] = []
        before_sum = after_sum = 0.0
        changed: list[int] = []
        for i in range(data.num_rows):
            r = retention_at_tick(
                now_tick,
                cols["last_accessed_tick"][i],
                kind=EntryKind.EPISODE,
                decay_class=DecayClass(cols["decay_class"][i]),
                strength=cols["strength"][i],
                quality=cols["quality"][i],
                tick_seconds=tick_seconds,
                dream_validated=bool(cols["dream_validated"][i]),
            )
            old = cols["retention"][i]
            conf = cols["confidence"][i]
            before_sum += effective_confidence(conf, old)
            after_sum += effective_confidence(conf, r)
            if r < old - 1e-12:
                report.decayed += 1
            if abs(r - old) > 1e-12:
                changed.append(i)
            if cols["decay_class"][i] != DecayClass.STRUCTURAL.value and effective_confidence(conf, r) < prune_floor:
                report.below_prune_floor += 1
            new_retention.append(r)
        report.avg_confidence_before = before_sum / data.num_rows
        report.avg_confidence_after = after_sum / data.num_rows
        if changed:
            idx = data.schema.get_field_index("retention")
            updated = data.set_column(idx, data.schema.field(idx), pa.array(new_retention, pa.float64()))
            self._merge(updated.take(pa.array(changed)))
        return report

    # ---- housekeeping ---------------------------------------------------------------------
    def upkeep(self) -> None:
        """Compact the small fragments each write leaves, fold new rows into the indexes and drop the table versions
        `retention` does not keep (also run by the delta cycle's upkeep.maintain)."""
        self._writes = 0
        optimize(self._table, self.retention)
        episode_index.refresh(self)  # a new version of the same rows: retrieval's index is rebuilt here, not in a query
