"""Heuristics (procedural memory rows) in SQLite, and their distillation from episodes.

Heuristics are SQLite rows (WAL for concurrent reads); a new one starts at confidence 0.5, each independent
validation adds 0.1 and a contradiction takes 0.15 (asymmetric on purpose); the Curator compiles those at >= 0.7
into PLAYBOOK.md (playbook/compile.py). See docs/design/grimoire.md#playbookmd.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import re
import sqlite3
from collections import defaultdict
from collections.abc import Mapping
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from golem.grimoire.episodes.model import Episode
from golem.storage import connect, init_db

INITIAL_CONFIDENCE = 0.5  # Heuristic 0.5 initial
UPVOTE = 0.1  # +0.1 per confirmation
DOWNVOTE = 0.15  # ... and -0.15 per contradiction
PROMOTE_AT = 0.7  # heuristics >= 0.7 are promoted to PLAYBOOK.md
DEMOTE_BELOW = 0.4  # active entries below 0.4 leave PLAYBOOK.md (row kept)
CONFIDENCE_FLOOR = 0.05  # downvotes never push below the 0.05 floor
INITIAL_IMPORTANCE = 2  # ExpeL (Zhao et al. 2023): an ADDed insight starts with importance 2; at 0 it is retired
MIN_PATTERN_SUPPORT = 3  # a pattern must recur >= 3 times before it becomes a rule ("clusters with 3+ episodes")
GLOBAL_SCOPE = "global"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS heuristics (
    id TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    norm_text TEXT NOT NULL,
    text TEXT NOT NULL,
    confidence REAL NOT NULL,
    evidence_count INTEGER NOT NULL,
    source_episode_ids TEXT NOT NULL,   -- JSON list
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (scope, norm_text)
);
CREATE INDEX IF NOT EXISTS idx_heuristics_confidence ON heuristics(confidence DESC);
-- a keyed vote (the Curator's cycle) is applied once, in the transaction that applies it
CREATE TABLE IF NOT EXISTS votes_applied (key TEXT NOT NULL, heuristic_id TEXT NOT NULL, net INTEGER NOT NULL,
    PRIMARY KEY (key, heuristic_id));
-- a learned rule's measured effect: its trials on the golem's own recent rows, with and without it
-- (docs/design/learning.md); one row per heuristic, delta cycle and run of that cycle (its workflow run id), so a
-- retried trial step records once while another run at the same tick (a backtest's second pass inheriting this
-- file) records its own
CREATE TABLE IF NOT EXISTS heuristic_trials (heuristic_id TEXT NOT NULL, tick INTEGER NOT NULL,
    occasion TEXT NOT NULL, verdict TEXT NOT NULL, result TEXT NOT NULL, created_at TEXT NOT NULL,
    run TEXT NOT NULL DEFAULT '', PRIMARY KEY (heuristic_id, tick, run));
"""
# PLAYBOOK membership with hysteresis (in at 0.7, out below 0.4), ExpeL importance, retirement
_COLUMNS_ADDED = (
    ("status", "TEXT NOT NULL DEFAULT 'candidate'"),  # candidate | active (in PLAYBOOK.md) | retired
    ("importance", f"INTEGER NOT NULL DEFAULT {INITIAL_IMPORTANCE}"),
    ("retired_tick", "INTEGER"),
    # the standing verdict of its trials: NULL never measured | kept | demoted | no effect (held out of PLAYBOOK.md)
    ("trial_verdict", "TEXT"),
    ("trial_tick", "INTEGER"),
)
# standing verdicts that keep a rule out of PLAYBOOK.md until a later trial keeps it; "untried": ADDed, but its trial
# did not run (too few ticks, the cycle's trial time spent) — no rule enters PLAYBOOK.md unmeasured
HELD = ("demoted", "no effect", "untried")


def status_after(confidence: float, importance: int, status: str, held: bool = False) -> str:
    """PLAYBOOK membership after a change (promotion and demotion, ExpeL importance); a rule its trial
    held back stays a candidate whatever its votes (docs/design/learning.md)."""
    if status == "retired" or importance <= 0:
        return "retired"
    if held:
        return "candidate"
    if confidence >= PROMOTE_AT - 1e-9:
        return "active"
    if status == "active" and confidence >= DEMOTE_BELOW - 1e-9:
        return "active"
    return "candidate"


# Standalone numbers only: "T2" or "v3" keep their digits, "+4.10" and "12%" become "#".
_NUMBER = re.compile(r"(?<![A-Za-z0-9_])[-+]?\d+(?:[.,]\d+)*%?")


