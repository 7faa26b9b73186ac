"""The Event Fabric's append-only store: `<data>/events.sqlite`, read as a stream by seq.

Append-only: an event is inserted once (its id is what it is about, so a retried activity's second
emit is ignored) and never updated; retention drops the oldest rows past an age or a count. Readers
(`golem events --follow`, the dashboard's SSE stream) poll by seq, which only grows.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path

from golem.events.models import GolemEvent
from golem.storage import connect, init_db
from golem.layout import DataLayout

log = logging.getLogger("golem.events")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    golem TEXT NOT NULL,
    tick INTEGER,
    time TEXT NOT NULL,
    subsystem TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_kind ON events(kind, seq);
CREATE INDEX IF NOT EXISTS events_time ON events(time);
"""

# A live view needs far fewer events to reconnect; on disk we keep more, so an owner can scroll back a month: 30 days,
# at most 200,000 events (10k ticks of history × their ~10 events each fit).
RETENTION_DAYS = 30
RETENTION_MAX_EVENTS = 200_000
PRUNE_EVERY = 500  # appends between retention passes

_COLS = "seq, id, golem, tick, time, subsystem, kind, payload"


def _row_event(row: tuple) -> GolemEvent:
    seq, ident, golem, tick, time, subsystem, kind, payload = row
    return GolemEvent(seq=seq, id=ident, golem=golem, tick=tick, time=time, subsystem=subsystem, kind=kind,
                      payload=json.loads(payload))


class EventStore:
    def __init__(self, data: DataLayout | Path, *, retention_days: float = RETENTION_DAYS,
                 max_events: int = RETENTION_MAX_EVENTS) -> None:
        self.layout = DataLayout.of(data)
        self.path = self.layout.events
        self.retention_days = retention_days
        self.max_events = max_events
        self._appends = 0
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        if not self._ready:
            init_db(self.path, _SCHEMA)
            self._ready = True
        return connect(self.path)

    def exists(self) -> bool:
        return self.path.exists()

    def append(self, events: Iterable[GolemEvent]) -> list[GolemEvent]:
        """Insert the events not yet stored (by id), in order; return those that were new, with their seq."""
        new: list[GolemEvent] = []
        with closing(self._connect()) as db, db:
            for e in events:
                cur = db.execute(
                    "INSERT OR IGNORE INTO events (id, golem, tick, time, subsystem, kind, payload) VALUES (?,?,?,?,?,?,?)",
                    (e.id, e.golem, e.tick, e.time, e.subsystem.value, e.kind, json.dumps(e.payload, default=str)),
                )
                if cur.rowcount:
                    new.append(e.model_copy(update={"seq": cur.lastrowid}))
        self._appends += len(new)
        if self._appends >= PRUNE_EVERY:
            self._appends = 0
            self.prune()
        return new

    def prune(self, now: datetime | None = None) -> int:
        """Retention: drop events older than retention_days, then the oldest past max_events."""
        cutoff = ((now or datetime.now(timezone.utc)) - timedelta(days=self.retention_days)).isoformat()
        with closing(self._connect()) as db, db:
            dropped = db.execute("DELETE FROM events WHERE time < ?", (cutoff,)).rowcount
            top = db.execute("SELECT MAX(seq) FROM events").fetchone()[0] or 0
            dropped += db.execute("DELETE FROM events WHERE seq <= ?", (top - self.max_events,)).rowcount
        return dropped

    def read(self, *, after: int = 0, kinds: Iterable[str] = (), since: str | None = None, limit: int = 1000,
             newest: bool = False) -> list[GolemEvent]:
        """Events with seq > after (oldest first); kinds: exact kinds or whole subsystems ("actions");
        newest: the last `limit` of them instead of the first."""
        where, params = ["seq > ?"], [after]
        kinds = list(kinds)
        if kinds:
            exact = [k for k in kinds if "." in k]
            subs = [k for k in kinds if "." not in k]
            parts = []
            if exact:
                parts.append(f"kind IN ({','.join('?' for _ in exact)})")
                params += exact
            if subs:
                parts.append(f"subsystem IN ({','.join('?' for _ in subs)})")
                params += subs
            where.append("(" + " OR ".join(parts) + ")")
        if since:
            where.append("time >= ?")
            params.append(since)
        order = "DESC" if newest else "ASC"
        sql = f"SELECT {_COLS} FROM events WHERE {' AND '.join(where)} ORDER BY seq {order} LIMIT ?"
        if not self.path.exists():
            return []
        with closing(self._connect()) as db:
            rows = db.execute(sql, (*params, limit)).fetchall()
        events = [_row_event(r) for r in rows]
        return list(reversed(events)) if newest else events

    def payloads(self, kind: str, *, after: int = 0, limit: int = 10_000) -> list[tuple[int, int | None, str, dict]]:
        """(seq, tick, time, payload) of the newest `limit` events of one kind after seq `after`, oldest first —
        the dashboard's fast path (no envelope objects for 10,000 ticks)."""
        if not self.path.exists():
            return []
        with closing(self._connect()) as db:
            rows = db.execute("SELECT seq, tick, time, payload FROM events WHERE kind = ? AND seq > ? "
                              "ORDER BY seq DESC LIMIT ?", (kind, after, limit)).fetchall()
        return [(seq, tick, time, json.loads(payload)) for seq, tick, time, payload in reversed(rows)]

    def series(self, kind: str, field: str, *, since: str) -> list[tuple[str, float]]:
        """(time, payload[field]) of one kind's events since `since`, oldest first, where the field is a number —
        read by SQLite's JSON functions, so a 30-day window is not parsed payload by payload (the delta cycle's
        external trend)."""
        if not field.isidentifier():
            raise ValueError(f"series field must be a plain payload key, got {field!r}")
        if not self.path.exists():
            return []
        with closing(self._connect()) as db:
            rows = db.execute(f"SELECT time, json_extract(payload, '$.{field}') AS v FROM events "
                              "WHERE kind = ? AND time >= ? AND json_type(payload, ?) IN ('integer', 'real') "
                              "ORDER BY seq", (kind, since, f"$.{field}")).fetchall()
        return [(t, float(v)) for t, v in rows]

    def last_seq(self) -> int:
        if not self.path.exists():
            return 0
        with closing(self._connect()) as db:
            return db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0]

    def count(self) -> int:
        if not self.path.exists():
            return 0
        with closing(self._connect()) as db:
            return db.execute("SELECT COUNT(*) FROM events").fetchone()[0]


class EventSink:
    """What activities emit through: the store, then listeners (the worker's metrics) for each new event.

    Emitting never fails a step: an event that cannot be stored is logged and the tick goes on."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.listeners: list[Callable[[GolemEvent], None]] = []

    def emit(self, events: Iterable[GolemEvent]) -> list[GolemEvent]:
        try:
            new = self.store.append(events)
        except sqlite3.Error as err:
            log.error("events not stored (%s): %s", self.store.path, err)
            return []
        for e in new:
            for listener in self.listeners:
                try:
                    listener(e)
                except Exception:  # a broken listener must not fail the activity that emitted
                    log.exception("event listener failed on %s", e.kind)
        return new
