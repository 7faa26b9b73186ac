"""What an action is worth in USD at an observation (the number the PolicyCage's trade-size limit reads), the
golem's pool claim, and a swap's slippage bound."""

from __future__ import annotations

from typing import Any

from golem.chain.tools.arguments import parse_arguments
from golem.chain.tools.schemas import (
    COLLATERAL_TOKEN,
    DEBT_TOKEN,
    LP_POSITION_KIND,
    POOL_TOKEN0,
    POOL_TOKEN1,
    STABLE_TOKENS,
)
from golem.models.observation import ChainSnapshot, Observation, PositionState
from golem.models.tick import ProposedAction


def lp_position(snapshot: ChainSnapshot) -> PositionState | None:
    """The golem's pool position in a ChainSnapshot (kind "lp"), or None when it holds no shares.

    Its `collateral` is the WETH side of the golem's pro-rata claim on the reserves (shares /
    total_shares × reserve0); the USDC side is that times the pool price (see golem.chain.reader)."""
    return next((p for p in snapshot.positions if p.kind == LP_POSITION_KIND), None)


def lp_value_usd(observation: Observation) -> float:
    """USD value of the golem's pool claim: WETH side at the oracle, USDC side = WETH side × pool price."""
    pos = lp_position(observation.snapshot)
    if pos is None:
        return 0.0
    return float(pos.collateral * (price_usd(POOL_TOKEN0, observation) + observation.snapshot.pool.price))


def price_usd(symbol: str, observation: Observation) -> float:
    """USD value of one unit: stables at 1, WETH at the oracle (pool price if the oracle reads 0)."""
    if symbol in STABLE_TOKENS:
        return 1.0
    snap = observation.snapshot
    return snap.oracle_price if snap.oracle_price > 0 else snap.pool.price


def action_value_usd(action: ProposedAction, observation: Observation) -> float:
    """The USD size of an action, the number the PolicyCage's max_trade_size_usd limits."""
    args = parse_arguments(action.tool, action.arguments)
    if action.tool == "swap":
        return float(args["amount_in"]) * price_usd(args["token_in"], observation)
    if action.tool == "add_liquidity":
        return float(args["amount_weth"]) * price_usd(POOL_TOKEN0, observation) + float(args["amount_usdc"]) * price_usd(
            POOL_TOKEN1, observation
        )
    if action.tool == "remove_liquidity":
        return float(args["fraction"]) * lp_value_usd(observation)
    symbol = COLLATERAL_TOKEN if action.tool in ("supply", "withdraw") else DEBT_TOKEN
    return float(args["amount"]) * price_usd(symbol, observation)


def slippage_bps_of(action: ProposedAction) -> float | None:
    """The slippage bound a swap or add_liquidity is checked against; None for tools without one."""
    if action.tool not in ("swap", "add_liquidity"):
        return None
    bound: float | None = parse_arguments(action.tool, action.arguments)["max_slippage_bps"]
    return bound
