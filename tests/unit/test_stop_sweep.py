"""The final check of a stop (infra.supervisor.sweep_children) and console writes to a dead pipe
(infra.console.say): what a stop leaves is killed and named, a grandchild orphaned in a dead child's process group
included, and a console whose reader went away costs the clean-up nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from infra.supervisor import _alive, sweep_children


def _wait(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_the_sweep_kills_and_names_what_the_stop_left_a_dead_childs_orphan_included(tmp_path):
    marker = tmp_path / "grandchild.pid"
    # a "worker" in a session of its own that started something (as a dream fork) and was then SIGKILLed
    worker = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                               "p = subprocess.Popen(['sleep', '300']); open(sys.argv[1], 'w').write(str(p.pid)); "
                               "time.sleep(300)", str(marker)], start_new_session=True)
    # a "dashboard" that ignores SIGTERM (once it says so: a SIGTERM before its handler is set would just end it)
    ignoring = tmp_path / "dashboard.ready"
    dashboard = subprocess.Popen([sys.executable, "-c", "import signal, sys, time; "
                                  "signal.signal(signal.SIGTERM, signal.SIG_IGN); open(sys.argv[1], 'w').write('1'); "
                                  "time.sleep(300)", str(ignoring)],
                                 start_new_session=True)
    _wait(lambda: marker.exists() and marker.read_text() and ignoring.exists() and ignoring.read_text())
    orphan = int(marker.read_text())
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    assert _alive(orphan)
    said: list[str] = []
    # parent=-1: only the named process groups (the test process's own children include session fixtures)
    killed = sweep_children({worker.pid: "worker", dashboard.pid: "dashboard"}, grace=0.3, say=said.append,
                            parent=-1)
    dashboard.wait(5)
    _wait(lambda: not _alive(orphan))
    assert sorted(killed) == sorted([f"dashboard (pid {dashboard.pid})", f"started by worker (pid {orphan})"])
    assert said == [f"still running after the stop, terminated: {', '.join(killed)}; still there after 0.3s, "
                    f"killed: dashboard (pid {dashboard.pid})"]  # the one that ignored SIGTERM
    assert sweep_children({worker.pid: "worker"}, grace=0.1, say=said.append, parent=-1) == []  # nothing left


def test_a_console_whose_reader_died_costs_the_clean_up_nothing(tmp_path):
    """A child prints through infra.console.say into a pipe whose reader is gone, then does its clean-up: the
    clean-up happens, the lines reach the mirror file, and the process exits 0 (no BrokenPipeError at exit)."""
    done = tmp_path / "cleaned-up"
    mirror = tmp_path / "run.log"
    code = ("import sys, time; from pathlib import Path; from infra.console import ignore_sigpipe, mirror_to, say; "
            "ignore_sigpipe(); mirror_to(Path(sys.argv[2])); say('started'); sys.stdin.readline(); "
            "ok = [say(f'stopping {i} ...') for i in range(3)]; print('a plain print after the pipe died'); "
            "Path(sys.argv[1]).write_text(str(ok))")
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", code, str(done), str(mirror)], stdout=w, stderr=w,
                            stdin=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    os.close(w)
    assert os.read(r, 100).startswith(b"started")
    os.close(r)  # the reader goes away (tee killed by the same Ctrl-C)
    assert proc.stdin is not None
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    assert proc.wait(20) == 0
    assert done.read_text() == "[False, False, False]"
    assert [ln.split(" ", 2)[2] for ln in mirror.read_text().splitlines()] == [
        "started", "stopping 0 ...", "stopping 1 ...", "stopping 2 ..."]
