"""Episodic memory: one Episode per tick in a LanceDB table (grimoire "Episodes", "Three-Store Split").

Writes are keyed by episode id (`<golem_id>:tick:<n>`) and go through `merge_insert`, so a retried
activity overwrites its own row instead of adding a second one (ARCHITECTURE "Side effects that
must happen once"). Lifecycle fields (retention, strength, access) live beside the vector and
follow decay.py.

Every row carries the identity of the model that embedded it (`embedding_model`, `embedding_version`,
`embedding_dim`; revisions Rev. 8 "Every vector carries metadata"), and so does the table (schema
metadata). A different configured model re-embeds the whole table and writes it back in one commit
(`reembed`), never part of it (Rev. 8 "Never partially re-embed"). While the grimoire is paused
(guard.py, Rev. 8 "Critical threshold → pause writes") rows that would need a new vector are queued
instead of written.

A table written by older code (without the Episode fields added since) is migrated when opened: every
row is kept, the new fields get the defaults `Episode` derives from the old ones, and the table is
rewritten in one commit. Its vectors' version is unknown, so it is then re-embedded like any switch.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lancedb
import numpy as np
import pyarrow as pa
from pydantic import BaseModel, Field, field_validator, model_validator

from golem.grimoire.lance import lance_session
from golem.grimoire.decay import (
    PRUNE_FLOOR,
    DecayClass,
    EntryKind,
    effective_confidence,
    retention_at_tick,
)
from golem.grimoire.embeddings import (
    Embedder,
    EmbeddingIdentity,
    embed_batched,
    embedding_stats,
    identity_metadata,
    identity_mismatch,
    identity_of,
    row_identities,
    table_identity,
    vector_fields,
)
from golem.grimoire import episode_index
from golem.grimoire.guard import WriteGuard
from golem.grimoire.regimes import normalise_regime
from golem.models.enums import ActionStatus, MarketRegime, ProbeSeverity, Tier

if TYPE_CHECKING:
    from golem.models.record import DecisionCycleRecord

TABLE = "episodes"
DEFAULT_TICK_SECONDS = 60.0  # config clock.theta_base_seconds default
REEMBED_BATCH = 2048  # rows embedded per batch during a full re-embed


def episode_id(golem_id: str, tick: int) -> str:
    return f"{golem_id}:tick:{tick}"


class EpisodeType(str, Enum):
    """grimoire "Episodes", Episode types table: the three this runtime produces (clade_alert,
    replicant_report and coordination_intent need peers it does not have)."""

    OBSERVATION = "observation"  # market snapshot, every tick
    ACTION = "action"  # execution with outcome data
    REGIME_SHIFT = "regime_shift"  # regime change detection


class EpisodeOutcome(str, Enum):
    """grimoire "Episode Struct" `Outcome`: Positive | Negative | Neutral | Descriptive(String) — the
    descriptive text is the episode's summary."""

    POSITIVE = "positive"
    NEGATIVE = "negative"
    NEUTRAL = "neutral"
    DESCRIPTIVE = "descriptive"


class Importance(str, Enum):
    """grimoire "Episode Struct" `ImportanceLevel`; see `importance_of` for the rule."""

    ROUTINE = "routine"
    NOTABLE = "notable"
    CRITICAL = "critical"
    EMERGENCY = "emergency"


NEUTRAL_PNL_USD = 0.01  # ours: |pnl| under a cent is rounding and gas dust, not a result

# PAD octants after Mehrabian (1996), "Pleasure-arousal-dominance: a general framework for describing and
# measuring individual differences in temperament", Current Psychology 14(4): 261–292 — the eight temperament
# types named by the signs of (pleasure, arousal, dominance). A zero component counts as +.
PAD_OCTANTS = {
    (1, 1, 1): "exuberant", (-1, -1, -1): "bored",
    (1, 1, -1): "dependent", (-1, -1, 1): "disdainful",
    (1, -1, 1): "relaxed", (-1, 1, -1): "anxious",
    (1, -1, -1): "docile", (-1, 1, 1): "hostile",
}
PAD_NEUTRAL_RADIUS = 0.1  # ours: an affect vector shorter than this (in the [-1, 1]^3 cube) is "neutral"
EMOTIONAL_TAGS = frozenset([*PAD_OCTANTS.values(), "neutral"])
_OCTANT_SIGNS = {label: signs for signs, label in PAD_OCTANTS.items()}


