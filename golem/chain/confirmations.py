"""Confirmation tracking and reorg detection.

Every executed action is tracked with the block (number and hash) its tx landed in; `ConfirmationTracker.poll(w3)`
runs once per tick: pending → confirmed at `depth` canonical blocks, pending/confirmed → reorged when the receipt
vanished or the block hash changed (the report asks for an immediate T2). Depth is 2, raised to 5 while reorgs are
frequent. State lives in SQLite next to the tx journal. Why: docs/design/tick.md#confirmations-and-reorgs.
"""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Any

from eth_typing import HexStr
from pydantic import BaseModel, Field
from web3 import Web3
from web3.exceptions import BlockNotFound, TransactionNotFound

from golem.storage import immediate_tx, init_db

BASE_DEPTH = 2  # 2-block confirmation
RAISED_DEPTH = 5  # auto-increase to 5 blocks
REORG_WINDOW_BLOCKS = 1_000  # over a 1,000-block window
REORG_RATE_LIMIT = 1 / 100  # more than 1 reorg per 100 blocks
WATCH_CONFIRMED_BLOCKS = 64  # keep re-checking confirmed actions this long (deep reorgs are rare)
SEEN_HEADS_KEPT = 256


class ConfirmationStatus(str, Enum):
    PENDING = "pending"
    CONFIRMED = "confirmed"
    REORGED = "reorged"


class TrackedAction(BaseModel):
    golem_id: str
    tick: int
    action_index: int
    tx_hash: str
    block_number: int
    block_hash: str
    status: ConfirmationStatus
    confirmations: int = 0
    detail: str = ""


class ConfirmationReport(BaseModel):
    head: int
    depth: int
    newly_confirmed: list[TrackedAction] = Field(default_factory=list)
    reorged: list[TrackedAction] = Field(default_factory=list)
    still_pending: list[TrackedAction] = Field(default_factory=list)
    reorg_detected_at: list[int] = Field(default_factory=list)  # fork block numbers found this poll

    @property
    def force_t2(self) -> bool:
        return bool(self.reorged or self.reorg_detected_at)

    @property
    def reorged_ticks(self) -> list[int]:
        return sorted({a.tick for a in self.reorged})


def required_depth(reorg_blocks: list[int], head: int) -> int:
    """5 blocks while reorgs in the last 1,000 blocks exceed 1 per 100 blocks, else 2."""
    recent = [b for b in reorg_blocks if b > head - REORG_WINDOW_BLOCKS]
    return RAISED_DEPTH if len(recent) > REORG_WINDOW_BLOCKS * REORG_RATE_LIMIT else BASE_DEPTH


_SCHEMA = """
CREATE TABLE IF NOT EXISTS tracked_actions (
    golem_id TEXT NOT NULL, tick INTEGER NOT NULL, action_index INTEGER NOT NULL,
    tx_hash TEXT NOT NULL, block_number INTEGER NOT NULL, block_hash TEXT NOT NULL,
    status TEXT NOT NULL, confirmations INTEGER NOT NULL DEFAULT 0, detail TEXT NOT NULL DEFAULT '',
    updated_at REAL NOT NULL,
    PRIMARY KEY (golem_id, tick, action_index)
);
CREATE TABLE IF NOT EXISTS reorgs (
    fork_block INTEGER NOT NULL, detected_at_head INTEGER NOT NULL, at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS seen_heads (number INTEGER PRIMARY KEY, hash TEXT NOT NULL);
"""

_COLS = "golem_id, tick, action_index, tx_hash, block_number, block_hash, status, confirmations, detail"


def _hex(h: str | bytes) -> str:
    if isinstance(h, str):
        return h.lower() if h.startswith("0x") else "0x" + h.lower()
    return "0x" + bytes(h).hex()


