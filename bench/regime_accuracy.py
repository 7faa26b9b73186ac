"""Regime detection against labels, after the 20-tick warm-up (the SMA period): the labelled set's tune part (even
seeds of the tuned families), its held-out part (odd seeds + families never tuned on), a sweep of the absolute
volatility line on the tune part, the simulator's `volatile` scenario (the demo that tagged 1 tick in 650), and
the shipped scenario paths (never tuned on; the detector replayed over each path's pool prices — `golem backtest`
reports the same figure from the golem's own ticks).

    python bench/regime_accuracy.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import golem.cognition.regime as regime  # noqa: E402
from golem.backtest.path import load_path  # noqa: E402
from golem.cognition.regime_labels import (  # noqa: E402
    FAMILIES,
    HELD_OUT_FAMILIES,
    WARMUP,
    detect_path,
    held_out_set,
    score,
    tune_set,
)
from golem.world.simulator.paths import oracle_path  # noqa: E402

SCENARIOS = Path(__file__).resolve().parents[1] / "examples" / "scenarios"
LABELS = ("calm", "trending_up", "trending_down", "volatile", "crash")
SHORT = {"calm": "calm", "trending_up": "up", "trending_down": "down", "volatile": "vol", "crash": "crash"}


def fmt(acc, per) -> str:
    return f"{acc:6.1%}  " + "  ".join(f"{per[k]:6.1%}" if k in per else f"{'-':>6}" for k in LABELS)


def head(title: str) -> None:
    print(f"  {title:36} {'all':>6}  " + "  ".join(f"{SHORT[k]:>6}" for k in LABELS))


def main() -> None:
    chosen = regime.ABSOLUTE_VOLATILE_SIGMA
    tune, hold = tune_set(), held_out_set()
    print(f"Regime accuracy after the {WARMUP}-tick warm-up; tune = {len(FAMILIES)} families x 10 even seeds "
          f"({len(tune)} paths), held out = odd seeds + {len(HELD_OUT_FAMILIES)} untuned families ({len(hold)} paths)")
    head("")
    for name, thr in (("before (relative rule only)", float("inf")), (f"after (+ line {chosen:.2%})", chosen)):
        regime.ABSOLUTE_VOLATILE_SIGMA = thr
        for part, paths in (("tune", tune), ("held out", hold)):
            print(f"  {name + ' ' + part:36} {fmt(*score(paths)[:2])}")
    print("\n  sweep of the absolute line (tune part only)")
    for thr in (0.005, 0.0075, 0.01, 0.015, 0.02):
        regime.ABSOLUTE_VOLATILE_SIGMA = thr
        print(f"  {'line ' + format(thr, '.2%'):36} {fmt(*score(tune)[:2])}")
    print("\n  held out, per family (after)")
    regime.ABSOLUTE_VOLATILE_SIGMA = chosen
    for fam in sorted({name for name, *_ in hold}):
        print(f"  {fam:36} {fmt(*score([p for p in hold if p[0] == fam])[:2])}")

    print("\n  simulator SCENARIO=volatile (3 %/step from the first step), share of ticks tagged volatile after the "
          "warm-up, 650 ticks x 3 seeds")
    for name, thr in (("before", float("inf")), ("after", chosen)):
        regime.ABSOLUTE_VOLATILE_SIGMA = thr
        tags = [t for seed in range(3) for t in detect_path(oracle_path("volatile", 2000.0, 650, seed=seed))[WARMUP:]]
        print(f"  {name:36} {tags.count('volatile') / len(tags):6.1%}")
    regime.ABSOLUTE_VOLATILE_SIGMA = chosen

    csvs = sorted(SCENARIOS.glob("*.csv"))
    if csvs:
        print("\n  shipped scenario paths (never tuned on)")
        paths = []
        for csv in csvs:
            rows = load_path(csv)
            paths.append((csv.stem, 0, [r.pool_price for r in rows], [r.regime for r in rows]))
        for name, thr in (("before", float("inf")), ("after", chosen)):
            regime.ABSOLUTE_VOLATILE_SIGMA = thr
            for p in paths:
                print(f"  {name + ' ' + p[0]:36} {fmt(*score([p])[:2])}")
            print(f"  {name + ' all':36} {fmt(*score(paths)[:2])}")
        regime.ABSOLUTE_VOLATILE_SIGMA = chosen


if __name__ == "__main__":
    main()