def tag_pad(tag: str | None) -> tuple[float, float, float] | None:
    """The PAD direction of an emotional tag (the octant's signs; None for "neutral" or no tag), for the mood
    congruence factor of retrieval."""
    signs = _OCTANT_SIGNS.get(tag or "")
    return tuple(float(x) for x in signs) if signs else None


def pad_label(pleasure: float, arousal: float, dominance: float) -> str:
    """The Mehrabian octant of a PAD vector, or "neutral" near the origin."""
    p, a, d = (float(x) for x in (pleasure, arousal, dominance))
    if not all(math.isfinite(x) for x in (p, a, d)):
        raise ValueError(f"PAD components must be finite, got {(p, a, d)}")
    if math.sqrt(p * p + a * a + d * d) < PAD_NEUTRAL_RADIUS:
        return "neutral"
    return PAD_OCTANTS[(1 if p >= 0 else -1, 1 if a >= 0 else -1, 1 if d >= 0 else -1)]


def outcome_of(acted: int, verified: bool | None, pnl: float | None, *, failed: bool = False) -> EpisodeOutcome:
    """No action: descriptive. A failed action or an outcome that did not verify: negative. Otherwise the
    sign of the verified P&L (|pnl| < NEUTRAL_PNL_USD, or no P&L measured: neutral)."""
    if acted <= 0:
        return EpisodeOutcome.DESCRIPTIVE
    if failed or verified is False:
        return EpisodeOutcome.NEGATIVE
    if pnl is None or abs(pnl) < NEUTRAL_PNL_USD:
        return EpisodeOutcome.NEUTRAL
    return EpisodeOutcome.POSITIVE if pnl > 0 else EpisodeOutcome.NEGATIVE


class Episode(BaseModel):
    id: str
    golem_id: str
    tick: int = Field(ge=0)
    created_at: str  # ISO 8601
    regime: MarketRegime
    tier: Tier
    summary: str
    prediction_error: float = Field(default=0.0, ge=0.0)
    actions: int = Field(default=0, ge=0)
    pnl_impact: float | None = None
    outcome_verified: bool | None = None
    utility: float = Field(default=0.0, ge=0.0, le=1.0)  # Mattar–Daw gain × need, see dream.py
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    strength: float = Field(default=1.0, ge=1.0)  # grimoire "Confidence and Decay": starts at 1
    decay_class: DecayClass = DecayClass.TACTICAL
    quality: float = Field(default=0.5, ge=0.0, le=1.0)
    last_accessed_tick: int | None = None  # defaults to the creation tick (grimoire: "lastAccessed: creation time")
    retention: float = Field(default=1.0, ge=0.0, le=1.0)
    access_count: int = Field(default=0, ge=0)
    strategy: str | None = None  # strategy scope for PLAYBOOK sections; None = global
    dream_validated: bool = False  # demurrage class D modifier
    last_replayed_tick: int | None = None  # makes dream strengthening idempotent per dream
    # grimoire "Episode Struct" (summary is the spec's `text`, tick its `tick_id`). None = derive from the
    # fields above (episodes built without a record: older exports and tables, hand-written incidents).
    episode_type: EpisodeType | None = None
    tool: str | None = None  # tool that produced it: "heartbeat" for an observation, else the first action's tool
    outcome: EpisodeOutcome | None = None
    chain: str | None = None  # chain id
    token_pair: str | None = None  # e.g. "WETH/USDC"
    timestamp_ms: int | None = None  # unix ms; default: created_at
    importance: Importance | None = None
    consolidated: bool = False  # true once the delta cycle's distillation (ExpeL) has processed it
    action_tools: list[str] = Field(default_factory=list)  # the spec's `actions`: tools called during the tick
    emotional_tag: str | None = None  # PAD-derived (pad_label); None = not recorded
    gain: float | None = Field(default=None, ge=0.0, le=1.0)  # replay gain (dream.replay_gain); default from pnl/PE

    @field_validator("regime", mode="before")
    @classmethod
    def _regime(cls, v):
        # §S9 vocabulary; foreign labels (bull, calm, crash, ...) mapped or refused by name (issue 15)
        if isinstance(v, MarketRegime):
            return v
        return normalise_regime(v) or MarketRegime.UNKNOWN.value

    @field_validator("id", "golem_id", "summary")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("must be a non-empty string")
        return v

    @field_validator("created_at")
    @classmethod
    def _iso(cls, v: str) -> str:
        try:
            datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError as e:
            raise ValueError(f"created_at must be an ISO 8601 timestamp, got {v!r}") from e
        return v

    @field_validator("prediction_error", "pnl_impact")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError(f"must be finite, got {v}")
        return v

    @field_validator("emotional_tag")
    @classmethod
    def _tag(cls, v: str | None) -> str | None:
        if v is not None and v not in EMOTIONAL_TAGS:
            raise ValueError(f"emotional_tag must be one of {sorted(EMOTIONAL_TAGS)} (pad_label), got {v!r}")
        return v

    @model_validator(mode="after")
    def _defaults(self) -> Episode:
        if self.last_accessed_tick is None:
            self.last_accessed_tick = self.tick
        if self.episode_type is None:
            self.episode_type = EpisodeType.ACTION if self.actions > 0 else EpisodeType.OBSERVATION
        if self.tool is None:
            self.tool = self.action_tools[0] if self.action_tools else ("heartbeat" if self.actions == 0 else "unknown")
        if self.outcome is None:
            self.outcome = outcome_of(self.actions, self.outcome_verified, self.pnl_impact)
        if self.timestamp_ms is None:
            self.timestamp_ms = _timestamp_ms(self.created_at)
        if self.importance is None:  # the part of importance_of these fields can answer
            self.importance = Importance.NOTABLE if self.actions > 0 or self.tier == Tier.T2 else Importance.ROUTINE
        if self.gain is None:
            from golem.grimoire.dream import replay_gain  # dream imports this module

            self.gain = replay_gain(self.pnl_impact, self.prediction_error)
        return self

    @property
    def acted(self) -> bool:
        return self.actions > 0


