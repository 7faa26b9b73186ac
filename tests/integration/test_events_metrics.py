"""The Event Fabric for a steered acted tick, and the worker's Prometheus endpoint after a few ticks."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from golem.events.store import EventStore
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, Tier
from tests.integration.golem_rig import REPO, in_process_worker, make_rig, wait_for, wait_for_record
from workers.client import connect
from workers.metrics import free_port, install_metrics, temporal_runtime

pytestmark = pytest.mark.integration


def _gid(request) -> str:
    return "ev-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


async def test_steered_acted_tick_emits_events_in_order_and_metrics_are_served(temporal_env, tmp_path, request):
    rig = make_rig(tmp_path, _gid(request), "calm", theta=0.25)
    core_port = free_port()
    address = temporal_env.client.service_client.config.target_host
    # A client on a Runtime whose core serves the Temporal SDK's metrics, as `golem worker` builds it.
    client = await connect(address, runtime=temporal_runtime(core_port))
    services = rig.services()
    metrics, server, timed = install_metrics(services, 0, core_port)
    try:
        rig.start_market(interval=0.25)
        async with in_process_worker(client, rig, services, interceptors=[timed]):
            handle = await rig.start_golem(client, max_ticks=None)
            store = CycleStore(rig.data_dir)
            await wait_for(lambda: store.count() >= 3, 90, "three ticks")
            await handle.signal("steer", {"id": "s-ev", "message": "reduce exposure", "severity": "high"})
            rec = await wait_for_record(
                store, lambda r: any(i.id == "s-ev" for i in r.active_interventions), "the steered tick", n=30,
                timeout=90)
            assert rec.tier == Tier.T2
            executed = [a for a in rec.actions if a.status == ActionStatus.EXECUTED]
            assert executed, f"the steer should make the golem act: {rec.deliberation}"
            # metrics: served after a few ticks, the golem's and the Temporal SDK's on one endpoint
            text = await asyncio.to_thread(_scrape, server.port)
            await handle.terminate("test done")
    finally:
        server.stop()
        metrics.shutdown()
        rig.stop()

    events = EventStore(rig.data_dir).read(limit=100_000)
    mine = [e for e in events if e.tick == rec.tick or e.payload.get("steer_id") == "s-ev"]
    kinds = [e.kind for e in mine]
    expected = ["interventions.steer_accepted", "heartbeat.tick_started", "heartbeat.gated",
                "interventions.steer_applied", "actions.proposed", "actions.executed", "actions.verified",
                "budget.spend", "heartbeat.tick_finished"]
    positions = [kinds.index(k) for k in expected]  # each present ...
    assert positions == sorted(positions), f"out of order: {kinds}"  # ... and in the order it happened
    assert [e.seq for e in mine] == sorted(e.seq for e in mine)
    assert kinds.count("interventions.steer_accepted") == 1  # one acceptance, however many ticks carry it
    gated = mine[kinds.index("heartbeat.gated")].payload
    assert gated["tier"] == "T2" and "s-ev" in gated["reason"]
    done = mine[kinds.index("actions.executed")].payload
    assert done["tx_hash"] == executed[0].tx_hash and done["tool"] == executed[0].tool_name
    finished = mine[-1].payload
    assert finished["tier"] == "T2" and finished["executed"] == len(executed)
    assert finished["workflow_id"] == rec.workflow_id and finished["equity_usd"] > 0
    # every tick started and finished once
    started = [e.tick for e in events if e.kind == "heartbeat.tick_started"]
    assert len(started) == len(set(started))

    # `golem events` reads the same store
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "cli", "--data", str(rig.data_dir), "events", "--kind", "actions",
                          "--json", "-n", "1000"], capture_output=True, text=True, env=env, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert rows and all(r["subsystem"] == "actions" for r in rows)
    assert any(r["kind"] == "actions.executed" and r["tick"] == rec.tick for r in rows)

    for name in ("golem_ticks_total", "golem_step_latency_seconds_bucket", "golem_prediction_error",
                 "golem_deliberation_threshold", "golem_inference_tokens_total", "golem_inference_usd_total",
                 "golem_gas_usd_total", "golem_equity_usd", "golem_health_factor", "golem_vitality",
                 "golem_grimoire_size", "golem_price", "golem_actions_total", "golem_events_total",
                 "golem_cognitive_quality"):
        assert name in text, f"{name} missing from /metrics"
    assert 'tier="T2"' in text and 'step="observe"' in text and 'metric="retrieval_hit_rate"' in text
    assert "temporal_" in text and "temporal SDK metrics unavailable" not in text, text[-2000:]
    # the worker's memory split, with its malloc trimmer running (build_worker starts it)
    for part in ("rss", "lance_cache", "malloc_in_use", "malloc_free", "malloc_released"):
        assert f'part="{part}"' in text, f"golem_worker_memory_bytes part {part} missing from /metrics"
