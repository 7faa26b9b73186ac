"""The learning ledger: each acted tick's compared outcome and the credit it gave, in SQLite beside the
Grimoire (grimoire/learning.sqlite). Keyed by tick and run, so a retried reflect overwrites its own rows and
credits an entry once; the Curator nets the uncurated credits per entry at its cycle and marks them. An acted
tick's outcome is settled k ticks later beside the immediate one (docs/design/learning.md#hindsight-settlement)."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from golem.learning.causal import CausalEdge
from golem.learning.cybernetics import ContextPolicy, ContextSample
from golem.learning.reflexion import credit_weight, evaluator_of
from golem.models.record import CreditGiven, DecisionCycleRecord, Reflexion
from golem.storage import connect, immediate_tx, init_db

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outcomes (
    tick INTEGER NOT NULL, run_label TEXT NOT NULL, regime TEXT NOT NULL, episode_id TEXT,
    rules TEXT NOT NULL,          -- JSON: [{rule, origin, entry_id, tool, text}]
    hf_before REAL, hf_after REAL, pnl REAL, verdict TEXT NOT NULL,
    settled_pnl REAL, settled_verdict TEXT, settled_tick INTEGER, settled_cycle INTEGER,
    PRIMARY KEY (tick, run_label)
);
CREATE TABLE IF NOT EXISTS credit (
    tick INTEGER NOT NULL, run_label TEXT NOT NULL, entry_id TEXT NOT NULL, kind TEXT NOT NULL,
    delta INTEGER NOT NULL, reason TEXT NOT NULL, curated_tick INTEGER,
    PRIMARY KEY (tick, run_label, entry_id)
);
CREATE TABLE IF NOT EXISTS curator_cycles (tick INTEGER PRIMARY KEY, report TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS causal_evidence (   -- lag and evidence of the causal graph's learned edges
    source TEXT NOT NULL, target TEXT NOT NULL, lag REAL NOT NULL, weight REAL NOT NULL,
    evidence TEXT NOT NULL, updated_tick INTEGER NOT NULL, PRIMARY KEY (source, target)
);
CREATE TABLE IF NOT EXISTS causal_cycles (tick INTEGER PRIMARY KEY, edges INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS context_samples (   -- cybernetics loop 1
    tick INTEGER NOT NULL, run_label TEXT NOT NULL, tier TEXT NOT NULL, categories TEXT NOT NULL,
    quality REAL NOT NULL, weight REAL NOT NULL, PRIMARY KEY (tick, run_label)
);
CREATE TABLE IF NOT EXISTS context_policy (    -- cybernetics loops 2 and 3: every revision kept
    revision INTEGER PRIMARY KEY, tick INTEGER NOT NULL, allocations TEXT NOT NULL, reason TEXT NOT NULL
);
-- learning changes (a loop-2 retune, a PLAYBOOK entry entering, revised or leaving) and their regime-matched verdicts
-- (docs/design/learning.md#regime-matched-evaluation); `before` is what a rollback restores
CREATE TABLE IF NOT EXISTS learning_changes (
    id TEXT PRIMARY KEY, tick INTEGER NOT NULL, kind TEXT NOT NULL, ref TEXT NOT NULL, op TEXT NOT NULL,
    description TEXT NOT NULL, before TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    judged_tick INTEGER, reason TEXT, figures TEXT
);
CREATE TABLE IF NOT EXISTS outcome_change_points (
    tick INTEGER PRIMARY KEY, alarm_tick INTEGER NOT NULL, direction TEXT NOT NULL, statistic REAL NOT NULL,
    found_cycle INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS regime_eval_cycles (tick INTEGER PRIMARY KEY, report TEXT NOT NULL);
"""
# hindsight settlement (a ledger from before it gains the columns on open; its rows settle at the next cycle)
_OUTCOME_COLUMNS_ADDED = (("settled_pnl", "REAL"), ("settled_verdict", "TEXT"), ("settled_tick", "INTEGER"),
                          ("settled_cycle", "INTEGER"), ("evaluator", "TEXT"))
_OUTCOME_COLUMNS = ("tick", "run_label", "regime", "episode_id", "rules", "hf_before", "hf_after", "pnl", "verdict",
                    "evaluator")
# A credit row still waiting for its outcome's settlement: a learned rule's swap whose tick is not settled yet
# (its immediate verdict is the fee; the Curator neither counts nor closes it until the settle step has judged it).
_PENDING = """EXISTS (SELECT 1 FROM outcomes o, json_each(o.rules) j WHERE o.tick = credit.tick
    AND o.run_label = credit.run_label AND o.settled_verdict IS NULL
    AND json_extract(j.value, '$.entry_id') = credit.entry_id AND json_extract(j.value, '$.tool') = 'swap')"""