class DecayReport(BaseModel):
    """grimoire "Events": GrimoireDecay { entries_decayed, avg_confidence_before, avg_confidence_after }."""

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
            *vector_fields(ident),
        ],
        metadata=identity_metadata(ident),
    )


_SCALAR_FIELDS = [name for name in Episode.model_fields]


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


ON_MODEL_SWITCH = ("reembed", "error", "ignore")


def _vectors_of(column: pa.ChunkedArray | pa.Array, dim: int) -> np.ndarray:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return np.asarray(arr.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)


class EpisodeStore:
    """The `episodes` table of a LanceDB database at `path`.

    `guard`: the write pause + pending queue (default: the one of the folder holding `path`, i.e. the
    grimoire directory shared with the semantic store). `on_model_switch`: what to do when the table was
    embedded with another {model, version, dim} than `embedder` — "reembed" (the worker: a full re-embed,
    Rev. 8), "error" (a clear error naming both), or "ignore" (read-only inspection such as stats; searches
    and writes still refuse to mix).
    """

    def __init__(self, path: Path, embedder: Embedder, *, guard: WriteGuard | None = None,
                 on_model_switch: str = "reembed") -> None:
        if on_model_switch not in ON_MODEL_SWITCH:
            raise ValueError(f"on_model_switch must be one of {', '.join(ON_MODEL_SWITCH)}, got {on_model_switch!r}")
        self.path = Path(path)
        self.embedder = embedder
        self.identity = identity_of(embedder)
        self.guard = guard if guard is not None else WriteGuard(self.path.parent)
        self.path.mkdir(parents=True, exist_ok=True)
        # read_consistency_interval=0: every read checks for newer versions, so a reader sees
        # rows another process (the worker) committed after this store was opened.
        self._db = lancedb.connect(str(self.path), read_consistency_interval=timedelta(0),
                                   session=lance_session())
        self._schema = episode_arrow_schema(self.identity)
        try:
            self._table = self._db.open_table(TABLE)
        except ValueError:  # "Table 'episodes' was not found"
            try:
                self._table = self._db.create_table(TABLE, schema=self._schema, exist_ok=True)
            except ValueError:  # another process created it first, with a different schema
                self._table = self._db.open_table(TABLE)
        self.migrated = self._migrate()  # rows carried over from an older schema (0: none needed)
        self.reembedded = 0  # rows re-embedded because the model changed
        mismatch = self.identity_mismatch()
        if mismatch:
            if on_model_switch == "reembed":
                self.reembedded = self.reembed()
            elif on_model_switch == "error":
                raise ValueError(f"episodes table at {self.path}: {mismatch}; mixing embedding models makes "
                                 f"similarity scores meaningless — run `golem grimoire reembed` (a full re-embed with "
                                 f"the configured model) or open it with the embedder that built it")

    @property
    def table(self):
        """The LanceDB `episodes` table (for upkeep, hybrid queries and stats; write through this store)."""
        return self._table

    # ---- embedding identity (Rev. 8) -----------------------------------------------------------
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

    def _assert_same_space(self, what: str) -> None:
        stored = table_identity(self._table.schema)  # re-read: another process may have re-embedded it
        if stored != self.identity:
            raise ValueError(
                f"cannot {what}: the episodes table at {self.path} is embedded with {stored.as_dict()} but this "
                f"process embeds with {self.identity.as_dict()} (rev. 8: never mix models); restart it with the "
                f"embedder in golem.toml, or run `golem grimoire reembed`")

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

    def _read_all(self, table=None) -> tuple[list[Episode], np.ndarray]:
        table = table if table is not None else self._table
        data = table.to_arrow()
        dim = table.schema.field("vector").type.list_size
        rows = data.drop_columns(["vector"]).to_pylist()
        return [self._to_episode(r) for r in rows], _vectors_of(data.column("vector"), dim)

    def _indexes(self) -> tuple[bool, bool]:
        from golem.grimoire.retrieval import vector_index  # retrieval imports this module

        fts = any("summary" in i.columns and i.index_type == "FTS" for i in self._table.list_indices())
        return fts, vector_index(self._table) is not None

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
        from golem.grimoire.retrieval import build_ann_index, ensure_fts

        had_fts, had_ann = indexes
        if had_fts and self._table.count_rows():
            ensure_fts(self._table, "summary")
        if had_ann and self._table.count_rows() >= 256:  # IVF needs rows to train on
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
        commit (Rev. 8: a model switch re-embeds everything, never part of it). While it runs the store is
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
        with their stored vector; the others are queued (guard.py) and written by the next flush."""
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

    def _update(self, ids: list[str], values_sql: dict[str, str], extra_where: str = "", *, py: dict) -> int:
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
        return n

    def mark_accessed(self, ids: list[str], tick: int) -> int:
        """A DECIDING retrieval used these episodes: reset their decay clock (grimoire "Decay Formula").

        Strength is untouched: it only grows on retrieval + positive outcome (`reinforce`).
        Returns the number of rows touched.
        """
        if not ids:
            return 0
        return self._update(ids, {"last_accessed_tick": str(int(tick)), "access_count": "access_count + 1",
                                  "retention": "1.0"}, py={"last_accessed_tick": lambda _: int(tick)})

    def mark_consolidated(self, ids: list[str]) -> int:
        """The delta cycle's distillation (ExpeL) has processed these episodes (grimoire "Episode Struct":
        consolidated). Idempotent; returns how many rows changed from false to true."""
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
        return self._table.count_rows()

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
        """Recompute retention of every episode as of `now_tick` (grimoire "Decay Formula").

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
    def compact(self) -> None:
        """Merge the small Lance fragments each upsert leaves behind (run during DELTA)."""
        self._table.optimize()


