"""Re-record the workflow histories replayed in CI (`make histories`).

Runs a short golem on real parts (Temporal dev server, Anvil, the crash scenario, a steer) and saves
the histories of a T0 tick, an escalated tick that acted on chain, a steered T2 tick, and the
GolemWorkflow run itself. Re-record only after an intended workflow change guarded by
workflow.patched(): the old files must keep replaying too, so keep them under a new name.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, Tier
from tests.histories import recording_server
from tests.integration.golem_rig import in_process_worker, make_rig
from workflows.golem import GolemWorkflow

HERE = Path(__file__).parent


async def record(prefix: str = "") -> list[Path]:
    env = await recording_server()
    tmp = Path(tempfile.mkdtemp(prefix="golem-histories-"))
    rig = make_rig(tmp, "hist", "crash", theta=0.25)
    written: list[Path] = []
    try:
        rig.start_market(interval=0.3, max_steps=16, per_tick=True, crash_after=9)
        async with in_process_worker(env.client, rig):
            handle = await rig.start_golem(env.client, max_ticks=16)
            store = CycleStore(rig.data_dir)
            while store.count() < 4:
                await asyncio.sleep(0.1)
            await handle.signal(GolemWorkflow.steer, {"id": "hist-steer", "message": "reduce exposure", "severity": "high"})
            await handle.result()
        records = [store.load(t) for t in range(16)]
        steered = next(r for r in records if any(i.id == "hist-steer" for i in r.active_interventions))
        acted = [r for r in records if any(a.status == ActionStatus.EXECUTED for a in r.actions)]
        picks = {
            "tick-t0": next(r for r in records if r.tier == Tier.T0),
            "tick-steered-t2": steered,
            "tick-acted": next((r for r in acted if r.tick != steered.tick), acted[0]),
        }
        for name, rec in picks.items():
            history = await env.client.get_workflow_handle(rec.workflow_id, run_id=rec.run_id).fetch_history()
            path = HERE / f"{prefix}{name}.json"
            path.write_text(history.to_json())
            written.append(path)
        # The first run of GolemWorkflow (before its continue-as-new).
        history = await env.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id).fetch_history()
        path = HERE / f"{prefix}golem-run.json"
        path.write_text(history.to_json())
        written.append(path)
    finally:
        rig.stop()
        await env.shutdown()
    return written


if __name__ == "__main__":
    import sys

    # --prefix P: write P<name>.json beside the existing files (a new workflow shape keeps the old ones replaying)
    prefix = sys.argv[sys.argv.index("--prefix") + 1] if "--prefix" in sys.argv else ""
    t0 = time.monotonic()
    for p in asyncio.run(record(prefix)):
        print(f"wrote {p.relative_to(HERE.parent.parent)} ({p.stat().st_size} bytes)")
    print(f"done in {time.monotonic() - t0:.1f}s")