_RULE = re.compile(r"^\s*WHEN\s.+\sTHEN\s")  # the STRATEGY.md grammar's keywords are upper case


def is_rule(text: str) -> bool:
    """A heuristic that carries a rule in the STRATEGY.md grammar ("WHEN … THEN …"), not prose ("When gas …")."""
    return bool(_RULE.match(text))


def normalise_text(text: str) -> str:
    """Identity of a rule: lower case, collapsed spaces, numbers masked as '#'.

    Masking numbers lets a rule restated with fresher statistics ("mean pnl +4.10 over 5 ticks")
    reinforce the same heuristic instead of creating a near-duplicate. Direction words stay, so
    "gained" and "lost" remain different rules.
    """
    t = _NUMBER.sub("#", text.strip().lower())
    return re.sub(r"\s+", " ", t).strip(" .")


def heuristic_id(scope: str, norm_text: str) -> str:
    return "h-" + hashlib.sha256(f"{scope}\x00{norm_text}".encode()).hexdigest()[:16]


class Heuristic(BaseModel):
    id: str
    text: str
    scope: str = GLOBAL_SCOPE  # a strategy id, or "global"
    confidence: float = Field(ge=0.0, le=1.0)
    evidence_count: int = Field(ge=0)
    source_episode_ids: list[str] = Field(default_factory=list)
    created_at: str
    updated_at: str
    status: str = "candidate"  # candidate | active (compiled into PLAYBOOK.md) | retired (row kept for the audit)
    importance: int = INITIAL_IMPORTANCE
    retired_tick: int | None = None
    trial_verdict: str | None = None  # the standing verdict of its trials (None: never measured)
    trial_tick: int | None = None

    @property
    def held(self) -> bool:
        """A trial found it did not pay (or changed nothing at ADD): out of PLAYBOOK.md until a trial keeps it."""
        return self.trial_verdict in HELD


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _check_scope(scope: str) -> str:
    scope = (scope or "").strip()
    if not scope:
        raise ValueError('scope must be a strategy id or "global"')
    if "\n" in scope or "#" in scope:
        raise ValueError(f"scope {scope!r} must not contain newlines or '#' (it becomes a PLAYBOOK heading)")
    return scope


