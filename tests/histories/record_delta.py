"""Record the delta-consolidation history replayed in CI (`make histories`): a
DeltaConsolidationWorkflow that ran its steps as ordered activities over a few ticks' episodes."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from golem.ids import cycle_workflow_id, task_queue
from golem.life.cycle_store import CycleStore
from golem.models.golem import ConsolidationInput, ConsolidationResult
from tests.histories import recording_server
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for
from workflows.consolidation import DeltaConsolidationWorkflow

HERE = Path(__file__).parent
GOLEM = "hist-delta"


async def record() -> Path:
    env = await recording_server()
    try:
        rig = make_rig(Path(tempfile.mkdtemp(prefix="golem-delta-hist-")), GOLEM, "calm", theta=0.25)
        try:
            async with in_process_worker(env.client, rig):
                golem = await rig.start_golem(env.client, max_ticks=4)
                await golem.result()
                await wait_for(lambda: CycleStore(rig.data_dir).count() >= 4, 30, "four recorded ticks")
                handle = await env.client.start_workflow(
                    DeltaConsolidationWorkflow.run, ConsolidationInput(golem_id=GOLEM, tick=4, config=rig.config),
                    id=cycle_workflow_id(GOLEM, "delta", 4), task_queue=task_queue(GOLEM),
                    result_type=ConsolidationResult)
                result = await handle.result()
                assert result.episodes_scanned >= 4, result
                path = HERE / "delta-cycle.json"
                path.write_text((await handle.fetch_history()).to_json())
                return path
        finally:
            rig.stop()
    finally:
        await env.shutdown()


if __name__ == "__main__":
    print("wrote", asyncio.run(record()))