EMERGENCY_PROBES = ("kill_switch", "circuit_breaker")  # a HIGH reading of these halts the golem (heartbeat §S9)


def importance_of(record: DecisionCycleRecord) -> Importance:
    """grimoire "Episode Struct" ImportanceLevel, derived deterministically from the record (ours):

    emergency  the kill switch or the circuit breaker probe reads HIGH, or the outcome broke an invariant
               (a safety incident)
    critical   any HIGH anomaly, a reorg removed earlier ticks' blocks, or an action failed
    notable    the golem acted, deliberated at T2, or the regime changed
    routine    everything else
    """
    probes = [*record.observation.probes, *record.probe_results]
    high = {p.probe for p in probes if p.severity == ProbeSeverity.HIGH}
    high |= {a.probe for a in record.anomalies if a.severity == ProbeSeverity.HIGH}
    if high & set(EMERGENCY_PROBES) or (record.outcome is not None and record.outcome.invariant_violations):
        return Importance.EMERGENCY
    if high or record.observation.reorged_ticks or any(a.status == ActionStatus.FAILED for a in record.actions):
        return Importance.CRITICAL
    acted = any(a.status in (ActionStatus.EXECUTED, ActionStatus.FAILED) for a in record.actions)
    if acted or record.tier == Tier.T2 or _regime_shift(record):
        return Importance.NOTABLE
    return Importance.ROUTINE


def _regime_shift(record: DecisionCycleRecord) -> bool:
    """The analyze step counted a regime change as surprise (cognition/prediction_error.regime_changed)."""
    return record.prediction_error_sources.get("regime_change", 0.0) > 0.0


def _timestamp_ms(iso: str) -> int:
    ts = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return round(ts.timestamp() * 1000)


