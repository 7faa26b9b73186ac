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
