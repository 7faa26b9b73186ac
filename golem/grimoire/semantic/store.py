"""The Grimoire's semantic store: GrimoireEntry rows in SQLite (WAL) with a LanceDB mirror for retrieval.

SQLite is the source of truth (every field, FTS5, quarantine, cold storage, the causal and knowledge graphs in one
file); the LanceDB table `semantic` holds (id, content, embedding identity, vector) only. A different model rebuilds
the mirror from scratch in one commit (`reembed_all`); while the grimoire is paused entries still reach SQLite and
their mirror rows wait in the queue. Times are ticks (`valid_until` NULL = still active).
See docs/design/grimoire.md#embeddings.
"""

from __future__ import annotations

import json
import math
import sqlite3
import uuid
from contextlib import closing
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import AliasChoices, BaseModel, Field, field_validator

from golem.grimoire.store.lance import DEFAULT_RETENTION, VersionRetention, optimize
from golem.grimoire.decay import (
    DREAM_STRENGTH_INCREMENT,
    LIVE_STRENGTH_INCREMENT,
    PRUNE_FLOOR,
    DecayClass,
    EntryKind,
    effective_confidence,
    retention_at_tick,
)
from golem.grimoire.store.embeddings import Embedder, EmbeddingIdentity, embed_batched, identity_of
from golem.grimoire.store.mirror import VectorTable, check_on_model_switch, identity_metadata, vector_fields
from golem.grimoire.store.guard import WriteGuard
from golem.grimoire.store.indexes import ensure_fts, has_fts
from golem.grimoire.regimes import normalise_regime
from golem.grimoire.semantic.migrations import migrate
from golem.storage import connect, immediate_tx

SEMANTIC_TABLE = "semantic"
PRUNE_CONSECUTIVE_CYCLES = 3  # below 0.1 for 3+ consecutive Curator cycles → cold storage
FTS_INDEX = "content_idx"
QUARANTINE_STATUSES = ("pending", "released", "dropped")


class EntryType(str, Enum):
    """grimoire `GrimoireEntryType` (five canonical types + DreamJournal)."""

    INSIGHT = "insight"
    HEURISTIC = "heuristic"
    WARNING = "warning"
    CAUSAL_LINK = "causal_link"
    STRATEGY_FRAGMENT = "strategy_fragment"
    DREAM_JOURNAL = "dream_journal"


class Provenance(str, Enum):
    """grimoire `Provenance`."""

    SELF_LEARNED = "self_learned"
    CLADE = "clade"
    PREDECESSOR = "predecessor"
    STYX_QUERY = "styx_query"
    LETHE = "lethe"
    MARKETPLACE = "marketplace"
    REPLICANT = "replicant"
    DEATH_REFLECTION = "death_reflection"
    DREAM = "dream"


# Which Ebbinghaus row of decay.py an entry type follows.
ENTRY_KIND: dict[EntryType, EntryKind] = {
    EntryType.INSIGHT: EntryKind.INSIGHT,
    EntryType.HEURISTIC: EntryKind.HEURISTIC,
    EntryType.WARNING: EntryKind.WARNING,
    EntryType.CAUSAL_LINK: EntryKind.INSIGHT,
    EntryType.STRATEGY_FRAGMENT: EntryKind.INSIGHT,
    EntryType.DREAM_JOURNAL: EntryKind.INSIGHT,
}


class EntrySource(BaseModel):
    golem_id: str
    generation_number: int | None = None
    owner_address: str | None = None


class EmotionalTag(BaseModel):
    primary: str = "neutral"  # Plutchik emotion name
    pad: tuple[float, float, float] = (0.0, 0.0, 0.0)  # pleasure, arousal, dominance in [-1, 1]
    phase: str | None = None
    arousal: float = Field(default=0.0, ge=0.0, le=1.0)

    @field_validator("pad")
    @classmethod
    def _pad_range(cls, v: tuple[float, float, float]) -> tuple[float, float, float]:
        if any(not (-1.0 <= x <= 1.0) or not math.isfinite(x) for x in v):
            raise ValueError(f"pad components must be finite and in [-1, 1], got {v}")
        return v


