"""The semantic store's SQLite schema: the migrations that build grimoire.sqlite, in order.

Each migration moves the file from version i to i+1; opening an older file runs the missing ones in order, in one
transaction each, so existing rows survive ("migrations that keep data"). The tables are those of
store.py (entries, their FTS5 index, quarantine, cold storage, the admission and retrieval logs), graph.py (the
causal graph, the bi-temporal knowledge graph) and transfer.py
(imported edges); `SemanticStore` runs `migrate` when it opens.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from golem.storage import immediate_tx

_MIGRATIONS: list[str] = [
    # v1: the original table, before the lifecycle columns.
    """
    CREATE TABLE grimoire_entries (
        id TEXT PRIMARY KEY,
        category TEXT NOT NULL,
        content TEXT NOT NULL,
        confidence REAL NOT NULL,
        quality_score REAL NOT NULL,
        validated_count INTEGER NOT NULL DEFAULT 0,
        contradicted_count INTEGER NOT NULL DEFAULT 0,
        decay_class TEXT NOT NULL,
        market_regime TEXT,
        valid_from INTEGER NOT NULL DEFAULT 0,
        valid_until INTEGER,
        parent_episode_ids TEXT NOT NULL DEFAULT '[]',
        tags TEXT NOT NULL DEFAULT '[]',
        provenance TEXT NOT NULL,
        source TEXT NOT NULL,
        emotional_tag TEXT,
        created_tick INTEGER NOT NULL DEFAULT 0
    );
    """,
    # v2: the lifecycle ALTER TABLEs (strength, last_accessed, consecutive_low_confidence) + ours.
    """
    ALTER TABLE grimoire_entries ADD COLUMN strength REAL NOT NULL DEFAULT 1;
    ALTER TABLE grimoire_entries ADD COLUMN last_accessed_at INTEGER;
    ALTER TABLE grimoire_entries ADD COLUMN consecutive_low_confidence INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE grimoire_entries ADD COLUMN dream_validated INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE grimoire_entries ADD COLUMN retention REAL NOT NULL DEFAULT 1.0;
    ALTER TABLE grimoire_entries ADD COLUMN access_count INTEGER NOT NULL DEFAULT 0;
    UPDATE grimoire_entries SET last_accessed_at = created_tick WHERE last_accessed_at IS NULL;
    """,
    # v3: FTS5 over content, quarantine, cold storage, logs for the quality metrics.
    """
    CREATE VIRTUAL TABLE grimoire_fts USING fts5(content, content='grimoire_entries', content_rowid='rowid');
    INSERT INTO grimoire_fts(rowid, content) SELECT rowid, content FROM grimoire_entries;
    CREATE TRIGGER grimoire_ai AFTER INSERT ON grimoire_entries BEGIN
        INSERT INTO grimoire_fts(rowid, content) VALUES (new.rowid, new.content);
    END;
    CREATE TRIGGER grimoire_ad AFTER DELETE ON grimoire_entries BEGIN
        INSERT INTO grimoire_fts(grimoire_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
    END;
    CREATE TRIGGER grimoire_au AFTER UPDATE OF content ON grimoire_entries BEGIN
        INSERT INTO grimoire_fts(grimoire_fts, rowid, content) VALUES ('delete', old.rowid, old.content);
        INSERT INTO grimoire_fts(rowid, content) VALUES (new.rowid, new.content);
    END;
    CREATE TABLE quarantined_entries (
        id TEXT PRIMARY KEY,
        entry TEXT NOT NULL,            -- the candidate GrimoireEntry as JSON
        reason TEXT NOT NULL,
        conflicts_with TEXT NOT NULL,   -- JSON list of entry ids
        quarantined_tick INTEGER NOT NULL,
        reviewed INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE cold_entries (
        id TEXT PRIMARY KEY,
        entry TEXT NOT NULL,
        archived_tick INTEGER NOT NULL
    );
    CREATE TABLE admission_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        tick INTEGER NOT NULL,
        category TEXT NOT NULL,
        action TEXT NOT NULL,           -- admitted | admitted_low | merged | rejected | quarantined | skipped
        score REAL NOT NULL,
        entry_id TEXT
    );
    CREATE TABLE retrieval_log (
        tick INTEGER PRIMARY KEY,
        retrieved INTEGER NOT NULL,
        hits INTEGER NOT NULL,
        abstained INTEGER NOT NULL
    );
    CREATE INDEX idx_entries_category ON grimoire_entries(category);
    """,
    # v4: causal graph and the bi-temporal knowledge graph.
    """
    CREATE TABLE causal_edges (
        source_id TEXT NOT NULL,
        target_id TEXT NOT NULL,
        weight REAL NOT NULL DEFAULT 1.0,
        evidence INTEGER NOT NULL DEFAULT 1,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (source_id, target_id)
    );
    CREATE TABLE kg_facts (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        fact_id TEXT NOT NULL,
        subject TEXT NOT NULL,
        predicate TEXT NOT NULL,
        object TEXT NOT NULL,
        confidence REAL NOT NULL,
        valid_from INTEGER NOT NULL,     -- block the fact became true
        valid_until INTEGER,             -- block it stopped being true (NULL = still true)
        tx_from INTEGER NOT NULL,        -- tick this version was recorded
        tx_until INTEGER                 -- tick this version was replaced (NULL = current knowledge)
    );
    CREATE INDEX idx_kg_subject ON kg_facts(subject);
    CREATE INDEX idx_kg_object ON kg_facts(object);
    """,
    # v5: ledger of imported causal edges, keyed by the stable edge id, so re-importing a file is a no-op.
    """
    CREATE TABLE imported_edges (
        edge_id TEXT NOT NULL,
        origin TEXT NOT NULL,            -- golem id of the export it came from
        imported_tick INTEGER NOT NULL,
        PRIMARY KEY (edge_id, origin)
    );
    """,
    # v6: quarantine review (ours): a quarantined candidate is re-examined at every Curator cycle and
    # released or dropped; its row stays either way (the audit), and `reviewed` = 1 once it is resolved.
    """
    ALTER TABLE quarantined_entries ADD COLUMN status TEXT NOT NULL DEFAULT 'pending';  -- pending|released|dropped
    ALTER TABLE quarantined_entries ADD COLUMN review_cycles INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE quarantined_entries ADD COLUMN last_reviewed_tick INTEGER;
    ALTER TABLE quarantined_entries ADD COLUMN resolved_tick INTEGER;
    ALTER TABLE quarantined_entries ADD COLUMN resolution TEXT;         -- why it was released or dropped
    ALTER TABLE quarantined_entries ADD COLUMN admission_action TEXT;   -- what admit() did on release
    ALTER TABLE quarantined_entries ADD COLUMN entry_id TEXT;           -- the entry it became or merged into
    CREATE INDEX idx_quarantine_status ON quarantined_entries(status);
    """,
    # v7: a change counter over what retrieval's in-memory entry index holds (ours: semantic/index.py), so
    # a query checks one row instead of scanning the table; access bookkeeping (mark_accessed) does not count.
    """
    CREATE TABLE entry_changes (n INTEGER NOT NULL);
    INSERT INTO entry_changes VALUES (0);
    CREATE TRIGGER entry_changes_ai AFTER INSERT ON grimoire_entries BEGIN
        UPDATE entry_changes SET n = n + 1;
    END;
    CREATE TRIGGER entry_changes_ad AFTER DELETE ON grimoire_entries BEGIN
        UPDATE entry_changes SET n = n + 1;
    END;
    CREATE TRIGGER entry_changes_au AFTER UPDATE OF content, tags, category, valid_from, valid_until, created_tick
        ON grimoire_entries BEGIN
        UPDATE entry_changes SET n = n + 1;
    END;
    """,
    # v8: the regime cell of the tick that wrote an entry (docs/design/learning.md#the-regime-tag); NULL on older rows
    """
    ALTER TABLE grimoire_entries ADD COLUMN regime_tag TEXT;
    """,
]
SCHEMA_VERSION = len(_MIGRATIONS)


def migrate(path: Path) -> int:
    """Bring the SQLite file at `path` to SCHEMA_VERSION; returns the version it started at."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with immediate_tx(path) as db:
        db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
        start = int(row[0] or 0)
        if start > SCHEMA_VERSION:
            raise ValueError(
                f"{path} has schema version {start}, newer than this code's {SCHEMA_VERSION}; upgrade golem"
            )
        for version in range(start, SCHEMA_VERSION):
            for stmt in _split_sql(_MIGRATIONS[version]):
                db.execute(stmt)
            db.execute("INSERT INTO schema_version (version) VALUES (?)", (version + 1,))
    return start


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies (BEGIN … END;) whole."""
    out: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buf.strip()[:80]}")
    return out
