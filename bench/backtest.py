"""Backtest throughput: a 400-row path end to end (start to report) with the offline deliberator.

Prints the wall time, rows/s and ticks/s, beside two floors measured in the same run on the backtest's own kind of
server: one workflow running one no-op activity (bench/tick_latency.py's floor), and the T0 tick it implies.
A figure, never a pass/fail: the issue's target is ≤ 2 min for 400 rows on 2 cores.

    python bench/backtest.py [--rows 400] [--scenario volatile] [--seed 1] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio import activity, workflow  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@activity.defn
def noop(x: int) -> int:
    return x


@workflow.defn(sandboxed=False)
class FloorWorkflow:
    @workflow.run
    async def run(self, x: int) -> int:
        return await workflow.execute_activity(noop, x, start_to_close_timeout=timedelta(seconds=10))


async def floor_ms(n: int = 20) -> float:
    """Median of one workflow + one no-op activity on a fresh dev server started the way backtests start it."""
    from infra.anvil import free_port
    from infra.temporal import TemporalDevServer
    from workers.client import connect

    with tempfile.TemporaryDirectory() as tmp:
        server = TemporalDevServer(Path(tmp) / "t.sqlite", port=free_port(), ui_port=free_port(), headless=True)
        server.start()
        try:
            client = await connect(server.address)
            xs = []
            async with Worker(client, task_queue="floor", workflows=[FloorWorkflow], activities=[noop],
                              activity_executor=ThreadPoolExecutor(2)):
                for i in range(n):
                    t = time.perf_counter()
                    await client.execute_workflow(FloorWorkflow.run, i, id=f"floor-{i}", task_queue="floor")
                    xs.append((time.perf_counter() - t) * 1000)
            return statistics.median(xs[3:])
        finally:
            server.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400)
    ap.add_argument("--scenario", default="volatile")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--home", default=str(REPO / "examples" / "golem-home"))
    ap.add_argument("--keep", help="keep the output here (default: a temp dir)")
    args = ap.parse_args()

    from golem.backtest.report import build_report, write_report
    from golem.backtest.scenarios import export_rows
    from golem.backtest.path import write_path_csv
    from infra.backtest import BacktestOptions, run_backtest

    floor = asyncio.run(floor_ms())
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="golem-bt-bench-"))
    csv = out.parent / f"{args.scenario}-{args.rows}.csv"
    with csv.open("w") as f:
        write_path_csv(export_rows(args.scenario, args.rows, args.seed), f)
    t = time.perf_counter()
    [run] = run_backtest(BacktestOptions(path=csv, home=Path(args.home), out=out, progress=False))
    report = build_report(run.info, run.marks)
    write_report(report, run.marks, out)
    wall = time.perf_counter() - t
    ticks = [m for m in run.marks if m.tick is not None]
    tick_ms = [m.wall_ms for m in ticks if m.wall_ms is not None and m.tier == "T0"]
    t0_med = statistics.median(tick_ms) if tick_ms else float("nan")
    tiers = {k: sum(1 for m in ticks if m.tier == k) for k in ("T0", "T1", "T2")}
    print(f"backtest {args.scenario} {args.rows} rows (seed {args.seed}), offline deliberator, {args.home}")
    print(f"  end to end (start to report): {wall:7.1f} s   target <= 120 s")
    print(f"  rows/s {args.rows / wall:6.2f}   ticks/s {len(ticks) / wall:6.2f}   ticks {len(ticks)}  tiers {tiers}")
    print(f"  floor (1 workflow + 1 no-op activity, same server kind): median {floor:6.1f} ms "
          f"-> {1000 / floor:5.2f} workflows/s")
    print(f"  T0 row (driver update round trip incl. the tick): median {t0_med:6.1f} ms = {t0_med / floor:4.1f}x floor")
    print(f"  output: {out}")


if __name__ == "__main__":
    main()
