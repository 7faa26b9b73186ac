"""What a tick costs the Temporal store: history bytes per T0 / escalated tick, the dev server's SQLite growth
per tick, the data dir's growth per 100 ticks, and the biggest activity input.

One golem on real parts at a fast theta under volatile prices, steered now and then so some ticks act; the floor is a
workflow running one no-op activity. `.venv/bin/python bench/history_bytes.py [--ticks N] [--json FILE]`; never fails
a build (tests/integration/test_lean_history.py asserts the targets).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workers.converter import data_converter  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402

from bench.floor import FloorWorkflow, noop  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from golem.life.cycle_store import CycleStore  # noqa: E402
from golem.models.enums import Tier  # noqa: E402
from infra.history_size import history_sizes  # noqa: E402
from infra.temporal import dev_server_args, prune_visibility_indexes, search_attribute_keys, temporal_cli  # noqa: E402
from tests.integration.golem_rig import in_process_worker, make_rig  # noqa: E402
from workflows.golem import GolemWorkflow  # noqa: E402


FLOOR_RUNS = 50




def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def sqlite_bytes(db: Path) -> int:
    """The files on disk: the database, its write-ahead log and shared memory."""
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())


def sqlite_used(db: Path) -> int:
    """Bytes the database holds (pages in use, WAL frames included, free pages not): what a long run grows by.
    The file alone also counts the write-ahead log, which grows to SQLite's checkpoint size (~4 MB) and is then
    reused, and free pages, which are reused — a short run's file growth overstates the per-tick cost."""
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        pages = con.execute("pragma page_count").fetchone()[0] - con.execute("pragma freelist_count").fetchone()[0]
        return pages * con.execute("pragma page_size").fetchone()[0]
    finally:
        con.close()


def demo_clock() -> dict:
    """The cadence of `golem run`'s demo (examples/golem-home/golem.toml [clock]): delta, dream and continue-as-new
    every N ticks. The test rig's cadence (delta 10, dream 15) runs a cycle every few ticks."""
    from golem.models.config import read_config_table

    clock = read_config_table(REPO / "examples" / "golem-home" / "golem.toml")["clock"]
    return {k: clock[k] for k in ("delta_theta_ticks", "continue_as_new_ticks", "dream_every_ticks")}


