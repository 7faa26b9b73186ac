"""ActionPermits: single-use, expiring authorisations for one write (docs/design/chain.md#writing-exactly-once).

Validation issues a permit for each approved action; execution must consume it. A permit moves
created → committed | expired | cancelled, or is recorded as blocked when the PolicyCage refused the
action. Every transition is appended to an audit table, so the history of a permit can be read back.
State lives in SQLite on the golem's disk; each call opens its own connection, so the store is safe
to use from activity threads.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from golem.storage import immediate_tx, init_db

DEFAULT_PERMIT_TTL_S = 300.0
# Values are re-computed at execution from the same observation; allow only float noise.
_VALUE_EPSILON = 1e-9


class PermitError(RuntimeError):
    """A write was attempted without a usable permit (unknown, expired, used, wrong tool, over value)."""


class PermitStatus(str, Enum):
    CREATED = "created"
    COMMITTED = "committed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"


class ActionPermit(BaseModel):
    id: str
    golem_id: str
    tick: int
    action_index: int
    tool: str
    value_limit_usd: float
    policy_hash: str
    created_at: float
    expires_at: float
    status: PermitStatus
    reason: str = ""


class PermitAuditEntry(BaseModel):
    seq: int
    permit_id: str
    at: float
    from_status: str | None
    to_status: str
    detail: str = ""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS permits (
    id TEXT PRIMARY KEY,
    golem_id TEXT NOT NULL,
    tick INTEGER NOT NULL,
    action_index INTEGER NOT NULL,
    tool TEXT NOT NULL,
    value_limit_usd REAL NOT NULL,
    policy_hash TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS permits_by_action ON permits (golem_id, tick, action_index);
CREATE TABLE IF NOT EXISTS permit_audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    permit_id TEXT NOT NULL,
    at REAL NOT NULL,
    from_status TEXT,
    to_status TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT ''
);
"""

_COLUMNS = "id, golem_id, tick, action_index, tool, value_limit_usd, policy_hash, created_at, expires_at, status, reason"