def new_entry_id() -> str:
    # UUIDv7 is not in Python 3.11's uuid; a time-ordered uuid1 keeps ids in chronological order.
    return str(uuid.uuid1())


class GrimoireEntry(BaseModel):
    """One semantic entry with its lifecycle fields."""

    id: str = Field(default_factory=new_entry_id)
    category: EntryType
    content: str
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    quality_score: float = Field(default=0.5, ge=0.0, le=1.0)
    validated_count: int = Field(default=0, ge=0)
    contradicted_count: int = Field(default=0, ge=0)
    decay_class: DecayClass = DecayClass.TACTICAL
    market_regime: str | None = None
    regime_tag: str | None = None  # the regime cell of the tick that wrote it (RegimeTag.cell); None: not a tick's
    # Valid time in ticks (bi-temporal): in force from valid_from until valid_until
    # (exclusive; None = still in force). Record time is created_tick. Imports may say valid_from_tick/valid_until_tick.
    valid_from: int = Field(default=0, ge=0, validation_alias=AliasChoices("valid_from", "valid_from_tick"))
    valid_until: int | None = Field(default=None, validation_alias=AliasChoices("valid_until", "valid_until_tick"))
    parent_episode_ids: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    provenance: Provenance = Provenance.SELF_LEARNED
    source: EntrySource
    emotional_tag: EmotionalTag | None = None
    created_tick: int = Field(default=0, ge=0)
    last_accessed_at: int | None = None  # tick; defaults to created_tick
    strength: float = Field(default=1.0, ge=1.0)
    consecutive_low_confidence: int = Field(default=0, ge=0)
    dream_validated: bool = False
    retention: float = Field(default=1.0, ge=0.0, le=1.0)
    access_count: int = Field(default=0, ge=0)

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("content must be non-empty")
        return v.strip()

    @field_validator("market_regime", mode="before")
    @classmethod
    def _regime(cls, v: Any) -> str | None:
        return normalise_regime(v)  # the detector's vocabulary; foreign labels mapped or refused

    def model_post_init(self, __context: Any) -> None:
        if self.last_accessed_at is None:
            self.last_accessed_at = self.created_tick

    @property
    def is_bloodstain(self) -> bool:
        return self.provenance == Provenance.DEATH_REFLECTION

    @property
    def active(self) -> bool:
        return self.valid_until is None

    def effective_confidence(self) -> float:
        return effective_confidence(self.confidence, self.retention)


_JSON_COLS = ("parent_episode_ids", "tags", "source", "emotional_tag")
_COLUMNS = [name for name in GrimoireEntry.model_fields]


def _entry_to_row(e: GrimoireEntry) -> dict[str, Any]:
    d = e.model_dump(mode="json")
    for c in _JSON_COLS:
        d[c] = json.dumps(d[c]) if d[c] is not None else None
    d["dream_validated"] = int(e.dream_validated)
    return d


def _row_to_entry(row: sqlite3.Row) -> GrimoireEntry:
    d = {k: row[k] for k in row.keys() if k in GrimoireEntry.model_fields}
    for c in _JSON_COLS:
        d[c] = json.loads(d[c]) if d[c] is not None else None
    d["dream_validated"] = bool(d["dream_validated"])
    return GrimoireEntry.model_validate(d)


def _fts_query(text: str) -> str:
    """An FTS5 MATCH expression from free text: each word quoted, OR-ed (bad input never raises)."""
    words = [w for w in "".join(c if c.isalnum() else " " for c in text.lower()).split() if len(w) > 1]
    return " OR ".join(f'"{w}"' for w in words[:32])


MIRROR_BATCH = 1024  # entries embedded per batch when the mirror is rebuilt


