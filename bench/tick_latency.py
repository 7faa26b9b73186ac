"""Wall time of a T0 tick and of an escalated (steered T2, acting on chain) tick on the Temporal dev
server, beside a floor measured in the same run: a workflow that runs one no-op activity.

Prints figures only; it never fails a build. Run: `make bench` (or python bench/tick_latency.py).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workers.converter import data_converter  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402

from bench.floor import FloorWorkflow, noop  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from golem.life.cycle_store import CycleStore  # noqa: E402
from golem.models.enums import Tier  # noqa: E402
from infra.temporal import dev_server_args, search_attribute_keys, temporal_cli  # noqa: E402
from tests.integration.golem_rig import in_process_worker, make_rig  # noqa: E402
from workflows.golem import GolemWorkflow  # noqa: E402

T0_TICKS = 30
STEERS = 6




def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def line(name: str, xs: list[float], floor: float) -> str:
    med = statistics.median(xs)
    return (f"{name:34} n={len(xs):3}  median {med:8.1f} ms  p90 {pct(xs, 0.9):8.1f} ms  "
            f"max {max(xs):8.1f} ms  = {med / floor:5.1f}x floor")


async def main() -> None:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()), search_attributes=search_attribute_keys(),
        dev_server_extra_args=dev_server_args(),
        data_converter=data_converter,
    )
    client = env.client
    # Floor: one workflow with one no-op activity, end to end on the same server.
    floor_ms: list[float] = []
    async with Worker(client, task_queue="floor", workflows=[FloorWorkflow], activities=[noop]):
        for i in range(20):
            t = time.perf_counter()
            await client.execute_workflow(FloorWorkflow.run, i, id=f"floor-{i}", task_queue="floor")
            floor_ms.append((time.perf_counter() - t) * 1000)
    floor = statistics.median(floor_ms[3:])

    tmp = Path(tempfile.mkdtemp(prefix="golem-bench-"))
    rig = make_rig(tmp, "bench", "calm", theta=0.2)
    try:
        rig.start_market(interval=0.2)
        async with in_process_worker(client, rig):
            handle = await rig.start_golem(client, max_ticks=None)
            store = CycleStore(rig.data_dir)
            while store.count() < T0_TICKS:
                await asyncio.sleep(0.2)
            for i in range(STEERS):
                n = store.count()
                await handle.signal(GolemWorkflow.steer, {"id": f"bench-{i}", "message": "reduce exposure", "severity": "high"})
                while store.count() < n + 3:
                    await asyncio.sleep(0.1)
            await handle.terminate("bench done")
        durations: dict[str, list[float]] = {"T0": [], "escalated": [], "acted": []}
        for row in store.recent(1000):
            rec = store.load(row["tick"])
            if rec.tick < 3:
                continue  # cold start: embedder and LanceDB open
            desc = await client.get_workflow_handle(rec.workflow_id, run_id=rec.run_id).describe()
            if desc.close_time is None:
                continue  # still finishing when the golem was stopped
            ms = (desc.close_time - desc.start_time).total_seconds() * 1000
            if rec.tier == Tier.T0:
                durations["T0"].append(ms)
            else:
                durations["escalated"].append(ms)
                if any(a.tx_hash for a in rec.actions):
                    durations["acted"].append(ms)
        steps: dict[str, list[float]] = {}
        for row in store.recent(1000):
            for t in store.load(row["tick"]).step_timings:
                steps.setdefault(t.step, []).append(t.ms)
    finally:
        rig.stop()
        await env.shutdown()

    print(f"Temporal dev server floor (1 workflow + 1 no-op activity): median {floor:.1f} ms "
          f"(p90 {pct(floor_ms[3:], 0.9):.1f} ms)")
    print(line("T0 tick (observe→analyze→gate→reflect)", durations["T0"], floor))
    if durations["escalated"]:
        print(line("escalated tick (T1/T2)", durations["escalated"], floor))
    if durations["acted"]:
        print(line("tick that acted on chain", durations["acted"], floor))
    print("per step (median ms, as seen by the workflow):")
    for name, xs in sorted(steps.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {name:10} {statistics.median(xs):8.1f}  (n={len(xs)})")


if __name__ == "__main__":
    asyncio.run(main())
