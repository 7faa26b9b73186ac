"""`golem run` as an owner runs it: `golem run 2>&1 | tee run.log` in a terminal's process group. The worker is
SIGKILLed once (supervision restarts it), the pipe's reader dies first, then the group gets SIGINT (what Ctrl-C
does): nothing of that run may be left 30 s later. Processes are matched by this run's data dir and by pid, never
by name (other stacks share the machine). The dev server is supervised too: SIGKILLed, it is restarted on the same
SQLite file and ports, and the outage reaches the status file and the Event Fabric."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import tomli_w

from golem.layout import DataLayout
from infra.anvil import free_port
from infra.temporal import temporal_cli
from workflows.monitor import monitor_workflow_id

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_HOME = REPO / "examples" / "golem-home"


def _home(tmp: Path, golem_id: str, rpc_port: int) -> Path:
    home = tmp / "home"
    home.mkdir()
    for name in ("STRATEGY.md", "HEARTBEAT.md"):
        shutil.copy(EXAMPLE_HOME / name, home / name)
    raw = tomllib.loads((EXAMPLE_HOME / "golem.toml").read_text())
    raw["golem"].update(id=golem_id, home=".")
    raw["chain"]["rpc_url"] = f"http://127.0.0.1:{rpc_port}"
    raw["clock"].update(theta_base_seconds=0.5, theta_min_seconds=0.25, theta_max_seconds=1.5)
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    return home


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _of_this_run(data: Path) -> dict[int, str]:
    """Every live process whose command line names this run's data dir (Temporal's --db-filename, Anvil's --state,
    the worker's and the dashboard's --data, the simulator's --deployment)."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and str(data) in (cmd := _cmdline(int(d.name))) and _alive(int(d.name)):
            out[int(d.name)] = cmd[:160]
    return out


def _children(pid: int) -> dict[int, str]:
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out[int(stat.parent.name)] = _cmdline(int(stat.parent.name))
    return out


def _recorded_ticks(data: Path) -> list[int]:
    """Every tick the golem recorded, done or failed, in order (one entry per tick run: a repeat shows twice)."""
    import sqlite3
    from contextlib import closing

    try:
        with closing(sqlite3.connect(f"file:{DataLayout(data).cycle_index}?mode=ro", uri=True, timeout=5)) as db:
            done = [t for (t,) in db.execute("SELECT tick FROM cycle_index")]
            failed = [t for (t,) in db.execute("SELECT tick FROM cycle_failures WHERE tick NOT IN "
                                               "(SELECT tick FROM cycle_index)")]
    except sqlite3.OperationalError:
        return []
    return sorted(done + failed)


def _wait(cond, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.5)
    tail = log.read_text()[-3000:] if log.exists() else "(no log)"
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; golem-run.log:\n{tail}")