def mirror_schema(ident: EmbeddingIdentity) -> pa.Schema:
    """The LanceDB mirror: id, content, the embedding identity of the row, the vector."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("content", pa.string(), nullable=False),
            *vector_fields(ident),
        ],
        metadata=identity_metadata(ident),
    )


class SemanticStore(VectorTable):
    """GrimoireEntry store: SQLite at `db_path`, LanceDB mirror at `lance_path`.

    `guard` and `on_model_switch` as for EpisodeStore (episodes/store.py): the write pause of the grimoire folder
    holding `lance_path`, and "reembed" | "error" | "ignore" when the mirror was embedded with another model.
    `retention`: which mirror versions cleanup keeps, and after how many mirror writes it runs (store/lance.py).
    """

    def __init__(self, db_path: Path, lance_path: Path, embedder: Embedder, *, guard: WriteGuard | None = None,
                 on_model_switch: str = "reembed", retention: VersionRetention = DEFAULT_RETENTION) -> None:
        check_on_model_switch(on_model_switch)
        self.db_path = Path(db_path)
        self.lance_path = Path(lance_path)
        self.embedder = embedder
        self.identity = identity_of(embedder)
        self.guard = guard if guard is not None else WriteGuard(self.lance_path.parent)
        self.retention = retention
        self._where = f"semantic mirror at {self.lance_path}"
        migrate(self.db_path)
        self.lance_path.mkdir(parents=True, exist_ok=True)
        self._schema = mirror_schema(self.identity)
        self._open_table(self.lance_path, SEMANTIC_TABLE, self._schema)
        # entries re-embedded on open because the model changed (a model switch re-embeds everything)
        self.reembedded = self._settle_model_switch(on_model_switch, self.reembed_all)

    def identity_mismatch(self) -> str | None:
        """Why the mirror's vectors cannot be compared with this store's embedder (None: they can)."""
        if [f.name for f in self.table.schema] != [f.name for f in self._schema]:
            return "the mirror was written before vectors carried their model identity"
        return super().identity_mismatch()

    # ---- SQLite plumbing ---------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        return connect(self.db_path, rows=True)

    def _upsert_rows(self, db: sqlite3.Connection, entries: list[GrimoireEntry]) -> None:
        cols = ", ".join(_COLUMNS)
        marks = ", ".join(f":{c}" for c in _COLUMNS)
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "id")
        db.executemany(
            f"INSERT INTO grimoire_entries ({cols}) VALUES ({marks}) ON CONFLICT(id) DO UPDATE SET {updates}",
            [_entry_to_row(e) for e in entries],
        )

    def _mirror_table(self, entries: list[GrimoireEntry], vectors: np.ndarray) -> pa.Table:
        n, ident = len(entries), self.identity
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
        return pa.table(
            {
                "id": pa.array([e.id for e in entries], pa.string()),
                "content": pa.array([e.content for e in entries], pa.string()),
                "embedding_model": pa.array([ident.model] * n, pa.string()),
                "embedding_version": pa.array([ident.version] * n, pa.string()),
                "embedding_dim": pa.array([ident.dim] * n, pa.int64()),
                "vector": pa.FixedSizeListArray.from_arrays(flat, ident.dim),
            },
            schema=self._schema,
        )

    def _mirror(self, entries: list[GrimoireEntry], vectors: np.ndarray | None = None) -> None:
        """Write the entries' mirror rows — or, while the grimoire is paused, queue them (store/guard.py)."""
        if not entries:
            return
        if self.guard.divert("semantic", [(e.id, e.content) for e in entries]):
            return
        self._write_mirror(entries, vectors)

    def _write_mirror(self, entries: list[GrimoireEntry], vectors: np.ndarray | None = None) -> None:
        if not entries:
            return
        self._assert_same_space("write the mirror")
        if vectors is None:
            vectors = self.embedder.embed([e.content for e in entries])
        self.table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(
            self._mirror_table(entries, vectors))
        self._wrote()

    def _delete_mirror(self, ids: list[str]) -> None:
        if ids:
            self.table.delete("id IN (" + ", ".join("'" + i.replace("'", "''") + "'" for i in ids) + ")")
            self._wrote()

    def __repr__(self) -> str:
        return f"semantic mirror at {self.lance_path}"

    def upkeep(self) -> None:
        """Compact the mirror, fold new rows into its FTS index, drop the versions `retention` does not keep (also run
        by the delta cycle's upkeep.maintain)."""
        self._writes = 0
        optimize(self.table, self.retention)

    # ---- writes --------------------------------------------------------------------------------
    def put_many(self, entries: list[GrimoireEntry], vectors: np.ndarray | None = None) -> None:
        """Insert or replace entries (idempotent by id). Bypasses the admission gate: use admission.admit."""
        if not entries:
            return
        ids = [e.id for e in entries]
        if len(set(ids)) != len(ids):
            raise ValueError("put_many got the same entry id twice in one batch")
        with immediate_tx(self.db_path) as db:
            existing = {r[0]: r[1] for r in db.execute(
                f"SELECT id, content FROM grimoire_entries WHERE id IN ({','.join('?' * len(ids))})", ids)}
            self._upsert_rows(db, entries)
        changed = [i for i, e in enumerate(entries) if existing.get(e.id) != e.content]
        if changed:
            vecs = None if vectors is None else np.asarray(vectors)[changed]
            self._mirror([entries[i] for i in changed], vecs)

    def put(self, entry: GrimoireEntry) -> GrimoireEntry:
        self.put_many([entry])
        return entry

    def update(self, entry: GrimoireEntry) -> None:
        """Change lifecycle fields of an existing entry (content changes re-embed)."""
        if self.get(entry.id) is None:
            raise KeyError(f"no grimoire entry {entry.id!r} in {self.db_path}")
        self.put_many([entry])

    def supersede(self, entry_id: str, tick: int) -> None:
        """A newer fact replaced this one: it stays, with valid_until set (never deleted)."""
        with immediate_tx(self.db_path) as db:
            db.execute("UPDATE grimoire_entries SET valid_until = ? WHERE id = ? AND valid_until IS NULL",
                       (int(tick), entry_id))

    def quarantine(self, entry: GrimoireEntry, reason: str, conflicts_with: list[str], tick: int) -> None:
        """Hold a candidate back (hallucination firewall). Quarantining the same candidate id again (a release
        attempt that found it still contradicted) refreshes its entry and conflicts and keeps its review count."""
        with immediate_tx(self.db_path) as db:
            db.execute(
                "INSERT INTO quarantined_entries (id, entry, reason, conflicts_with, quarantined_tick) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET entry = excluded.entry, "
                "reason = excluded.reason, conflicts_with = excluded.conflicts_with, status = 'pending', "
                "reviewed = 0, resolved_tick = NULL, resolution = NULL, admission_action = NULL, entry_id = NULL",
                (entry.id, entry.model_dump_json(), reason, json.dumps(conflicts_with), int(tick)),
            )

    @staticmethod
    def _quarantine_row(r: sqlite3.Row) -> dict[str, Any]:
        return {"id": r["id"], "entry": GrimoireEntry.model_validate_json(r["entry"]), "reason": r["reason"],
                "conflicts_with": json.loads(r["conflicts_with"]), "tick": r["quarantined_tick"],
                "reviewed": bool(r["reviewed"]), "status": r["status"], "review_cycles": r["review_cycles"],
                "last_reviewed_tick": r["last_reviewed_tick"], "resolved_tick": r["resolved_tick"],
                "resolution": r["resolution"], "admission_action": r["admission_action"], "entry_id": r["entry_id"]}

    def quarantined(self, status: str | None = None) -> list[dict[str, Any]]:
        """Quarantine rows, oldest first: all of them, or those with `status` (pending | released | dropped)."""
        if status is not None and status not in QUARANTINE_STATUSES:
            raise ValueError(f"quarantine status must be one of {', '.join(QUARANTINE_STATUSES)}, got {status!r}")
        sql = "SELECT * FROM quarantined_entries" + (" WHERE status = ?" if status else "")
        with closing(self._conn()) as db:
            rows = db.execute(sql + " ORDER BY quarantined_tick, id", (status,) if status else ()).fetchall()
        return [self._quarantine_row(r) for r in rows]

    def quarantined_one(self, quarantine_id: str) -> dict[str, Any] | None:
        with closing(self._conn()) as db:
            r = db.execute("SELECT * FROM quarantined_entries WHERE id = ?", (quarantine_id,)).fetchone()
        return self._quarantine_row(r) if r else None

    def add_quarantine_evidence(self, quarantine_id: str, parent_episode_ids: list[str], conflicts_with: list[str],
                                tick: int) -> int:
        """A near-identical candidate was quarantined again: its episodes join the pending row's evidence
        (so a contradiction that keeps recurring can outweigh the entry it contradicts at the next review).
        Returns how many episode ids were new."""
        with immediate_tx(self.db_path) as db:
            r = db.execute("SELECT entry, conflicts_with FROM quarantined_entries WHERE id = ? AND status = 'pending'",
                           (quarantine_id,)).fetchone()
            if r is None:
                raise KeyError(f"no pending quarantined entry {quarantine_id!r} in {self.db_path}")
            entry = GrimoireEntry.model_validate_json(r[0])
            new = [p for p in dict.fromkeys(parent_episode_ids) if p not in entry.parent_episode_ids]
            conflicts = list(dict.fromkeys([*json.loads(r[1]), *conflicts_with]))
            entry = entry.model_copy(update={"parent_episode_ids": entry.parent_episode_ids + new})
            db.execute("UPDATE quarantined_entries SET entry = ?, conflicts_with = ? WHERE id = ?",
                       (entry.model_dump_json(), json.dumps(conflicts), quarantine_id))
        return len(new)

    def note_quarantine_review(self, quarantine_id: str, tick: int) -> int:
        """One Curator review left the row pending: count it (once per tick, so a retried cycle counts once)."""
        with immediate_tx(self.db_path) as db:
            db.execute("UPDATE quarantined_entries SET review_cycles = review_cycles + 1, last_reviewed_tick = ? "
                       "WHERE id = ? AND status = 'pending' AND (last_reviewed_tick IS NULL OR last_reviewed_tick < ?)",
                       (int(tick), quarantine_id, int(tick)))
            r = db.execute("SELECT review_cycles FROM quarantined_entries WHERE id = ?", (quarantine_id,)).fetchone()
        if r is None:
            raise KeyError(f"no quarantined entry {quarantine_id!r} in {self.db_path}")
        return int(r[0])

    def resolve_quarantine(self, quarantine_id: str, status: str, tick: int, resolution: str, *,
                           admission_action: str | None = None, entry_id: str | None = None) -> None:
        """Close a pending row as released or dropped. The row is kept (audit), never deleted."""
        if status not in ("released", "dropped"):
            raise ValueError(f"a quarantine row is resolved as released or dropped, not {status!r}")
        with immediate_tx(self.db_path) as db:
            cur = db.execute(
                "UPDATE quarantined_entries SET status = ?, reviewed = 1, resolved_tick = ?, resolution = ?, "
                "admission_action = ?, entry_id = ?, last_reviewed_tick = ? WHERE id = ? AND status = 'pending'",
                (status, int(tick), resolution, admission_action, entry_id, int(tick), quarantine_id))
            if cur.rowcount == 0:
                row = db.execute("SELECT status FROM quarantined_entries WHERE id = ?", (quarantine_id,)).fetchone()
                if row is None:
                    raise KeyError(f"no quarantined entry {quarantine_id!r} in {self.db_path}")
                raise ValueError(f"quarantined entry {quarantine_id!r} is already {row[0]}; only pending ones resolve")

    def log_admission(self, tick: int, category: str, action: str, score: float, entry_id: str | None) -> None:
        with immediate_tx(self.db_path) as db:
            db.execute("INSERT INTO admission_log (tick, category, action, score, entry_id) VALUES (?, ?, ?, ?, ?)",
                       (int(tick), category, action, float(score), entry_id))

    def log_retrieval(self, tick: int, retrieved: bool, hits: int, abstained: bool) -> None:
        """One row per tick (a retried retrieve activity overwrites its own row)."""
        with immediate_tx(self.db_path) as db:
            db.execute("INSERT OR REPLACE INTO retrieval_log VALUES (?, ?, ?, ?)",
                       (int(tick), int(retrieved), int(hits), int(abstained)))

    # ---- reads ---------------------------------------------------------------------------------
    def get(self, entry_id: str) -> GrimoireEntry | None:
        with closing(self._conn()) as db:
            row = db.execute("SELECT * FROM grimoire_entries WHERE id = ?", (entry_id,)).fetchone()
        return _row_to_entry(row) if row else None

    def get_many(self, ids: list[str]) -> dict[str, GrimoireEntry]:
        if not ids:
            return {}
        out: dict[str, GrimoireEntry] = {}
        with closing(self._conn()) as db:
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                for row in db.execute(
                        f"SELECT * FROM grimoire_entries WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                    out[row["id"]] = _row_to_entry(row)
        return out

    def all(self, *, include_inactive: bool = False) -> list[GrimoireEntry]:
        sql = "SELECT * FROM grimoire_entries"
        if not include_inactive:
            sql += " WHERE valid_until IS NULL"
        with closing(self._conn()) as db:
            rows = db.execute(sql + " ORDER BY created_tick, id").fetchall()
        return [_row_to_entry(r) for r in rows]

    def count(self, *, include_inactive: bool = False) -> int:
        sql = "SELECT COUNT(*) FROM grimoire_entries" + ("" if include_inactive else " WHERE valid_until IS NULL")
        with closing(self._conn()) as db:
            return int(db.execute(sql).fetchone()[0])

    def mean_quality(self) -> float | None:
        """Mean quality score of the entries in force (a quality metric; None when there are none)."""
        with closing(self._conn()) as db:
            row = db.execute("SELECT AVG(quality_score) FROM grimoire_entries WHERE valid_until IS NULL").fetchone()
        return float(row[0]) if row and row[0] is not None else None

    def change_count(self) -> int:
        """Bumped by every insert, delete, or change of what the retrieval index holds (content, tags, category,
        valid and record times); not by access bookkeeping."""
        with closing(self._conn()) as db:
            return int(db.execute("SELECT n FROM entry_changes").fetchone()[0])

    _SCORING_COLS = ("id", "category", "content", "confidence", "quality_score", "validated_count",
                     "contradicted_count", "decay_class", "market_regime", "provenance", "emotional_tag",
                     "created_tick", "last_accessed_at", "strength", "dream_validated")

    def scoring_rows(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """What retrieval scores an entry with, for `ids`, without building GrimoireEntry models (the per-query
        path): the columns of _SCORING_COLS, emotional_tag decoded (tags and parents come from the entry index)."""
        if not ids:
            return {}
        with closing(self._conn()) as db:
            rows = db.execute(f"SELECT {', '.join(self._SCORING_COLS)} FROM grimoire_entries "
                              f"WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall()
        out = {}
        for r in rows:
            d = dict(zip(self._SCORING_COLS, r))
            d["emotional_tag"] = json.loads(d["emotional_tag"]) if d["emotional_tag"] else None
            d["dream_validated"] = bool(d["dream_validated"])
            out[d["id"]] = d
        return out

    def retention_of_row(self, d: dict[str, Any], now_tick: int, tick_seconds: float) -> float:
        """retention_now for a scoring_rows() row."""
        last = d["last_accessed_at"] if d["last_accessed_at"] is not None else d["created_tick"]
        return retention_at_tick(
            now_tick, last, kind=ENTRY_KIND[EntryType(d["category"])], decay_class=d["decay_class"],
            strength=d["strength"], quality=d["quality_score"], tick_seconds=tick_seconds,
            dream_validated=d["dream_validated"], bloodstain=d["provenance"] == Provenance.DEATH_REFLECTION.value)

    def fts_search(self, text: str, k: int = 20) -> list[tuple[str, float]]:
        """SQLite FTS5 BM25 over content: (entry id, bm25) best first (bm25 is lower = better in SQLite)."""
        q = _fts_query(text)
        if not q:
            return []
        with closing(self._conn()) as db:
            rows = db.execute(
                "SELECT e.id, bm25(grimoire_fts) AS s FROM grimoire_fts JOIN grimoire_entries e "
                "ON e.rowid = grimoire_fts.rowid WHERE grimoire_fts MATCH ? ORDER BY s LIMIT ?",
                (q, int(k)),
            ).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def nearest(self, vector: np.ndarray, k: int = 5) -> list[tuple[GrimoireEntry, float]]:
        """Active entries nearest to `vector` by cosine, best first (the admission gate's neighbours)."""
        if self.table.count_rows() == 0:
            return []
        rows = (self.table.search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
                .distance_type("cosine").select(["id", "_distance"]).limit(k * 3).to_list())
        entries = self.get_many([r["id"] for r in rows])
        out = []
        for r in rows:
            e = entries.get(r["id"])
            if e is not None and e.active:
                out.append((e, min(1.0, max(-1.0, 1.0 - float(r["_distance"])))))
        return out[:k]

    # ---- lifecycle --------------------------------------------------------------------
    def mark_accessed(self, ids: list[str], tick: int) -> int:
        """A DECIDING retrieval used these entries: restart their decay clock; strength unchanged."""
        if not ids:
            return 0
        with immediate_tx(self.db_path) as db:
            cur = db.execute(
                f"UPDATE grimoire_entries SET last_accessed_at = ?, access_count = access_count + 1, retention = 1.0 "
                f"WHERE id IN ({','.join('?' * len(ids))})", [int(tick), *ids])
            return cur.rowcount

    def reinforce(self, ids: list[str], tick: int, positive_outcome: bool) -> int:
        """Retrieved AND positive outcome → strength +1; a retrieval alone never strengthens."""
        if not positive_outcome or not ids:
            return 0
        with immediate_tx(self.db_path) as db:
            cur = db.execute(
                f"UPDATE grimoire_entries SET strength = strength + ?, validated_count = validated_count + 1, "
                f"last_accessed_at = ?, retention = 1.0 WHERE id IN ({','.join('?' * len(ids))})",
                [LIVE_STRENGTH_INCREMENT, int(tick), *ids])
            return cur.rowcount

    def weaken(self, ids: list[str], tick: int) -> int:
        """Retrieved AND negative outcome → contradicted, confidence -0.15 (the
        asymmetric downvote), never below the 0.05 floor."""
        if not ids:
            return 0
        with immediate_tx(self.db_path) as db:
            cur = db.execute(
                f"UPDATE grimoire_entries SET confidence = MAX(0.05, confidence - 0.15), "
                f"contradicted_count = contradicted_count + 1 WHERE id IN ({','.join('?' * len(ids))})", list(ids))
            return cur.rowcount

    def dream_validate(self, ids: list[str], tick: int) -> int:
        """NREM replay found a validated pattern in these entries → strength +0.5."""
        if not ids:
            return 0
        with immediate_tx(self.db_path) as db:
            cur = db.execute(
                f"UPDATE grimoire_entries SET strength = strength + ?, dream_validated = 1 "
                f"WHERE id IN ({','.join('?' * len(ids))})", [DREAM_STRENGTH_INCREMENT, *ids])
            return cur.rowcount

    def retention_now(self, e: GrimoireEntry, now_tick: int, tick_seconds: float) -> float:
        return retention_at_tick(
            now_tick, e.last_accessed_at if e.last_accessed_at is not None else e.created_tick,
            kind=ENTRY_KIND[e.category], decay_class=e.decay_class, strength=e.strength,
            quality=e.quality_score, tick_seconds=tick_seconds, dream_validated=e.dream_validated,
            bloodstain=e.is_bloodstain)

    def curator_decay(self, now_tick: int, tick_seconds: float = 60.0) -> dict[str, int]:
        """One Curator cycle: recompute retention; count cycles under 0.1; archive after 3.

        Structural entries are never pruned. Archived entries move to `cold_entries` (kept, not deleted)
        and leave the retrieval mirror. Not idempotent per tick by design: each call is one cycle.
        """
        entries = self.all()
        archived: list[GrimoireEntry] = []
        updated: list[GrimoireEntry] = []
        for e in entries:
            r = self.retention_now(e, now_tick, tick_seconds)
            low = effective_confidence(e.confidence, r) < PRUNE_FLOOR and e.decay_class != DecayClass.STRUCTURAL
            n = e.consecutive_low_confidence + 1 if low else 0
            fresh = e.model_copy(update={"retention": r, "consecutive_low_confidence": n})
            (archived if n >= PRUNE_CONSECUTIVE_CYCLES else updated).append(fresh)
        with immediate_tx(self.db_path) as db:
            db.executemany("UPDATE grimoire_entries SET retention = ?, consecutive_low_confidence = ? WHERE id = ?",
                           [(e.retention, e.consecutive_low_confidence, e.id) for e in updated])
            for e in archived:
                db.execute("INSERT OR REPLACE INTO cold_entries VALUES (?, ?, ?)", (e.id, e.model_dump_json(), now_tick))
                db.execute("DELETE FROM grimoire_entries WHERE id = ?", (e.id,))
        self._delete_mirror([e.id for e in archived])
        return {"scanned": len(entries), "archived": len(archived),
                "low": sum(1 for e in updated if e.consecutive_low_confidence)}

    def cold_count(self) -> int:
        with closing(self._conn()) as db:
            return int(db.execute("SELECT COUNT(*) FROM cold_entries").fetchone()[0])

    # ---- maintenance ---------------------------------------------------------------------------
    def reembed_all(self, *, hold: bool = True) -> int:
        """Rebuild the LanceDB mirror from SQLite with the current embedder (never partial).

        The whole mirror is embedded first and written in one commit (`mode="overwrite"`), so a crash leaves
        the old mirror or the new one. While it runs the mirror is paused (`reembed-semantic`): other
        processes still write SQLite, their mirror rows queue; entries that changed in SQLite meanwhile are
        reconciled, the queue is flushed, then the pause is lifted. Returns the number of entries embedded."""
        with self.guard.holding("reembed-semantic", {"model": self.identity.as_dict()}, self.flush_pending,
                                enabled=hold):
            had_fts = has_fts(self.table, "content")
            entries = self.all(include_inactive=True)
            vectors = embed_batched(self.embedder, [e.content for e in entries], MIRROR_BATCH)
            self.table = self._db.create_table(SEMANTIC_TABLE, data=self._mirror_table(entries, vectors),
                                               mode="overwrite")
            # SQLite moved on while we embedded (another process): mirror what changed, drop what left.
            built = {e.id: e.content for e in entries}
            now = self.all(include_inactive=True)
            self._write_mirror([e for e in now if built.get(e.id) != e.content])
            self._delete_mirror(sorted(set(built) - {e.id for e in now}))
            if had_fts and self.table.count_rows():
                ensure_fts(self.table, "content")  # an overwrite drops the table's indexes
        return len(entries)

    def flush_pending(self) -> int:
        """Write the mirror rows queued while paused (from SQLite's current content; entries archived since
        leave the mirror) and drop them from the queue. Returns how many queued rows were handled."""
        rows = self.guard.pending("semantic")
        if not rows:
            return 0
        for i in range(0, len(rows), MIRROR_BATCH):
            chunk = rows[i:i + MIRROR_BATCH]
            entries = self.get_many([r["id"] for r in chunk])
            self._write_mirror(list(entries.values()))
            self._delete_mirror([r["id"] for r in chunk if r["id"] not in entries])
            self.guard.ack([r["seq"] for r in chunk])
        return len(rows)

