"""The heartbeat-monitor. When ticks stall (the golem paused), a tick_stalled ProbeAlert with its numbers
is batched per window and POSTed to a local webhook once per window; the monitor never signals the golem; the
golem reads the alert at its next observe as a probe input."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys

import pytest
from aiohttp import web
from temporalio.api.enums.v1 import EventType

from golem.events.store import EventStore
from golem.life.cycle_store import CycleStore
from golem.life.vitals import MonitorInput
from tests.integration.golem_rig import REPO, in_process_worker, make_rig, wait_for, wait_for_record
from workers.metrics import free_port
from workflows.monitor import HeartbeatMonitorWorkflow, monitor_workflow_id

pytestmark = pytest.mark.integration


async def _cli(temporal_env, rig, *args: str):
    env = dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host)
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir), *args],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=60)


async def _receiver():
    received: list[dict] = []

    async def hook(request: web.Request) -> web.Response:
        received.append(await request.json())
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}/hook", received


async def test_stalled_ticks_raise_a_batched_alert_at_the_webhook(temporal_env, temporal_client, tmp_path, request):
    runner, url, received = await _receiver()
    gid = "mon-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    rig = make_rig(tmp_path, gid, "calm", theta=0.3, alerts={"webhook_url": url})
    rig.start_market(interval=0.3)
    store = CycleStore(rig.data_dir)
    try:
        async with in_process_worker(temporal_client, rig):
            golem = await rig.start_golem(temporal_client, max_ticks=None)
            await wait_for(lambda: store.count() >= 4, 90, "four ticks")
            paused = await _cli(temporal_env, rig, "pause", "--reason", "stall the heartbeat")
            assert paused.returncode == 0, paused.stderr
            stalled_at = store.count()
            monitor = await temporal_client.start_workflow(
                HeartbeatMonitorWorkflow.run,
                MonitorInput(golem_id=gid, theta_seconds=0.3, check_seconds=0.5, window_seconds=3.0),
                id=monitor_workflow_id(gid), task_queue=f"golem-{gid}")
            await wait_for(lambda: len(received) >= 2, 60, "two alert batches at the webhook")
            first = received[0]
            stalls = [a for a in first["alerts"] if a["vital"] == "tick_stalled"]
            assert stalls, first
            stall = stalls[0]
            print(f"first batch: {len(first['alerts'])} alert(s) over {first['checks']} checks; tick_stalled "
                  f"{stall['value']}s against {stall['threshold']}s: {stall['detail']}")
            assert stall["value"] > stall["threshold"] > 0 and "no tick for" in stall["detail"]
            # the owner's pause (a control event the CLI stored) is named, and lowers the severity
            assert stall["severity"] == "low" and "paused" in stall["detail"] and stall["tick"] >= stalled_at - 1
            # batched: one POST per window with several checks in it, each vital once
            assert first["checks"] >= 3 and len({a["vital"] for a in first["alerts"]}) == len(first["alerts"])
            assert received[0]["batch_id"] != received[1]["batch_id"]
            assert received[1]["window_start"] >= received[0]["window_end"][:19]
            # the alerts are on the Event Fabric too
            probes = EventStore(rig.data_dir).read(kinds=["alerts.probe"])
            assert {e.payload["batch_id"] for e in probes} >= {received[0]["batch_id"]}
            # ... and `golem alerts` shows them to the owner, and nothing but alerts
            shown = await _cli(temporal_env, rig, "alerts", "--json", "-n", "500")
            assert shown.returncode == 0, shown.stderr
            listed = [json.loads(line) for line in shown.stdout.splitlines() if line.strip()]
            assert {e["payload"].get("batch_id") for e in listed if e["kind"] == "alerts.probe"} >= \
                {received[0]["batch_id"]}, listed
            assert listed and all(e["kind"].startswith("alerts.") for e in listed), {e["kind"] for e in listed}
            table = await _cli(temporal_env, rig, "alerts")
            assert table.returncode == 0 and "alerts.probe" in table.stdout and "tick_stalled" in table.stdout, \
                table.stdout[-2000:]

            # the monitor only reads: the golem's history holds our pause and no signal or update from it
            await monitor.terminate("test done")
            history = await golem.fetch_history()
            signals = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]
            updates = [e for e in history.events
                       if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED]
            assert not signals and len(updates) == 1

            # resumed, the golem reads the alert at its next observe as a probe input
            assert (await _cli(temporal_env, rig, "resume")).returncode == 0
            rec = await wait_for_record(
                store, lambda r: r.tick >= stalled_at and any(p.probe == "monitor_tick_stalled" for p in r.probe_results),
                "a tick that read the monitor's alert", timeout=60)
            alert = next(p for p in rec.probe_results if p.probe == "monitor_tick_stalled")
            assert alert.severity.value == "low" and alert.value > alert.threshold
            await golem.terminate("test done")
    finally:
        rig.stop()
        await runner.cleanup()


def test_a_stack_stopped_for_hours_is_not_a_stall_for_the_worker_that_just_started(tmp_path):
    """The owner stopped `golem run` in the evening and starts it in the morning: the last tick event is hours old,
    but the worker reading the vitals started seconds ago — no tick_stalled until it too has waited (a worker's real
    stores; the tick events as reflect emits them)."""
    from datetime import datetime, timedelta, timezone

    from activities.monitor import MonitorActivities
    from golem.events.models import make_event
    from golem.life.vitals import VitalsInput

    rig = make_rig(tmp_path, "mon-restart", "calm", theta=0.3)
    try:
        services = rig.services()
        evening = datetime.now(timezone.utc) - timedelta(hours=10)
        services.events.emit([make_event("mon-restart", t, (evening + timedelta(seconds=t)).isoformat(),
                                         "heartbeat.tick_finished") for t in range(10)])
        monitor = MonitorActivities(services)
        now = datetime.now(timezone.utc)
        assert [a.vital for a in monitor.check_vitals(VitalsInput(golem_id="mon-restart", now=now.isoformat(),
                                                                  theta_seconds=0.3))] == []
        monitor.serving_since = (now - timedelta(seconds=30)).isoformat()  # the new worker waited 30 s: a stall
        (stall,) = [a for a in monitor.check_vitals(VitalsInput(golem_id="mon-restart", now=now.isoformat(),
                                                                theta_seconds=0.3)) if a.vital == "tick_stalled"]
        assert stall.value == 30.0 and "since the worker started" in stall.detail
    finally:
        rig.stop()
