"""A golem's inbox of consolidator proposals (in <data>/clade/exchange.sqlite beside its exchange ledger): written by
a memory-consolidator, decided by the golem's own admission gate at its next tick, each decision kept with its
score. Docs: docs/design/clade.md#the-memory-consolidator.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from pydantic import BaseModel

from golem.clade.consolidator import Proposal
from golem.grimoire.semantic.admission import admit
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, Provenance, SemanticStore
from golem.storage import connect, init_db

SCHEMA = """
CREATE TABLE IF NOT EXISTS proposals (id TEXT PRIMARY KEY, body TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
                                      proposed_at TEXT NOT NULL, decided_tick INTEGER, decision TEXT,
                                      score REAL, entry_id TEXT);
"""


class Decided(BaseModel):
    proposal: Proposal
    status: str  # pending | admitted | admitted_low | merged | skipped | rejected | quarantined
    decided_tick: int | None = None
    score: float | None = None
    entry_id: str | None = None


class ProposalInbox:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        init_db(self.path, SCHEMA)

    def _db(self) -> sqlite3.Connection:
        return connect(self.path, rows=True)

    def offer(self, items: list[Proposal], when: str) -> int:
        """Add proposals not offered before; returns how many are new."""
        with closing(self._db()) as db, db:
            before = db.total_changes
            db.executemany("INSERT OR IGNORE INTO proposals (id, body, proposed_at) VALUES (?, ?, ?)",
                           [(p.id, p.model_dump_json(), when) for p in items])
            return db.total_changes - before

    def all(self, status: str | None = None) -> list[Decided]:
        with closing(self._db()) as db:
            rows = db.execute("SELECT * FROM proposals" + (" WHERE status = ?" if status else "") + " ORDER BY id",
                              (status,) if status else ()).fetchall()
        return [Decided(proposal=Proposal.model_validate_json(r["body"]), status=r["status"],
                        decided_tick=r["decided_tick"], score=r["score"], entry_id=r["entry_id"]) for r in rows]

    def decide(self, store: SemanticStore, tick: int) -> list[Decided]:
        """The golem's own admission gate on every pending proposal (an insight from the clade: heuristics are
        derived locally); the decision is kept."""
        out = []
        for d in self.all("pending"):
            p = d.proposal
            entry = GrimoireEntry(category=EntryType.INSIGHT, content=p.content, provenance=Provenance.CLADE,
                                  source=EntrySource(golem_id=p.consolidator), created_tick=tick, valid_from=tick,
                                  parent_episode_ids=p.parent_episode_ids,
                                  tags=sorted({"consolidator", p.scope, *(f"seen-by:{g}" for g in p.golems)}))
            decision = admit(store, entry, tick=tick)
            with closing(self._db()) as db, db:
                db.execute("UPDATE proposals SET status = ?, decided_tick = ?, decision = ?, score = ?, entry_id = ? "
                           "WHERE id = ? AND status = 'pending'",
                           (decision.action.value, tick, decision.model_dump_json(include={"action", "flags"}),
                            decision.score, decision.entry_id, p.id))
            out.append(d.model_copy(update={"status": decision.action.value, "decided_tick": tick,
                                            "score": decision.score, "entry_id": decision.entry_id}))
        return out
