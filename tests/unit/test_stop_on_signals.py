"""`kill PID` of a run that owns processes (chaos, soak, `golem backtest`) leaves none of them behind: SIGTERM raises
KeyboardInterrupt for the clean-up, and a clean-up that hangs is cut short — the run's children are terminated and
it exits 130 (infra.supervisor.stop_on_signals)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.supervisor import child_pids

ROOT = Path(__file__).resolve().parents[2]

HANGS = """
import subprocess, sys, time
from infra.supervisor import stop_on_signals
stop_on_signals(grace_seconds={grace})
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(child.pid, flush=True)
try:
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    print("cleaning up", flush=True)
    {cleanup}
"""


def _run(grace: float, cleanup: str) -> tuple[int, str, int]:
    code = HANGS.format(grace=grace, cleanup=cleanup)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    assert child_pids(proc.pid) == [child]
    os.kill(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    return proc.returncode, out, child


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_a_hanging_clean_up_is_cut_short_and_the_children_are_terminated():
    t0 = time.monotonic()
    rc, out, child = _run(1.0, "time.sleep(60)")  # a clean-up that never finishes in time
    assert rc == 130 and "cleaning up" in out and "terminated 1 child process(es)" in out
    assert time.monotonic() - t0 < 15
    assert _gone(child)


def test_a_clean_up_that_finishes_exits_its_own_way():
    rc, out, child = _run(10.0, "child.terminate(); child.wait(); sys.exit(3)")
    assert rc == 3 and "terminated" not in out and _gone(child)


STOPPABLE = """
import asyncio, sys
from infra.supervisor import run_stoppable, stop_on_signals
stop_on_signals(grace_seconds=10.0)

async def main():
    helper = asyncio.create_task(asyncio.sleep(3600))  # as a Temporal worker's own tasks: main's clean-up needs them
    print("ready", flush=True)
    try:
        await asyncio.sleep(3600)
    finally:
        await asyncio.sleep(0.3)  # a clean-up that awaits (a second signal arrives meanwhile)
        print("clean-up: helper", "cancelled" if helper.done() else "running", flush=True)
        helper.cancel()

try:
    run_stoppable(main())
except KeyboardInterrupt as stop:
    print(f"stopped: {stop}", flush=True)
    sys.exit(130)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_stoppable_cancels_only_the_main_task_and_raises_keyboard_interrupt_after(sig):
    """The signal cancels `main` alone: its clean-up runs while the loop's other tasks still run (asyncio.run's
    cancel-everything after a KeyboardInterrupt in the loop is what hung `golem backtest`'s worker shutdown); then
    KeyboardInterrupt(<signal name>) comes out of run_stoppable. A second signal does not cut the clean-up short."""
    proc = subprocess.Popen([sys.executable, "-c", STOPPABLE], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, sig)
    time.sleep(0.1)
    os.kill(proc.pid, sig)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    assert out.splitlines() == ["clean-up: helper running", f"stopped: {sig.name}"], out
