"""Regenerate the shipped market paths (deterministic: each scenario has its own fixed seed).

    python examples/scenarios/make_scenarios.py [OUT_DIR]     # default: this directory
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from golem.backtest.path import write_path_csv
from golem.backtest.scenarios import SHIPPED, shipped_rows


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else HERE
    for name in SHIPPED:
        with (out / f"{name}.csv").open("w") as f:
            write_path_csv(shipped_rows(name), f)
        print(f"wrote {out / name}.csv")


if __name__ == "__main__":
    main()