class OutcomeRow(BaseModel):
    tick: int
    run_label: str = ""
    regime: str
    episode_id: str | None = None
    rules: list[dict[str, Any]] = Field(default_factory=list)
    hf_before: float | None = None
    hf_after: float | None = None
    pnl: float | None = None
    verdict: str
    settled_pnl: float | None = None  # the hindsight outcome k ticks later (None: not settled yet)
    settled_verdict: str | None = None
    settled_tick: int | None = None  # the tick whose price settled it
    settled_cycle: int | None = None  # the delta cycle that settled it
    evaluator: str | None = None  # the evaluator model's verdict on the decision (None: no evaluator judged it)

    @property
    def swapped(self) -> bool:
        """A rule behind the tick swapped: its immediate verdict reads the fee, not what the trade was for."""
        return any(r.get("tool") == "swap" for r in self.rules)

    @property
    def judged(self) -> str | None:
        """The verdict the Curator learns from: the settled one where the row is settled; a swap not settled yet
        waits (None); any other row (a repay, a supply) is judged at the tick, by the health factor it restored."""
        if self.settled_verdict is not None:
            return self.settled_verdict
        return None if self.swapped else self.verdict


class LearningChange(BaseModel):
    """A learning change and its regime-matched verdict (status: pending | rolled_back | improved | inconclusive)."""

    id: str
    tick: int  # the delta cycle that made it; its after window starts here
    kind: str  # context_policy | heuristic
    ref: str  # the ContextPolicy revision, or the heuristic id
    op: str  # retune | entered | revised | left
    description: str
    before: dict[str, Any] = Field(default_factory=dict)  # what a rollback restores
    status: str = "pending"
    judged_tick: int | None = None
    reason: str | None = None
    figures: dict[str, Any] | None = None


