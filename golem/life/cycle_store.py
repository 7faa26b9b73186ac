"""DecisionCycleRecord storage: one JSON file per run of a tick plus the SQLite `cycle_index`.

Records are append-only across runs (a rerun, a reset or a retry writes beside the first under its run label);
within one run the write is atomic (tmp + rename, INSERT OR REPLACE), so a retried reflect overwrites only its own
write. Why JSON and why per run: docs/design/life.md#the-record-store.
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
from golem.life.retention import read_archived
from golem.life.runs import check_label, labelled
from golem.models.record import DecisionCycleRecord
from golem.storage import connect, init_db
from golem.layout import DataLayout

# the record's index columns, plus workflow_id and gating_reason for the CLI, and one row per
# run of a tick: `run` is the run label ('' for the tick's first run), linked to the original by
# original_run_id (a reset or retry) or rerun_of (a `golem rerun`, the original tick's workflow id).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS cycle_index (
    tick INTEGER NOT NULL,
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
    gating_reason TEXT,
    run TEXT NOT NULL DEFAULT '',
    run_kind TEXT NOT NULL DEFAULT 'original',
    run_id TEXT,
    original_run_id TEXT,
    rerun_of TEXT,
    reset_reason TEXT,
    PRIMARY KEY (tick, run)
);
CREATE INDEX IF NOT EXISTS idx_cycle_tier_regime ON cycle_index(tier, regime);
CREATE INDEX IF NOT EXISTS idx_cycle_outcome ON cycle_index(has_action, has_outcome);
CREATE INDEX IF NOT EXISTS idx_cycle_phase ON cycle_index(phase);
CREATE INDEX IF NOT EXISTS idx_cycle_recent ON cycle_index(tick DESC);
-- The run an owner cares about, one per tick: the first run's, else the latest run that recorded
-- (a failed tick recovered by a reset or rerun).
CREATE VIEW IF NOT EXISTS cycle_primary AS
    SELECT c.* FROM cycle_index c
    WHERE c.rowid = (SELECT r.rowid FROM cycle_index r WHERE r.tick = c.tick
                     ORDER BY (r.run = '') DESC, r.rowid DESC LIMIT 1);
-- Ticks whose workflow failed (no observation, so no record): kept so nothing is lost silently.
CREATE TABLE IF NOT EXISTS cycle_failures (
    tick INTEGER PRIMARY KEY,
    workflow_id TEXT NOT NULL,
    error TEXT NOT NULL,
    failed_at TEXT NOT NULL
);
-- Later runs of a tick (a reset, a rerun) that failed: each records itself, since no parent is waiting.
CREATE TABLE IF NOT EXISTS cycle_run_failures (
    tick INTEGER NOT NULL,
    run TEXT NOT NULL,
    run_kind TEXT NOT NULL,
    run_id TEXT,
    workflow_id TEXT NOT NULL,
    error TEXT NOT NULL,
    failed_at TEXT NOT NULL,
    PRIMARY KEY (tick, run)
);
-- Records compacted by [retention] (golem.life.retention): the loose file's name → its day's archive.
CREATE TABLE IF NOT EXISTS archived (
    name TEXT PRIMARY KEY,
    archive TEXT NOT NULL
);
"""

INDEX_NAMES = ("idx_cycle_tier_regime", "idx_cycle_outcome", "idx_cycle_phase", "idx_cycle_recent")
_COLUMNS = (
    "tick", "regime", "tier", "has_action", "has_outcome", "phase", "prediction_error",
    "total_cost", "pnl_impact", "primary_emotion", "timestamp", "workflow_id", "gating_reason",
    "run", "run_kind", "run_id", "original_run_id", "rerun_of", "reset_reason",
)
_V1_COLUMNS = _COLUMNS[:13]  # the index before runs were told apart (tick was the primary key)
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
        "primary_emotion": record.primary_emotion.value if record.primary_emotion is not None else None,
        "timestamp": record.timestamp,
        "workflow_id": record.workflow_id or None,
        "gating_reason": record.gating_reason,
        "run": record.run_label,
        "run_kind": record.run_kind,
        "run_id": record.run_id or None,
        "original_run_id": record.original_run_id,
        "rerun_of": record.rerun_of,
        "reset_reason": record.reset_reason,
    }