def test_ctrl_c_through_a_dead_pipe_after_a_worker_restart_leaves_nothing(tmp_path):
    data = tmp_path / "data"
    rpc = free_port()
    home = _home(tmp_path, "pipe" + str(os.getpid()), rpc)
    env = dict(os.environ, GOLEM_TEMPORAL_PORT=str(free_port()), GOLEM_TEMPORAL_UI_PORT=str(free_port()),
               GOLEM_DASHBOARD_PORT=str(free_port()), GOLEM_METRICS_PORT=str(free_port()), PYTHONUNBUFFERED="1")
    # The first worker starts a child of its own (as a dream fork is) and is then SIGKILLed below: that orphan, in
    # the dead worker's process group, is what only the final sweep of the stop can find.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, subprocess, sys\n"
        "marker = os.environ.get('ORPHAN_MARKER')\n"
        "if marker and sys.argv[1:2] == ['worker'] and not os.path.exists(marker):\n"
        "    p = subprocess.Popen([sys.executable, '-S', '-c', 'import time; time.sleep(600)', os.environ['GOLEM_DATA']])\n"
        "    open(marker, 'w').write(str(p.pid))\n")
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", str(REPO))])
    env["ORPHAN_MARKER"] = str(tmp_path / "orphan.pid")
    run_log = data / "logs" / "golem-run.log"
    # The terminal's foreground group: the pipe's reader leads it, `golem run` joins it (as a shell pipeline does).
    reader = subprocess.Popen(["tee", str(tmp_path / "run.log")], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              process_group=0)
    golem = subprocess.Popen([sys.executable, "-m", "cli", "run", "--home", str(home), "--data", str(data)],
                             stdout=reader.stdin, stderr=subprocess.STDOUT, cwd=REPO, env=env,
                             process_group=reader.pid)
    assert reader.stdin is not None
    reader.stdin.close()  # the pipe's write end is golem run's alone
    try:
        _wait(lambda: run_log.exists() and "golem '" in run_log.read_text(), 240, "the golem to start", run_log)
        _wait(lambda: "tick " in (tmp_path / "run.log").read_text(), 120, "a tick line through the pipe", run_log)
        workers = [p for p, cmd in _children(golem.pid).items() if " cli worker " in cmd]
        assert len(workers) == 1, _children(golem.pid)
        orphan = int((tmp_path / "orphan.pid").read_text())
        assert _alive(orphan)
        os.kill(workers[0], signal.SIGKILL)
        _wait(lambda: "worker restarted" in run_log.read_text(), 60, "supervision to restart the worker", run_log)
        assert _alive(orphan), "the dead worker's child lives on (as a dream fork would)"
        restarted = [p for p, cmd in _children(golem.pid).items() if " cli worker " in cmd]
        assert restarted and restarted != workers
        # the dev server under `golem run`: SIGKILLed, restarted by supervision on its SQLite, ticks go on
        [server] = [p for p, cmd in _children(golem.pid).items() if "server start-dev" in cmd]
        ticks_before = _recorded_ticks(data)
        os.killpg(server, signal.SIGKILL)
        _wait(lambda: "temporal restarted" in run_log.read_text(), 90, "supervision to restart the dev server",
              run_log)
        _wait(lambda: len(_recorded_ticks(data)) >= len(ticks_before) + 2, 120, "ticks after the dev server restart",
              run_log)
        ticks = _recorded_ticks(data)
        assert ticks == list(range(len(ticks))), f"a tick lost or doubled across the outage: {ticks}"
        status = subprocess.run([sys.executable, "-m", "cli", "status", "--home", str(home), "--data", str(data),
                                 "--address", f"127.0.0.1:{env['GOLEM_TEMPORAL_PORT']}"],
                                capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
        assert status.returncode == 0, status.stderr
        assert "temporal restarted 1x (last outage" in status.stdout and "worker restarted 1x" in status.stdout, \
            status.stdout
        # `golem run` started the heartbeat-monitor beside the golem, and it runs through the dev server's restart
        gid = tomllib.loads((home / "golem.toml").read_text())["golem"]["id"]
        assert f"heartbeat-monitor {monitor_workflow_id(gid)} started" in run_log.read_text()
        described = subprocess.run([str(temporal_cli()), "workflow", "describe", "--workflow-id",
                                    monitor_workflow_id(gid), "--address", f"127.0.0.1:{env['GOLEM_TEMPORAL_PORT']}",
                                    "-o", "json"], capture_output=True, text=True, timeout=60)
        assert described.returncode == 0, described.stderr
        assert json.loads(described.stdout)["workflowExecutionInfo"]["status"] == "WORKFLOW_EXECUTION_STATUS_RUNNING"
        events = subprocess.run([sys.executable, "-m", "cli", "events", "--data", str(data), "--kind", "alerts"],
                                capture_output=True, text=True, cwd=REPO, env=env, timeout=60).stdout
        assert events.count("alerts.process_died") == 2 and events.count("alerts.process_restarted") == 2, events
        before = _of_this_run(data)
        assert len(before) >= 5, before  # temporal, anvil, simulator, worker, dashboard

        os.kill(reader.pid, signal.SIGKILL)  # the reader goes first: every later console write hits a dead pipe
        reader.wait(5)
        os.killpg(reader.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30 and (golem.poll() is None or _of_this_run(data)):
            time.sleep(0.25)
        left = _of_this_run(data)
        took = time.monotonic() - t0
    finally:
        for pid in _of_this_run(data):  # never leave a stack behind, whatever the assertions say
            try:
                os.killpg(pid, signal.SIGKILL) if os.getpgid(pid) == pid else os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if golem.poll() is None:
            golem.kill()
    assert golem.returncode is not None, "golem run still running 30 s after Ctrl-C"
    assert not left, f"left running {took:.0f}s after Ctrl-C: {left}"
    log = run_log.read_text()
    # the stop went to the run's own log although the console was gone, and it reached its end
    assert "stopping ..." in log and "stopped." in log.split("stopping ...")[-1], log[-2000:]
    # the orphan was found by the final sweep through the dead worker's process group, and named
    assert f"still running after the stop, terminated: started by worker (pid {orphan})" in log, log[-2000:]
    print(f"everything of the run gone {took:.1f}s after Ctrl-C; golem run exited {golem.returncode}; the stop:\n"
          + log.split("stopping ...")[-1])


def test_a_killed_dev_server_is_restarted_on_its_sqlite_and_the_outage_is_recorded(tmp_path):
    from golem.events.store import EventStore
    from infra.supervisor import Supervisor, SupervisionJournal, TemporalChild, supervision_note
    from infra.temporal import TemporalDevServer, port_open

    data = tmp_path / "data"
    data.mkdir()
    server = TemporalDevServer(data / "temporal.sqlite", port=free_port(), ui_port=free_port(), headless=True,
                               log_path=data / "temporal.log")
    child = TemporalChild(server)
    journal = SupervisionJournal(data, "devsrv")
    said: list[str] = []
    sup = Supervisor([child], backoff_initial=0.2, say=said.append, notify=journal)
    child.start()
    try:
        first = child.pid
        assert first is not None
        os.killpg(first, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while sup.restarts("temporal") < 1 and time.monotonic() < deadline:
            sup.check()
            time.sleep(0.1)
        assert sup.restarts("temporal") == 1, said
        assert child.pid != first and port_open(server.ip, server.port)
        assert server.db_path == data / "temporal.sqlite"
    finally:
        problems = sup.stop()
    assert not problems
    assert said[0].startswith("temporal died: killed by SIGKILL") and "restarting temporal in 0.2s" in said[0], said
    assert said[1].startswith("temporal restarted (pid") and "down " in said[1], said
    kinds = [e.kind for e in EventStore(data).read(kinds=["alerts"])]
    assert kinds == ["alerts.process_died", "alerts.process_restarted"], kinds
    note = supervision_note(data)  # this process is the "golem run" whose journal it is
    assert note is not None and note.startswith("temporal restarted 1x (last outage"), note
