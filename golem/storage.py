"""SQLite plumbing shared by the golem's small stores (cycle index, heuristics, permits, tx journal).

One short-lived connection per operation, WAL mode: safe across the worker, the CLI and tests
reading and writing the same file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path


def connect(path: Path, *, timeout: float = 30.0, rows: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=timeout)
    if rows:
        conn.row_factory = sqlite3.Row
    return conn


def init_db(path: Path, schema: str) -> Path:
    """Create the parent folder and the schema (idempotent), in WAL mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(connect(path)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(schema)  # executescript manages its own transaction
    return path


@contextmanager
def immediate_tx(path: Path, *, durable: bool = False, timeout: float = 10.0) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE … COMMIT, so a check-then-write is atomic across processes.

    durable: synchronous=FULL, for records that must survive a crash right after they are written."""
    db = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        if durable:
            db.execute("PRAGMA synchronous=FULL")
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
    finally:
        db.close()