class CycleStore:
    """`data_dir/cycles/cycle-<tick:06d>.json` + `data_dir/cycles/index.sqlite` (WAL)."""

    def __init__(self, data: DataLayout | Path) -> None:
        self.layout = DataLayout.of(data)
        self.data_dir = self.layout.root
        self.dir = self.layout.cycles
        self.dir.mkdir(parents=True, exist_ok=True)
        self.index_path = self.dir / "index.sqlite"
        _migrate_v1(self.index_path)
        init_db(self.index_path, _SCHEMA)  # WAL: the CLI can read the index while the worker writes it

    def _connect(self) -> sqlite3.Connection:
        return connect(self.index_path, rows=True)

    def path_for(self, tick: int, run: str = "") -> Path:
        if tick < 0:
            raise ValueError(f"tick must be >= 0, got {tick}")
        return self.dir / f"{labelled(f'cycle-{tick:06d}', run)}.json"

    def persist(self, record: DecisionCycleRecord) -> Path:
        path = self.path_for(record.tick, record.run_label)
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

    def exists(self, tick: int, run: str = "") -> bool:
        return self.path_for(tick, run).exists() or self._archive_of(self.path_for(tick, run).name) is not None

    def mark_archived(self, names: list[str], archive: str) -> None:
        """[retention] moved these record files into `archive` (relative to cycles/)."""
        with closing(self._connect()) as conn, conn:
            conn.executemany("INSERT OR REPLACE INTO archived (name, archive) VALUES (?, ?)",
                             [(n, archive) for n in names])

    def _archive_of(self, name: str) -> str | None:
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT archive FROM archived WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None

    def _read(self, path: Path) -> str | None:
        """A record's JSON: its file, or its line in the day's archive once [retention] compacted it."""
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            archive = self._archive_of(path.name)
            return read_archived(self.dir / archive, path.name) if archive else None

    def load(self, tick: int, run: str | None = None) -> DecisionCycleRecord:
        """Tick N's record: the given run's, or (run None) the run an owner cares about — the first run's,
        else the latest run that recorded (a failed tick recovered by a reset or rerun)."""
        if run is None:
            primary = self.row(tick)
            run = primary["run"] if primary else ""
        path = self.path_for(tick, run)
        text = self._read(path)
        if text is None:
            if run:
                runs = ", ".join(repr(r["run"]) for r in self.runs(tick)) or "none"
                raise CycleNotFoundError(f"tick {tick} has no run {run!r} (recorded runs: {runs})")
            latest = self.latest_tick()
            hint = f"latest recorded tick is {latest}" if latest is not None else "no ticks are recorded yet"
            raise CycleNotFoundError(f"no DecisionCycleRecord for tick {tick} at {path} ({hint})")
        try:
            return DecisionCycleRecord.model_validate_json(text)
        except ValidationError as e:
            raise ValueError(f"{path} is not a valid DecisionCycleRecord: {e}") from e

    def latest_tick(self) -> int | None:
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT MAX(tick) FROM cycle_index").fetchone()
        latest: int | None = row[0]  # NULL on an empty index
        return latest

    @staticmethod
    def _row_dict(row: sqlite3.Row) -> dict[str, Any]:
        d = dict(row)
        d["has_action"] = bool(d["has_action"])
        d["has_outcome"] = bool(d["has_outcome"])
        return d

    # One row per tick (the primary run's), with how many runs the tick had and whether a later run
    # recovered a failed first run.
    _PRIMARY = (
        f"SELECT {', '.join('p.' + c for c in _COLUMNS)}, "
        "(SELECT COUNT(*) FROM cycle_index r WHERE r.tick = p.tick) "
        "+ (SELECT COUNT(*) FROM cycle_run_failures x WHERE x.tick = p.tick) "
        "+ (EXISTS (SELECT 1 FROM cycle_failures f WHERE f.tick = p.tick) AND p.run != '') AS runs, "
        "(EXISTS (SELECT 1 FROM cycle_failures f WHERE f.tick = p.tick) AND p.run != '') AS recovered "
        "FROM cycle_primary p"
    )

    def _primary_dict(self, row: sqlite3.Row) -> dict[str, Any]:
        d = self._row_dict(row)
        d["recovered"] = bool(d["recovered"])
        return d

    # The tick the golem recorded last (its newest first run, by write order). Ticks above it are a former life's
    # left in the data dir (an abandoned timeline after a reset, or a golem restarted on it before its ticks were
    # numbered on from the records): `recent` leaves them out unless asked.
    _CURRENT = ("p.tick <= COALESCE((SELECT c.tick FROM cycle_index c WHERE c.run = '' ORDER BY c.rowid DESC LIMIT 1),"
                " p.tick)")

    def recent(self, n: int = 20, *, former: bool = False) -> list[dict[str, Any]]:
        """The newest n ticks, newest first: one row per tick (the run an owner cares about), with
        `runs` (how many runs the tick had) and `recovered` (its first run failed, a later one recorded). `former`:
        also the ticks numbered past the last one recorded (a former life's, see _CURRENT)."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        where = "" if former else f" WHERE {self._CURRENT}"
        with closing(self._connect()) as conn:
            rows = conn.execute(f"{self._PRIMARY}{where} ORDER BY p.tick DESC LIMIT ?", (n,)).fetchall()
        return [self._primary_dict(r) for r in rows]

    def recent_records(self, n: int) -> list[DecisionCycleRecord]:
        """The newest n ticks' records (the run an owner cares about), newest first; one unreadable is left out."""
        out = []
        for row in self.recent(n):
            try:
                out.append(self.load(row["tick"]))
            except (LookupError, ValueError):
                continue
        return out

    def former_ticks(self) -> int:
        """How many recorded ticks are numbered past the last one recorded (a former life's)."""
        with closing(self._connect()) as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM cycle_primary p WHERE NOT ({self._CURRENT})").fetchone()[0])

    def row(self, tick: int) -> dict[str, Any] | None:
        """Tick N's primary row (see recent), or None when no run of it recorded."""
        with closing(self._connect()) as conn:
            r = conn.execute(f"{self._PRIMARY} WHERE p.tick = ?", (tick,)).fetchone()
        return self._primary_dict(r) if r else None

    def runs(self, tick: int) -> list[dict[str, Any]]:
        """Every recorded run of tick N, in the order they recorded (the first run first)."""
        with closing(self._connect()) as conn:
            rows = conn.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM cycle_index WHERE tick = ? ORDER BY (run = '') DESC, rowid",
                (tick,),
            ).fetchall()
        return [self._row_dict(r) for r in rows]

    def run_failures(self, tick: int) -> list[dict[str, Any]]:
        """Later runs of tick N (a reset, a rerun) that failed, oldest first."""
        with closing(self._connect()) as conn:
            rows = conn.execute(
                "SELECT tick, run, run_kind, run_id, workflow_id, error, failed_at FROM cycle_run_failures "
                "WHERE tick = ? ORDER BY rowid", (tick,),
            ).fetchall()
        return [dict(r) for r in rows]

    def failure(self, tick: int) -> dict[str, Any] | None:
        """The parent's note of tick N's failed first run, if it failed."""
        with closing(self._connect()) as conn:
            r = conn.execute(
                "SELECT tick, workflow_id, error, failed_at FROM cycle_failures WHERE tick = ?", (tick,)
            ).fetchone()
        return dict(r) if r else None

    def count(self) -> int:
        """How many ticks have a record (a tick with several runs counts once)."""
        with closing(self._connect()) as conn:
            n: int = conn.execute("SELECT COUNT(DISTINCT tick) FROM cycle_index").fetchone()[0]
            return n

    def record_failure(self, failure: TickFailure) -> None:
        """A failed run of a tick: the first run's (recorded by the parent), or a later run's (by itself)."""
        with closing(self._connect()) as conn, conn:
            if failure.run_label:
                conn.execute(
                    "INSERT OR REPLACE INTO cycle_run_failures (tick, run, run_kind, run_id, workflow_id, error, failed_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (failure.tick, check_label(failure.run_label), failure.run_kind, failure.run_id or None,
                     failure.workflow_id, failure.error, failure.failed_at),
                )
                return
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
        """Ticks per tier, each tick counted once (by its primary run)."""
        with closing(self._connect()) as conn:
            rows = conn.execute("SELECT tier, COUNT(*) FROM cycle_primary GROUP BY tier ORDER BY tier").fetchall()
        return {tier: n for tier, n in rows}


def _migrate_v1(path: Path) -> None:
    """An index written before runs were told apart (tick was the primary key) becomes the per-run
    index in one transaction: every old row is the tick's first run."""
    if not path.exists():
        return
    with closing(connect(path)) as conn:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(cycle_index)")]
        if not cols or "run" in cols:
            return
        old = ", ".join(_V1_COLUMNS)
        conn.executescript(
            "BEGIN IMMEDIATE;"
            "ALTER TABLE cycle_index RENAME TO cycle_index_v1;"
            + "".join(f"DROP INDEX IF EXISTS {name};" for name in INDEX_NAMES)
            + _SCHEMA
            + f"INSERT INTO cycle_index ({old}) SELECT {old} FROM cycle_index_v1;"
            "DROP TABLE cycle_index_v1;"
            "COMMIT;"
        )