def episode_from_record(
    record: DecisionCycleRecord,
    *,
    strategy: str | None = None,
    confidence: float = 0.5,
    quality: float = 0.5,
) -> Episode:
    """The tick's episode, built from its DecisionCycleRecord (heartbeat §S6: "The record IS the episode")."""
    from golem.grimoire.dream import replay_gain  # dream imports this module; import at call time

    acted = [a for a in record.actions if a.status in (ActionStatus.EXECUTED, ActionStatus.FAILED)]
    parts = [
        f"Tick {record.tick}: {record.regime.value.replace('_', ' ')} regime, gate chose {record.tier.value} "
        f"({record.gating_reason}); prediction error {record.prediction_error:.3f}, "
        f"price {record.observation.primary_price:.4g}."
    ]
    high = [a for a in record.anomalies if a.severity == ProbeSeverity.HIGH]
    if record.anomalies:
        parts.append("Anomalies: " + "; ".join(f"{a.probe} ({a.severity.value}): {a.description}" for a in record.anomalies) + ".")
    hf = record.observation.min_health_factor()
    if hf is not None:
        parts.append(f"Lowest health factor {hf:.3f}.")
    if record.deliberation and record.deliberation.decision:
        parts.append(f"Decision: {record.deliberation.decision}.")
    if record.actions:
        parts.append("Actions: " + ", ".join(f"{a.action_type} {a.status.value}" for a in record.actions) + ".")
    pnl = record.outcome.pnl_impact if record.outcome else None
    if record.outcome is not None:
        verdict = "verified" if record.outcome.verified else "NOT verified"
        pnl_text = f", pnl {pnl:+.2f}" if pnl is not None else ""
        parts.append(f"Outcome {verdict}{pnl_text}.")
    if record.active_interventions:
        parts.append("Owner said: " + "; ".join(i.message for i in record.active_interventions) + ".")
    if record.phase_transition:  # issue 17: each behavioural phase transition is an episode
        v = record.vitality
        parts.append(f"Phase transition {record.phase_transition}: vitality {v.composite:.3f} (economic "
                     f"{v.economic:.3f}, epistemic {v.epistemic:.3f}, stochastic {v.stochastic:.3f}).")
    if record.somatic_markers_fired:
        parts.append("Somatic markers fired: " + ", ".join(record.somatic_markers_fired) + ".")
    if record.errors:
        parts.append("Errors: " + "; ".join(record.errors) + ".")
    if high:
        decay_class = DecayClass.REGIME_CONDITIONAL
    elif record.tier == Tier.T0 and not acted:
        decay_class = DecayClass.EPHEMERAL  # routine observation: fades within a day
    else:
        decay_class = DecayClass.TACTICAL
    if acted:
        episode_type = EpisodeType.ACTION
    elif _regime_shift(record):
        episode_type = EpisodeType.REGIME_SHIFT
    else:
        episode_type = EpisodeType.OBSERVATION
    tools = [a.tool_name for a in sorted(acted, key=lambda a: a.action_index)]
    snap = record.observation.snapshot
    created_at = record.timestamp or datetime.now(timezone.utc).isoformat()
    gain = replay_gain(pnl, record.prediction_error)
    pad = record.pad_after
    return Episode(
        id=episode_id(record.golem_id, record.tick),
        golem_id=record.golem_id,
        tick=record.tick,
        created_at=created_at,
        regime=record.regime,
        tier=record.tier,
        summary=" ".join(parts),
        prediction_error=max(0.0, record.prediction_error),
        actions=len(acted),
        pnl_impact=pnl,
        outcome_verified=record.outcome.verified if record.outcome else None,
        # At creation need = 1 (nothing fresher exists), so utility = gain.
        utility=gain,
        confidence=confidence,
        decay_class=decay_class,
        quality=quality,
        strategy=strategy,
        episode_type=episode_type,
        tool=tools[0] if tools else "heartbeat",
        outcome=outcome_of(len(acted), record.outcome.verified if record.outcome else None, pnl,
                           failed=any(a.status == ActionStatus.FAILED for a in acted)),
        chain=str(snap.chain_id),
        token_pair=f"{snap.pool.token0}/{snap.pool.token1}",
        timestamp_ms=_timestamp_ms(created_at),
        importance=importance_of(record),
        action_tools=tools,
        # the affect the tick left the golem in; no tag while nothing appraises it (pad_after absent, issue 17)
        emotional_tag=pad_label(pad.pleasure, pad.arousal, pad.dominance) if pad is not None else None,
        gain=gain,
    )
