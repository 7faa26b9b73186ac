"""Which run of a tick sent each of its actions, so exactly-once holds across runs.

The tx journal and permits key a write by (golem, tick, action_index); a tick can run more than once (a reset,
`golem rerun`). Before an action executes its slot is claimed by its run with the tool and arguments, so a later
run numbers new actions after every claimed slot and does not resend one another run already sent, and a retried
execute of the same run carries on. See docs/design/safety.md#runs-of-one-tick.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from golem.models.tick import ProposedAction
from golem.storage import immediate_tx, init_db

_SCHEMA = """
CREATE TABLE IF NOT EXISTS run_actions (
    golem_id TEXT NOT NULL,
    tick INTEGER NOT NULL,
    action_index INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    claimed_at REAL NOT NULL,
    PRIMARY KEY (golem_id, tick, action_index)
);
"""
_COLUMNS = ("golem_id", "tick", "action_index", "run_id", "tool", "arguments", "claimed_at")


class SlotTaken(RuntimeError):
    """The action slot belongs to another run of the tick, for a different action."""


class RunAction(BaseModel):
    golem_id: str
    tick: int
    action_index: int
    run_id: str
    tool: str
    arguments: str  # canonical JSON
    claimed_at: float


def canonical_arguments(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)


def same_action(claim: RunAction, action: ProposedAction) -> bool:
    return claim.tool == action.tool and claim.arguments == canonical_arguments(action.arguments)


def renumbered(actions: list[ProposedAction], first_index: int) -> list[ProposedAction]:
    """A later run's actions, numbered from `first_index` (past the slots other runs used)."""
    if first_index <= 0:
        return actions
    return [a.model_copy(update={"action_index": first_index + i}) for i, a in enumerate(actions)]


class RunActionLedger:
    def __init__(self, path: str | Path) -> None:
        self.path = init_db(Path(path), _SCHEMA)

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[RunAction]:
        with immediate_tx(self.path) as db:
            rows = db.execute(f"SELECT {', '.join(_COLUMNS)} FROM run_actions {sql}", params).fetchall()
        return [RunAction(**dict(zip(_COLUMNS, r))) for r in rows]

    def claim(self, golem_id: str, tick: int, action: ProposedAction, run_id: str) -> RunAction:
        """Claim the action's slot for this run (before anything is signed). Claiming it again in the
        same run returns the claim; a slot another run claimed is refused."""
        key = (golem_id, tick, action.action_index)
        with immediate_tx(self.path, durable=True) as db:
            row = db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM run_actions WHERE golem_id = ? AND tick = ? AND action_index = ?", key
            ).fetchone()
            if row is None:
                # a clipped action is claimed as proposed, so another run proposing it again finds it sent
                row = (*key, run_id, action.tool, canonical_arguments(action.clipped_from or action.arguments),
                       time.time())
                db.execute(
                    "INSERT INTO run_actions (golem_id, tick, action_index, run_id, tool, arguments, claimed_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
        claim = RunAction(**dict(zip(_COLUMNS, row)))
        if claim.run_id != run_id:
            raise SlotTaken(
                f"action {action.action_index} of tick {tick} was claimed by run {claim.run_id} "
                f"({claim.tool} {claim.arguments}); this run ({run_id}) may not send under it"
            )
        return claim

    def claims(self, golem_id: str, tick: int) -> list[RunAction]:
        return self._rows("WHERE golem_id = ? AND tick = ? ORDER BY action_index", (golem_id, tick))

    def others(self, golem_id: str, tick: int, run_id: str) -> list[RunAction]:
        """Slots of this tick claimed by other runs."""
        return [c for c in self.claims(golem_id, tick) if c.run_id != run_id]

    def first_free_index(self, golem_id: str, tick: int, run_id: str) -> int:
        """Where this run's actions start: 0 for the first run to act, else past every other run's slots."""
        others = self.others(golem_id, tick, run_id)
        return max((c.action_index for c in others), default=-1) + 1
