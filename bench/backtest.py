"""Backtest throughput on a shipped path: rows/s of `golem backtest` by each route, beside a floor measured in the
same run (the hold variant: the same rows on its own Anvil, no golem), with where a row's wall time went, the median
T0 tick and CPU seconds. A figure, never a pass/fail (docs/development/tests.md#what-each-benchmark-measures).

    python bench/backtest.py [--path examples/scenarios/crash_recovery.csv] [--rows N] [--routes local,activities]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
GOAL_ROWS_S = 10  # the goal on 2 cores (docs/how-to/backtesting.md#how-fast)


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of its waited-for children (the runs' Temporal servers and Anvils)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _floor(path: Path, rows, out: Path) -> tuple[float, float]:
    """The hold variant: rows/s of the row loop and of the whole variant (its Anvil's start and deployment)."""
    from infra.backtest import BacktestOptions, _run_variant

    opts = BacktestOptions(path=path, home=REPO / "examples" / "golem-home", out=out, progress=False)
    t = time.perf_counter()
    run = asyncio.run(_run_variant(opts, rows, "hold", None, None, out))
    return len(rows) / sum(run.phases.values()), len(rows) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--path", default=str(REPO / "examples" / "scenarios" / "crash_recovery.csv"))
    ap.add_argument("--rows", type=int, help="only the first N rows of the path")
    ap.add_argument("--routes", default="local,activities", help="comma-separated: local, activities")
    ap.add_argument("--home", default=str(REPO / "examples" / "golem-home"))
    ap.add_argument("--keep", help="keep the outputs here (default: a temp dir)")
    args = ap.parse_args()

    from golem.backtest.path import load_path, write_path_csv
    from infra.backtest import BacktestOptions, run_backtest

    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="golem-bt-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    path = Path(args.path)
    rows = load_path(path)
    if args.rows:
        rows = rows[: args.rows]
        path = out / f"{path.stem}-{len(rows)}.csv"
        with path.open("w") as f:
            write_path_csv(rows, f)
    n = len(rows)
    floor_loop, floor_all = _floor(path, rows, out / "floor")
    print(f"backtest bench: {Path(args.path).name}, {n} rows, home {args.home}")
    print(f"  floor (hold: the driver's chain setup + marking, no golem): {floor_loop:6.2f} rows/s in the row loop, "
          f"{floor_all:6.2f} rows/s with its Anvil's start")
    marks: dict[str, list] = {}
    for route in args.routes.split(","):
        cpu0 = _cpu()
        t = time.perf_counter()
        [run] = run_backtest(BacktestOptions(path=path, home=Path(args.home), out=out / route, progress=False,
                                             steps=route))
        wall = time.perf_counter() - t
        cpu1 = _cpu()
        marks[route] = [m.model_dump(mode="json", exclude={"wall_ms"}) for m in run.marks]
        loop = sum(run.phases.values())
        per_row = {k: 1000 * v / n for k, v in run.phases.items()}
        t0 = [m.wall_ms for m in run.marks if m.tier == "T0" and m.wall_ms is not None]
        ticks = sum(1 for m in run.marks if m.tick is not None)
        print(f"  route {route:10}  end to end {wall:6.1f} s = {n / wall:5.2f} rows/s   row loop {loop:6.1f} s = "
              f"{n / loop:5.2f} rows/s (goal {GOAL_ROWS_S:g}; {floor_loop / (n / loop):4.1f}x floor's time per row)   ticks {ticks}")
        print(f"    per row ms: " + "  ".join(f"{k} {v:6.1f}" for k, v in per_row.items())
              + f"   T0 tick median {statistics.median(t0) if t0 else float('nan'):6.1f} ms")
        print(f"    CPU s: this process {cpu1[0] - cpu0[0]:6.1f} ({1000 * run.loop_cpu_seconds / n:5.1f} ms per row over "
              f"the rows), its Temporal + Anvil {cpu1[1] - cpu0[1]:6.1f}; all {1000 * (cpu1[0] - cpu0[0] + cpu1[1] - cpu0[1]) / n:6.1f} ms per "
              f"row, start-up included")
        kids = run.loop_child_cpu_seconds
        if kids:
            per_row = {"python": run.loop_cpu_seconds, **kids}
            print("    CPU ms per row over the rows: " + "  ".join(f"{k} {1000 * v / n:5.1f}" for k, v in per_row.items())
                  + f"  = {1000 * sum(per_row.values()) / n:5.1f}; at 2 cores the CPU alone allows "
                  f"{2 * n / sum(per_row.values()):5.1f} rows/s (goal {GOAL_ROWS_S:g})")
    if len(marks) > 1:
        first, *others = marks.values()
        print(f"  same marks on every route (ticks, tiers, actions, figures; wall_ms aside): "
              f"{'yes' if all(o == first for o in others) else 'NO'}")
    print(f"  outputs: {out}")


if __name__ == "__main__":
    main()
