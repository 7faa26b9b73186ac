"""The owner's stop buttons on chain — `golem stop-entries` blocks what opens a position while the
risk-reducing actions of a steer still run; `golem pause` stops new ticks (state kept) until `golem resume`."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys

import pytest

from golem.events.store import EventStore
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus
from tests.integration.golem_rig import REPO, in_process_worker, make_rig, wait_for, wait_for_record
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration


def _cli(temporal_env, rig):
    env = dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host)

    async def run(*args: str):
        return await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir),
                             *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=60)

    return run


async def test_stop_entries_blocks_new_positions_but_risk_reducing_steer_runs_and_pause_holds_ticks(
        temporal_env, temporal_client, tmp_path, request):
    rig = make_rig(tmp_path, "stop-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8], "calm", theta=0.3)
    # One steer-triggered rule that buys the volatile asset (opens exposure) beside the example's risk-reducing ones.
    strategy = rig.home / "STRATEGY.md"
    strategy.write_text(strategy.read_text().replace(
        '- WHEN steer contains "repay" THEN repay 25% debt\n',
        '- WHEN steer contains "repay" THEN repay 25% debt\n- WHEN steer contains "buy weth" THEN swap 5% USDC to WETH\n'))
    rig.start_market(interval=0.3)
    cli = _cli(temporal_env, rig)
    store = CycleStore(rig.data_dir)
    try:
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            await wait_for(lambda: store.count() >= 2, 90, "two ticks")

            out = await cli("stop-entries", "--reason", "test")
            assert out.returncode == 0 and "entries_stopped=True" in out.stdout, out.stderr
            again = await cli("stop-entries")  # the validator refuses, in one line; nothing enters history
            assert again.returncode == 1 and "already stopped" in again.stderr and "Traceback" not in again.stderr
            status = await cli("status")
            assert "entries stopped (no new positions)" in status.stdout, status.stdout

            await handle.signal(GolemWorkflow.steer, {"id": "s-stop", "severity": "high",
                                                      "message": "reduce exposure, then buy weth"})
            rec = await wait_for_record(store, lambda r: any(i.id == "s-stop" for i in r.active_interventions),
                                        "the steered tick", n=30, timeout=90)
            by_tool = {(a.tool_name, a.status) for a in rec.actions}
            blocked = [a for a in rec.actions if a.status == ActionStatus.BLOCKED]
            executed = [a for a in rec.actions if a.status == ActionStatus.EXECUTED]
            assert blocked and all("stop-entries" in (a.block_reason or "") for a in blocked), by_tool
            assert {a.tool_name for a in executed} >= {"swap", "repay"}, by_tool  # WETH→USDC and the repay ran
            for a in executed:
                assert rig.w3.eth.get_transaction_receipt(a.tx_hash)["status"] == 1
            assert len(blocked) == 1 and blocked[0].tool_name == "swap"

            # allow entries again; then pause: no new tick until resume, and the state is kept
            assert (await cli("allow-entries")).returncode == 0
            paused = await cli("pause", "--reason", "lunch")
            assert paused.returncode == 0 and "paused=True" in paused.stdout, paused.stderr
            await wait_for(lambda: _activity(handle, "paused"), 30, "the loop to stop before its next tick")
            held = store.count()
            await asyncio.sleep(3 * 0.3 * 3)  # three theta_max intervals
            assert store.count() == held, "a paused golem started a tick"
            st = await handle.query(GolemWorkflow.status)
            assert st.paused and not st.entries_stopped and "lunch" in st.control_note
            assert (await cli("resume")).returncode == 0
            await wait_for(lambda: store.count() >= held + 2, 60, "ticks after resume")
            await handle.terminate("test done")
    finally:
        rig.stop()
    kinds = [e.kind for e in EventStore(rig.data_dir).read(kinds=["control"])]
    assert kinds == ["control.entries_stopped", "control.entries_allowed", "control.paused", "control.resumed"]


async def _activity(handle, want: str) -> bool:
    return (await handle.query(GolemWorkflow.status)).activity == want
