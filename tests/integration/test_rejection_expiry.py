"""Rejected steers carry their time and tick, are reported by one record (not copied into every later
one) and leave `golem status` after REJECTION_VISIBLE_TICKS ticks; every workflow task replays
(max_cached_workflows=0) and the golem's history replays with the current code afterwards."""

from __future__ import annotations

import asyncio

import pytest

from golem.cognition.fold import REJECTION_VISIBLE_TICKS
from golem.life.cycle_store import CycleStore
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for
from tests.integration.test_cli_user_errors import golem_async
from workers.replay import replay_history
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration


async def test_rejection_is_dated_reported_once_and_expires_from_status(temporal_env, temporal_client, tmp_path):
    rig = make_rig(tmp_path, "reject-expiry", "calm", theta=1.0)  # 10 ticks outlast a CLI call
    try:
        async with in_process_worker(temporal_client, rig, max_cached_workflows=0):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            store = CycleStore(rig.data_dir)
            await wait_for(lambda: store.count() >= 2, 60, "two ticks")
            await handle.signal(GolemWorkflow.steer, {"id": "bad-1", "severity": "apocalyptic"})

            async def rejected():
                return (await handle.query(GolemWorkflow.status)).rejected_interventions

            await wait_for_async(rejected, 30, "the rejection in status")
            (rej,) = await rejected()
            assert rej.tick is not None and rej.received_at and "severity" in rej.reason
            shown = await golem_async(temporal_env, rig.home, rig.data_dir, "status")
            assert f"before tick {rej.tick}: malformed steer" in shown.stdout, shown.stdout + shown.stderr
            assert rej.received_at[:19].replace("T", " ") in shown.stdout
            # The CLI queries by name (no workflow import): the state query answers too.
            gating = await golem_async(temporal_env, rig.home, rig.data_dir, "gating", "show")
            assert gating.returncode == 0 and "hedge weights" in gating.stdout, gating.stderr

            gone_at = rej.tick + REJECTION_VISIBLE_TICKS
            await wait_for(lambda: store.count() >= gone_at + 2, 120, "the rejection's visible ticks to pass")
            status = await handle.query(GolemWorkflow.status)
            assert status.tick > gone_at and status.rejected_interventions == [], status.rejected_interventions
            shown = await golem_async(temporal_env, rig.home, rig.data_dir, "status")
            assert "rejected" not in shown.stdout, shown.stdout
            await handle.terminate("test done")

        # Exactly one record reports it: the first tick that saw it.
        reporting = [t for t in range(store.count()) if store.load(t).rejected_interventions]
        assert reporting == [rej.tick], reporting
        assert store.load(rej.tick).rejected_interventions[0].received_at == rej.received_at

        history = await handle.fetch_history()
        ok, detail = await replay_history(history)
        assert ok, detail
    finally:
        rig.stop()


async def wait_for_async(probe, timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await probe():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)
