"""Files a tick or a cycle leaves for later readers (out of the worker layer).

Owner follow-ups for the curator or the dream cycle go to `<data>/owner-notes.jsonl` (idempotent by id); a
tick's outcome verification goes to `<data>/outcomes/<tick>[-<run>].json`, one file per run of the tick, so
a reset or a rerun writes beside the first run's evidence.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from golem.layout import DataLayout
from golem.life.runs import labelled
from golem.models.interventions import FollowUp


def deliver_followups(layout: DataLayout, followups: Iterable[FollowUp], window: str, tick: int) -> list[str]:
    """Append the follow-ups not delivered yet; the ids of all of them (delivered now or before)."""
    followups = list(followups)
    path = layout.owner_notes
    seen = set()
    if path.exists():
        seen = {json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()}
    with path.open("a") as out:
        for f in followups:
            if f.id not in seen:
                out.write(json.dumps({"id": f.id, "window": window, "tick": tick, "message": f.message}) + "\n")
    return [f.id for f in followups]


def write_outcome_file(layout: DataLayout, tick: int, run_label: str, verification_json: str) -> Path:
    path = layout.outcome_file(labelled(f"tick-{tick:06d}", run_label))
    path.parent.mkdir(exist_ok=True)
    path.write_text(verification_json)
    return path
