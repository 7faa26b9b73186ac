"""Runs of a tick: every run writes its own record, and knows whether it is the first.

A tick's workflow can run more than once: `golem rerun` starts a new workflow (`…-tick-N-rerun-K`),
a Temporal reset (Web UI, `temporal workflow reset`, the service API) starts a new run of the same
workflow, and a workflow retry policy would too. What a run knows about itself comes from
`workflow.info()` (its run id, the first run id of the workflow, the attempt) and its input
(`rerun_of`); a reset's reason is only in the run's history and is read by the reflect activity.
"""

from __future__ import annotations

import re

from golem.models.record import TickRun

_LABEL = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_SHORT = 8  # characters of a run id in a label: enough to tell a tick's runs apart


def tick_run(
    workflow_id: str,
    run_id: str,
    first_run_id: str,
    *,
    attempt: int = 1,
    continued_run_id: str | None = None,
    rerun_of: str | None = None,
) -> TickRun:
    """Who this run is. The first run of the tick's own workflow is `original` (label ""); the first run
    of a `golem rerun` workflow is `rerun` (label "rerun-K" from its id); any later run of either
    workflow is a `retry` (attempt > 1, started by the retry policy) or a `reset`, labelled by its run id."""
    base = ""
    if rerun_of and workflow_id.startswith(rerun_of + "-"):
        base = workflow_id[len(rerun_of) + 1:]
    elif rerun_of:
        base = "rerun"
    first = not first_run_id or not run_id or run_id == first_run_id
    if first:
        return TickRun(kind="rerun" if rerun_of else "original", label=base, run_id=run_id,
                       original_run_id=first_run_id or run_id)
    kind = "retry" if attempt > 1 and continued_run_id else "reset"
    label = "-".join(p for p in (base, f"{kind}-{run_id[:_SHORT].lower()}") if p)
    return TickRun(kind=kind, label=label, run_id=run_id, original_run_id=first_run_id,
                   reset_from_run_id=continued_run_id if kind == "retry" else None)


def check_label(label: str) -> str:
    """A run label as it may appear in a file name; bad input gets a one-line reason."""
    if label and not _LABEL.match(label):
        raise ValueError(f"run label {label!r} must be lower-case letters, digits and single dashes (e.g. rerun-1)")
    return label


def labelled(stem: str, label: str) -> str:
    """`cycle-000008` + `reset-1a2b3c4d` → `cycle-000008-reset-1a2b3c4d` (the first run keeps the bare name)."""
    return f"{stem}-{check_label(label)}" if label else stem
