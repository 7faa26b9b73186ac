"""Record `pheromone-field.json`: a clade's PheromoneFieldWorkflow taking deposit batches, as signals and as updates
(one batch sent twice), until it continues as new, so the field's handlers replay in CI.

    .venv/bin/python -m tests.histories.record_pheromones
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from activities.pheromones import PheromoneLink
from golem import ids
from golem.models.config import GolemConfig
from golem.models.pheromones import Deposit, DepositBatch, FieldInput, FieldState
from tests.histories import recording_server
from workers.worker import build_clade_worker
from workflows.pheromones import PheromoneFieldWorkflow

HERE = Path(__file__).parent


async def record() -> Path:
    env = await recording_server()
    clade = "recorded"
    try:
        worker = build_clade_worker(env.client, GolemConfig.model_validate({"clade": {"id": clade}}))
        assert worker is not None
        async with worker:
            handle = await env.client.start_workflow(
                PheromoneFieldWorkflow.run, FieldInput(state=FieldState(clade=clade), continue_after_events=20),
                id=ids.pheromone_field_id(clade), task_queue=ids.clade_queue(clade))
            link = PheromoneLink(env.client)
            pool, oracle = "pool:0x" + "ab" * 20, "oracle:0x" + "cd" * 20
            batches = [
                DepositBatch(id="golem-a/1/r", deposits=[Deposit(entity=oracle, kind="threat", intensity=0.8,
                                                                 half_life_s=3600, depositor="golem-a")]),
                DepositBatch(id="golem-b/1/r", deposits=[Deposit(entity=pool, kind="opportunity", intensity=0.5,
                                                                 half_life_s=900, depositor="golem-b"),
                                                         Deposit(entity="chain:31337", kind="congestion",
                                                                 intensity=0.4, half_life_s=300, depositor="golem-b")]),
                DepositBatch(id="golem-a/1/r", deposits=[Deposit(entity=oracle, kind="threat", intensity=0.8,
                                                                 half_life_s=3600, depositor="golem-a")]),  # a retry
            ]
            batches += [DepositBatch(id=f"golem-a/{i}/r", deposits=[Deposit(entity=oracle, kind="threat",
                                                                            intensity=0.8, half_life_s=3600,
                                                                            depositor="golem-a")])
                        for i in range(2, 8)]
            for i, b in enumerate(batches):  # the ticks' signals and the answered updates, interleaved
                if i % 2:
                    await link.lay(clade, b, timeout_s=10)
                else:
                    await link.deposit(clade, b)
            while (await env.client.get_workflow_handle(handle.id).describe()).run_id == handle.result_run_id:
                await asyncio.sleep(0.1)
        history = await env.client.get_workflow_handle(handle.id, run_id=handle.result_run_id).fetch_history()
        path = HERE / "pheromone-field.json"
        path.write_text(history.to_json())
        return path
    finally:
        await env.shutdown()


if __name__ == "__main__":
    t0 = time.monotonic()
    p = asyncio.run(record())
    print(f"wrote {p.relative_to(HERE.parent.parent)} ({p.stat().st_size} bytes) in {time.monotonic() - t0:.1f}s")
