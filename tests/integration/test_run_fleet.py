"""`golem run --golems N`: N golems with their own homes, data dirs and wallets in the one worker the stack starts."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from golem.fleet import FleetRegistry
from infra.anvil import free_port
from tests.integration.test_run_shutdown import REPO, _cmdline, _home, _of_this_run, _recorded_ticks, _wait

pytestmark = pytest.mark.integration


def test_golem_run_with_three_golems_in_one_worker(tmp_path):
    data = tmp_path / "data"
    home = _home(tmp_path, "f" + str(os.getpid()), free_port())
    env = dict(os.environ, GOLEM_TEMPORAL_PORT=str(free_port()), GOLEM_TEMPORAL_UI_PORT=str(free_port()),
               GOLEM_DASHBOARD_PORT=str(free_port()), GOLEM_METRICS_PORT="0", PYTHONUNBUFFERED="1",
               GOLEM_HOST="testhost")
    run_log = data / "logs" / "golem-run.log"
    golem = subprocess.Popen([sys.executable, "-m", "cli", "run", "--home", str(home), "--data", str(data),
                              "--golems", "3"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=REPO,
                             env=env, start_new_session=True)
    registry = FleetRegistry(data)
    ids = [f"f{os.getpid()}{i}" for i in (1, 2, 3)]
    try:
        _wait(lambda: run_log.exists() and "3 golems" in run_log.read_text(), 300, "the fleet to start", run_log)
        for gid in ids:
            _wait(lambda: len(_recorded_ticks(registry.layout(gid).root)) >= 2, 180, f"{gid}'s ticks", run_log)
        workers = [_cmdline(pid) for pid, cmd in _of_this_run(data).items() if " cli worker " in cmd]
        assert len(workers) == 1 and "--host testhost" in workers[0], workers
        # each its own wallet: the worker opened each golem's services on its own account
        log = (data / "logs" / "worker.log").read_text()
        accounts = dict(re.findall(r"golem (\S+) services ready: account (0x[0-9a-fA-F]{40})", log))
        assert set(ids) <= set(accounts) and len({accounts[g] for g in ids}) == 3, accounts
        listed = subprocess.run([sys.executable, "-m", "cli", "list", "--json", "--data", str(data), "--address",
                                 f"127.0.0.1:{env['GOLEM_TEMPORAL_PORT']}"], capture_output=True, text=True, cwd=REPO,
                                env=env, timeout=120)
        assert listed.returncode == 0, listed.stderr
        rows = {r["id"]: r for r in json.loads(listed.stdout)}
        assert all(rows[g]["host"] == "testhost" and rows[g]["tick"] >= 2 for g in ids), rows
        # each golem has its own wallet and loan (the first the world's golem account, the others opened for them)
        equity = {g: float(rows[g]["equity"].lstrip("$").replace(",", "")) for g in ids}
        assert all(v > 50_000 for v in equity.values()), equity
        # the dashboard serves the fleet page: the same rows, each golem's page under it
        import urllib.request

        base = f"http://127.0.0.1:{env['GOLEM_DASHBOARD_PORT']}/"
        fleet = json.loads(urllib.request.urlopen(base + "api/fleet", timeout=60).read())
        assert [r["id"] for r in fleet["rows"]] == sorted(ids) and all(r["local"] for r in fleet["rows"]), fleet
        assert f"window.GOLEM = {{\"golem\": \"{ids[1]}\"" in \
            urllib.request.urlopen(base + f"golems/{ids[1]}/", timeout=60).read().decode()
        # one heartbeat monitor for the host, none per golem
        assert "heartbeat-monitor host-testhost-monitor" in run_log.read_text(), run_log.read_text()[-2000:]
        # a line per tick on the console, each naming its golem
        assert all(re.search(rf" {g} tick +\d", run_log.read_text()) for g in ids), run_log.read_text()[-2000:]
    finally:
        os.killpg(golem.pid, signal.SIGINT)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 40 and golem.poll() is None:
            time.sleep(0.25)
        for pid in _of_this_run(data):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if golem.poll() is None:
            golem.kill()