async def main(ticks: int, steer_every: int, out_json: str | None, dump: str | None = None,
               scenario: str = "volatile", clock: dict | None = None, prune: bool = True) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="golem-bench-hist-"))
    db = tmp / "temporal.sqlite"

    async def start_server() -> WorkflowEnvironment:
        return await WorkflowEnvironment.start_local(
            dev_server_existing_path=str(temporal_cli()), search_attributes=search_attribute_keys(),
            dev_server_extra_args=dev_server_args(), dev_server_database_filename=str(db),
            data_converter=data_converter,
        )

    env = await start_server()
    if prune:  # as `golem run`'s TemporalDevServer does on a new file (infra.temporal.prune_visibility_indexes)
        await env.shutdown()
        prune_visibility_indexes(db)
        env = await start_server()
    client = env.client
    async with Worker(client, task_queue="floor", workflows=[FloorWorkflow], activities=[noop]):
        await client.execute_workflow(FloorWorkflow.run, 1, id="floor-1", task_queue="floor")
        before, used_before = sqlite_bytes(db), sqlite_used(db)
        for i in range(2, FLOOR_RUNS + 2):  # the store's own cost of one small workflow (rows, visibility, tasks)
            await client.execute_workflow(FloorWorkflow.run, i, id=f"floor-{i}", task_queue="floor")
        floor_db = (sqlite_bytes(db) - before) / FLOOR_RUNS
        floor_used = (sqlite_used(db) - used_before) / FLOOR_RUNS
    floor = (await history_sizes(client, "floor-1")).total

    rig = make_rig(tmp, "benchhist", scenario, theta=0.2, clock=clock or {"continue_as_new_ticks": 50})
    figures: dict = {}
    try:
        rig.start_market(interval=0.2)
        store = CycleStore(rig.data_dir)
        async with in_process_worker(client, rig):
            handle = await rig.start_golem(client, max_ticks=None)
            while store.count() < 5:  # cold start: embedder, LanceDB, first files
                await asyncio.sleep(0.2)
            db0, dir0, n0, t0 = sqlite_bytes(db), dir_bytes(rig.data_dir), store.count(), time.monotonic()
            used0 = sqlite_used(db)
            steered = 0
            while store.count() < n0 + ticks:
                n = store.count()
                if steer_every and n - n0 >= (steered + 1) * steer_every:
                    steered += 1
                    await handle.signal(GolemWorkflow.steer, {"id": f"bench-{steered}", "message": "reduce exposure",
                                                             "severity": "high"})
                await asyncio.sleep(0.2)
            n1 = store.count()
            db1, dir1, elapsed = sqlite_bytes(db), dir_bytes(rig.data_dir), time.monotonic() - t0
            used1 = sqlite_used(db)
            parent = await history_sizes(client, f"golem-{rig.golem_id}")
            if dump:
                Path(dump).mkdir(parents=True, exist_ok=True)
                history = await client.get_workflow_handle(f"golem-{rig.golem_id}").fetch_history()
                (Path(dump) / "parent.json").write_text(history.to_json())
            await handle.terminate("bench done")
        per_tier: dict[str, list[int]] = {"T0": [], "escalated": [], "acted": []}
        breakdown: dict[str, dict[str, int]] = {}  # tier → by event of its last tick
        biggest: dict[str, int] = {}
        results: dict[str, int] = {}
        samples: dict[str, bytes] = {}
        for row in store.recent(n1):
            rec = store.load(row["tick"])
            if rec.tick < n0:
                continue
            try:
                sizes = await history_sizes(client, rec.workflow_id, rec.run_id)
            except Exception:
                continue  # still running when the golem was stopped
            key = "T0" if rec.tier == Tier.T0 else "escalated"
            per_tier[key].append(sizes.total)
            breakdown[key] = sizes.by_event
            if dump:  # the last tick of each kind, as the UI downloads it (for `python -m infra.history_size`)
                history = await client.get_workflow_handle(rec.workflow_id, run_id=rec.run_id).fetch_history()
                Path(dump).mkdir(parents=True, exist_ok=True)
                (Path(dump) / f"{key}.json").write_text(history.to_json())
            if any(a.tx_hash for a in rec.actions):
                per_tier["acted"].append(sizes.total)
            for name, size in sizes.inputs.items():
                biggest[name] = max(biggest.get(name, 0), size)
            for name, size in sizes.results.items():
                if size > results.get(name, 0):
                    results[name], samples[name] = size, sizes.result_json.get(name, b"")
        done = n1 - n0
        figures = {
            "floor_bytes": floor,
            "ticks": done,
            "ticks_per_s": round(done / elapsed, 2),
            "history_bytes": {k: (int(statistics.median(v)) if v else None) for k, v in per_tier.items()},
            "history_bytes_max": {k: (max(v) if v else None) for k, v in per_tier.items()},
            "counts": {k: len(v) for k, v in per_tier.items()},
            "sqlite_bytes_per_tick": int((db1 - db0) / max(1, done)),
            "sqlite_bytes_per_floor_workflow": int(floor_db),
            "sqlite_used_bytes_per_tick": int((used1 - used0) / max(1, done)),
            "sqlite_used_bytes_per_floor_workflow": int(floor_used),
            "data_dir_bytes_per_100_ticks": int((dir1 - dir0) / max(1, done) * 100),
            "parent_history_bytes": parent.total,
            "parent_events": parent.events,
            "largest_activity_input": biggest,
            "largest_activity_result": results,
        }
    finally:
        rig.stop()
        await env.shutdown()

    kb = lambda b: f"{b / 1024:7.1f} KB" if b is not None else "      –   "  # noqa: E731
    print(f"floor (1 workflow + 1 no-op activity): {kb(floor)}")
    for k in ("T0", "escalated", "acted"):
        med = figures["history_bytes"][k]
        ratio = f"= {med / floor:5.1f}x floor" if med else ""
        print(f"tick history {k:9} n={figures['counts'][k]:3}  median {kb(med)}  max {kb(figures['history_bytes_max'][k])}  {ratio}")
    print(f"temporal.sqlite growth per tick: {kb(figures['sqlite_used_bytes_per_tick'])} stored (pages in use)  "
          f"(floor: {kb(floor_used)} per no-op workflow = {figures['sqlite_used_bytes_per_tick'] / max(1.0, floor_used):.1f}x); "
          f"files incl. WAL: {kb(figures['sqlite_bytes_per_tick'])} (floor {kb(floor_db)})")
    print(f"data dir growth per 100 ticks:   {kb(figures['data_dir_bytes_per_100_ticks'])}")
    print(f"parent history now: {kb(parent.total)} in {parent.events} events ({done} ticks at {figures['ticks_per_s']} ticks/s)")
    print("largest input per activity:", ", ".join(f"{k} {v / 1024:.1f} KB" for k, v in sorted(biggest.items(), key=lambda kv: -kv[1])))
    print("largest result per activity:", ", ".join(f"{k} {v / 1024:.1f} KB" for k, v in sorted(results.items(), key=lambda kv: -kv[1])))
    if samples.get("observe"):
        obs = json.loads(samples["observe"])
        print("  observation by field:", ", ".join(f"{k} {len(json.dumps(v))} B" for k, v in
                                               sorted(obs.items(), key=lambda kv: -len(json.dumps(kv[1])))[:6]))
    for tier, events in breakdown.items():
        print(f"  a {tier} tick by event:", ", ".join(f"{k} {v}" for k, v in sorted(events.items(), key=lambda kv: -kv[1])[:10]))
    if out_json:
        Path(out_json).write_text(json.dumps(figures, indent=2))
    return figures


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int, default=100)
    ap.add_argument("--steer-every", type=int, default=15, help="a high steer every N ticks (0: none)")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--scenario", default="volatile", choices=["calm", "trending", "volatile", "crash"],
                    help="the market (volatile + steers: a stress mix, ~60%% escalated; calm, --steer-every 0: "
                         "`golem run`'s demo)")
    ap.add_argument("--dump", help="write the last T0 and escalated tick's and the parent's history JSON into this folder")
    ap.add_argument("--demo", action="store_true",
                    help="`golem run`'s demo: calm, no steers, the example golem.toml's cadence (delta every 50 ticks, "
                         "continue-as-new 100, dream 200) at a fast theta; without it the test rig's cadence (delta "
                         "every 10 ticks, dream 15, continue-as-new 50) puts a cycle's cost in a short run")
    ap.add_argument("--keep-indexes", action="store_true",
                    help="keep all of the dev server's visibility indexes (as before they were pruned)")
    args = ap.parse_args()
    clock = None
    if args.demo:
        args.scenario, args.steer_every, clock = "calm", 0, demo_clock()
    print(f"scenario {args.scenario}, a steer every {args.steer_every or 'never'}, clock {clock or 'the test rig'}, "
          f"{args.ticks} ticks, visibility indexes {'all' if args.keep_indexes else 'pruned'}")
    asyncio.run(main(args.ticks, args.steer_every, args.json, args.dump, args.scenario, clock,
                     prune=not args.keep_indexes))
