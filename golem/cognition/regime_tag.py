"""The per-tick regime tag: volatility quintile against the golem's own recent history, trend direction, gas band
against its recent median, liquidity band from the pool's depth beside the golem's exposure. Pure and
deterministic. What each cell means and why: docs/design/learning.md#the-regime-tag.
"""

from __future__ import annotations

import math
import statistics

from golem.cognition.regime import MIN_PRICE_SIGMA, SMA_PERIOD, TREND_BAND_SIGMA
from golem.models.regime_tag import RegimeTag

VOL_WINDOW = 5  # σ of the last 5 returns, the regime detector's "recent" window
MIN_VOL_HISTORY = 10  # the quintile needs this many earlier rolling σ to rank against
MIN_TREND_PRICES = 5
MIN_GAS_HISTORY = 5
GAS_BANDS = ((0.75, "low"), (1.5, "normal"), (3.0, "high"))  # gas / recent median; above 3×: "spike"
# price impact of selling a tenth of the golem's collateral-token exposure into the pool (constant product): one
# de-risking step (the shipped strategy's swaps are 10-30 %); the whole exposure read the dev pool as a crisis
LIQUIDITY_TRADE_SHARE = 0.10
LIQUIDITY_BANDS = ((0.005, "deep"), (0.02, "normal"), (0.10, "thin"))  # ≥ 10 %: "crisis"


def _returns(prices: list[float]) -> list[float]:
    return [(b - a) / a for a, b in zip(prices, prices[1:]) if a > 0]


def _std(xs: list[float]) -> float:
    m = math.fsum(xs) / len(xs)
    return math.sqrt(math.fsum((x - m) ** 2 for x in xs) / len(xs))


def volatility_quintile(prices: list[float]) -> tuple[int | None, float | None]:
    """(quintile, σ): the current rolling σ ranked among the rolling σ of the earlier history (mid-rank for ties,
    so a flat history puts every tick in the middle quintile rather than the calmest)."""
    rets = _returns(prices)
    if len(rets) < VOL_WINDOW:
        return None, None
    sigmas = [_std(rets[i - VOL_WINDOW:i]) for i in range(VOL_WINDOW, len(rets) + 1)]
    now, past = sigmas[-1], sigmas[:-1]
    if len(past) < MIN_VOL_HISTORY:
        return None, round(now, 8)
    eps = 1e-12
    below = sum(s < now - eps for s in past)
    equal = sum(abs(s - now) <= eps for s in past)
    rank = (below + 0.5 * equal) / len(past)  # in [0, 1]
    return min(5, 1 + int(rank * 5)), round(now, 8)


def trend_of(prices: list[float]) -> str | None:
    """Above / below the 20-period SMA by more than 1σ (the regime detector's bands), else range."""
    if len(prices) < MIN_TREND_PRICES:
        return None
    window = prices[-SMA_PERIOD:]
    sma = math.fsum(window) / len(window)
    sigma = max(_std(window), MIN_PRICE_SIGMA * sma)
    dev = window[-1] - sma
    return "up" if dev > TREND_BAND_SIGMA * sigma else "down" if dev < -TREND_BAND_SIGMA * sigma else "range"


def gas_band(gas_gwei: float, history: list[float]) -> tuple[str | None, float | None]:
    past = [g for g in history if g > 0 and math.isfinite(g)]
    if len(past) < MIN_GAS_HISTORY or gas_gwei <= 0:
        return None, None
    ratio = gas_gwei / statistics.median(past)
    return next((name for top, name in GAS_BANDS if ratio < top), "spike"), round(ratio, 4)


def liquidity_band(exposure: float, reserve: float) -> tuple[str | None, float | None]:
    """Selling `exposure` units into a constant-product pool holding `reserve` of them moves its price by
    1 − (R / (R + x))²; the band is read from that impact."""
    if reserve <= 0:
        return ("crisis", 1.0) if exposure > 0 else (None, None)
    impact = 1.0 - (reserve / (reserve + max(0.0, exposure))) ** 2
    return next((name for top, name in LIQUIDITY_BANDS if impact < top), "crisis"), round(impact, 6)


def regime_tag(prices: list[float], gas_gwei: float, gas_history: list[float], exposure: float,
               reserve: float) -> RegimeTag:
    """The tag of a tick: `prices` its price history with its own price last, `gas_history` the earlier ticks' gas,
    `exposure` the collateral-token units the account holds, `reserve` the pool's reserve of that token."""
    prices = [p for p in prices if p > 0 and math.isfinite(p)]
    q, sigma = volatility_quintile(prices)
    gas, ratio = gas_band(gas_gwei, gas_history)
    liq, impact = liquidity_band(exposure * LIQUIDITY_TRADE_SHARE, reserve)
    return RegimeTag(volatility_quintile=q, trend=trend_of(prices), gas_band=gas, liquidity_band=liq,
                     volatility=sigma, gas_ratio=ratio, price_impact=impact)
