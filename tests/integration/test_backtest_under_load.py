"""A backtest under load: a workflow activation starved of CPU (it shares the GIL with its activities) must not fail
its task as a "deadlock" — Temporal's 2-s detector tripped on a loaded machine and the worker's shutdown then hung
on a workflow it could not evict. A backtest's worker runs with the detector off (workers/worker.py:
worker_options). Real Temporal dev server; a real backtest for the wire."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.worker import Worker

from infra.anvil import free_port
from tests.integration.test_backtest import REPO, _path_csv
from workers.worker import worker_options

pytestmark = pytest.mark.integration

STARVED_S = 2.5  # longer than the SDK's fixed 2 s deadlock timeout


@workflow.defn(sandboxed=False)
class StarvedActivation:
    @workflow.run
    async def run(self) -> str:
        if not workflow.unsafe.is_replaying():
            time.sleep(STARVED_S)  # the activation holds its thread, as one starved on a loaded machine does
        return "done"


async def _failed_tasks(deadlock_detection: bool, address: str) -> tuple[list[str], str | None]:
    from workers.client import connect

    client = await connect(address)
    queue = f"starved-{uuid.uuid4().hex[:8]}"
    worker = Worker(client, task_queue=queue, workflows=[StarvedActivation],
                    **worker_options(sandboxed=False, deadlock_detection=deadlock_detection))
    async with worker:
        handle = await client.start_workflow(StarvedActivation.run, id=queue, task_queue=queue,
                                             execution_timeout=timedelta(seconds=60))
        failures: list[str] = []
        result = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            failures = [ev.workflow_task_failed_event_attributes.failure.message
                        async for ev in handle.fetch_history_events()
                        if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED]
            if failures:
                await handle.terminate("the test saw the task fail")
                break
            if (await handle.describe()).status.name == "COMPLETED":
                result = await handle.result()
                break
            await asyncio.sleep(0.2)
    return failures, result


def test_a_starved_activation_fails_as_a_deadlock_unless_the_detector_is_off(tmp_path):
    from infra.temporal import TemporalDevServer

    server = TemporalDevServer(tmp_path / "t.sqlite", port=free_port(), ui_port=free_port(), headless=True,
                               log_path=tmp_path / "t.log")
    server.start()
    try:
        # the backtest's worker: the slow activation completes, its task never failed
        assert asyncio.run(_failed_tasks(False, server.address)) == ([], "done")
        # `golem run`'s worker keeps the detector: the same activation fails its task (TMPRL1101)
        failures, result = asyncio.run(_failed_tasks(True, server.address))
        assert result is None and failures and "TMPRL1101" in failures[0]
    finally:
        server.stop()


def test_a_backtests_worker_runs_without_the_deadlock_detector(tmp_path, monkeypatch):
    import workers.worker
    from golem.backtest.path import load_path
    from infra.backtest import BacktestOptions, _backtest

    built: list[bool] = []
    real = workers.worker.build_worker

    def recording(*args, **kwargs):
        worker = real(*args, **kwargs)
        built.append(worker.config()["debug_mode"])
        return worker

    monkeypatch.setattr(workers.worker, "build_worker", recording)
    csv = _path_csv(tmp_path / "p.csv", rows=12)
    opts = BacktestOptions(path=csv, home=REPO / "examples" / "golem-home", out=tmp_path / "out", progress=False)
    asyncio.run(_backtest(opts, load_path(csv)))
    assert built == [True]  # debug mode: the SDK's only switch that turns the 2-s detector off
