"""The audit trail: every permit, tool call and outcome, appended to a SHA-256 hash chain.

Each entry's hash covers the previous hash and the entry, so editing, removing or truncating is caught;
`verify()` walks the whole chain and `golem audit verify` prints what it finds. Payloads are redacted before
hashing: a value under a key that looks like a secret is never written. See docs/design/safety.md#the-audit-trail.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from golem.storage import immediate_tx, init_db

GENESIS_HASH = "0" * 64
# Keys whose values never enter the audit trail (a signed raw tx is not secret, but it is bulky and
# lives in the tx journal already).
_REDACT = ("private_key", "privatekey", "secret", "mnemonic", "password", "api_key", "raw_tx", "signer_key")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit_log (
    seq INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    golem_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS audit_head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL
);
"""


class AuditEntry(BaseModel):
    seq: int
    at: float
    golem_id: str
    kind: str  # permit.created, permit.committed, tool_call.blocked, tx.signed, outcome.verified, ...
    payload: dict[str, Any]
    prev_hash: str
    hash: str


class AuditReport(BaseModel):
    ok: bool
    entries: int
    head_hash: str
    problems: list[str] = []
    first_bad_seq: int | None = None


def redact(value: Any) -> Any:
    """Drop values under secret-looking keys, recursively."""
    if isinstance(value, dict):
        return {
            k: ("<redacted>" if any(s in str(k).lower().replace("-", "_") for s in _REDACT) else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)


def entry_hash(prev_hash: str, seq: int, at: float, golem_id: str, kind: str, payload_json: str) -> str:
    body = canonical({"seq": seq, "at": repr(float(at)), "golem_id": golem_id, "kind": kind, "payload": payload_json})
    return hashlib.sha256((prev_hash + body).encode()).hexdigest()


class AuditLog:
    """SQLite-backed hash chain under the data dir (`audit.sqlite`). Safe across processes."""

    def __init__(self, path: str | Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = init_db(Path(path), _SCHEMA)
        self._clock = clock

    def append(self, golem_id: str, kind: str, payload: dict[str, Any]) -> AuditEntry:
        if not kind or not isinstance(kind, str):
            raise ValueError("audit kind must be a non-empty string such as 'permit.created'")
        body = canonical(redact(payload))
        with immediate_tx(self.path, durable=True) as db:
            head = db.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
            seq, prev = (head[0] + 1, head[1]) if head else (1, GENESIS_HASH)
            at = self._clock()
            h = entry_hash(prev, seq, at, golem_id, kind, body)
            db.execute(
                "INSERT INTO audit_log (seq, at, golem_id, kind, payload, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (seq, at, golem_id, kind, body, prev, h),
            )
            db.execute("INSERT OR REPLACE INTO audit_head (id, seq, hash) VALUES (1, ?, ?)", (seq, h))
        return AuditEntry(seq=seq, at=at, golem_id=golem_id, kind=kind, payload=json.loads(body), prev_hash=prev, hash=h)

    def entries(self, *, kind_prefix: str | None = None, limit: int | None = None) -> list[AuditEntry]:
        sql = "SELECT seq, at, golem_id, kind, payload, prev_hash, hash FROM audit_log"
        params: list[Any] = []
        if kind_prefix:
            sql += " WHERE kind LIKE ?"
            params.append(kind_prefix + "%")
        sql += " ORDER BY seq"
        with immediate_tx(self.path) as db:
            rows = db.execute(sql, params).fetchall()
        if limit is not None:
            rows = rows[-limit:]
        return [
            AuditEntry(seq=r[0], at=r[1], golem_id=r[2], kind=r[3], payload=json.loads(r[4]), prev_hash=r[5], hash=r[6])
            for r in rows
        ]

    def verify(self) -> AuditReport:
        """Walk the chain: every hash recomputes, every link points at its predecessor, seq has no
        gap, and the head matches the last entry. Reports the first broken entry."""
        with immediate_tx(self.path) as db:
            rows = db.execute(
                "SELECT seq, at, golem_id, kind, payload, prev_hash, hash FROM audit_log ORDER BY seq"
            ).fetchall()
            head = db.execute("SELECT seq, hash FROM audit_head WHERE id = 1").fetchone()
        return verify_rows(rows, head)


def verify_rows(rows: list[tuple[Any, ...]], head: tuple[Any, ...] | None) -> AuditReport:
    problems: list[str] = []
    first_bad: int | None = None
    prev, expect_seq = GENESIS_HASH, 1

    def bad(seq: int, msg: str) -> None:
        nonlocal first_bad
        problems.append(msg)
        if first_bad is None:
            first_bad = seq

    for seq, at, golem_id, kind, payload, prev_hash, h in rows:
        if seq != expect_seq:
            bad(seq, f"entry {expect_seq}" + (f"–{seq - 1}" if seq - 1 > expect_seq else "") + " removed (seq jumps to "
                f"{seq})")
        if prev_hash != prev:
            bad(seq, f"entry {seq}: prev_hash does not match entry {seq - 1}'s hash (an entry before it was removed or edited)")
        if entry_hash(prev_hash, seq, at, golem_id, kind, payload) != h:
            bad(seq, f"entry {seq} ({kind}): content does not match its hash (edited)")
        prev, expect_seq = h, seq + 1
    last_seq = rows[-1][0] if rows else 0
    if head is None:
        if rows:
            bad(last_seq, "head record missing (the log was tampered with outside the AuditLog)")
    elif head[0] != last_seq or head[1] != prev:
        bad(min(head[0], last_seq + 1), f"head says {head[0]} entries ending in {head[1][:12]}…, the log has {last_seq} "
            "(entries removed from the end)")
    return AuditReport(ok=not problems, entries=len(rows), head_hash=prev, problems=problems, first_bad_seq=first_bad)