class ConfirmationTracker:
    def __init__(self, path: str | Path) -> None:
        self.path = init_db(Path(path), _SCHEMA)

    def track(self, golem_id: str, tick: int, action_index: int, tx_hash: str, block_number: int,
              block_hash: str | bytes) -> None:
        """Start tracking an executed action (idempotent: a retried verify re-tracks the same tx)."""
        with immediate_tx(self.path, durable=True) as db:
            db.execute(
                f"INSERT OR REPLACE INTO tracked_actions ({_COLS}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, '', ?)",
                (golem_id, tick, action_index, _hex(tx_hash), block_number, _hex(block_hash),
                 ConfirmationStatus.PENDING.value, time.time()),
            )  # fmt: skip

    def get(self, golem_id: str, tick: int, action_index: int) -> TrackedAction | None:
        with immediate_tx(self.path) as db:
            row = db.execute(f"SELECT {_COLS} FROM tracked_actions WHERE golem_id = ? AND tick = ? AND action_index = ?",
                             (golem_id, tick, action_index)).fetchone()
        return TrackedAction(**dict(zip([c.strip() for c in _COLS.split(",")], row))) if row else None

    def reorg_blocks(self) -> list[int]:
        with immediate_tx(self.path) as db:
            return [r[0] for r in db.execute("SELECT fork_block FROM reorgs ORDER BY fork_block").fetchall()]

    def depth(self, head: int) -> int:
        return required_depth(self.reorg_blocks(), head)

    def poll(self, w3: Web3, golem_id: str | None = None) -> ConfirmationReport:
        head_block = w3.eth.get_block("latest")
        head = head_block["number"]
        fork_points = self._check_heads(w3, head, _hex(head_block["hash"]))
        depth = self.depth(head)
        report = ConfirmationReport(head=head, depth=depth, reorg_detected_at=fork_points)
        with immediate_tx(self.path) as db:
            sql = f"SELECT {_COLS} FROM tracked_actions WHERE (status = 'pending' OR (status = 'confirmed' AND block_number > ?))"
            params: list[Any] = [head - WATCH_CONFIRMED_BLOCKS]
            if golem_id is not None:
                sql += " AND golem_id = ?"
                params.append(golem_id)
            rows = db.execute(sql, params).fetchall()
        names = [c.strip() for c in _COLS.split(",")]
        for row in rows:
            t = TrackedAction(**dict(zip(names, row)))
            status, detail, confs = self._status(w3, t, head, depth)
            if status is ConfirmationStatus.REORGED:
                report.reorged.append(t.model_copy(update={"status": status, "detail": detail}))
            elif status is ConfirmationStatus.CONFIRMED and t.status is ConfirmationStatus.PENDING:
                report.newly_confirmed.append(t.model_copy(update={"status": status, "confirmations": confs}))
            elif status is ConfirmationStatus.PENDING:
                report.still_pending.append(t.model_copy(update={"confirmations": confs}))
            if status is not t.status or confs != t.confirmations:
                with immediate_tx(self.path, durable=True) as db:
                    db.execute(
                        "UPDATE tracked_actions SET status = ?, confirmations = ?, detail = ?, updated_at = ? "
                        "WHERE golem_id = ? AND tick = ? AND action_index = ?",
                        (status.value, confs, detail, time.time(), t.golem_id, t.tick, t.action_index),
                    )
        if report.reorged and not fork_points:
            # our tx's block was replaced although the heads we saw did not show it (no poll in between)
            self._record_reorg(min(a.block_number for a in report.reorged), head)
            report.reorg_detected_at.append(min(a.block_number for a in report.reorged))
            report.depth = self.depth(head)
        return report

    # ── internals ───────────────────────────────────────────────────────────────────────────

    def _status(self, w3: Web3, t: TrackedAction, head: int, depth: int) -> tuple[ConfirmationStatus, str, int]:
        try:
            receipt = w3.eth.get_transaction_receipt(HexStr(t.tx_hash))
        except TransactionNotFound:
            receipt = None
        if receipt is None:
            return ConfirmationStatus.REORGED, f"tx {t.tx_hash} is no longer on chain (block {t.block_number} reorged)", 0
        if _hex(receipt["blockHash"]) != t.block_hash:
            return (ConfirmationStatus.REORGED,
                    f"tx {t.tx_hash} moved from block {t.block_number} to {receipt['blockNumber']} (reorg)", 0)
        try:
            canonical = _hex(w3.eth.get_block(t.block_number)["hash"])
        except BlockNotFound:
            canonical = None
        if canonical != t.block_hash:
            return ConfirmationStatus.REORGED, f"block {t.block_number} was replaced (reorg)", 0
        confs = head - t.block_number + 1
        if confs >= depth:
            return ConfirmationStatus.CONFIRMED, f"{confs} confirmations (depth {depth})", confs
        return ConfirmationStatus.PENDING, f"{confs} of {depth} confirmations", confs

    def _record_reorg(self, fork_block: int, head: int) -> None:
        with immediate_tx(self.path, durable=True) as db:
            db.execute("INSERT INTO reorgs VALUES (?, ?, ?)", (fork_block, head, time.time()))

    def _check_heads(self, w3: Web3, head: int, head_hash: str) -> list[int]:
        """Compare the heads remembered from earlier polls with the chain now; returns fork points."""
        with immediate_tx(self.path) as db:
            seen = db.execute("SELECT number, hash FROM seen_heads ORDER BY number DESC").fetchall()
        fork = None
        for number, h in seen:
            if number > head:
                fork = number if fork is None else min(fork, number)
                continue
            try:
                now = _hex(w3.eth.get_block(number)["hash"])
            except BlockNotFound:
                now = None
            if now == h:
                break  # everything older is consistent with this block
            fork = number
        with immediate_tx(self.path, durable=True) as db:
            if fork is not None:
                db.execute("DELETE FROM seen_heads WHERE number >= ?", (fork,))
                db.execute("INSERT INTO reorgs VALUES (?, ?, ?)", (fork, head, time.time()))
            db.execute("INSERT OR REPLACE INTO seen_heads VALUES (?, ?)", (head, head_hash))
            db.execute("DELETE FROM seen_heads WHERE number <= ?", (head - SEEN_HEADS_KEPT,))
        return [fork] if fork is not None else []
