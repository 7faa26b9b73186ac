"""Fault points in the write path, for the chaos run (`make chaos`, infra/chaos.py). Off unless armed.

With `GOLEM_FAULT_DIR=DIR`, the executor's "signed" and "broadcast" moments look for `DIR/arm-<event>`, remove it,
write `DIR/paused-<event>.json` and sleep `PAUSE_SECONDS` so the chaos run can SIGKILL the worker inside that
window. Without the variable: one environment lookup per transaction. See docs/design/chain.md#writing-exactly-once.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

ENV = "GOLEM_FAULT_DIR"
EVENTS = ("signed", "broadcast")
PAUSE_SECONDS = 60.0


def arm(fault_dir: Path, event: str) -> Path:
    """Arm one pause at `event` (the chaos run's side)."""
    if event not in EVENTS:
        raise ValueError(f"unknown fault event {event!r}; choose one of {', '.join(EVENTS)}")
    fault_dir.mkdir(parents=True, exist_ok=True)
    path = fault_dir / f"arm-{event}"
    path.write_text(event)
    return path


def paused(fault_dir: Path, event: str) -> dict[str, Any] | None:
    """The worker's report that it is paused at `event` (None until it is); removed when read."""
    path = fault_dir / f"paused-{event}.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        info: dict[str, Any] = json.loads(text)
    except ValueError:  # caught mid-write: read it on the next poll
        return None
    path.unlink(missing_ok=True)
    return info


def fault_point(event: str, intent: Any) -> None:
    """The executor's on_event observer in a worker: pause here when the chaos run armed `event`."""
    where = os.environ.get(ENV)
    if not where:
        return
    fault_dir = Path(where)
    try:
        (fault_dir / f"arm-{event}").unlink()  # atomic: of two threads racing, one pauses
    except FileNotFoundError:
        return
    info = {"event": event, "pid": os.getpid(), "tick": intent.tick, "action_index": intent.action_index,
            "call_index": intent.call_index, "tx_hash": intent.tx_hash, "nonce": intent.nonce, "at": time.time()}
    tmp = fault_dir / f".paused-{event}.tmp"
    tmp.write_text(json.dumps(info))
    os.replace(tmp, fault_dir / f"paused-{event}.json")
    time.sleep(PAUSE_SECONDS)  # the chaos run SIGKILLs the worker in here
