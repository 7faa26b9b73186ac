"""Regime detection against labels: the labelled set (tune = even seeds, held out = odd seeds), a sweep of the
absolute volatility line, and the shipped scenario paths (the detector replayed over each path's pool prices;
`golem backtest` reports the same figure from the golem's own ticks).

    python bench/regime_accuracy.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import golem.cognition.regime as regime  # noqa: E402
from golem.backtest.path import load_path  # noqa: E402
from golem.cognition.regime_labels import labelled_set, score  # noqa: E402

SCENARIOS = Path(__file__).resolve().parents[1] / "examples" / "scenarios"


def fmt(acc, per) -> str:
    return f"{acc:6.1%}  " + "  ".join(f"{k} {v:5.1%}" for k, v in sorted(per.items()))


def main() -> None:
    tune, hold = labelled_set(range(0, 20, 2)), labelled_set(range(1, 20, 2))
    chosen = regime.ABSOLUTE_VOLATILE_SIGMA
    print("accuracy after the 20-tick warm-up (labelled set: 7 families x 10 seeds each side)")
    for thr in (None, 0.005, 0.0075, 0.01, 0.015, 0.02):
        regime.ABSOLUTE_VOLATILE_SIGMA = float("inf") if thr is None else thr
        acc, per, _ = score(tune)
        name = "relative §S9 rule only" if thr is None else f"absolute line {thr:.2%}"
        print(f"  tune     {name:24} {fmt(acc, per)}")
    regime.ABSOLUTE_VOLATILE_SIGMA = chosen
    acc, per, _ = score(hold)
    print(f"  held out absolute line {chosen:.2%}   {fmt(acc, per)}")
    paths = []
    for csv in sorted(SCENARIOS.glob("*.csv")):
        rows = load_path(csv)
        paths.append((csv.stem, 0, [r.pool_price for r in rows], [r.regime for r in rows]))
        acc, per, _ = score(paths[-1:])
        print(f"  shipped  {csv.stem:16} {fmt(acc, per)}")
    acc, per, _ = score(paths)
    print(f"  shipped  all              {fmt(acc, per)}")


if __name__ == "__main__":
    main()
