"""Record `golem-death.json`: a GolemWorkflow whose Hayflick limit (6 ticks) runs out, through the phases, the
Thanatopsis settlement ticks (a repay on chain) and the legacy activity, to its completion with the death
certificate — so the `thanatopsis` and `phase-search-attribute` patches replay in CI.

    .venv/bin/python -m tests.histories.record_death
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from tests.histories import recording_server
from tests.integration.golem_rig import in_process_worker, make_rig

HERE = Path(__file__).parent


async def record() -> Path:
    env = await recording_server()
    tmp = Path(tempfile.mkdtemp(prefix="golem-death-"))
    rig = make_rig(tmp, "death", "calm", theta=0.25, lifespan={"hayflick_ticks": 6, "settlement_ticks": 2})
    try:
        async with in_process_worker(env.client, rig):
            handle = await rig.start_golem(env.client, max_ticks=None)
            state = await handle.result()
            assert state.life.certificate is not None and state.life.certificate.cause == "hayflick"
        history = await env.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id).fetch_history()
        path = HERE / "golem-death.json"
        path.write_text(history.to_json())
        return path
    finally:
        rig.stop()
        await env.shutdown()


if __name__ == "__main__":
    t0 = time.monotonic()
    p = asyncio.run(record())
    print(f"wrote {p.relative_to(HERE.parent.parent)} ({p.stat().st_size} bytes) in {time.monotonic() - t0:.1f}s")
