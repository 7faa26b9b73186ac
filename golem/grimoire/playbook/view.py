"""PLAYBOOK.md as a view of the admitted semantic store (quarantine, decay and supersession respected).

Every heuristic that would enter PLAYBOOK.md is first offered to the admission gate as a HEURISTIC entry whose id is
the heuristic's id (the link is kept in `heuristic_admission`). A heuristic is compiled when its votes keep it in
(in at >= 0.7, out below 0.4), its entry is admitted, in force and not in cold storage, and its effective confidence
is >= 0.4. Why: docs/design/grimoire.md#playbookmd.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from typing import Any

from pydantic import BaseModel

from golem.grimoire.semantic.admission import AdmissionAction, admit
from golem.grimoire.decay import effective_confidence
from golem.grimoire.playbook.heuristics import DEMOTE_BELOW, Heuristic, HeuristicStore
from golem.grimoire.playbook.compile import in_playbook
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore
from golem.storage import connect, immediate_tx, init_db

_SCHEMA = """
CREATE TABLE IF NOT EXISTS heuristic_admission (
    heuristic_id TEXT PRIMARY KEY,
    entry_id TEXT,                 -- the semantic entry that holds it (its own id, a merge target, a quarantine row)
    action TEXT NOT NULL,          -- the admission gate's action
    evidence_count INTEGER NOT NULL,  -- evidence when offered (a rejected or dropped one is offered again on more)
    tick INTEGER NOT NULL
);
"""
SUMMARY_LIMIT = 10  # ours: ids per list in ConsolidationResult.playbook_view (histories stay lean)


class Link(BaseModel):
    heuristic_id: str
    entry_id: str | None
    action: str
    evidence_count: int
    tick: int


class AdmittedView(BaseModel):
    """What the PLAYBOOK step did: heuristics offered to the gate this cycle, and why eligible ones stay out."""

    offered: dict[str, str] = {}  # heuristic id → admission action
    excluded: dict[str, str] = {}  # heuristic id → reason (quarantined, superseded, decayed, rejected, …)

    def summary(self, limit: int = SUMMARY_LIMIT) -> dict[str, Any]:
        """For the cycle's result (workflow history): counts, and at most `limit` ids of each."""
        return {"offered_count": len(self.offered), "excluded_count": len(self.excluded),
                "offered": dict(sorted(self.offered.items())[:limit]),
                "excluded": dict(sorted(self.excluded.items())[:limit])}


class PlaybookLinks:
    def __init__(self, store: HeuristicStore) -> None:
        self.path = store.path
        init_db(self.path, _SCHEMA)

    def get(self, heuristic_id: str) -> Link | None:
        with closing(connect(self.path, rows=True)) as db:
            r = db.execute("SELECT * FROM heuristic_admission WHERE heuristic_id = ?", (heuristic_id,)).fetchone()
        return Link(**dict(r)) if r else None

    def all(self) -> dict[str, Link]:
        with closing(connect(self.path, rows=True)) as db:
            try:
                rows = db.execute("SELECT * FROM heuristic_admission").fetchall()
            except sqlite3.OperationalError:
                return {}
        return {r["heuristic_id"]: Link(**dict(r)) for r in rows}

    def put(self, link: Link) -> None:
        with immediate_tx(self.path) as db:
            db.execute("INSERT OR REPLACE INTO heuristic_admission VALUES (?, ?, ?, ?, ?)",
                       (link.heuristic_id, link.entry_id, link.action, link.evidence_count, link.tick))


def candidate_of(h: Heuristic, golem_id: str, tick: int) -> GrimoireEntry:
    return GrimoireEntry(
        id=h.id, category=EntryType.HEURISTIC, content=h.text, confidence=h.confidence,
        parent_episode_ids=list(h.source_episode_ids), created_tick=tick, valid_from=tick,
        tags=[h.scope, "playbook"], source=EntrySource(golem_id=golem_id),
    )


