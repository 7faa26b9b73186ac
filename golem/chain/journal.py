"""The tx journal: signed-transaction intents written *before* broadcast (docs/design/chain.md#writing-exactly-once).

An intent is keyed by (golem_id, tick, action_index, call_index) and holds the nonce, the signed raw
bytes and their hash, so a retried execute finds what it already signed and checks the chain by hash
instead of signing again. The plan (the list of calls an action was turned into) is frozen here too,
so a retry sends exactly what was planned even if the chain moved. Raw bytes are a signed
transaction, never a key.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import AbstractContextManager
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from golem.storage import immediate_tx, init_db


class JournalError(RuntimeError):
    """The journal refused a write that would break exactly-once (e.g. a second, different intent)."""


class IntentStatus(str, Enum):
    SIGNED = "signed"  # signed and journaled, maybe not broadcast
    SENT = "sent"  # accepted by the node
    MINED = "mined"  # receipt with status 1
    FAILED = "failed"  # receipt with status 0, or can never be mined (nonce taken)


class TxIntent(BaseModel):
    golem_id: str
    tick: int
    action_index: int
    call_index: int
    label: str = ""
    nonce: int
    raw_tx: str  # 0x-hex of the signed transaction
    tx_hash: str  # 0x-hex
    status: IntentStatus
    block_number: int | None = None
    gas_used: int | None = None
    effective_gas_price: int | None = None  # wei
    error: str | None = None
    created_at: float
    updated_at: float


_SCHEMA = """
CREATE TABLE IF NOT EXISTS tx_intents (
    golem_id TEXT NOT NULL,
    tick INTEGER NOT NULL,
    action_index INTEGER NOT NULL,
    call_index INTEGER NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    nonce INTEGER NOT NULL,
    raw_tx TEXT NOT NULL,
    tx_hash TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    block_number INTEGER,
    gas_used INTEGER,
    effective_gas_price INTEGER,
    error TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (golem_id, tick, action_index, call_index)
);
CREATE TABLE IF NOT EXISTS tx_plans (
    golem_id TEXT NOT NULL,
    tick INTEGER NOT NULL,
    action_index INTEGER NOT NULL,
    permit_id TEXT NOT NULL,
    calls TEXT NOT NULL,
    failed_reason TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (golem_id, tick, action_index)
);
"""

class TxPlan(BaseModel):
    """The frozen calls of one action (PlannedCall dicts), and why it stopped if it never sent."""

    golem_id: str
    tick: int
    action_index: int
    permit_id: str
    calls: list[dict[str, Any]]
    failed_reason: str | None = None  # e.g. gas estimation showed the call would revert: nothing sent


_COLUMNS = (
    "golem_id", "tick", "action_index", "call_index", "label", "nonce", "raw_tx", "tx_hash", "status",
    "block_number", "gas_used", "effective_gas_price", "error", "created_at", "updated_at",
)  # fmt: skip
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM tx_intents"
_KEY = "golem_id = ? AND tick = ? AND action_index = ? AND call_index = ?"


class TxJournal:
    def __init__(self, path: str | Path) -> None:
        self.path = init_db(Path(path), _SCHEMA)

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        # Intents must survive a crash right after they are written: that is their purpose.
        return immediate_tx(self.path, durable=True)

    @staticmethod
    def _row(row: tuple[Any, ...]) -> TxIntent:
        return TxIntent(**dict(zip(_COLUMNS, row)))

    def _get(self, db: sqlite3.Connection, key: tuple[str, int, int, int]) -> TxIntent | None:
        row = db.execute(f"{_SELECT} WHERE {_KEY}", key).fetchone()
        return self._row(row) if row else None

    # ── intents ─────────────────────────────────────────────────────────────────────────────

    def record_intent(
        self,
        golem_id: str,
        tick: int,
        action_index: int,
        call_index: int,
        *,
        nonce: int,
        raw_tx: str,
        tx_hash: str,
        label: str = "",
    ) -> TxIntent:
        """Write a signed intent before it is broadcast. Re-recording the same hash is a no-op;
        a *different* transaction for the same key is refused (that would be a second write)."""
        key = (golem_id, tick, action_index, call_index)
        now = time.time()
        with self._tx() as db:
            existing = self._get(db, key)
            if existing is not None:
                if existing.tx_hash.lower() == tx_hash.lower():
                    return existing
                raise JournalError(
                    f"intent {key} already holds tx {existing.tx_hash} ({existing.status.value}); "
                    f"refusing a second transaction {tx_hash} for the same call"
                )
            db.execute(
                "INSERT INTO tx_intents (golem_id, tick, action_index, call_index, label, nonce, raw_tx, tx_hash, "
                "status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*key, label, nonce, raw_tx, tx_hash, IntentStatus.SIGNED.value, now, now),
            )
            return self._get(db, key)  # type: ignore[return-value]

    def _update(self, key: tuple[str, int, int, int], **fields: Any) -> TxIntent:
        fields["updated_at"] = time.time()
        with self._tx() as db:
            if self._get(db, key) is None:
                raise JournalError(f"no intent recorded for {key}")
            sets = ", ".join(f"{k} = ?" for k in fields)
            db.execute(f"UPDATE tx_intents SET {sets} WHERE {_KEY}", (*fields.values(), *key))
            return self._get(db, key)  # type: ignore[return-value]

    def mark_sent(self, golem_id: str, tick: int, action_index: int, call_index: int) -> TxIntent:
        key = (golem_id, tick, action_index, call_index)
        with self._tx() as db:
            current = self._get(db, key)
        if current is not None and current.status in (IntentStatus.MINED, IntentStatus.FAILED):
            return current  # never move a settled intent backwards
        return self._update(key, status=IntentStatus.SENT.value)

    def mark_mined(
        self,
        golem_id: str,
        tick: int,
        action_index: int,
        call_index: int,
        *,
        block_number: int,
        gas_used: int,
        effective_gas_price: int,
        success: bool = True,
        error: str | None = None,
    ) -> TxIntent:
        """Record the receipt: status mined when it succeeded, failed (with the reason) when it reverted."""
        return self._update(
            (golem_id, tick, action_index, call_index),
            status=(IntentStatus.MINED if success else IntentStatus.FAILED).value,
            block_number=block_number,
            gas_used=gas_used,
            effective_gas_price=effective_gas_price,
            error=error,
        )

    def mark_failed(self, golem_id: str, tick: int, action_index: int, call_index: int, *, error: str) -> TxIntent:
        """An intent that can never be mined (its nonce went to another transaction)."""
        return self._update((golem_id, tick, action_index, call_index), status=IntentStatus.FAILED.value, error=error)

    def get(self, golem_id: str, tick: int, action_index: int, call_index: int) -> TxIntent | None:
        with self._tx() as db:
            return self._get(db, (golem_id, tick, action_index, call_index))

    def intents_for(self, golem_id: str, tick: int, action_index: int) -> list[TxIntent]:
        with self._tx() as db:
            rows = db.execute(
                f"{_SELECT} WHERE golem_id = ? AND tick = ? AND action_index = ? ORDER BY call_index",
                (golem_id, tick, action_index),
            ).fetchall()
        return [self._row(r) for r in rows]

    def pending(self, golem_id: str | None = None) -> list[TxIntent]:
        """Intents not yet settled (signed or sent): what a restarted worker must look up on-chain."""
        sql = f"{_SELECT} WHERE status IN ('signed', 'sent')"
        params: tuple[Any, ...] = ()
        if golem_id is not None:
            sql += " AND golem_id = ?"
            params = (golem_id,)
        with self._tx() as db:
            rows = db.execute(sql + " ORDER BY golem_id, nonce", params).fetchall()
        return [self._row(r) for r in rows]

    # ── plans ───────────────────────────────────────────────────────────────────────────────

    _PLAN_SELECT = "SELECT golem_id, tick, action_index, permit_id, calls, failed_reason FROM tx_plans"
    _PLAN_KEY = "golem_id = ? AND tick = ? AND action_index = ?"

    def _plan(self, db: sqlite3.Connection, key: tuple[str, int, int]) -> TxPlan | None:
        row = db.execute(f"{self._PLAN_SELECT} WHERE {self._PLAN_KEY}", key).fetchone()
        if not row:
            return None
        return TxPlan(
            golem_id=row[0], tick=row[1], action_index=row[2], permit_id=row[3], calls=json.loads(row[4]),
            failed_reason=row[5],
        )  # fmt: skip

    def record_plan(
        self, golem_id: str, tick: int, action_index: int, permit_id: str, calls: list[dict[str, Any]]
    ) -> TxPlan:
        """Freeze the calls of an action; the first plan wins and is returned on every later call."""
        key = (golem_id, tick, action_index)
        with self._tx() as db:
            existing = self._plan(db, key)
            if existing is not None:
                return existing
            db.execute(
                "INSERT INTO tx_plans (golem_id, tick, action_index, permit_id, calls, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (*key, permit_id, json.dumps(calls, sort_keys=True), time.time()),
            )
            return self._plan(db, key)  # type: ignore[return-value]

    def mark_plan_failed(self, golem_id: str, tick: int, action_index: int, reason: str) -> TxPlan:
        """The action stopped before a call was sent (it would revert); a retry must not try again."""
        key = (golem_id, tick, action_index)
        with self._tx() as db:
            if self._plan(db, key) is None:
                raise JournalError(f"no plan recorded for {key}")
            db.execute(f"UPDATE tx_plans SET failed_reason = ? WHERE {self._PLAN_KEY}", (reason, *key))
            return self._plan(db, key)  # type: ignore[return-value]

    def get_plan(self, golem_id: str, tick: int, action_index: int) -> TxPlan | None:
        with self._tx() as db:
            return self._plan(db, (golem_id, tick, action_index))
