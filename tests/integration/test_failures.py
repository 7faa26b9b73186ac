"""Bad input and outages lose nothing: the tick is recorded, the golem keeps ticking, a failed tick
can be re-run from its recorded input."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from golem.cognition.chain_health import CHAIN_ALERT_TICKS
from golem.life.cycle_store import CycleStore
from golem.models.enums import HeartbeatState, Tier
from tests.integration.golem_rig import REPO, in_process_worker, make_rig, wait_for, wait_for_record
from workers.config_versions import apply_version, local_version
from workers.replay import RerunRefused, rerun_tick
from workflows.golem import GolemWorkflow
from workflows.tick import ThetaTickWorkflow

pytestmark = pytest.mark.integration


async def _cli(rig, *args: str, address: str | None = None) -> str:
    """The golem CLI in a subprocess, off the event loop (the in-process worker must answer its queries)."""
    env = dict(os.environ, GOLEM_TEMPORAL_ADDRESS=address) if address else None
    proc = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir), *args],
        capture_output=True, text=True, cwd=REPO, env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _status_where(handle, predicate):
    async def poll():
        st = await handle.query(GolemWorkflow.status)
        return st if predicate(st) else None

    return poll


@pytest.fixture
def rig(tmp_path):
    rig = make_rig(tmp_path, "fail-golem", "calm", theta=0.25, anvil_state=True, heartbeat={"step_timeout_seconds": 3.0})
    yield rig
    rig.stop()


async def test_rpc_outage_fails_ticks_golem_goes_on_and_rerun_records_them(temporal_env, temporal_client, rig):
    store = CycleStore(rig.data_dir)
    async with in_process_worker(temporal_client, rig):
        handle = await rig.start_golem(temporal_client, max_ticks=None)
        await wait_for(lambda: store.count() >= 3, 60, "three ticks")

        # A malformed STRATEGY.md: the escalated tick records a clear error and the golem goes on.
        strategy = rig.home / "STRATEGY.md"
        good = strategy.read_text()
        strategy.write_text("## Rules\n- WHEN health_factr < 1.5 THEN repay 10% debt\n")
        # An edited STRATEGY.md reaches the golem as a new config version, never behind its back.
        await apply_version(temporal_client, rig.golem_id, local_version(rig.home / "golem.toml"), rig.data_dir, "test")
        await handle.signal(GolemWorkflow.steer, {"id": "st-1", "message": "reduce exposure", "severity": "high"})

        rec = await wait_for_record(store, lambda rec: bool(rec.errors), "a tick that recorded the STRATEGY.md error")
        assert rec.tier == Tier.T2
        assert "health_factr" in rec.errors[0] and "line" in rec.errors[0].lower(), rec.errors
        assert rec.actions == []

        # A parseable but unviable strategy: trading stops with the reasons recorded.
        strategy.write_text("## Rules\n- WHEN regime == volatile THEN borrow 10 debt\n## Constraints\n- MUST NOT borrow\n")
        await apply_version(temporal_client, rig.golem_id, local_version(rig.home / "golem.toml"), rig.data_dir, "test")
        await handle.signal(GolemWorkflow.steer, {"id": "st-2", "message": "reduce exposure", "severity": "high"})

        rec = await wait_for_record(
            store, lambda rec: any("STRATEGY_UNVIABLE" in e for e in rec.errors), "a tick that recorded STRATEGY_UNVIABLE"
        )
        assert "no rule can ever act" in rec.errors[0] and rec.actions == []
        strategy.write_text(good)
        await apply_version(temporal_client, rig.golem_id, local_version(rig.home / "golem.toml"), rig.data_dir, "test")

        # An RPC outage: observe fails after its retries, the tick is recorded as failed, the loop goes on.
        n = store.count()
        address = temporal_client.service_client.config.target_host
        theta_before = (await handle.query(GolemWorkflow.status)).theta_seconds
        rig.anvil.stop()
        await wait_for(lambda: store.failures(10), 90, "a failed tick")
        # The root cause reaches the failure record and `golem ticks`, not Temporal's "Activity task failed".
        cause = store.failures(10)[-1]["error"]
        assert cause.startswith("observe: ") and "Activity task failed" not in cause, cause
        assert str(rig.anvil.port) in cause or "onnection" in cause, cause
        ticks_out = await _cli(rig, "ticks", "-n", "20")
        assert "FAILED observe: " in ticks_out and "Activity task failed" not in ticks_out, ticks_out

        # The running tick's step and since when: a tick stuck reading a dead RPC shows as Observing.
        async def observing():
            st = await handle.query(GolemWorkflow.status)
            if not st.current_tick_workflow_id:
                return None
            try:
                fsm = await temporal_client.get_workflow_handle(st.current_tick_workflow_id).query(ThetaTickWorkflow.fsm)
            except Exception:  # the tick ended between the two queries
                return None
            return fsm if fsm.state == HeartbeatState.OBSERVING else None

        fsm = await wait_for(observing, 30, "a tick in its observe step")
        assert fsm.entered_at and datetime.fromisoformat(fsm.entered_at) <= datetime.now(timezone.utc)

        # N ticks in a row without a chain read: an alert in status, and theta backs off.
        alerted = await wait_for(_status_where(handle, lambda st: st.chain.alert), 90, "the chain alert")
        assert alerted.chain.errors_in_row >= CHAIN_ALERT_TICKS and "CHAIN UNREADABLE" in alerted.chain.alert
        assert alerted.chain.last_error.startswith("observe: ") and alerted.theta_seconds > theta_before
        assert alerted.last_tick.failed and alerted.last_tick.error.startswith("observe: ")
        status_out = await _cli(rig, "status", address=address)
        assert "chain RPC:" in status_out and "failed reads in a row" in status_out, status_out
        assert "ALERT:" in status_out and "CHAIN UNREADABLE" in status_out, status_out

        rig.anvil.start()
        await wait_for(lambda: store.count() >= n + 2, 90, "ticks after the outage")
        status = await wait_for(_status_where(handle, lambda st: st.chain.errors_in_row == 0), 30, "chain healthy")
        assert status.chain.alert is None and status.chain.last_good_read_at
        assert "chain RPC:  ok" in await _cli(rig, "status", address=address)
        # `golem list` shows a golem on its own worker's queue (golem-<id>), not only a fleet's
        listed = {r["id"]: r for r in json.loads(await _cli(rig, "list", "--json", address=address))}
        mine = listed[rig.golem_id]
        assert mine["host"] == "(own worker)" and mine["tick"] >= n and mine["equity"].startswith("$"), listed
        failed = store.failures(10)
        assert failed and set(f["tick"] for f in failed) <= set(status.failed_ticks)
        await handle.terminate("test done")

    # `golem rerun N` re-executes the failed tick from its recorded input, linked to the original.
    tick = failed[-1]["tick"]
    async with in_process_worker(temporal_client, rig):
        new_id, result = await rerun_tick(temporal_client, rig.golem_id, tick)
        with pytest.raises(RerunRefused):
            await rerun_tick(temporal_client, rig.golem_id, 0)  # a completed tick is not re-run without --force
    assert new_id == f"golem-{rig.golem_id}-tick-{tick}-rerun-1"
    rerun = store.load(tick)
    assert rerun.rerun_of == f"golem-{rig.golem_id}-tick-{tick}" and rerun.workflow_id == new_id
    assert tick not in [f["tick"] for f in store.failures(10)]
    desc = await temporal_client.get_workflow_handle(new_id).describe()
    assert (await desc.memo_value("rerun_of")) == f"golem-{rig.golem_id}-tick-{tick}"

    # The CLI reads the same store.
    out = subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir), "show", str(tick)],
        capture_output=True, text=True, cwd=REPO, check=True,
    ).stdout
    assert f'"rerun_of": "golem-{rig.golem_id}-tick-{tick}"' in out
