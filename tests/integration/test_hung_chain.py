"""A chain RPC that hangs (Anvil SIGSTOPped) fails the tick once its step timeout passes, with the cause in
`golem ticks` and `status`, and the golem ticks on when the chain is back, on the real dev server,
Anvil and a live golem."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from golem.life.cycle_store import CycleStore
from tests.integration.golem_rig import REPO, in_process_worker, make_rig, wait_for
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration


def _cli(temporal_env, rig, *args):
    return subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir), *args],
        capture_output=True, text=True, cwd=REPO, timeout=120,
        env=dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host),
    )


async def test_a_hung_rpc_fails_the_tick_with_its_cause(temporal_env, tmp_path, request):
    gid = f"hang-{abs(hash(request.node.name)) % 10**6}"
    rig = make_rig(tmp_path, gid, "calm", theta=0.3, heartbeat={"step_timeout_seconds": 3.0})
    store = CycleStore(rig.data_dir)
    try:
        async with in_process_worker(temporal_env.client, rig):
            handle = await rig.start_golem(temporal_env.client, max_ticks=None)
            await wait_for(lambda: store.count() >= 2, 90, "two ticks")
            os.kill(rig.anvil.pid, signal.SIGSTOP)  # the node hangs: reads block, nothing answers
            try:
                hung_from = store.latest_tick()
                failure = await wait_for(
                    lambda: next((f for f in store.failures(50) if f["tick"] > hung_from), None), 90,
                    "a tick that failed while the chain hung")
                assert failure["error"].startswith("observe: timed out (START_TO_CLOSE)"), failure
                ticks = await asyncio.to_thread(_cli, temporal_env, rig, "ticks", "-n", "50")
                line = next(ln for ln in ticks.stdout.splitlines() if ln.split()[:2] == [str(failure["tick"]), "FAILED"])
                assert "observe: timed out" in line
                status = await handle.query(GolemWorkflow.status)
                assert status.chain.errors_in_row >= 1 and "timed out" in (status.chain.last_error or "")
            finally:
                os.kill(rig.anvil.pid, signal.SIGCONT)
            await wait_for(lambda: (store.latest_tick() or 0) > failure["tick"], 90, "a tick after the chain came back")

            async def healthy():  # the record is written inside the tick; the parent folds it a moment later
                chain = (await handle.query(GolemWorkflow.status)).chain
                return chain.errors_in_row == 0 and (chain.last_good_tick or -1) > failure["tick"]

            await wait_for(healthy, 60, "status to show the chain healthy again")
            await handle.terminate("test done")
    finally:
        rig.stop()
