"""A fleet host's heartbeat monitor on real Temporal + Anvil: `golem worker --host` starts one monitor for the host
(no monitor per golem); it watches the golems placed there at each check — one spawned later is watched, a stopped
one is not — and a stalled golem's batched alert names that golem, at the webhook and on its own Event Fabric."""

from __future__ import annotations

import asyncio
import json

import pytest
from eth_account import Account
from temporalio.service import RPCError

from temporalio.client import WorkflowExecutionStatus

from golem.events.store import EventStore
from golem.life.vitals import MonitorInput
from golem.world.devchain import dev_key
from tests.integration.golem_rig import wait_for, write_golem_home
from tests.integration.test_fleet import FIRST_KEY, _cli, _ticks, make_fleet
from tests.integration.test_heartbeat_monitor import _receiver
from workers.fleet import start_placed, stop_golem
from workflows.monitor import HeartbeatMonitorWorkflow, monitor_workflow_id

pytestmark = pytest.mark.integration

HOST = "mon"
MONITOR = f"host-{HOST}-monitor"


def _fund(monkeypatch, w3, i: int) -> None:
    key = dev_key(FIRST_KEY + i)
    monkeypatch.setenv(f"GOLEM_TEST_KEY_{i}", key)
    w3.provider.make_request("anvil_setBalance", [Account.from_key(key).address, hex(2 * 10**18)])


