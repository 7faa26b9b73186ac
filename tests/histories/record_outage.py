"""Record `golem-outage.json`: a GolemWorkflow run through an RPC outage (Anvil stopped for several ticks),
so the failed-tick path with its `chain-health` patch (root causes, chain alert, theta backoff) replays in CI.

    .venv/bin/python -m tests.histories.record_outage
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from golem.cognition.chain_health import CHAIN_ALERT_TICKS
from golem.life.cycle_store import CycleStore
from tests.histories import recording_server
from tests.integration.golem_rig import in_process_worker, make_rig

HERE = Path(__file__).parent


async def record() -> Path:
    env = await recording_server()
    tmp = Path(tempfile.mkdtemp(prefix="golem-outage-"))
    rig = make_rig(tmp, "outage", "calm", theta=0.25, anvil_state=True, heartbeat={"step_timeout_seconds": 1.0})
    try:
        async with in_process_worker(env.client, rig):
            handle = await rig.start_golem(env.client, max_ticks=10)
            store = CycleStore(rig.data_dir)
            while store.count() < 2:
                await asyncio.sleep(0.1)
            rig.anvil.stop()
            while len(store.failures(100)) < CHAIN_ALERT_TICKS:
                await asyncio.sleep(0.1)
            rig.anvil.start()
            await handle.result()
        history = await env.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id).fetch_history()
        path = HERE / "golem-outage.json"
        path.write_text(history.to_json())
        return path
    finally:
        rig.stop()
        await env.shutdown()


if __name__ == "__main__":
    t0 = time.monotonic()
    p = asyncio.run(record())
    print(f"wrote {p.relative_to(HERE.parent.parent)} ({p.stat().st_size} bytes) in {time.monotonic() - t0:.1f}s")
