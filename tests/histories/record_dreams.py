"""Record the dream histories replayed in CI (`make histories`): a DreamCycleWorkflow that ran its
phases on Anvil forks, and a GolemWorkflow whose dream a critical steer woke."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from golem.models.golem import DreamInput, DreamResult, GolemStatus
from golem.models.interventions import Steer
from tests.histories import recording_server
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for
from tests.integration.test_dreams import near_liquidation
from workflows.consolidation import DreamCycleWorkflow
from workflows.golem import GolemWorkflow

HERE = Path(__file__).parent


async def record() -> list[Path]:
    env = await recording_server()
    written = []
    try:
        rig = make_rig(Path(tempfile.mkdtemp(prefix="golem-dream-hist-")), "hist-dream",
                       dream={"forks": True, "rem_scenarios": 1})
        try:
            near_liquidation(rig)
            async with in_process_worker(env.client, rig):
                handle = await env.client.start_workflow(
                    DreamCycleWorkflow.run, DreamInput(golem_id="hist-dream", tick=3, config=rig.config),
                    id="golem-hist-dream-dream-3", task_queue="golem-hist-dream", result_type=DreamResult)
                await handle.result()
                path = HERE / "dream-cycle.json"
                path.write_text((await handle.fetch_history()).to_json())
                written.append(path)
        finally:
            rig.stop()
        rig = make_rig(Path(tempfile.mkdtemp(prefix="golem-dream-hist-")), "hist-wake",
                       clock={"dream_every_ticks": 2}, dream={"forks": True, "budget_seconds": 3600})
        try:
            near_liquidation(rig)
            async with in_process_worker(env.client, rig):
                handle = await rig.start_golem(env.client, max_ticks=4)

                async def dreaming():
                    st = await handle.query(GolemWorkflow.status, result_type=GolemStatus)
                    return st.activity == "dreaming"

                await wait_for(dreaming, 90, "the golem to fall asleep")
                await handle.signal(GolemWorkflow.steer, Steer(id="wake-h", message="repay now", severity="critical"))
                await handle.result()
                path = HERE / "dream-golem-woken.json"
                path.write_text((await handle.fetch_history()).to_json())
                written.append(path)
        finally:
            rig.stop()
    finally:
        await env.shutdown()
    return written


if __name__ == "__main__":
    for p in asyncio.run(record()):
        print(f"wrote {p}")
