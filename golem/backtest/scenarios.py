"""Seeded market paths with regime labels: the live simulator's regimes for `golem sim export`, and the nine
scenarios shipped in examples/scenarios/. Pure: a (name, steps, seed) always gives the same rows.

Sizes come from the dev world (golem/world/deploy.py): WETH starts at 2,000 USDC; the golem supplies 10 WETH to
Aave V3 and borrows 8,000 USDC, so HF = 10 × price × 0.825 (WETH's liquidation threshold) / 8,000 is 2.06 at the
start, 1.6 (STRATEGY.md's repay line) at ≈ 1,550 and 1.0 at ≈ 970, where the world's liquidator calls
`liquidationCall` if the golem did nothing. No shipped path goes that low (the deepest, crash_recovery, bottoms at
≈ 1,216: HF ≈ 1.25 held); a path that does shows the liquidation in the report's figures.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from golem.backtest.models import DEFAULT_ROW_SECONDS, PathRow
from golem.backtest.path import PATH_EPOCH
from golem.world.deploy import ORACLE_START_PRICE
from golem.world.simulator.paths import CALM_SIGMA, CRASH_STEPS, DEFAULT_CRASH_AFTER, oracle_path
from golem.world.simulator.paths import SCENARIOS as SIM_SCENARIOS

BASE_GAS_GWEI = 1.0  # ours: a quiet L2-like base fee (Anvil's own default is 1 gwei)
GAS_NOISE = 0.05  # ours: ±5 % lognormal wobble, far below the gas probe's 2× Low line
VOLUME_USD = 20_000.0  # ours: median noise volume per row; ~1 % of the pool's depth
DEFAULT_EXPORT_STEPS = 400  # ours: `golem sim export` without --steps (the bench's path length)
POOL_SPREAD_BPS = 5.0  # ours: an arbitraged pool sits within a few bps of the oracle (30 bps fee band)


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.rows: list[PathRow] = []
        self.price = float(ORACLE_START_PRICE)

    def gas(self, level: float = BASE_GAS_GWEI) -> float:
        return round(level * math.exp(self.rng.gauss(0.0, GAS_NOISE)), 4)

    def volume(self) -> float:
        return round(VOLUME_USD * math.exp(self.rng.gauss(0.0, 0.4)), 2)

    def add(self, label: str, ret: float = 0.0, *, sigma: float = CALM_SIGMA, oracle: float | None = None,
            gas: float | None = None, pool: float | None = None) -> None:
        self.price = max(1.0, self.price * (1.0 + ret + self.rng.gauss(0.0, sigma)))
        spread = self.rng.gauss(0.0, POOL_SPREAD_BPS / 10_000)
        i = len(self.rows)
        self.rows.append(PathRow(
            tick=i, timestamp=PATH_EPOCH + DEFAULT_ROW_SECONDS * i,
            pool_price=round(pool if pool is not None else self.price * (1.0 + spread), 6),
            oracle_price=round(oracle if oracle is not None else self.price, 6),
            gas_gwei=gas if gas is not None else self.gas(), volume_usd=self.volume(), regime=label,
        ))

    def run(self, n: int, label: str, ret: float = 0.0, sigma: float = CALM_SIGMA, **kw) -> None:
        for _ in range(n):
            self.add(label, ret, sigma=sigma, **kw)


# ---- the nine shipped scenarios ------------------------------------------------------------------------
def calm(g: _Gen) -> None:
    g.run(240, "calm")


def trend_up(g: _Gen) -> None:
    g.run(30, "calm")
    g.run(180, "trending_up", 0.003, sigma=0.001)  # +0.3 %/row: a 2× in ~230 rows
    g.run(30, "calm")


def crash_recovery(g: _Gen) -> None:
    g.run(60, "calm")
    g.run(8, "crash", -0.05, sigma=0.002)  # −5 %/row for 8 rows: 2,000 → ~1,330 (HF ~1.33 if it did nothing)
    g.run(40, "trending_down", -0.002, sigma=0.002)
    g.run(80, "trending_up", 0.004, sigma=0.002)
    g.run(52, "calm")


def v_recovery(g: _Gen) -> None:
    """A V: the same crash as crash_recovery, then the market takes it all back — a full retracement to the
    pre-crash level (2,000 → ~1,300 → ~2,030), where crash_recovery's recovery stops at ~1,690. The rally has three
    +3.5 % rows (short squeezes, every 30 rows): the moves STRATEGY.md's buy-back rule ("swap 5 % USDC to WETH" on
    >= +300 bps in trending_up) is written for, which no other shipped path makes."""
    g.run(60, "calm")
    g.run(8, "crash", -0.05, sigma=0.002)  # as crash_recovery: 2,000 → ~1,330
    g.run(12, "trending_down", -0.002, sigma=0.002)  # a short bottom: ~1,300
    for k in range(100):  # +0.35 %/row and the three squeezes: ×1.56 in 100 rows, back to ~2,030
        g.add("trending_up", 0.035 if k in (30, 60, 90) else 0.0035, sigma=0.002)
    g.run(60, "calm")


def slow_bleed(g: _Gen) -> None:
    g.run(30, "calm")
    g.run(210, "trending_down", -0.0022, sigma=0.0003)  # −22 bps/row, under the 50 bps price probe: HF 2.0 → ~1.25


def oracle_lag(g: _Gen) -> None:
    g.run(60, "calm")
    lagged = g.price
    moves = [-0.04, -0.04, -0.04, -0.03, 0.0, 0.0]  # the pool falls ~14 % in 4 rows ...
    for k, r in enumerate(moves):
        g.add("crash" if k < 4 else "trending_down", r, sigma=0.0005, oracle=lagged)
        if k >= 2:  # ... the oracle follows 3 rows late
            lagged = g.rows[-3].pool_price
    g.run(4, "trending_down", sigma=0.0005)
    g.run(110, "calm")


def gas_spike(g: _Gen) -> None:
    """Sharp −3.5 % dips that revert on the next row (each fires STRATEGY.md's swap rule at −300 bps): three at
    normal gas first (they give the gas gate a usual cost per action), one inside six rows of 10× base fee, one
    after the spike at normal gas again."""

    def dip(gas: float | None = None) -> None:
        g.add("volatile", -0.035, sigma=0.0005, gas=gas)
        g.add("volatile", 0.036, sigma=0.0005, gas=gas)

    for start in (30, 55, 80):
        g.run(start - len(g.rows), "calm")
        dip()
    g.run(110 - len(g.rows), "calm")
    spike = 10 * BASE_GAS_GWEI
    g.run(2, "calm", gas=g.gas(spike))
    dip(gas=g.gas(spike))
    g.run(2, "calm", gas=g.gas(spike))
    g.run(30, "calm")
    dip()  # the same dip at normal gas: the swap goes through
    g.run(240 - len(g.rows), "calm")


def whipsaw(g: _Gen) -> None:
    g.run(40, "calm")
    for k in range(60):  # ±4 % alternating with noise: nowhere to go, every signal reverses
        g.add("volatile", 0.04 if k % 2 else -0.04, sigma=0.01)
    g.run(140, "calm")


def busy_day_crash(g: _Gen) -> None:
    """A busy morning spends the day's gas, then the crash comes: the golem's repays must still go through."""
    g.run(20, "calm")
    for k in range(150):  # ±4 % whipsaw: the swap rule fires on every down row, and each swap pays gas
        g.add("volatile", 0.04 if k % 2 else -0.04, sigma=0.005)
    g.run(20, "calm")
    g.run(8, "crash", -0.05, sigma=0.002)  # HF ~2.0 → ~1.3 if nothing is repaid
    g.run(40, "calm")


SHIPPED: dict[str, Callable[[_Gen], None]] = {
    "calm": calm, "trend_up": trend_up, "crash_recovery": crash_recovery, "slow_bleed": slow_bleed,
    "oracle_lag": oracle_lag, "gas_spike": gas_spike, "whipsaw": whipsaw, "busy_day_crash": busy_day_crash,
    "v_recovery": v_recovery,  # last: the seeds above are by position
}
SHIPPED_SEEDS = {name: 100 + i for i, name in enumerate(SHIPPED)}  # ours: one fixed seed per shipped file


def shipped_rows(name: str, seed: int | None = None) -> list[PathRow]:
    if name not in SHIPPED:
        raise ValueError(f"unknown scenario {name!r}; choose one of {', '.join(SHIPPED)}")
    g = _Gen(SHIPPED_SEEDS[name] if seed is None else seed)
    SHIPPED[name](g)
    return g.rows


# ---- the live simulator's regimes ---------------------------------------------------------------------
def _sim_label(scenario: str, i: int, crash_after: int) -> str:
    if scenario == "trending":
        return "trending_up"
    if scenario == "crash":
        return "crash" if crash_after <= i < crash_after + CRASH_STEPS else "calm"
    return scenario  # calm, volatile


def export_rows(scenario: str, steps: int | None = None, seed: int | None = None,
                crash_after: int = DEFAULT_CRASH_AFTER) -> list[PathRow]:
    """What `golem sim --scenario S --seed N` posts to the oracle, as a path (the same oracle_path), with the
    arbitraged pool a few bps off the oracle, a quiet base fee and noise volume. Shipped scenario names work too:
    with steps and seed left out they give the shipped CSV row for row."""
    if steps is not None and steps < 1:
        raise ValueError(f"--steps must be >= 1, got {steps}")
    if scenario not in SIM_SCENARIOS:
        if scenario in SHIPPED:
            rows = shipped_rows(scenario, seed)
            if steps is None:
                return rows
            while len(rows) < steps:  # longer than the shipped file: continue calm from where it ended
                g = _Gen((SHIPPED_SEEDS[scenario] if seed is None else seed) + len(rows))
                g.rows, g.price = rows, rows[-1].oracle_price
                g.run(steps - len(rows), "calm")
            return rows[:steps]
        raise ValueError(f"unknown scenario {scenario!r}; choose one of {', '.join((*SIM_SCENARIOS, *SHIPPED))}")
    seed = 0 if seed is None else seed
    prices = oracle_path(scenario, float(ORACLE_START_PRICE), steps or DEFAULT_EXPORT_STEPS, seed=seed,
                         crash_after=crash_after)
    g = _Gen(seed + 1_000_003)  # its own stream: the prices depend on the seed exactly as the simulator's do
    for i, p in enumerate(prices):
        g.price = p
        g.add(_sim_label(scenario, i, crash_after), sigma=0.0, oracle=p)
    return g.rows