async def test_one_monitor_per_host_watches_the_golems_placed_there(temporal_client, temporal_env, anvil, w3,
                                                                     world_snapshot, tmp_path, monkeypatch, capsys):
    hook, url, received = await _receiver()
    address = temporal_env.client.service_client.config.target_host
    monkeypatch.setenv("GOLEM_TEMPORAL_ADDRESS", address)
    # every golem's home is copied from this template: its alerts go to the owner's one webhook
    (tmp_path / "template").mkdir()
    write_golem_home(tmp_path / "template", "template", anvil.rpc_url, world_snapshot, theta=0.3,
                     alerts={"webhook_url": url})
    registry = make_fleet(tmp_path, anvil.rpc_url, world_snapshot, ["w1"], HOST, monkeypatch, w3)
    data = ["--home", str(tmp_path / "template" / "home"), "--data", str(registry.root)]
    await start_placed(temporal_client, registry, "w1")  # started as a library call: no monitor from here
    # the per-golem monitor an earlier `golem run --golems` started beside each fleet golem, on its host's queue
    legacy = await temporal_client.start_workflow(
        HeartbeatMonitorWorkflow.run, MonitorInput(golem_id="w1", theta_seconds=0.3, check_seconds=30),
        id=monitor_workflow_id("w1"), task_queue=f"golem-host-{HOST}")
    proc = _host_worker(registry.root, HOST, address, tmp_path / "host.log",
                        "--monitor-every", "0.5", "--alert-window", "3")
    monitor = temporal_client.get_workflow_handle(MONITOR)

    async def watched() -> list[str]:
        try:
            return await monitor.query("watched", result_type=list[str])
        except RPCError:
            return []

    try:
        # the worker started the host's monitor, and it reads the golem placed there
        await wait_for(lambda: _ticks(registry, "w1") and len(_ticks(registry, "w1")) >= 3, 120, "w1 ticking")
        await wait_for(lambda: watched(), 60, "the host monitor's first check")
        assert await watched() == ["w1"]
        # ... and the worker ended the per-golem one: w1 is watched once
        assert (await legacy.describe()).status == WorkflowExecutionStatus.TERMINATED
        desc = await monitor.describe()
        assert desc.task_queue == f"golem-host-{HOST}" and desc.workflow_type == "HostMonitorWorkflow"

        # a golem spawned later is watched from the next check; spawn names the host's monitor
        _fund(monkeypatch, w3, 2)
        out = await _cli(capsys, *data, "spawn", "w2", "--host", HOST, "--key-env", "GOLEM_TEST_KEY_2")
        assert f"heartbeat-monitor {MONITOR} running" in out, out
        await wait_for(lambda: _ticks(registry, "w2") and len(_ticks(registry, "w2")) >= 2, 120, "w2 ticking")
        await wait_for(lambda: _eq(watched(), ["w1", "w2"]), 30, "w2 watched")

        # w2 paused: its ticks stall; the window's batch names w2, at the webhook and on w2's own Event Fabric
        # (a loaded machine may stall a ticking golem now and then: the batch looked for is the one of the pause)
        out = await _cli(capsys, "--data", str(registry.root), "--golem", "w2", "pause", "--reason", "stall w2")
        stalled = await wait_for(lambda: [b for b in received if b["golem_id"] == "w2" and any(
            a["vital"] == "tick_stalled" and "stall w2" in a["detail"] for a in b["alerts"])], 60,
            "a tick_stalled batch for w2 naming its pause")
        batch = stalled[0]
        stall = next(a for a in batch["alerts"] if a["vital"] == "tick_stalled")
        assert stall["value"] > stall["threshold"] > 0 and "the golem is paused" in stall["detail"], stall
        assert stall["severity"] == "low", stall  # the owner's pause lowers it
        assert batch["checks"] >= 3, batch
        mine = EventStore(registry.layout("w2")).read(kinds=["alerts.probe"])
        assert batch["batch_id"] in {e.payload["batch_id"] for e in mine} and {e.golem for e in mine} == {"w2"}
        theirs = EventStore(registry.layout("w1")).read(kinds=["alerts.probe"])
        assert batch["batch_id"] not in {e.payload["batch_id"] for e in theirs}, "w2's batch landed on w1"
        shown = await _cli(capsys, "--data", str(registry.root), "--golem", "w2", "alerts", "--json", "-n", "500")
        assert batch["batch_id"] in shown, shown[-2000:]
        rows = {r["id"]: r for r in json.loads(await _cli(capsys, *data, "list", "--json"))}
        assert int(rows["w2"]["alerts"].split()[0]) >= 1, rows["w2"]

        # a stopped golem is not watched, and no batch names it after that
        await _cli(capsys, *data, "stop", "w2")
        await wait_for(lambda: _eq(watched(), ["w1"]), 30, "w2 no longer watched")
        after_stop = len([b for b in received if b["golem_id"] == "w2"])
        await asyncio.sleep(2 * 3.0 + 1.0)  # two alert windows
        assert len([b for b in received if b["golem_id"] == "w2"]) == after_stop, "a batch for a stopped golem"

        # one monitor for the host, none per golem
        with pytest.raises(RPCError):
            await temporal_client.get_workflow_handle(monitor_workflow_id("w2")).describe()
        found = [wf.id async for wf in temporal_client.list_workflows(
            "WorkflowType = 'HostMonitorWorkflow' AND ExecutionStatus = 'Running'") if wf.task_queue.endswith(HOST)]
        assert found == [MONITOR], found

        # spawn on a host whose worker is not up yet: that host's monitor is started with the golem
        _fund(monkeypatch, w3, 3)
        out = await _cli(capsys, *data, "spawn", "w3", "--host", "later", "--key-env", "GOLEM_TEST_KEY_3")
        assert "heartbeat-monitor host-later-monitor started" in out, out
        later = await temporal_client.get_workflow_handle("host-later-monitor").describe()
        assert later.task_queue == "golem-host-later"
        await temporal_client.get_workflow_handle("host-later-monitor").terminate("test over")
        await temporal_client.get_workflow_handle("golem-w3").terminate("test over")
        await stop_golem(temporal_client, registry, "w1", "test over")
    finally:
        if await _running(monitor):
            await monitor.terminate("test over")
        proc.terminate()
        proc.wait(timeout=30)
        await hook.cleanup()


async def _eq(value, expected) -> bool:
    return (await value) == expected


def _host_worker(root, host: str, address: str, log, *flags: str):
    """`golem worker --host` as its own process, as an owner runs it."""
    import os
    import subprocess
    import sys

    from tests.integration.golem_rig import REPO

    return subprocess.Popen([sys.executable, "-m", "cli", "--data", str(root), "worker", "--host", host, *flags],
                            stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=REPO,
                            env=dict(os.environ, GOLEM_TEMPORAL_ADDRESS=address))


async def _running(handle) -> bool:
    try:
        return (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    except RPCError:
        return False
