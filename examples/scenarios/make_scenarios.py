"""Regenerate the shipped market paths (deterministic: each scenario has its own fixed seed).

    python examples/scenarios/make_scenarios.py
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from golem.backtest.path import write_path_csv  # noqa: E402
from golem.backtest.scenarios import SHIPPED, shipped_rows  # noqa: E402


def main() -> None:
    for name in SHIPPED:
        with (HERE / f"{name}.csv").open("w") as f:
            write_path_csv(shipped_rows(name), f)
        print(f"wrote {name}.csv")


if __name__ == "__main__":
    main()
