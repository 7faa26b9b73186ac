"""A synthetic world in process: the dev world's pool and lending position at a given price, and an owner's
STRATEGY.md decided by the offline deliberator on every escalated tick, its actions applied to the book.

It lets System 1 run past the cold start as GolemWorkflow runs it — learned gating fed at delta cycles with the
actions its escalated ticks took (golem.cognition.system1.simulate's `snapshot` and `act` hooks) — without a
chain: no simulation, validation or gas, and swaps fill at the pool price less the deliberator's own haircut.
Pure and deterministic: the same prices give the same actions.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from golem.inference.offline import SWAP_OUTPUT_HAIRCUT, OfflineDeliberator
from golem.inference.strategy import Strategy, load_strategy
from golem.models.config import GolemConfig
from golem.models.observation import ChainSnapshot, PoolState, PositionState
from golem.models.state import GolemState
from golem.models.tick import DecideInput, TickContext

EXAMPLE_STRATEGY = Path(__file__).resolve().parents[2] / "examples" / "golem-home" / "STRATEGY.md"


class StrategyBook:
    """The dev world's account (golem/world/deploy.py sizes: 20 WETH and 20,000 USDC in the wallet, 10 WETH
    supplied, 8,000 USDC borrowed, liquidation threshold 0.8: HF 2.0 at 2,000) traded by `strategy`."""

    def __init__(self, cfg: GolemConfig | None = None, strategy: Strategy | None = None, *, golem_id: str = "sim",
                 weth: float = 20.0, usdc: float = 20_000.0, collateral: float = 10.0, debt: float = 8_000.0,
                 liquidation_threshold: float = 0.8, pool_k: float = 1e9) -> None:
        self.cfg = cfg or GolemConfig()
        self.strategy = strategy or load_strategy(EXAMPLE_STRATEGY)
        self.golem_id = golem_id
        self.balances = {"WETH": weth, "USDC": usdc}
        self.collateral, self.debt, self.lt, self.k = collateral, debt, liquidation_threshold, pool_k
        self.price = 0.0
        self.deliberator = OfflineDeliberator()

    def snapshot(self, price: float, tick: int) -> ChainSnapshot:
        self.price = price
        r0, r1 = math.sqrt(self.k / price), math.sqrt(self.k * price)
        hf = self.collateral * price * self.lt / self.debt if self.debt > 1e-9 else None
        return ChainSnapshot(
            chain_id=31337, block_number=1000 + tick, block_timestamp=1_700_000_000 + 12 * tick, gas_price_gwei=1.0,
            pool=PoolState(address="0xpool", token0="WETH", token1="USDC", reserve0=r0, reserve1=r1, price=price,
                           tvl=2.0 * r1),
            oracle_price=price, balances=dict(self.balances),
            positions=[PositionState(id="lending:golem", collateral=self.collateral, debt=self.debt,
                                     health_factor=hf)],
        )

    def act(self, state: GolemState, tick: Any) -> int:
        """Deliberate an escalated tick (a golem.cognition.system1.System1Tick) offline; apply and count its actions."""
        inp = DecideInput(ctx=TickContext(golem_id=self.golem_id, tick=state.tick, config=self.cfg, state=state),
                          observation=tick.observation, tier=tick.tier, prediction_error=tick.prediction_error)
        actions = self.deliberator.decide_now(inp, self.strategy).actions
        for a in actions:
            if a.tool == "repay":
                amount = float(a.arguments["amount"])
                self.balances["USDC"] -= amount
                self.debt -= amount
            elif a.tool == "swap":
                tin, tout, amount = a.arguments["token_in"], a.arguments["token_out"], float(a.arguments["amount_in"])
                out = amount * self.price if tin == "WETH" else amount / self.price
                self.balances[tin] -= amount
                self.balances[tout] = self.balances.get(tout, 0.0) + out * SWAP_OUTPUT_HAIRCUT
        return len(actions)
