"""Supervision of the `golem run` stack on real processes: a worker and an Anvil killed with SIGKILL are
restarted (Anvil from its --state file) and the golem goes on without losing or doubling a tick; a process
that keeps crashing makes the supervisor give up with the cause."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys

import pytest

from golem.life.cycle_store import CycleStore
from infra.supervisor import AnvilChild, ProcessChild, Supervisor, SupervisionGaveUp
from tests.integration.golem_rig import make_rig, wait_for

pytestmark = pytest.mark.integration


def test_gives_up_after_n_crashes_in_m_minutes_with_the_cause(tmp_path):
    log = tmp_path / "crasher.log"

    def spawn():
        out = log.open("ab")
        return subprocess.Popen([sys.executable, "-c", "print('boom: the config is broken'); raise SystemExit(3)"],
                                stdout=out, stderr=subprocess.STDOUT)

    said: list[str] = []
    child = ProcessChild("simulator", spawn, log)
    child.start()
    sup = Supervisor([child], crash_limit=3, window_seconds=60, backoff_initial=0.05, say=said.append)
    with pytest.raises(SupervisionGaveUp) as gave_up:
        for _ in range(200):
            sup.check()
            import time

            time.sleep(0.05)
    msg = str(gave_up.value)
    assert "simulator crashed 3 times in 1 minutes; giving up" in msg and "exit code 3" in msg, msg
    assert "boom: the config is broken" in msg and str(log) in msg, msg
    assert sup.restarts("simulator") == 2
    assert said[0].startswith("simulator died: exit code 3") and "restarting simulator in 0.05s" in said[0], said


@pytest.fixture
def rig(tmp_path):
    rig = make_rig(tmp_path, "sup-golem", "calm", theta=0.25, anvil_state=True, heartbeat={"step_timeout_seconds": 3.0})
    yield rig
    rig.stop()


def _ticks(store: CycleStore) -> tuple[list[int], list[int]]:
    return [r["tick"] for r in store.recent(1000)], [f["tick"] for f in store.failures(1000)]


async def test_killed_worker_and_anvil_are_restarted_and_no_tick_is_lost(temporal_client, rig):
    store = CycleStore(rig.data_dir)
    address = temporal_client.service_client.config.target_host
    # As `golem run` does, Anvil is checkpointed while it runs: SIGKILL loses at most a second of chain.
    rig.anvil.stop()
    anvil = AnvilChild(rig.anvil, checkpoint_seconds=1.0)
    anvil.start()
    worker = ProcessChild("worker", lambda: rig.worker_subprocess(address), rig.data_dir / "worker.log")
    worker.start()
    said: list[str] = []
    sup = Supervisor([anvil, worker], backoff_initial=0.2, say=said.append)

    async def supervise():
        while True:
            sup.check()
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(supervise())
    handle = await rig.start_golem(temporal_client, max_ticks=None)
    try:
        await wait_for(lambda: store.count() >= 3, 180, "three ticks")  # a worker process starting at a high load

        os.kill(worker.pid, signal.SIGKILL)
        await wait_for(lambda: sup.restarts("worker") == 1, 10, "the worker restarted")
        n = store.count()
        await wait_for(lambda: store.count() >= n + 3, 60, "ticks after the worker restart")

        os.kill(anvil.pid, signal.SIGKILL)
        await wait_for(lambda: sup.restarts("anvil") == 1, 10, "anvil restarted")
        assert anvil.restored_from_checkpoint == 1
        assert rig.w3.eth.get_code(rig.w3.to_checksum_address(rig.deployment.addresses["AAVE_POOL"])), \
            "anvil came back without the deployed world (not from its --state file)"
        n = store.count()
        await wait_for(lambda: store.count() >= n + 3, 60, "ticks after the anvil restart")
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        with contextlib.suppress(Exception):
            await handle.terminate("test done")
        worker.stop()

    # Which process died and why reached the operator.
    assert any(m.startswith("worker died: killed by SIGKILL") and "worker.log" in m for m in said), said
    assert any(m.startswith("anvil died: killed by SIGKILL") for m in said), said
    # Every tick number up to the last is recorded exactly once: done or (during the outage) failed.
    done, failed = _ticks(store)
    assert len(done) == len(set(done)), f"a tick recorded twice: {sorted(done)}"
    assert set(done) | set(failed) == set(range(max(done) + 1)), (sorted(done), failed)
    assert all(r["runs"] == 1 for r in store.recent(1000))


def test_the_golem_start_waits_under_supervision(tmp_path):
    """`golem run` starts the golem (an update or query the worker must answer) while the supervisor keeps
    watching: a worker that dies at start is reported and restarted during the wait, and Ctrl-C ends the wait."""
    import threading
    import time

    from infra.stack import supervised_wait

    log = tmp_path / "worker.log"

    def spawn():
        out = log.open("ab")
        return subprocess.Popen([sys.executable, "-c", "print('OSError: [Errno 98] Address already in use'); "
                                 "raise SystemExit(1)"], stdout=out, stderr=subprocess.STDOUT)

    said: list[str] = []
    child = ProcessChild("worker", spawn, log)
    child.start()
    sup = Supervisor([child], crash_limit=50, window_seconds=60, backoff_initial=0.05, say=said.append)
    answered = threading.Event()

    def start_golem() -> str:  # answers once the worker has been restarted twice (or gives up after 20 s)
        deadline = time.monotonic() + 20
        while sup.restarts("worker") < 2:
            if time.monotonic() > deadline:
                return "nobody restarted the worker"
            answered.wait(0.05)
        return "resumed"

    assert supervised_wait(start_golem, sup, lambda: False, log) == "resumed"
    assert said and said[0].startswith("worker died: exit code 1") and "Address already in use" in said[0], said
    # Ctrl-C (the stack's stopping flag) while the golem has not answered: the wait ends with None
    assert supervised_wait(lambda: answered.wait(30) and "late", sup, lambda: True, log) is None
    answered.set()
    sup.stop()