class LearningLedger:
    def __init__(self, path: Path) -> None:
        self.path = init_db(Path(path), _SCHEMA)
        with immediate_tx(self.path) as db:
            have = {r[1] for r in db.execute("PRAGMA table_info(outcomes)")}
            for name, decl in _OUTCOME_COLUMNS_ADDED:
                if name not in have:
                    db.execute(f"ALTER TABLE outcomes ADD COLUMN {name} {decl}")

    def record(self, record: DecisionCycleRecord, reflexion: Reflexion, credit: list[CreditGiven]) -> list[CreditGiven]:
        """Store the tick's compared outcome and its credit; returns the credit not given before (a retried
        reflect gives none again)."""
        delib = record.deliberation
        rules = [{"rule": r.rule, "origin": r.origin, "entry_id": r.entry_id,
                  "tool": record.actions[r.action_index].tool_name if r.action_index < len(record.actions) else None,
                  "text": r.text} for r in (delib.rules_applied if delib else [])]
        o = record.outcome
        fresh: list[CreditGiven] = []
        with immediate_tx(self.path) as db:
            db.execute(f"INSERT OR REPLACE INTO outcomes ({', '.join(_OUTCOME_COLUMNS)}) VALUES "
                       f"({', '.join('?' for _ in _OUTCOME_COLUMNS)})",
                       (record.tick, record.run_label, record.regime.value,
                        record.episodes_written[0] if record.episodes_written else None, json.dumps(rules),
                        o.health_factor_before if o else None, o.health_factor_after if o else None,
                        o.pnl_impact if o else None, reflexion.verdict, evaluator_of(record)))
            for c in credit:
                cur = db.execute("INSERT OR IGNORE INTO credit VALUES (?, ?, ?, ?, ?, ?, NULL)",
                                 (record.tick, record.run_label, c.entry_id, c.kind, c.delta, c.reason))
                if cur.rowcount:
                    fresh.append(c)
        return fresh

    def outcomes(self, regime: str | None = None) -> list[OutcomeRow]:
        with closing(connect(self.path, rows=True)) as db:
            rows = db.execute("SELECT * FROM outcomes" + (" WHERE regime = ?" if regime else "") + " ORDER BY tick, run_label",
                              (regime,) if regime else ()).fetchall()
        return [OutcomeRow(**{**dict(r), "rules": json.loads(r["rules"])}) for r in rows]

    def unsettled(self, up_to_tick: int) -> list[OutcomeRow]:
        """Rows acted at or before `up_to_tick` and not settled yet, oldest first."""
        with closing(connect(self.path, rows=True)) as db:
            rows = db.execute("SELECT * FROM outcomes WHERE settled_verdict IS NULL AND tick <= ? ORDER BY tick, run_label",
                              (up_to_tick,)).fetchall()
        return [OutcomeRow(**{**dict(r), "rules": json.loads(r["rules"])}) for r in rows]

    def settle(self, row: OutcomeRow, pnl: float | None, verdict: str, at_tick: int, cycle: int) -> bool:
        """Store a row's settled outcome once (a retried settle step, or a later cycle, changes nothing); a learned
        rule's credit for that tick, not yet curated, takes the settled verdict. True when this call settled it."""
        delta = {"positive": 1, "negative": -1}.get(verdict, 0) * credit_weight(row.evaluator, verdict)
        with immediate_tx(self.path) as db:
            cur = db.execute("UPDATE outcomes SET settled_pnl = ?, settled_verdict = ?, settled_tick = ?, settled_cycle = ? "
                             "WHERE tick = ? AND run_label = ? AND settled_verdict IS NULL",
                             (pnl, verdict, at_tick, cycle, row.tick, row.run_label))
            if not cur.rowcount:
                return False
            for r in row.rules:
                if r.get("origin") != "learned" or not r.get("entry_id"):
                    continue
                reason = (f"learned rule {r.get('rule')}; outcome settled at tick {at_tick}: {verdict}"
                          + (f" (pnl {pnl:+.2f})" if pnl is not None else ""))
                db.execute("INSERT INTO credit VALUES (?, ?, ?, 'heuristic', ?, ?, NULL) "
                           "ON CONFLICT (tick, run_label, entry_id) DO UPDATE SET delta = excluded.delta, "
                           "reason = excluded.reason WHERE credit.curated_tick IS NULL",
                           (row.tick, row.run_label, r["entry_id"], delta, reason))
        return True

    def uncurated(self, up_to_tick: int) -> dict[str, int]:
        """Net credit per heuristic not yet consumed by a Curator cycle; a swap's credit waits for its settlement."""
        with closing(connect(self.path)) as db:
            rows = db.execute("SELECT entry_id, SUM(delta) FROM credit WHERE kind = 'heuristic' AND curated_tick IS NULL "
                              f"AND tick <= ? AND NOT {_PENDING} GROUP BY entry_id ORDER BY entry_id",
                              (up_to_tick,)).fetchall()
        return {eid: int(net) for eid, net in rows}

    def cycle(self, tick: int) -> dict[str, Any] | None:
        """The report of the Curator cycle at `tick`, when it already ran (a retried delta activity)."""
        with closing(connect(self.path)) as db:
            row = db.execute("SELECT report FROM curator_cycles WHERE tick = ?", (tick,)).fetchone()
        return json.loads(row[0]) if row else None

    def close_cycle(self, tick: int, report: dict[str, Any]) -> None:
        with immediate_tx(self.path) as db:
            db.execute("UPDATE credit SET curated_tick = ? WHERE kind = 'heuristic' AND curated_tick IS NULL AND tick <= ? "
                       f"AND NOT {_PENDING}", (tick, tick))
            db.execute("INSERT OR REPLACE INTO curator_cycles VALUES (?, ?)", (tick, json.dumps(report)))

    # ---- causal graph evidence ------------------------------------------------------------------
    def causal_cycle_done(self, tick: int) -> int | None:
        with closing(connect(self.path)) as db:
            row = db.execute("SELECT edges FROM causal_cycles WHERE tick = ?", (tick,)).fetchone()
        return row[0] if row else None

    def record_edges(self, tick: int, edges: list[CausalEdge]) -> None:
        """Lag, weight and the union of evidence ticks per edge; the cycle is marked done (a retried delta skips)."""
        with immediate_tx(self.path) as db:
            for e in edges:
                row = db.execute("SELECT evidence FROM causal_evidence WHERE source = ? AND target = ?",
                                 (e.source, e.target)).fetchone()
                ev = sorted(set(json.loads(row[0]) if row else []) | set(e.evidence))
                db.execute("INSERT OR REPLACE INTO causal_evidence VALUES (?, ?, ?, ?, ?, ?)",
                           (e.source, e.target, e.lag, e.weight, json.dumps(ev), tick))
            db.execute("INSERT OR REPLACE INTO causal_cycles VALUES (?, ?)", (tick, len(edges)))

    def causal_evidence(self) -> dict[tuple[str, str], dict[str, Any]]:
        with closing(connect(self.path, rows=True)) as db:
            rows = db.execute("SELECT * FROM causal_evidence").fetchall()
        return {(r["source"], r["target"]): {"lag": r["lag"], "weight": r["weight"], "evidence": json.loads(r["evidence"])}
                for r in rows}

    # ---- cybernetics ----------------------------------------------------------------------------
    def add_context_sample(self, tick: int, run_label: str, sample: ContextSample) -> None:
        with immediate_tx(self.path) as db:
            db.execute("INSERT OR REPLACE INTO context_samples VALUES (?, ?, ?, ?, ?, ?)",
                       (tick, run_label, sample.tier, json.dumps(sample.categories), sample.quality, sample.weight))

    def context_samples(self) -> list[ContextSample]:
        with closing(connect(self.path, rows=True)) as db:
            rows = db.execute("SELECT * FROM context_samples ORDER BY tick, run_label").fetchall()
        return [ContextSample(tick=r["tick"], tier=r["tier"], categories=json.loads(r["categories"]),
                              quality=r["quality"], weight=r["weight"]) for r in rows]

    def context_policy(self, defaults: dict[str, dict[str, int]]) -> ContextPolicy:
        """The newest revision, or revision 0 (the configured allocations)."""
        with closing(connect(self.path, rows=True)) as db:
            r = db.execute("SELECT * FROM context_policy ORDER BY revision DESC LIMIT 1").fetchone()
        if r is None:
            return ContextPolicy(allocations={t: dict(a) for t, a in defaults.items()})
        return ContextPolicy(revision=r["revision"], tick=r["tick"], allocations=json.loads(r["allocations"]),
                             reason=r["reason"])

    def save_policy(self, policy: ContextPolicy, *, keep_samples: float | None = None) -> None:
        """A new revision (loop 3 also scales what loop 1 has learned by `keep_samples`)."""
        with immediate_tx(self.path) as db:
            db.execute("INSERT OR IGNORE INTO context_policy VALUES (?, ?, ?, ?)",
                       (policy.revision, policy.tick, json.dumps(policy.allocations), policy.reason))
            if keep_samples is not None:
                db.execute("UPDATE context_samples SET weight = weight * ? WHERE tick < ?", (keep_samples, policy.tick))

    # ---- regime-matched evaluation of learning changes ----------------------------------------------
    def record_change(self, change: LearningChange) -> bool:
        """Store a change once (a retried step records nothing twice); True when this call stored it."""
        with immediate_tx(self.path) as db:
            cur = db.execute("INSERT OR IGNORE INTO learning_changes (id, tick, kind, ref, op, description, before) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)", (change.id, change.tick, change.kind, change.ref, change.op,
                                                              change.description, json.dumps(change.before)))
            return bool(cur.rowcount)

    def changes(self, status: str | None = None) -> list[LearningChange]:
        with closing(connect(self.path, rows=True)) as db:
            rows = db.execute("SELECT * FROM learning_changes" + (" WHERE status = ?" if status else "")
                              + " ORDER BY tick, id", (status,) if status else ()).fetchall()
        return [LearningChange(**{**dict(r), "before": json.loads(r["before"]),
                                  "figures": json.loads(r["figures"]) if r["figures"] else None}) for r in rows]

    def judge_change(self, change_id: str, status: str, tick: int, reason: str, figures: dict[str, Any]) -> None:
        with immediate_tx(self.path) as db:
            db.execute("UPDATE learning_changes SET status = ?, judged_tick = ?, reason = ?, figures = ? WHERE id = ?",
                       (status, tick, reason, json.dumps(figures), change_id))

    def add_change_points(self, points: list[dict[str, Any]], cycle: int) -> list[int]:
        """Store the change points not known yet; returns their ticks."""
        fresh = []
        with immediate_tx(self.path) as db:
            for p in points:
                cur = db.execute("INSERT OR IGNORE INTO outcome_change_points VALUES (?, ?, ?, ?, ?)",
                                 (p["tick"], p["alarm_tick"], p["direction"], p["statistic"], cycle))
                if cur.rowcount:
                    fresh.append(int(p["tick"]))
        return fresh

    def change_points(self) -> list[dict[str, Any]]:
        with closing(connect(self.path, rows=True)) as db:
            return [dict(r) for r in db.execute("SELECT * FROM outcome_change_points ORDER BY tick").fetchall()]

    def regime_eval_cycle(self, tick: int) -> dict[str, Any] | None:
        with closing(connect(self.path)) as db:
            row = db.execute("SELECT report FROM regime_eval_cycles WHERE tick = ?", (tick,)).fetchone()
        return json.loads(row[0]) if row else None

    def close_regime_eval(self, tick: int, report: dict[str, Any]) -> None:
        with immediate_tx(self.path) as db:
            db.execute("INSERT OR REPLACE INTO regime_eval_cycles VALUES (?, ?)", (tick, json.dumps(report)))