def offer(heuristics: HeuristicStore, semantic: SemanticStore, golem_id: str, tick: int,
          utility_fn: Callable[[GrimoireEntry], float] | None = None) -> dict[str, str]:
    """Offer every heuristic eligible for PLAYBOOK.md and not yet offered to the admission gate (or rejected /
    dropped from quarantine before and now resting on more evidence). Idempotent: a retried step finds the links and offers nothing."""
    links = PlaybookLinks(heuristics)
    known = links.all()
    offered: dict[str, str] = {}
    for h in heuristics.list():
        if not in_playbook(h):
            continue
        link = known.get(h.id)
        if link is not None and not (_refused(link, semantic) and h.evidence_count > link.evidence_count):
            continue
        d = admit(semantic, candidate_of(h, golem_id, tick), tick=tick, utility_fn=utility_fn)
        links.put(Link(heuristic_id=h.id, entry_id=d.entry_id, action=d.action.value,
                       evidence_count=h.evidence_count, tick=tick))
        offered[h.id] = d.action.value
    return offered


def _refused(link: Link, semantic: SemanticStore) -> bool:
    """The gate said no for good: rejected, or quarantined and then dropped by the quarantine review."""
    if link.action == AdmissionAction.REJECTED.value:
        return True
    if link.action == AdmissionAction.QUARANTINED.value and link.entry_id:
        q = semantic.quarantined_one(link.entry_id)
        return q is not None and q["status"] == "dropped"
    return False


def holding_entry(link: Link | None, semantic: SemanticStore) -> tuple[GrimoireEntry | None, str | None]:
    """The semantic entry that holds a heuristic, or why there is none."""
    if link is None:
        return None, "not offered to the admission gate"
    if link.action == AdmissionAction.REJECTED.value or link.entry_id is None:
        return None, "rejected by the admission gate"
    entry_id = link.entry_id
    if link.action == AdmissionAction.QUARANTINED.value:
        q = semantic.quarantined_one(entry_id)
        if q is None or q["status"] != "released" or not q["entry_id"]:
            return None, f"quarantined ({q['status'] if q else 'row gone'})"
        entry_id = q["entry_id"]
    e = semantic.get(entry_id)
    if e is None:
        return None, "archived to cold storage (decayed)"
    return e, None


def exclusion(h: Heuristic, link: Link | None, semantic: SemanticStore, now_tick: int,
              tick_seconds: float) -> str | None:
    """Why an eligible heuristic stays out of PLAYBOOK.md, or None when it is compiled."""
    e, why = holding_entry(link, semantic)
    if e is None:
        return why
    if e.valid_until is not None:
        return f"superseded at tick {e.valid_until}"
    eff = effective_confidence(e.confidence, semantic.retention_now(e, now_tick, tick_seconds))
    if eff < DEMOTE_BELOW - 1e-9:
        return f"decayed: effective confidence {eff:.2f} < {DEMOTE_BELOW}"
    return None


def admitted_filter(heuristics: HeuristicStore, semantic: SemanticStore, now_tick: int, tick_seconds: float,
                    view: AdmittedView) -> Callable[[Heuristic], bool]:
    """The predicate rewrite_playbook compiles with; fills `view.excluded` with the reasons."""
    links = PlaybookLinks(heuristics).all()

    def keep(h: Heuristic) -> bool:
        why = exclusion(h, links.get(h.id), semantic, now_tick, tick_seconds)
        if why is not None:
            view.excluded[h.id] = why
        return why is None

    return keep


def follow_votes(heuristics: HeuristicStore, semantic: SemanticStore, voted: list[str], tick: int) -> int:
    """The Curator voted on these heuristics: their own entries take the voted confidence and wording (EDIT) and
    their decay clock restarts (a rule in use is accessed). Merge targets keep their own confidence."""
    links = PlaybookLinks(heuristics).all()
    touched: list[str] = []
    for hid in voted:
        h, link = heuristics.get(hid), links.get(hid)
        if h is None or link is None:
            continue
        e, _ = holding_entry(link, semantic)
        if e is None:
            continue
        if e.id == hid and (e.confidence != h.confidence or e.content != h.text):
            semantic.update(e.model_copy(update={"confidence": h.confidence, "content": h.text}))
        touched.append(e.id)
    return semantic.mark_accessed(touched, tick)
