"""Record `clade-exchange.json`: a clade's CladeExchangeWorkflow taking share batches (one sent twice, one entry
shared again in a new batch, one malformed signal) until it continues as new, so the bus's handlers replay in CI.

    .venv/bin/python -m tests.histories.record_clade_exchange
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from activities.clade import CladeBus
from golem import ids
from golem.models.clade import BusInput, BusState, ShareBatch, SharedEntry, exchange_id
from golem.models.config import GolemConfig
from tests.histories import recording_server
from workers.worker import build_clade_worker
from workflows.clade_exchange import CladeExchangeWorkflow

HERE = Path(__file__).parent


def entry(origin: str, i: int, category: str = "warning") -> SharedEntry:
    return SharedEntry(origin=origin, entry_id=f"e{i}", category=category, confidence=0.7,  # type: ignore[arg-type]
                       content=f"Avoid borrowing when the oracle lags the pool by more than {100 * i} bps")


async def record() -> Path:
    env = await recording_server()
    clade = "recorded"
    try:
        worker = build_clade_worker(env.client, GolemConfig.model_validate({"clade": {"id": clade}}))
        assert worker is not None
        async with worker:
            handle = await env.client.start_workflow(
                CladeExchangeWorkflow.run, BusInput(state=BusState(clade=clade), continue_after_events=20),
                id=exchange_id(clade), task_queue=ids.clade_queue(clade))
            bus = CladeBus(env.client)
            first = ShareBatch(id="golem-a/1", entries=[entry("golem-a", 1, "insight"), entry("golem-a", 2)])
            await bus.share(clade, first, 10)
            await bus.share(clade, first, 10)  # a retried send
            await handle.signal("share", {"id": "bad", "entries": [{"origin": "golem-a"}]})  # malformed: dropped
            await bus.share(clade, ShareBatch(id="golem-b/1", entries=[entry("golem-b", 2), entry("golem-a", 2)]), 10)
            assert [b.seq for b in await bus.since(clade, 0, "golem-b", 10)] == [1, 2]
            for i in range(3, 12):
                await bus.share(clade, ShareBatch(id=f"golem-a/{i}", entries=[entry("golem-a", i)]), 10)
            while (await env.client.get_workflow_handle(handle.id).describe()).run_id == handle.result_run_id:
                await asyncio.sleep(0.1)
        history = await env.client.get_workflow_handle(handle.id, run_id=handle.result_run_id).fetch_history()
        path = HERE / "clade-exchange.json"
        path.write_text(history.to_json())
        return path
    finally:
        await env.shutdown()


if __name__ == "__main__":
    t0 = time.monotonic()
    p = asyncio.run(record())
    print(f"wrote {p.relative_to(HERE.parent.parent)} ({p.stat().st_size} bytes) in {time.monotonic() - t0:.1f}s")
