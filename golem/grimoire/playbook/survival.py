"""The heuristic survival rate: the share of promoted PLAYBOOK heuristics still in force 100 ticks after they entered
(healthy 40–70 %, alarm below 20 % or above 90 %), read from the PLAYBOOK revision history (`playbook_revisions` in
<data>/grimoire/heuristics.sqlite). A heuristic is *new* when it first appears in a compiled revision (ids in
`inherited` are not); it *survives* when the revision in force `horizon` ticks later still lists it; ones younger
than `horizon` at `last_tick` are not judged yet. See docs/design/events.md#quality-figures.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

HORIZON_TICKS = 100  # judged 100 ticks after entry
HEALTHY = (0.40, 0.70)  # healthy range
ALARM_BELOW, ALARM_ABOVE = 0.20, 0.90  # alarm: it learns noise, or it never revises
MIN_JUDGED = 5  # ours: fewer judged heuristics make no rate worth an alert


ID = re.compile(r"\bh-[0-9a-f]{16}\b")


def revisions(db: Path) -> list[tuple[int, set[str]]]:
    """(tick, heuristic ids) per recorded revision with a tick, oldest first."""
    with closing(sqlite3.connect(db)) as c:
        rows = c.execute("SELECT tick, text FROM playbook_revisions ORDER BY revision").fetchall()
    return [(t, set(ID.findall(text))) for t, text in rows if t is not None]


def survival(revs: list[tuple[int, set[str]]], last_tick: int, horizon: int = HORIZON_TICKS,
             inherited: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """New heuristics, how many were judged (entered >= horizon ticks before last_tick) and how many survived."""
    entered: dict[str, int] = {}
    for tick, ids in revs:
        for h in ids - set(inherited):
            entered.setdefault(h, tick)

    def in_force(at: int) -> set[str]:
        now = [ids for t, ids in revs if t <= at]
        return now[-1] if now else set()

    judged = {h: t for h, t in entered.items() if t + horizon <= last_tick}
    survived = [h for h, t in judged.items() if h in in_force(t + horizon)]
    return {"new": len(entered), "judged": len(judged), "survived": len(survived),
            "rate": round(len(survived) / len(judged), 3) if judged else None}
