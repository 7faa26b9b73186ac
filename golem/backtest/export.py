"""`golem sim export --scenario crash --steps 400 --seed 1 > crash.csv`: a scenario as a market-path CSV on stdout.

Lives in backtest/ (not world/): the path format is the backtest's, and world/ must not import backtest/.
"""

from __future__ import annotations

import argparse
import os
import sys

from golem.backtest.path import write_path_csv
from golem.backtest.scenarios import DEFAULT_EXPORT_STEPS, SHIPPED, export_rows
from golem.world.simulator.paths import DEFAULT_CRASH_AFTER, SCENARIOS


class _OneLineParser(argparse.ArgumentParser):
    """A bad argument is one line on stderr and exit 2 (argparse's usual usage block is left to --help)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    names = list(dict.fromkeys([*SCENARIOS, *SHIPPED]))
    p = _OneLineParser(
        prog="golem sim export",
        description="Write a scenario as a market-path CSV (the format `golem backtest` reads) to stdout. "
        f"{', '.join(SCENARIOS)} are the live simulator's regimes (the same oracle prices `golem sim` posts); "
        "the other names are the shipped paths of examples/scenarios/ (calm means the simulator's).",
    )
    p.add_argument("--scenario", choices=names, default="calm", metavar="NAME", help=f"one of: {', '.join(names)}")
    p.add_argument("--steps", type=int, default=None,
                   help=f"rows (default {DEFAULT_EXPORT_STEPS}; a shipped path's own length)")
    p.add_argument("--seed", type=int, default=None, help="default 0; a shipped path's own seed (== its CSV)")
    p.add_argument("--crash-after", type=int, default=DEFAULT_CRASH_AFTER, help="crash: calm steps before the crash")
    return p


def export_main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    if args.crash_after < 0:
        parser.error(f"--crash-after must be >= 0, got {args.crash_after}")
    try:
        rows = export_rows(args.scenario, args.steps, args.seed, args.crash_after)
    except ValueError as err:
        parser.error(str(err))
    try:
        write_path_csv(rows, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader left; say nothing more (Python's documented recipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
