"""A labelled set for the regime detector: seeded price paths, one label per tick, and the detector replayed over
them exactly as a golem runs it (observe: history + price, then the fold keeps the run and the regime).

Families (ours): calm, trend up, trend down, volatile from the first tick, calm→volatile, crash in calm, whipsaw.
Seeds are split: even seeds tune, odd seeds are held out (bench/regime_accuracy.py reports both). HELD_OUT_FAMILIES
are shapes the detector was never tuned on (a noisier calm and trend, a falling volatile market, volatility that
calms down, a trend reversal, a flash crash): every seed of them is held out.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from golem.cognition.regime import detect_regime
from golem.models.enums import MarketRegime
from golem.models.state import PRICE_HISTORY_LEN

# Path labels → the detector regimes that count as right (the backtest report's REGIME_MATCH, kept in step by a test)
LABEL_MATCH: dict[str, set[str]] = {
    "calm": {"range_bound"}, "trending_up": {"trending_up"}, "trending_down": {"trending_down"},
    "volatile": {"volatile"}, "crash": {"trending_down", "volatile"},
}
WARMUP = 20  # the 20-period SMA


def _walk(rng: random.Random, segments: list[tuple[str, int, float, float]],
          p: float = 2000.0) -> tuple[list[float], list[str]]:
    prices: list[float] = []
    labels: list[str] = []
    for label, n, drift, sigma in segments:
        for _ in range(n):
            p = max(1.0, p * (1.0 + drift + rng.gauss(0.0, sigma)))
            prices.append(p)
            labels.append(label)
    return prices, labels


FAMILIES: dict[str, Callable[[random.Random], tuple[list[float], list[str]]]] = {
    "calm": lambda r: _walk(r, [("calm", 200, 0.0, r.uniform(0.0002, 0.0008))]),
    "trend_up": lambda r: _walk(r, [("calm", 30, 0.0, 0.0005), ("trending_up", 170, r.uniform(0.002, 0.005), 0.001)]),
    "trend_down": lambda r: _walk(r, [("calm", 30, 0.0, 0.0005),
                                      ("trending_down", 170, -r.uniform(0.002, 0.005), 0.001)]),
    "volatile_from_start": lambda r: _walk(r, [("volatile", 200, 0.0, r.uniform(0.015, 0.04))]),
    "calm_then_volatile": lambda r: _walk(r, [("calm", 80, 0.0, 0.0005), ("volatile", 120, 0.0, r.uniform(0.015, 0.04))]),
    "crash": lambda r: _walk(r, [("calm", 60, 0.0, 0.0005), ("crash", 8, -r.uniform(0.03, 0.07), 0.003),
                                 ("trending_down", 30, -0.002, 0.001), ("calm", 100, 0.0, 0.0005)]),
    "whipsaw": lambda r: _walk(r, [("calm", 40, 0.0, 0.0005)] + [("volatile", 1, s * r.uniform(0.03, 0.05), 0.005)
                                                                  for s in [1, -1] * 40] + [("calm", 80, 0.0, 0.0005)]),
}

# Written after the line was chosen and never used to tune it (ours, like the families above).
HELD_OUT_FAMILIES: dict[str, Callable[[random.Random], tuple[list[float], list[str]]]] = {
    "quiet_walk": lambda r: _walk(r, [("calm", 200, 0.0, r.uniform(0.0008, 0.0012))]),  # 2x the calm σ above
    "noisy_trend_up": lambda r: _walk(r, [("calm", 30, 0.0, 0.0005),
                                          ("trending_up", 170, r.uniform(0.002, 0.004), 0.002)]),
    "bear_volatile": lambda r: _walk(r, [("calm", 40, 0.0, 0.0005), ("volatile", 160, -0.003, r.uniform(0.015, 0.03))]),
    "volatile_then_calm": lambda r: _walk(r, [("volatile", 100, 0.0, r.uniform(0.015, 0.03)), ("calm", 100, 0.0, 0.0005)]),
    "reversal": lambda r: _walk(r, [("calm", 30, 0.0, 0.0005), ("trending_up", 80, 0.003, 0.001),
                                    ("trending_down", 90, -0.003, 0.001)]),
    "flash_crash": lambda r: _walk(r, [("calm", 60, 0.0, 0.0005), ("crash", 3, -0.08, 0.005), ("calm", 137, 0.0, 0.0005)]),
}


def labelled_set(seeds: range, families: dict[str, Any] | None = None) -> list[tuple[str, int, list[float], list[str]]]:
    fams = FAMILIES if families is None else families
    return [(name, seed, *gen(random.Random(f"{name}:{seed}"))) for name, gen in fams.items() for seed in seeds]


def tune_set(seeds: int = 10) -> list[tuple[str, int, list[float], list[str]]]:
    """What the absolute volatility line was tuned on: the even seeds of FAMILIES."""
    return labelled_set(range(0, 2 * seeds, 2))


def held_out_set(seeds: int = 10) -> list[tuple[str, int, list[float], list[str]]]:
    """Never tuned on: the odd seeds of FAMILIES and every seed of HELD_OUT_FAMILIES."""
    return labelled_set(range(1, 2 * seeds, 2)) + labelled_set(range(seeds), HELD_OUT_FAMILIES)


def detect_path(prices: list[float]) -> list[str]:
    """The detector over a path as the golem runs it: each tick sees its history (≤ 64 prices) + the new price."""
    history: list[float] = []
    run, regime = 0, MarketRegime.UNKNOWN
    out = []
    for p in prices:
        regime, run = detect_regime([*history, p], run, regime)
        out.append(regime.value)
        history = [*history, p][-PRICE_HISTORY_LEN:]
    return out


def score(paths: list[tuple[str, int, list[float], list[str]]],
          warmup: int = WARMUP) -> tuple[float, dict[str, float], Counter[tuple[str, str]]]:
    """(accuracy after the warm-up, accuracy per label, confusion (label, detected) → ticks)."""
    hits: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    confusion: Counter[tuple[str, str]] = Counter()
    for _, _, prices, labels in paths:
        for det, lab in list(zip(detect_path(prices), labels))[warmup:]:
            totals[lab] += 1
            confusion[(lab, det)] += 1
            hits[lab] += det in LABEL_MATCH[lab]
    per = {lab: hits[lab] / totals[lab] for lab in totals}
    return sum(hits.values()) / max(1, sum(totals.values())), per, confusion