class PermitStore:
    """SQLite-backed permits. `clock` (seconds since epoch) is injectable for expiry tests."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        init_db(self.path, _SCHEMA)

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        """One connection per operation, inside BEGIN IMMEDIATE so check-and-transition is atomic."""
        return immediate_tx(self.path)

    @staticmethod
    def _row(row: tuple[Any, ...]) -> ActionPermit:
        return ActionPermit(**dict(zip([c.strip() for c in _COLUMNS.split(",")], row)))

    def _fetch(self, db: sqlite3.Connection, permit_id: str) -> ActionPermit | None:
        row = db.execute(f"SELECT {_COLUMNS} FROM permits WHERE id = ?", (permit_id,)).fetchone()
        return self._row(row) if row else None

    def _transition(
        self, db: sqlite3.Connection, permit: ActionPermit, to: PermitStatus, detail: str = "", reason: str | None = None
    ) -> ActionPermit:
        now = self._clock()
        db.execute(
            "UPDATE permits SET status = ?, reason = COALESCE(?, reason) WHERE id = ?",
            (to.value, reason, permit.id),
        )
        self._audit(db, permit.id, permit.status.value, to.value, detail, now)
        return permit.model_copy(update={"status": to, "reason": reason if reason is not None else permit.reason})

    @staticmethod
    def _audit(db: sqlite3.Connection, permit_id: str, frm: str | None, to: str, detail: str, at: float) -> None:
        db.execute(
            "INSERT INTO permit_audit (permit_id, at, from_status, to_status, detail) VALUES (?, ?, ?, ?, ?)",
            (permit_id, at, frm, to, detail),
        )

    def _insert(self, db: sqlite3.Connection, permit: ActionPermit, detail: str) -> None:
        db.execute(
            f"INSERT INTO permits ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                permit.id, permit.golem_id, permit.tick, permit.action_index, permit.tool,
                permit.value_limit_usd, permit.policy_hash, permit.created_at, permit.expires_at,
                permit.status.value, permit.reason,
            ),
        )  # fmt: skip
        self._audit(db, permit.id, None, permit.status.value, detail, permit.created_at)

    # ── public API ──────────────────────────────────────────────────────────────────────────

    def issue(
        self,
        golem_id: str,
        tick: int,
        action_index: int,
        tool: str,
        value_limit_usd: float,
        policy_hash: str,
        ttl_s: float = DEFAULT_PERMIT_TTL_S,
    ) -> ActionPermit:
        """Issue a permit for one action.

        Idempotent for a retried validation: a live (created) or committed permit for the same
        (golem, tick, action_index) with the same tool, value limit and policy is returned as is;
        a live one with different terms is cancelled and replaced.
        """
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0 seconds, got {ttl_s}")
        if value_limit_usd < 0:
            raise ValueError(f"value_limit_usd must be >= 0, got {value_limit_usd}")
        now = self._clock()
        with self._tx() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM permits WHERE golem_id = ? AND tick = ? AND action_index = ? "
                "AND status IN ('created', 'committed') ORDER BY created_at",
                (golem_id, tick, action_index),
            ).fetchall()
            for existing in map(self._row, rows):
                same = (
                    existing.tool == tool
                    and abs(existing.value_limit_usd - value_limit_usd) <= _VALUE_EPSILON * max(1.0, value_limit_usd)
                    and existing.policy_hash == policy_hash
                )
                if existing.status is PermitStatus.COMMITTED:
                    if same:
                        return existing
                    raise PermitError(
                        f"action {action_index} of tick {tick} already committed under permit {existing.id} "
                        f"({existing.tool}, ${existing.value_limit_usd:,.2f}); a different action needs a new tick"
                    )
                if same and existing.expires_at > now:
                    return existing
                self._transition(db, existing, PermitStatus.CANCELLED, "superseded by a re-issued permit")
            permit = ActionPermit(
                id=f"permit-{uuid.uuid4().hex}",
                golem_id=golem_id,
                tick=tick,
                action_index=action_index,
                tool=tool,
                value_limit_usd=value_limit_usd,
                policy_hash=policy_hash,
                created_at=now,
                expires_at=now + ttl_s,
                status=PermitStatus.CREATED,
            )
            self._insert(db, permit, f"issued for {tool} up to ${value_limit_usd:,.2f}, ttl {ttl_s:g}s")
            return permit

    def record_blocked(
        self, golem_id: str, tick: int, action_index: int, tool: str, policy_hash: str, reason: str
    ) -> ActionPermit:
        """Record that validation refused an action (status blocked, never consumable)."""
        now = self._clock()
        permit = ActionPermit(
            id=f"permit-{uuid.uuid4().hex}",
            golem_id=golem_id,
            tick=tick,
            action_index=action_index,
            tool=tool,
            value_limit_usd=0.0,
            policy_hash=policy_hash,
            created_at=now,
            expires_at=now,
            status=PermitStatus.BLOCKED,
            reason=reason,
        )
        with self._tx() as db:
            self._insert(db, permit, reason)
        return permit

    def consume(self, permit_id: str, tool: str, value_usd: float) -> ActionPermit:
        """Commit a permit for one write. Single use: a second call raises `PermitError`."""
        with self._tx() as db:
            permit = self._fetch(db, permit_id)
            if permit is None:
                raise PermitError(f"unknown permit {permit_id!r}: writes need a permit issued by validation")
            if permit.status is not PermitStatus.CREATED:
                raise PermitError(f"permit {permit_id} is {permit.status.value}, not usable (permits are single-use)")
            now = self._clock()
            if now >= permit.expires_at:
                self._transition(db, permit, PermitStatus.EXPIRED, f"expired at {permit.expires_at:.0f}, used at {now:.0f}")
                error = PermitError(
                    f"permit {permit_id} expired {now - permit.expires_at:.1f}s ago; validate the action again"
                )
            elif tool != permit.tool:
                self._audit(db, permit_id, permit.status.value, permit.status.value, f"refused: tool {tool}", now)
                error = PermitError(f"permit {permit_id} is for tool {permit.tool!r}, not {tool!r}")
            elif value_usd > permit.value_limit_usd + _VALUE_EPSILON * max(1.0, permit.value_limit_usd):
                self._audit(db, permit_id, permit.status.value, permit.status.value, f"refused: value ${value_usd:,.2f}", now)
                error = PermitError(
                    f"permit {permit_id} allows ${permit.value_limit_usd:,.2f}, the action is worth ${value_usd:,.2f}"
                )
            else:
                return self._transition(db, permit, PermitStatus.COMMITTED, f"committed {tool} worth ${value_usd:,.2f}")
        # Raised after COMMIT so the expired transition and the refusal's audit row are kept (mutation testing found
        # the refusals' audit rows rolled back with the raise inside the transaction).
        raise error

    def cancel(self, permit_id: str, reason: str) -> ActionPermit:
        """Cancel a permit that was not used (e.g. a high-severity steer). Committed permits stay committed."""
        with self._tx() as db:
            permit = self._fetch(db, permit_id)
            if permit is None:
                raise PermitError(f"unknown permit {permit_id!r}")
            if permit.status is not PermitStatus.CREATED:
                raise PermitError(f"permit {permit_id} is {permit.status.value}; only created permits can be cancelled")
            return self._transition(db, permit, PermitStatus.CANCELLED, reason, reason=reason)

    def expire_stale(self) -> int:
        """Mark every created permit past its expiry as expired; returns how many."""
        now = self._clock()
        with self._tx() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM permits WHERE status = 'created' AND expires_at <= ?", (now,)
            ).fetchall()
            for permit in map(self._row, rows):
                self._transition(db, permit, PermitStatus.EXPIRED, "expired unused")
            return len(rows)

    def get(self, permit_id: str) -> ActionPermit | None:
        with self._tx() as db:
            return self._fetch(db, permit_id)

    def for_action(self, golem_id: str, tick: int, action_index: int) -> list[ActionPermit]:
        with self._tx() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM permits WHERE golem_id = ? AND tick = ? AND action_index = ? ORDER BY created_at",
                (golem_id, tick, action_index),
            ).fetchall()
        return [self._row(r) for r in rows]

    def audit(self, permit_id: str) -> list[PermitAuditEntry]:
        with self._tx() as db:
            rows = db.execute(
                "SELECT seq, permit_id, at, from_status, to_status, detail FROM permit_audit WHERE permit_id = ? ORDER BY seq",
                (permit_id,),
            ).fetchall()
        return [
            PermitAuditEntry(seq=r[0], permit_id=r[1], at=r[2], from_status=r[3], to_status=r[4], detail=r[5]) for r in rows
        ]
