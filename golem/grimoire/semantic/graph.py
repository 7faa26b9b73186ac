"""Causal graph and bi-temporal knowledge graph in the semantic store's SQLite file.

Causal graph: weighted edges between entries, searched up to 3 hops, each path scored by Π(weight × recency).
Knowledge graph: facts (subject, predicate, object) with valid time in blocks and transaction time in ticks; rows
are never rewritten in place, so `query_as_known_at` answers what the golem believed at an earlier tick.
Topology curiosity: 0–1 hop 1.0, 2 hops 0.5, 3 hops 0.25, unconnected 0.0 (it only adds to the prediction error).
See docs/design/grimoire.md#knowledge-graph.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
import uuid
from collections import deque
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from golem.storage import connect, immediate_tx

MAX_HOPS = 3  # 3 hops default
RECENCY_TICKS = 1440.0 * 7  # ours: an edge untouched for a week weighs e^-1 as much
TOPOLOGY_MAX_HOPS = 3  # k_hop_neighbors(position, 3, block)
# 0 (the position itself) and 1 hop → 1.0, 2 → 0.5, 3 → 0.25, else 0.0
TOPOLOGY_MODIFIER_BY_HOPS = {0: 1.0, 1: 1.0, 2: 0.5, 3: 0.25}


def edge_id(source_id: str, target_id: str) -> str:
    """Stable id of the edge source → target: the same on every golem, so imports can be keyed by it."""
    return "ce-" + hashlib.sha256(f"{source_id}\x00{target_id}".encode()).hexdigest()[:24]


class CausalGraph:
    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)  # migrated by SemanticStore (schema v4)

    def add_edge(self, source_id: str, target_id: str, *, weight: float = 1.0, tick: int) -> None:
        """Insert or reinforce (evidence + 1, weight = running mean) an edge."""
        if source_id == target_id:
            raise ValueError("a causal edge needs two different entries")
        if not 0.0 < weight <= 1.0:
            raise ValueError(f"weight must be in (0, 1], got {weight}")
        with immediate_tx(self.db_path) as db:
            db.execute(
                "INSERT INTO causal_edges VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT(source_id, target_id) DO UPDATE SET "
                "weight = (weight * evidence + excluded.weight) / (evidence + 1), evidence = evidence + 1, "
                "updated_at = excluded.updated_at", (source_id, target_id, weight, tick, tick))

    def import_edge(self, source_id: str, target_id: str, *, weight: float, tick: int, origin: str,
                    eid: str | None = None) -> bool:
        """Add an edge from another golem's export once per (edge id, origin): a re-import of the same
        file is a no-op (add_edge would count the evidence again). True when it was applied."""
        if not origin or not origin.strip():
            raise ValueError("origin (the exporting golem id) must be non-empty")
        if source_id == target_id:
            raise ValueError("a causal edge needs two different entries")
        if not 0.0 < weight <= 1.0:
            raise ValueError(f"weight must be in (0, 1], got {weight}")
        expected = edge_id(source_id, target_id)
        if eid is not None and eid != expected:
            raise ValueError(f"edge_id {eid!r} does not match {source_id} → {target_id} (expected {expected})")
        with immediate_tx(self.db_path) as db:
            cur = db.execute("INSERT OR IGNORE INTO imported_edges VALUES (?, ?, ?)", (expected, origin, tick))
            if cur.rowcount == 0:
                return False
            db.execute(
                "INSERT INTO causal_edges VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT(source_id, target_id) DO UPDATE SET "
                "weight = (weight * evidence + excluded.weight) / (evidence + 1), evidence = evidence + 1, "
                "updated_at = MAX(updated_at, excluded.updated_at)", (source_id, target_id, weight, tick, tick))
            return True

    def edges(self) -> list[dict[str, Any]]:
        """Every edge with its stable `edge_id`."""
        with closing(connect(self.db_path, rows=True)) as db:
            rows = [dict(r) for r in db.execute("SELECT * FROM causal_edges ORDER BY source_id, target_id")]
        for r in rows:
            r["edge_id"] = edge_id(r["source_id"], r["target_id"])
        return rows

    def bfs(self, start: list[str], *, now_tick: int, max_hops: int = MAX_HOPS,
            direction: str = "forward") -> list[tuple[str, float, int]]:
        """Entries reachable from `start` within max_hops: (id, best path score, hops), best first."""
        if direction not in ("forward", "backward"):
            raise ValueError("direction must be 'forward' (consequences) or 'backward' (causes)")
        a, b = ("source_id", "target_id") if direction == "forward" else ("target_id", "source_id")
        best: dict[str, tuple[float, int]] = {}
        frontier = deque((s, 1.0, 0) for s in start)
        with closing(connect(self.db_path)) as db:
            while frontier:
                node, score, hops = frontier.popleft()
                if hops >= max_hops:
                    continue
                for nxt, w, upd in db.execute(f"SELECT {b}, weight, updated_at FROM causal_edges WHERE {a} = ?", (node,)):
                    s = score * w * math.exp(-max(0, now_tick - upd) / RECENCY_TICKS)
                    if nxt in start or (nxt in best and best[nxt][0] >= s):
                        continue
                    best[nxt] = (s, hops + 1)
                    frontier.append((nxt, s, hops + 1))
        return sorted(((k, v[0], v[1]) for k, v in best.items()), key=lambda t: (-t[1], t[0]))


class Fact(BaseModel):
    fact_id: str
    subject: str
    predicate: str
    object: str
    confidence: float
    valid_from: int
    valid_until: int | None
    tx_from: int
    tx_until: int | None


class KnowledgeGraph:
    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)

    def _close_and_reissue(self, db: sqlite3.Connection, row: tuple[Any, ...], *, valid_until: int, tick: int) -> None:
        db.execute("UPDATE kg_facts SET tx_until = ? WHERE seq = ?", (tick, row[0]))
        db.execute("INSERT INTO kg_facts (fact_id, subject, predicate, object, confidence, valid_from, valid_until, "
                   "tx_from) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (*row[1:7], valid_until, tick))

    def assert_fact(self, subject: str, predicate: str, obj: str, *, block: int, tick: int,
                    confidence: float = 0.5, exclusive: bool = True) -> str:
        """Record a fact true from `block`. Re-asserting a current fact is a no-op (idempotent: same id, no new
        version). With `exclusive` (asserting a fact that replaces) a current fact with the same subject and predicate
        but another object is superseded (valid_until = block); `exclusive=False` is for many-valued relations
        (a pool holds two tokens, a golem has several positions), whose removal is an explicit `invalidate`."""
        for name, v in (("subject", subject), ("predicate", predicate), ("object", obj)):
            if not v or not v.strip():
                raise ValueError(f"{name} must be non-empty")
        if block < 0 or tick < 0:
            raise ValueError(f"block and tick must be >= 0, got block={block} tick={tick}")
        with immediate_tx(self.db_path) as db:
            cur = db.execute("SELECT seq, fact_id, subject, predicate, object, confidence, valid_from FROM kg_facts "
                             "WHERE subject = ? AND predicate = ? AND valid_until IS NULL AND tx_until IS NULL",
                             (subject, predicate)).fetchall()
            same = next((row for row in cur if row[4] == obj), None)
            if same is not None:
                return str(same[1])
            if exclusive:
                for row in cur:
                    # a reorg can hand us an older block: never close a fact before it began
                    self._close_and_reissue(db, row, valid_until=max(block, row[6]), tick=tick)
            fid = str(uuid.uuid4())
            db.execute("INSERT INTO kg_facts (fact_id, subject, predicate, object, confidence, valid_from, tx_from) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)", (fid, subject, predicate, obj, confidence, block, tick))
            return fid

    def invalidate(self, fact_id: str, *, block: int, tick: int) -> bool:
        with immediate_tx(self.db_path) as db:
            row = db.execute("SELECT seq, fact_id, subject, predicate, object, confidence, valid_from FROM kg_facts "
                             "WHERE fact_id = ? AND valid_until IS NULL AND tx_until IS NULL", (fact_id,)).fetchone()
            if row is None:
                return False
            self._close_and_reissue(db, row, valid_until=max(block, row[6]), tick=tick)
            return True

    def current_facts(self, subjects: list[str]) -> list[Fact]:
        """Facts with one of `subjects` that are true now (open valid time) as currently known."""
        if not subjects:
            return []
        marks = ", ".join("?" * len(subjects))
        with closing(connect(self.db_path, rows=True)) as db:
            rows = db.execute(f"SELECT * FROM kg_facts WHERE subject IN ({marks}) AND valid_until IS NULL "
                              "AND tx_until IS NULL ORDER BY seq", list(subjects)).fetchall()
        return [Fact.model_validate({k: r[k] for k in Fact.model_fields}) for r in rows]

    def facts_at_block(self, block: int) -> list[Fact]:
        """Every fact true at `block`, as currently known."""
        with closing(connect(self.db_path, rows=True)) as db:
            rows = db.execute("SELECT * FROM kg_facts WHERE tx_until IS NULL AND valid_from <= ? "
                              "AND (valid_until IS NULL OR valid_until > ?) ORDER BY seq", (block, block)).fetchall()
        return [Fact.model_validate({k: r[k] for k in Fact.model_fields}) for r in rows]

    def _query(self, entity: str, block: int | None, known_at: int | None) -> list[Fact]:
        sql = "SELECT * FROM kg_facts WHERE (subject = ? OR object = ?)"
        args: list[Any] = [entity, entity]
        if known_at is None:
            sql += " AND tx_until IS NULL"
        else:
            sql += " AND tx_from <= ? AND (tx_until IS NULL OR tx_until > ?)"
            args += [known_at, known_at]
        if block is not None:
            sql += " AND valid_from <= ? AND (valid_until IS NULL OR valid_until > ?)"
            args += [block, block]
        with closing(connect(self.db_path, rows=True)) as db:
            rows = db.execute(sql + " ORDER BY valid_from, seq", args).fetchall()
        return [Fact.model_validate({k: r[k] for k in Fact.model_fields}) for r in rows]

    def query_at_block(self, entity: str, block: int) -> list[Fact]:
        """Facts about `entity` true at `block`, as currently known."""
        return self._query(entity, block, None)

    def query_as_known_at(self, entity: str, known_at_tick: int, block: int | None = None) -> list[Fact]:
        """Facts about `entity` as the golem believed them at `known_at_tick` (optionally at `block`)."""
        return self._query(entity, block, known_at_tick)

    def k_hop_neighbors(self, entity: str, k: int, block: int) -> dict[str, int]:
        """Entities within k hops of `entity` over facts true at `block`: {entity: hops}."""
        seen = {entity: 0}
        frontier = deque([entity])
        while frontier:
            node = frontier.popleft()
            if seen[node] >= k:
                continue
            for f in self.query_at_block(node, block):
                other = f.object if f.subject == node else f.subject
                if other not in seen:
                    seen[other] = seen[node] + 1
                    frontier.append(other)
        seen.pop(entity)
        return seen

    def distances_from(self, sources: list[str], k: int, block: int) -> dict[str, int]:
        """Hop distance from the nearest of `sources` (0 for a source itself) to every entity within k hops over
        facts true at `block`: the minimum of k_hop_neighbors over the sources, in one pass on one connection."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        seen = dict.fromkeys(sources, 0)
        frontier = deque(seen)
        sql = ("SELECT subject, object FROM kg_facts WHERE (subject = ? OR object = ?) AND tx_until IS NULL "
               "AND valid_from <= ? AND (valid_until IS NULL OR valid_until > ?)")
        with closing(connect(self.db_path)) as db:
            while frontier:
                node = frontier.popleft()
                if seen[node] >= k:
                    continue
                for subj, obj in db.execute(sql, (node, node, block, block)):
                    other = obj if subj == node else subj
                    if other not in seen:
                        seen[other] = seen[node] + 1
                        frontier.append(other)
        return seen


def modifier_for_hops(hops: int | None) -> float:
    """The modifier per hop distance: 0/1 hop → 1.0, 2 → 0.5, 3 → 0.25, farther or unconnected (None) → 0.0."""
    return TOPOLOGY_MODIFIER_BY_HOPS.get(hops, 0.0) if hops is not None else 0.0


def topology_curiosity_modifier(kg: KnowledgeGraph, event_entity: str | None, golem_positions: list[str],
                                block: int) -> float:
    """Curiosity modifier of an event on `event_entity` by its topological distance from the golem's positions
    at `block`. An event with no entity, or no position, gets 0.0."""
    if not event_entity or not golem_positions:
        return 0.0
    return modifier_for_hops(kg.distances_from(golem_positions, TOPOLOGY_MAX_HOPS, block).get(event_entity))