class HeuristicStore:
    """A SQLite file of heuristics. One short-lived connection per call: safe across processes."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        init_db(self.path, _SCHEMA)
        with closing(self._connect()) as conn, conn:
            have = {r[1] for r in conn.execute("PRAGMA table_info(heuristics)")}
            missing = [(n, d) for n, d in _COLUMNS_ADDED if n not in have]
            for name, decl in missing:
                conn.execute(f"ALTER TABLE heuristics ADD COLUMN {name} {decl}")
            trial_cols = {r[1] for r in conn.execute("PRAGMA table_info(heuristic_trials)")}
            if "run" not in trial_cols:  # a trial table from before runs were told apart: its rows were one run's
                conn.execute("ALTER TABLE heuristic_trials ADD COLUMN run TEXT NOT NULL DEFAULT ''")
            if "status" in dict(missing):  # rows from before the Curator's status column: what was compiled (>= 0.7) is in PLAYBOOK.md
                conn.execute("UPDATE heuristics SET status = 'active' WHERE confidence >= ?", (PROMOTE_AT - 1e-9,))

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path, rows=True)

    @staticmethod
    def _row(row: sqlite3.Row) -> Heuristic:
        return Heuristic(
            id=row["id"],
            text=row["text"],
            scope=row["scope"],
            confidence=row["confidence"],
            evidence_count=row["evidence_count"],
            source_episode_ids=json.loads(row["source_episode_ids"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            status=row["status"],
            importance=row["importance"],
            retired_tick=row["retired_tick"],
            trial_verdict=row["trial_verdict"],
            trial_tick=row["trial_tick"],
        )

    def add_or_reinforce(self, text: str, scope: str, episode_id: str) -> Heuristic:
        """Add a heuristic, or upvote the one with the same normalised text in the same scope.

        Evidence is counted once per episode: the same episode id reinforcing twice (a retried
        activity, a second DELTA over the same window) changes nothing.
        """
        if not text or not text.strip():
            raise ValueError("heuristic text must be non-empty")
        if not episode_id or not episode_id.strip():
            raise ValueError("episode_id must be non-empty (every heuristic needs provenance)")
        scope = _check_scope(scope)
        norm = normalise_text(text)
        hid = heuristic_id(scope, norm)
        now = _now()
        with closing(self._connect()) as conn, conn:
            conn.execute("BEGIN IMMEDIATE")  # read-modify-write under the write lock
            row = conn.execute("SELECT * FROM heuristics WHERE id = ?", (hid,)).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO heuristics (id, scope, norm_text, text, confidence, evidence_count, source_episode_ids,"
                    " created_at, updated_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (hid, scope, norm, text.strip(), INITIAL_CONFIDENCE, 1, json.dumps([episode_id]), now, now,
                     status_after(INITIAL_CONFIDENCE, INITIAL_IMPORTANCE, "candidate")),
                )
            else:
                sources = json.loads(row["source_episode_ids"])
                if episode_id not in sources and row["status"] != "retired":  # a retired row stays as it was
                    sources.append(episode_id)
                    conf = round(min(1.0, row["confidence"] + UPVOTE), 6)
                    conn.execute(
                        "UPDATE heuristics SET text = ?, confidence = ?, evidence_count = ?, "
                        "source_episode_ids = ?, updated_at = ?, status = ? WHERE id = ?",
                        (
                            # Prose keeps the freshest statistics in its wording. A rule keeps its own: its numbers
                            # are its triggers, which move only through the Curator's EDIT (≤ 10 % a revision);
                            # re-wording it here let a later dream's guard lower an earlier guard's trigger.
                            row["text"] if is_rule(row["text"]) else text.strip(),
                            conf,
                            row["evidence_count"] + 1,
                            json.dumps(sources),
                            now,
                            status_after(conf, row["importance"], row["status"], row["trial_verdict"] in HELD),
                            hid,
                        ),
                    )
            return self._row(conn.execute("SELECT * FROM heuristics WHERE id = ?", (hid,)).fetchone())

    def downvote(self, heuristic_id_: str) -> Heuristic:
        """Contradicting evidence: confidence -0.15."""
        with closing(self._connect()) as conn, conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT * FROM heuristics WHERE id = ?", (heuristic_id_,)).fetchone()
            if row is None:
                raise KeyError(f"no heuristic {heuristic_id_!r} in {self.path}")
            conn.execute(
                "UPDATE heuristics SET confidence = ?, updated_at = ? WHERE id = ?",
                (round(max(0.0, row["confidence"] - DOWNVOTE), 6), _now(), heuristic_id_),
            )
            return self._row(conn.execute("SELECT * FROM heuristics WHERE id = ?", (heuristic_id_,)).fetchone())

    def vote(self, heuristic_id_: str, net: int, tick: int, text: str | None = None, *,
             key: str | None = None) -> Heuristic:
        """The Curator's batched UPVOTE/DOWNVOTE (3 up and 1 down net to +2):
        confidence +0.1 per net upvote, -0.15 per net downvote, floor 0.05; importance moves by `net` (ExpeL);
        PLAYBOOK membership follows (in at 0.7, out below 0.4); importance 0 retires the row, which is kept.
        `text` replaces the wording (EDIT), keeping the id. A `key` (the Curator's "curator:<cycle tick>") makes the
        vote idempotent: the same key and heuristic again (a retried activity) changes nothing."""
        with closing(self._connect()) as conn, conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT * FROM heuristics WHERE id = ?", (heuristic_id_,)).fetchone()
            if row is None:
                raise KeyError(f"no heuristic {heuristic_id_!r} in {self.path}")
            if key is not None and conn.execute(
                    "INSERT OR IGNORE INTO votes_applied VALUES (?, ?, ?)", (key, heuristic_id_, net)).rowcount == 0:
                return self._row(row)  # already applied under this key
            step = UPVOTE * net if net > 0 else -DOWNVOTE * -net
            conf = round(min(1.0, max(CONFIDENCE_FLOOR, row["confidence"] + step)), 6)
            importance = row["importance"] + net
            status = status_after(conf, importance, row["status"], row["trial_verdict"] in HELD)
            retired = row["retired_tick"] if row["retired_tick"] is not None else (tick if status == "retired" else None)
            conn.execute(
                "UPDATE heuristics SET confidence = ?, importance = ?, status = ?, retired_tick = ?, text = ?, "
                "updated_at = ? WHERE id = ?",
                (conf, importance, status, retired, (text or row["text"]).strip(), _now(), heuristic_id_),
            )
            return self._row(conn.execute("SELECT * FROM heuristics WHERE id = ?", (heuristic_id_,)).fetchone())

    def restore(self, heuristic_id_: str, before: Mapping[str, Any], tick: int) -> Heuristic:
        """Undo a PLAYBOOK change its regime-matched evaluation found harmful (docs/design/learning.md): a rule that
        entered is retired (row kept); one that was revised or left goes back in with its earlier wording, at least at
        the promotion line, its trial verdict cleared so the next trial measures it again."""
        with closing(self._connect()) as conn, conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT * FROM heuristics WHERE id = ?", (heuristic_id_,)).fetchone()
            if row is None:
                raise KeyError(f"no heuristic {heuristic_id_!r} in {self.path}")
            if not before.get("in_playbook"):
                conn.execute("UPDATE heuristics SET status = 'retired', retired_tick = COALESCE(retired_tick, ?), "
                             "updated_at = ? WHERE id = ?", (tick, _now(), heuristic_id_))
            else:
                conn.execute("UPDATE heuristics SET status = 'active', text = ?, confidence = MAX(confidence, ?), "
                             "importance = MAX(importance, 1), retired_tick = NULL, trial_verdict = NULL, "
                             "updated_at = ? WHERE id = ?",
                             (str(before.get("text") or row["text"]), PROMOTE_AT, _now(), heuristic_id_))
            return self._row(conn.execute("SELECT * FROM heuristics WHERE id = ?", (heuristic_id_,)).fetchone())

    def record_trial(self, heuristic_id_: str, tick: int, occasion: str, verdict: str, result: str,
                     run: str = "") -> Heuristic:
        """A trial's figures (`result`: TrialResult JSON) into the history, and what the verdict does, once per
        heuristic and cycle tick (a retried step changes nothing):
          kept       the hold is lifted; back in PLAYBOOK.md when its confidence allows (>= 0.7, or active);
          demoted    out of PLAYBOOK.md (candidate), one DOWNVOTE's confidence and one importance lost — a rule
                     demoted twice is retired (ExpeL importance 0), its row kept;
          no effect  at ADD (or on an untried rule): held back (nothing measured is nothing paid); at a
                     re-judgement: nothing changes (a crash rule is not demoted because the last rows were calm);
          no trial   on a rule never measured (at ADD, or promoted by votes or a dream): held back as "untried"
                     until a trial measures it; on a measured rule: nothing changes.
        `run`: the cycle's workflow run id (a retry of the step has the same one)."""
        with closing(self._connect()) as conn, conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT * FROM heuristics WHERE id = ?", (heuristic_id_,)).fetchone()
            if row is None:
                raise KeyError(f"no heuristic {heuristic_id_!r} in {self.path}")
            if conn.execute("INSERT OR IGNORE INTO heuristic_trials VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (heuristic_id_, tick, occasion, verdict, result, _now(), run)).rowcount == 0:
                return self._row(row)  # this cycle's trial is already recorded
            conf, importance, standing = row["confidence"], row["importance"], row["trial_verdict"]
            if verdict == "kept":
                standing = "kept"
            elif verdict == "demoted":
                standing = "demoted"
                conf = round(max(CONFIDENCE_FLOOR, conf - DOWNVOTE), 6)
                importance -= 1
            elif verdict == "no effect" and (occasion == "add" or standing == "untried"):
                standing = "no effect"
            elif verdict == "no trial" and standing is None:  # never measured (an ADD, or promoted by votes/dream)
                standing = "untried"
            else:  # no effect at a re-judgement of a measured rule, or no trial: the standing verdict stays
                return self._row(row)
            status = row["status"]
            if status == "candidate" and standing == "kept" and conf >= PROMOTE_AT - 1e-9:
                status = "active"
            status = status_after(conf, importance, status, standing in HELD)
            retired = row["retired_tick"] if row["retired_tick"] is not None else (tick if status == "retired" else None)
            conn.execute("UPDATE heuristics SET confidence = ?, importance = ?, status = ?, retired_tick = ?, "
                         "trial_verdict = ?, trial_tick = ?, updated_at = ? WHERE id = ?",
                         (conf, importance, status, retired, standing, tick, _now(), heuristic_id_))
            return self._row(conn.execute("SELECT * FROM heuristics WHERE id = ?", (heuristic_id_,)).fetchone())

    def trials(self, heuristic_id_: str | None = None) -> builtins.list[dict[str, Any]]:
        """The trial history (newest first): heuristic_id, tick, occasion, verdict, result (TrialResult JSON), run."""
        with closing(self._connect()) as conn:
            sql = "SELECT * FROM heuristic_trials" + (" WHERE heuristic_id = ?" if heuristic_id_ else "")
            rows = conn.execute(sql + " ORDER BY rowid DESC",  # newest first: the order they were recorded
                                (heuristic_id_,) if heuristic_id_ else ()).fetchall()
        return [{**dict(r), "result": json.loads(r["result"])} for r in rows]

    def get(self, heuristic_id_: str) -> Heuristic | None:
        with closing(self._connect()) as conn:
            row = conn.execute("SELECT * FROM heuristics WHERE id = ?", (heuristic_id_,)).fetchone()
        return self._row(row) if row else None

    def count(self) -> int:
        with closing(self._connect()) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM heuristics").fetchone()[0])

    def list(self, min_confidence: float = 0.0) -> builtins.list[Heuristic]:
        """Heuristics at or above `min_confidence`, by scope then confidence (highest first)."""
        with closing(self._connect()) as conn:
            rows = conn.execute(
                "SELECT * FROM heuristics WHERE confidence >= ? - 1e-9 "
                "ORDER BY scope, confidence DESC, evidence_count DESC, id",
                (min_confidence,),
            ).fetchall()
        return [self._row(r) for r in rows]


def derive_heuristics_from_episodes(
    episodes: builtins.list[Episode], min_support: int = MIN_PATTERN_SUPPORT,
    settled: Mapping[str, float] | None = None,
) -> builtins.list[tuple[str, str, str]]:
    """ExpeL-style distillation without an LLM (zero cost).

    Groups episodes by (strategy scope, regime, tier, acted). A group seen at least `min_support`
    times becomes one rule computed from its members. Returns one (text, scope, episode_id) per
    supporting episode, so feeding them to `add_or_reinforce` counts each episode as evidence once.
    Deterministic: the same episodes always give the same tuples in the same order. `settled`: episode id → its
    tick's pnl settled in hindsight (the learning ledger), read instead of the tick's own pnl (a swap's fee).
    """
    if min_support < 1:
        raise ValueError(f"min_support must be >= 1, got {min_support}")
    groups: dict[tuple[str, str, str, bool], builtins.list[Episode]] = defaultdict(builtins.list)
    for ep in episodes:
        scope = ep.strategy or GLOBAL_SCOPE
        groups[(scope, ep.regime.value, ep.tier.value, ep.acted)].append(ep)

    out: builtins.list[tuple[str, str, str]] = []
    for (scope, regime, tier, acted), members in sorted(groups.items()):
        if len(members) < min_support:
            continue
        members = sorted(members, key=lambda e: (e.tick, e.id))
        text = _rule_text(regime.replace("_", " "), tier, acted, members, settled or {})
        if text is None:
            continue
        out.extend((text, scope, ep.id) for ep in members)
    return out


def _rule_text(regime: str, tier: str, acted: bool, members: builtins.list[Episode],
               settled: Mapping[str, float]) -> str | None:
    n = len(members)
    mean_pe = sum(e.prediction_error for e in members) / n
    if not acted:
        return (
            f"When the regime is {regime} and the gate settles at {tier}, holding has been the norm: "
            f"{n} ticks without action, mean prediction error {mean_pe:.3f}."
        )
    with_pnl = [p for p in (settled.get(e.id, e.pnl_impact) for e in members) if p is not None]
    n_settled = sum(1 for e in members if e.id in settled)
    if not with_pnl:
        return (
            f"When the regime is {regime} and the gate escalates to {tier}, actions have gone unmeasured: "
            f"{n} acting ticks without a P&L reading; verify outcomes before repeating them."
        )
    mean_pnl = sum(with_pnl) / len(with_pnl)
    wins = sum(1 for p in with_pnl if p > 0)
    verified = sum(1 for e in members if e.outcome_verified)
    if mean_pnl > 0:
        verdict = f"acting has paid: mean pnl {mean_pnl:+.2f}"
    else:
        verdict = f"acting has lost money: mean pnl {mean_pnl:+.2f}; prefer holding or smaller size"
    return (
        f"When the regime is {regime} and the gate escalates to {tier}, {verdict} "
        # the settled count is always worded (numbers are masked in a rule's identity), so the text keeps one
        # identity whether or not its episodes were settled yet
        f"over {len(with_pnl)} measured actions ({wins} profitable, {verified} verified on chain, "
        f"{n_settled} settled in hindsight)."
    )
