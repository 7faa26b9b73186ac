"""The Grimoire's write pause and pending queue.

While the grimoire is paused no new vector is written: the stores `divert` each row that would need one into a
durable queue; a full re-embed (golem/grimoire/integrity.py) flushes it and lifts the pause. Pause and queue share
`<grimoire>/write-guard.sqlite`, so "is it paused?" and "queue this row" are one transaction; the file does not exist
until the first pause. Reasons: `drift` (lifted only by a full re-embed) and `reembed-episodes` / `reembed-semantic`
(held while a process rewrites that table). See docs/design/grimoire.md#embeddings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from golem.storage import connect, immediate_tx

GUARD_FILE = "write-guard.sqlite"
REASONS = ("drift", "reembed-episodes", "reembed-semantic")
STORES = ("episodes", "semantic")

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS pause (
        reason TEXT PRIMARY KEY,       -- drift | reembed-episodes | reembed-semantic
        since TEXT NOT NULL,           -- ISO time it was set
        detail TEXT NOT NULL           -- JSON: the drift report, or who holds a re-embed
    )""",
    """CREATE TABLE IF NOT EXISTS pending (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        store TEXT NOT NULL,           -- episodes | semantic
        id TEXT NOT NULL,              -- episode id / entry id
        payload TEXT NOT NULL,         -- episodes: the Episode as JSON; semantic: the entry content
        queued_at TEXT NOT NULL,
        UNIQUE (store, id)             -- a retried write replaces its own queued row (new seq)
    )""",
]


def _applies(reasons: set[str], store: str) -> bool:
    """Is `store` paused under these reasons?"""
    return "drift" in reasons or f"reembed-{store}" in reasons


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class WriteGuard:
    """Pause marker + pending queue of one grimoire directory."""

    def __init__(self, grimoire_dir: Path) -> None:
        self.dir = Path(grimoire_dir)
        self.path = self.dir / GUARD_FILE

    def _create(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with immediate_tx(self.path) as db:
            for stmt in _SCHEMA:
                db.execute(stmt)

    # ---- the pause -----------------------------------------------------------------------------
    def pause(self, reason: str, detail: dict[str, Any] | None = None) -> None:
        """Set (or refresh) a pause reason. Idempotent."""
        if reason not in REASONS:
            raise ValueError(f"pause reason must be one of {', '.join(REASONS)}, got {reason!r}")
        self._create()
        with immediate_tx(self.path, durable=True) as db:
            db.execute("INSERT INTO pause (reason, since, detail) VALUES (?, ?, ?) ON CONFLICT(reason) DO UPDATE "
                       "SET detail = excluded.detail", (reason, _now(), json.dumps(detail or {}, default=str)))

    def reasons(self) -> dict[str, dict[str, Any]]:
        """{reason: {"since", "detail"}} of the pause now in force (empty: writes flow)."""
        if not self.path.exists():
            return {}
        with closing(connect(self.path)) as db:
            rows = db.execute("SELECT reason, since, detail FROM pause ORDER BY reason").fetchall()
        return {r[0]: {"since": r[1], "detail": json.loads(r[2])} for r in rows}

    @property
    def paused(self) -> bool:
        return bool(self.reasons())

    def paused_for(self, store: str) -> bool:
        return _applies(set(self.reasons()), store)

    def lift(self, reasons: Iterable[str]) -> bool:
        """Remove these reasons, unless a store they would unpause still has queued rows (checked in the same
        transaction, so no writer can queue a row that nobody will flush). True when they were removed."""
        reasons = list(reasons)
        if not self.path.exists():
            return True
        with immediate_tx(self.path, durable=True) as db:
            now = {r[0] for r in db.execute("SELECT reason FROM pause")}
            after = now - set(reasons)
            for store in STORES:
                if _applies(now, store) and not _applies(after, store) and \
                        db.execute("SELECT 1 FROM pending WHERE store = ? LIMIT 1", (store,)).fetchone():
                    return False
            db.executemany("DELETE FROM pause WHERE reason = ?", [(r,) for r in reasons])
        return True

    @contextmanager
    def holding(self, reason: str, detail: dict[str, Any], flush: Callable[[], int], *, enabled: bool = True,
                attempts: int = 20) -> Iterator[None]:
        """Pause under `reason` while the body rewrites a table, so writers in other processes queue instead
        of being overwritten. On success, flush their queued rows (`flush`) and lift the pause once nothing is
        left queued; if the body fails, the old table stands and the pause is lifted only when the queue is
        empty (rows queued meanwhile keep it until a re-embed flushes them)."""
        if not enabled:
            yield
            return
        self.pause(reason, detail)
        try:
            yield
        except BaseException:
            self.lift([reason])
            raise
        for _ in range(attempts):
            if self.lift([reason]):
                return
            flush()
        raise RuntimeError(f"{self.path}: writers keep queueing rows; the {reason} pause stays set "
                           f"(run `golem grimoire resume` once they stop)")

    # ---- the queue -----------------------------------------------------------------------------
    def divert(self, store: str, rows: list[tuple[str, str]]) -> bool:
        """If paused, queue `rows` [(id, payload)] for `store` and return True (the caller must not write
        them); otherwise return False and queue nothing. Check and queue are one transaction."""
        if store not in STORES:
            raise ValueError(f"store must be one of {', '.join(STORES)}, got {store!r}")
        if not rows or not self.path.exists():
            return False
        with immediate_tx(self.path, durable=True) as db:
            if not _applies({r[0] for r in db.execute("SELECT reason FROM pause")}, store):
                return False
            now = _now()
            db.executemany("INSERT OR REPLACE INTO pending (store, id, payload, queued_at) VALUES (?, ?, ?, ?)",
                           [(store, i, p, now) for i, p in rows])
        return True

    def pending(self, store: str | None = None, ids: list[str] | None = None) -> list[dict[str, Any]]:
        """Queued rows, oldest first: [{"seq", "store", "id", "payload", "queued_at"}]."""
        if not self.path.exists():
            return []
        sql, args = "SELECT seq, store, id, payload, queued_at FROM pending WHERE 1 = 1", list[Any]()
        if store is not None:
            sql, args = sql + " AND store = ?", [*args, store]
        if ids is not None:
            if not ids:
                return []
            sql, args = sql + f" AND id IN ({','.join('?' * len(ids))})", [*args, *ids]
        with closing(connect(self.path)) as db:
            rows = db.execute(sql + " ORDER BY seq", args).fetchall()
        return [{"seq": r[0], "store": r[1], "id": r[2], "payload": r[3], "queued_at": r[4]} for r in rows]

    def pending_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STORES, 0)
        if self.path.exists():
            with closing(connect(self.path)) as db:
                counts.update(dict(db.execute("SELECT store, COUNT(*) FROM pending GROUP BY store").fetchall()))
        return counts

    def ack(self, seqs: list[int]) -> None:
        """Forget queued rows that were written. By seq: a row re-queued meanwhile has a new seq and stays."""
        if not seqs or not self.path.exists():
            return
        with immediate_tx(self.path, durable=True) as db:
            db.executemany("DELETE FROM pending WHERE seq = ?", [(s,) for s in seqs])

    def status(self) -> dict[str, Any]:
        """For `golem grimoire stats`: {"paused", "reasons", "pending"}."""
        reasons = self.reasons()
        return {"paused": bool(reasons), "reasons": reasons, "pending": self.pending_counts()}
