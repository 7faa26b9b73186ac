"""User errors of the Temporal-backed commands, on the real dev server (and a real golem for `rerun`):
one line on stderr, a non-zero exit, no traceback."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from golem.life.cycle_store import CycleStore
from tests.integration.golem_rig import REPO, in_process_worker, make_rig, wait_for
from tests.unit.test_cli_errors import assert_one_line_error

pytestmark = pytest.mark.integration


def _address(temporal_env) -> str:
    return temporal_env.client.service_client.config.target_host


async def golem_async(temporal_env, home, data, *args: str) -> subprocess.CompletedProcess:
    # On a thread: an in-process worker shares this event loop and must keep serving.
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "cli", "--home", str(home), "--data", str(data), *args],
        capture_output=True, text=True, cwd=REPO, timeout=120,
        env=dict(os.environ, GOLEM_TEMPORAL_ADDRESS=_address(temporal_env)),
    )


async def test_unknown_tick_and_golem_not_started(temporal_env, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "golem.toml").write_text('[golem]\nid = "never-started"\n')
    proc = await golem_async(temporal_env, home, tmp_path, "replay", "99")
    assert_one_line_error(proc, "golem replay: tick 99 has no history", "golem-never-started-tick-99", "golem ticks")
    proc = await golem_async(temporal_env, home, tmp_path, "replay", "--workflow-id", "nope")
    assert_one_line_error(proc, "golem replay:", "nope not found")
    proc = await golem_async(temporal_env, home, tmp_path, "rerun", "99")
    assert_one_line_error(proc, "golem rerun: tick 99 has no workflow", "golem ticks")
    proc = await golem_async(temporal_env, home, tmp_path, "status")
    assert_one_line_error(proc, "golem status: no golem 'never-started'", "golem run")
    proc = await golem_async(temporal_env, home, tmp_path, "gating", "show")
    assert_one_line_error(proc, "golem gating:", "golem-never-started", "golem run")


async def test_rerun_while_the_chain_rpc_is_down(temporal_env, temporal_client, tmp_path):
    rig = make_rig(tmp_path, "rpc-down", "calm", theta=0.25)
    try:
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=2)
            await asyncio.wait_for(handle.result(), timeout=120)
            assert CycleStore(rig.data_dir).count() == 2
            rig.anvil.stop()  # the chain RPC goes away; Temporal and the worker stay up
            proc = await golem_async(temporal_env, rig.home, rig.data_dir, "rerun", "1", "--force")
        line = assert_one_line_error(proc, "golem rerun: the re-run of tick 1 failed:", "golem show 1 --runs",
                                     "golem rerun 1")
        assert "Activity task failed" not in line, "the root cause, not Temporal's wrapper"
        store = CycleStore(rig.data_dir)
        await wait_for(lambda: store.run_failures(1), 10, "the failed rerun to be recorded")
    finally:
        rig.stop()


async def test_status_of_a_golem_whose_worker_is_gone_says_so_with_its_newest_record(temporal_env, temporal_client,
                                                                                      tmp_path):
    """The SDK waits 30 s for a query no worker takes and then raises a traceback; status waits 10 s and says what
    is wrong, with what the data dir shows."""
    rig = make_rig(tmp_path, "no-worker", "calm", theta=0.25)
    try:
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            store = CycleStore(rig.data_dir)
            await wait_for(lambda: store.count() >= 2, 60, "two ticks recorded")
        newest = store.recent(1)[0]["tick"]  # the worker is gone; the golem's workflow runs on
        proc = await golem_async(temporal_env, rig.home, rig.data_dir, "status")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        *before, last = proc.stderr.strip().splitlines()
        assert last.startswith("golem status: golem 'no-worker' is running, but no worker answered its 'status' "
                               "query within 10 s"), proc.stderr
        assert "`golem worker`" in last
        assert any(line.strip().startswith(f"newest record: tick {newest} T") for line in before), proc.stderr
        await handle.terminate("test over")
    finally:
        rig.stop()
