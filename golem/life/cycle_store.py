"""DecisionCycleRecord storage: one file per tick plus the SQLite `cycle_index` (heartbeat §S6).

The spec stores records as bincode. We write the pydantic model as JSON instead: the same model
round-trips exactly, and a person (or `golem show`) can read a tick without any decoder. Files are
~2–10 KB either way. Files are written atomically (tmp + rename) and the index row with
INSERT OR REPLACE, so persisting the same tick twice (a retried reflect activity) is harmless.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from golem.models.enums import ActionStatus
from golem.models.golem import TickFailure
from golem.models.record import DecisionCycleRecord
from golem.storage import connect, init_db

# heartbeat §S6 "Storage and Indexing", plus workflow_id and gating_reason for the CLI.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS cycle_index (
    tick INTEGER PRIMARY KEY,
    regime TEXT NOT NULL,
    tier TEXT NOT NULL,
    has_action BOOLEAN NOT NULL,
    has_outcome BOOLEAN NOT NULL,
    phase TEXT NOT NULL,
    prediction_error REAL NOT NULL,
    total_cost REAL NOT NULL,
    pnl_impact REAL,
    primary_emotion TEXT,
    timestamp TEXT NOT NULL,
    workflow_id TEXT,
    gating_reason TEXT
);
CREATE INDEX IF NOT EXISTS idx_cycle_tier_regime ON cycle_index(tier, regime);
CREATE INDEX IF NOT EXISTS idx_cycle_outcome ON cycle_index(has_action, has_outcome);
CREATE INDEX IF NOT EXISTS idx_cycle_phase ON cycle_index(phase);
CREATE INDEX IF NOT EXISTS idx_cycle_recent ON cycle_index(tick DESC);
-- Ticks whose workflow failed (no observation, so no record): kept so nothing is lost silently.
CREATE TABLE IF NOT EXISTS cycle_failures (
    tick INTEGER PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    error TEXT NOT NULL,
    failed_at TEXT NOT NULL
);
"""

INDEX_NAMES = ("idx_cycle_tier_regime", "idx_cycle_outcome", "idx_cycle_phase", "idx_cycle_recent")
_COLUMNS = (
    "tick", "regime", "tier", "has_action", "has_outcome", "phase", "prediction_error",
    "total_cost", "pnl_impact", "primary_emotion", "timestamp", "workflow_id", "gating_reason",
)
# Statuses that mean a transaction was actually sent (a blocked or deferred action is not "acting").
_ACTED = (ActionStatus.EXECUTED, ActionStatus.FAILED)


class CycleNotFoundError(LookupError):
    pass


def index_row(record: DecisionCycleRecord) -> dict[str, Any]:
    """The `cycle_index` row of a record (pure)."""
    outcome = record.outcome
    return {
        "tick": record.tick,
        "regime": record.regime.value,
        "tier": record.tier.value,
        "has_action": any(a.status in _ACTED for a in record.actions),
        "has_outcome": outcome is not None,
        "phase": record.phase.value,
        "prediction_error": record.prediction_error,
        "total_cost": record.total_cost,
        "pnl_impact": outcome.pnl_impact if outcome is not None else None,
        "primary_emotion": record.primary_emotion.value,
        "timestamp": record.timestamp,
        "workflow_id": record.workflow_id or None,
        "gating_reason": record.gating_reason,
    }


class CycleStore:
    """`data_dir/cycles/cycle-<tick:06d>.json` + `data_dir/cycles/index.sqlite` (WAL)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.dir = self.data_dir / "cycles"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.index_path = self.dir / "index.sqlite"
        init_db(self.index_path, _SCHEMA)  # WAL: the CLI can read the index while the worker writes it

    def _connect(self) -> sqlite3.Connection:
        return connect(self.index_path, rows=True)

    def path_for(self, tick: int) -> Path:
        if tick < 0:
            raise ValueError(f"tick must be >= 0, got {tick}")
        return self.dir / f"cycle-{tick:06d}.json"

    def persist(self, record: DecisionCycleRecord) -> Path:
        path = self.path_for(record.tick)
        data = record.model_dump_json(indent=2)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=self.dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        row = index_row(record)
        with closing(self._connect()) as conn, conn:
            conn.execute(
                f"INSERT OR REPLACE INTO cycle_index ({', '.join(_COLUMNS)}) "
                f"VALUES ({', '.join('?' for _ in _COLUMNS)})",
                tuple(row[c] for c in _COLUMNS),
            )
        return path

    def exists(self, tick: int) -> bool:
        return self.path_for(tick).exists()

    def load(self, tick: int) -> DecisionCycleRecord:
        path = self.path_for(tick)
        if not path.exists():
            latest = self.latest_tick()
            hint = f"latest recorded tick is {latest}" if latest is not None else "no ticks are recorded yet"
            raise CycleNotFoundError(f"no DecisionCycleRecord for tick {tick} at {path} ({hint})")
        try:
            return DecisionCycleRecord.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as e:
            raise ValueError(f"{path} is not a valid DecisionCycleRecord: {e}") from e

    def latest_tick(self) -> int | None:
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT MAX(tick) FROM cycle_index").fetchone()
        return row[0]

    @staticmethod
    def _row_dict(row: sqlite3.Row) -> dict[str, Any]:
        d = dict(row)
        d["has_action"] = bool(d["has_action"])
        d["has_outcome"] = bool(d["has_outcome"])
        return d

    def recent(self, n: int = 20) -> list[dict[str, Any]]:
        """The newest n index rows, newest first."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        with closing(self._connect()) as conn:
            rows = conn.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM cycle_index ORDER BY tick DESC LIMIT ?", (n,)
            ).fetchall()
        return [self._row_dict(r) for r in rows]

    def row(self, tick: int) -> dict[str, Any] | None:
        with closing(self._connect()) as conn:
            r = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM cycle_index WHERE tick = ?", (tick,)).fetchone()
        return self._row_dict(r) if r else None

    def count(self) -> int:
        with closing(self._connect()) as conn:
            return conn.execute("SELECT COUNT(*) FROM cycle_index").fetchone()[0]

    def record_failure(self, failure: TickFailure) -> None:
        with closing(self._connect()) as conn, conn:
            conn.execute(
                "INSERT OR REPLACE INTO cycle_failures (tick, workflow_id, error, failed_at) VALUES (?, ?, ?, ?)",
                (failure.tick, failure.workflow_id, failure.error, failure.failed_at),
            )

    def failures(self, n: int = 20) -> list[dict[str, Any]]:
        """Failed ticks that no later run (e.g. `golem rerun`) has recorded, newest first."""
        with closing(self._connect()) as conn:
            rows = conn.execute(
                "SELECT f.tick, f.workflow_id, f.error, f.failed_at FROM cycle_failures f "
                "LEFT JOIN cycle_index c ON c.tick = f.tick WHERE c.tick IS NULL ORDER BY f.tick DESC LIMIT ?",
                (n,),
            ).fetchall()
        return [dict(r) for r in rows]

    def tier_counts(self) -> dict[str, int]:
        with closing(self._connect()) as conn:
            rows = conn.execute("SELECT tier, COUNT(*) FROM cycle_index GROUP BY tier ORDER BY tier").fetchall()
        return {tier: n for tier, n in rows}
