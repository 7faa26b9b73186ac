"""Episodic memory: one Episode per tick in a LanceDB table (grimoire "Episodes", "Three-Store Split").

Writes are keyed by episode id (`<golem_id>:tick:<n>`) and go through `merge_insert`, so a retried
activity overwrites its own row instead of adding a second one (ARCHITECTURE "Side effects that
must happen once"). Lifecycle fields (retention, strength, access) live beside the vector and
follow decay.py.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lancedb
import numpy as np
import pyarrow as pa
from pydantic import BaseModel, Field, field_validator, model_validator

from golem.grimoire.decay import (
    PRUNE_FLOOR,
    DecayClass,
    EntryKind,
    effective_confidence,
    retention_at_tick,
)
from golem.grimoire.embeddings import Embedder
from golem.models.enums import ActionStatus, MarketRegime, ProbeSeverity, Tier

if TYPE_CHECKING:
    from golem.models.record import DecisionCycleRecord

TABLE = "episodes"
DEFAULT_TICK_SECONDS = 60.0  # config clock.theta_base_seconds default


def episode_id(golem_id: str, tick: int) -> str:
    return f"{golem_id}:tick:{tick}"


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

    @model_validator(mode="after")
    def _defaults(self) -> Episode:
        if self.last_accessed_tick is None:
            self.last_accessed_tick = self.tick
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


def episode_arrow_schema(dim: int, embedder_name: str) -> pa.Schema:
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
            pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
        ],
        metadata={"golem.embedder": embedder_name, "golem.dim": str(dim)},
    )


_SCALAR_FIELDS = [name for name in Episode.model_fields]


def _sql_str(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class EpisodeStore:
    """The `episodes` table of a LanceDB database at `path`."""

    def __init__(self, path: Path, embedder: Embedder) -> None:
        self.path = Path(path)
        self.embedder = embedder
        self.path.mkdir(parents=True, exist_ok=True)
        # read_consistency_interval=0: every read checks for newer versions, so a reader sees
        # rows another process (the worker) committed after this store was opened.
        self._db = lancedb.connect(str(self.path), read_consistency_interval=timedelta(0))
        self._schema = episode_arrow_schema(embedder.dim, embedder.model_name)
        try:
            self._table = self._db.open_table(TABLE)
        except ValueError:  # "Table 'episodes' was not found"
            try:
                self._table = self._db.create_table(TABLE, schema=self._schema, exist_ok=True)
            except ValueError:  # another process created it first, with a different schema
                self._table = self._db.open_table(TABLE)
        self._check_compatible()

    @property
    def table(self):
        """The LanceDB `episodes` table (for upkeep, hybrid queries and stats; write through this store)."""
        return self._table

    def _check_compatible(self) -> None:
        vec = self._table.schema.field("vector").type
        dim = getattr(vec, "list_size", None)
        if dim != self.embedder.dim:
            raise ValueError(
                f"episodes table at {self.path} holds {dim}-d vectors but embedder {self.embedder.model_name} "
                f"gives {self.embedder.dim}-d; open it with the embedder that built it or use a new path"
            )
        meta = self._table.schema.metadata or {}
        built_with = meta.get(b"golem.embedder", b"").decode()
        if built_with and built_with != self.embedder.model_name:
            raise ValueError(
                f"episodes table at {self.path} was embedded with {built_with}, not {self.embedder.model_name}; "
                f"mixing embedding models makes similarity scores meaningless"
            )

    # ---- writes -------------------------------------------------------------------------
    def _rows_table(self, episodes: list[Episode], vectors: np.ndarray) -> pa.Table:
        rows = [ep.model_dump(mode="json") for ep in episodes]
        scalar_schema = pa.schema([f for f in self._schema if f.name != "vector"])
        table = pa.Table.from_pylist(rows, schema=scalar_schema)
        flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
        vec = pa.FixedSizeListArray.from_arrays(flat, self.embedder.dim)
        return table.append_column(self._schema.field("vector"), vec).replace_schema_metadata(self._schema.metadata)

    def _merge(self, data: pa.Table) -> None:
        if data.num_rows:
            self._table.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data)

    def upsert_many(self, episodes: list[Episode], vectors: np.ndarray | None = None) -> None:
        """Insert or overwrite by id. `vectors` (one row per episode, from this store's embedder) skips
        re-embedding when the caller already has them (bulk loads, the benchmark)."""
        if not episodes:
            return
        ids = [ep.id for ep in episodes]
        if len(set(ids)) != len(ids):
            raise ValueError("upsert_many got the same episode id twice in one batch")
        if vectors is None:
            vectors = self.embedder.embed([ep.summary for ep in episodes])
        elif np.shape(vectors) != (len(episodes), self.embedder.dim):
            raise ValueError(f"vectors must have shape ({len(episodes)}, {self.embedder.dim}), got {np.shape(vectors)}")
        self._merge(self._rows_table(episodes, vectors))

    def upsert(self, ep: Episode) -> None:
        self.upsert_many([ep])

    def mark_accessed(self, ids: list[str], tick: int) -> int:
        """A DECIDING retrieval used these episodes: reset their decay clock (grimoire "Decay Formula").

        Strength is untouched: it only grows on retrieval + positive outcome (`reinforce`).
        Returns the number of rows touched.
        """
        if not ids:
            return 0
        where = f"id IN ({', '.join(_sql_str(i) for i in ids)})"
        res = self._table.update(
            where=where,
            values_sql={
                "last_accessed_tick": str(int(tick)),
                "access_count": "access_count + 1",
                "retention": "1.0",
            },
        )
        return int(getattr(res, "rows_updated", 0))

    def reinforce(self, ids: list[str], tick: int, increment: float) -> list[Episode]:
        """Retrieved AND positive outcome: strength += increment and the decay clock restarts."""
        if increment <= 0:
            raise ValueError(f"increment must be > 0, got {increment}")
        updated = []
        for ep in self.get_many(ids):
            updated.append(
                ep.model_copy(
                    update={"strength": ep.strength + increment, "last_accessed_tick": tick, "retention": 1.0}
                )
            )
        self.upsert_many(updated)
        return updated

    # ---- reads --------------------------------------------------------------------------
    @staticmethod
    def _to_episode(row: dict[str, Any]) -> Episode:
        return Episode.model_validate({k: row[k] for k in _SCALAR_FIELDS if k in row})

    def _scalar_rows(self, where: str | None = None) -> list[dict[str, Any]]:
        q = self._table.search().select(_SCALAR_FIELDS)
        if where:
            q = q.where(where)
        n = self._table.count_rows()
        return q.limit(max(n, 1)).to_list() if n else []

    def get(self, id: str) -> Episode | None:
        rows = self._scalar_rows(f"id = {_sql_str(id)}")
        return self._to_episode(rows[0]) if rows else None

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
        query = self.embedder.embed([text])[0]
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
    if record.errors:
        parts.append("Errors: " + "; ".join(record.errors) + ".")
    if high:
        decay_class = DecayClass.REGIME_CONDITIONAL
    elif record.tier == Tier.T0 and not acted:
        decay_class = DecayClass.EPHEMERAL  # routine observation: fades within a day
    else:
        decay_class = DecayClass.TACTICAL
    return Episode(
        id=episode_id(record.golem_id, record.tick),
        golem_id=record.golem_id,
        tick=record.tick,
        created_at=record.timestamp or datetime.now(timezone.utc).isoformat(),
        regime=record.regime,
        tier=record.tier,
        summary=" ".join(parts),
        prediction_error=max(0.0, record.prediction_error),
        actions=len(acted),
        pnl_impact=pnl,
        outcome_verified=record.outcome.verified if record.outcome else None,
        # At creation need = 1 (nothing fresher exists), so utility = gain.
        utility=replay_gain(pnl, record.prediction_error),
        confidence=confidence,
        decay_class=decay_class,
        quality=quality,
        strategy=strategy,
    )
