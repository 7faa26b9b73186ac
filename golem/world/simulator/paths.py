"""The scenarios' price paths: the ETH/USD feed's seeded step returns for calm, trending, volatile and crashing
markets, and a price as a feed's fixed-point answer."""

from __future__ import annotations

import random

from golem.chain.contracts import FEED_DECIMALS


SCENARIOS: tuple[str, ...] = ("calm", "trending", "volatile", "crash")

CALM_SIGMA = 0.0005  # ~0.05% per step
TRENDING_DRIFT = 0.004  # +0.4% per step
TRENDING_SIGMA = 0.001
VOLATILE_SIGMA = 0.03  # ~3% per step
CRASH_STEP = -0.06  # −6% per step ...
CRASH_STEPS = 6  # ... for 6 steps, then flat
DEFAULT_CRASH_AFTER = 5

MIN_PRICE = 1e-6  # a feed rejects a non-positive answer

# Chainlink's USDC/USD and DAI/USD deviation threshold (data.chain.link: 0.25 %); the stables' own market
# wobbles a couple of bps around the peg (ours), so in practice they post on the heartbeat rule.
STABLE_DEVIATION = 0.0025
STABLE_SIGMA = 0.0002


class SimulatorError(RuntimeError):
    """The simulator cannot run as configured (bad scenario, keys, or chain)."""


def scenario_return(scenario: str, step: int, rng: random.Random, crash_after: int = DEFAULT_CRASH_AFTER) -> float:
    """The ETH/USD feed's relative move at `step` (0-based). Draws from `rng` in a fixed order."""
    if scenario == "calm":
        return rng.gauss(0.0, CALM_SIGMA)
    if scenario == "trending":
        return TRENDING_DRIFT + rng.gauss(0.0, TRENDING_SIGMA)
    if scenario == "volatile":
        return rng.gauss(0.0, VOLATILE_SIGMA)
    if scenario == "crash":
        if step < crash_after:
            return rng.gauss(0.0, CALM_SIGMA)
        if step < crash_after + CRASH_STEPS:
            return CRASH_STEP
        return 0.0
    raise SimulatorError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")


def oracle_path(
    scenario: str, start_price: float, steps: int, seed: int = 0, crash_after: int = DEFAULT_CRASH_AFTER
) -> list[float]:
    """The ETH/USD prices of `steps` simulator steps from `start_price` (what MarketSimulator posts)."""
    rng = random.Random(seed)
    prices, p = [], start_price
    for i in range(steps):
        p = max(MIN_PRICE, p * (1.0 + scenario_return(scenario, i, rng, crash_after)))
        prices.append(p)
    return prices


def feed_answer(price: float) -> int:
    """A USD price as the feeds' 8-decimal fixed-point answer."""
    return int(round(max(MIN_PRICE, price) * 10**FEED_DECIMALS))
