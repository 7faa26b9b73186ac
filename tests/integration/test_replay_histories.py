"""Committed histories under tests/histories/ must replay with the current workflow code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory

from workers.replay import replay_history

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))


def test_histories_are_committed():
    names = {p.stem for p in HISTORIES}
    assert {"tick-t0", "tick-acted", "tick-steered-t2", "golem-run", "golem-config-applied", "golem-outage",
            # the lean step inputs (config by version, state slices, results by reference)
            "lean-tick-t0", "lean-tick-acted", "lean-tick-steered-t2", "lean-golem-run",
            "delta-cycle",  # the delta cycle's steps as ordered activities
            "golem-approvals",  # privileged requests: approve / deny updates, audits, an expiry
            "pheromone-field",  # a clade's field: deposit updates (one a retry), continue-as-new
            "clade-exchange"} <= names, names  # a clade's entry bus: shares (one resent, one malformed), continue-as-new


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays(path: Path):
    raw = json.loads(path.read_text())
    history = WorkflowHistory.from_json(path.stem, raw)
    ok, detail = await replay_history(history)
    assert ok, f"{path.name} no longer replays: {detail}"


async def test_replay_detects_divergence():
    """The check can fail: a history whose first command is altered must not replay."""
    path = next(p for p in HISTORIES if p.stem == "tick-t0")
    raw = json.loads(path.read_text())
    for ev in raw["events"]:
        attrs = ev.get("activityTaskScheduledEventAttributes")
        if attrs:
            attrs["activityType"]["name"] = "not_observe"
            break
    ok, detail = await replay_history(WorkflowHistory.from_json("tampered", raw))
    assert not ok and detail
