"""The data a backtest passes between its parts: path rows in, per-row marks out."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

# The labels a path's optional `regime` column may carry.
PATH_REGIMES: tuple[str, ...] = ("calm", "trending_up", "trending_down", "volatile", "crash")

DEFAULT_ROW_SECONDS = 60  # a row without a timestamp column is 60 s after the previous one


class PathRow(BaseModel):
    """One row of a market path: the world the golem sees at its tick."""

    tick: int  # the row's own index column (strictly increasing)
    timestamp: int  # unix seconds (default: start + 60 s per row)
    pool_price: float = Field(gt=0)  # USDC per WETH the pool is traded to
    oracle_price: float = Field(gt=0)  # USDC per WETH the oracle answers
    gas_gwei: float = Field(ge=0)  # the next block's base fee
    volume_usd: float = Field(ge=0)  # noise trading volume in the row
    regime: str | None = None  # label from PATH_REGIMES, when the path has one


class BlockedAction(BaseModel):
    tool: str
    category: Literal["gate", "budget", "policy", "other"]  # gas gate/spike, a budget, a PolicyCage rule
    reason: str


class ActionMark(BaseModel):
    tool: str
    status: str  # executed | blocked | deferred | failed | cancelled
    gas_usd: float = 0.0
    protective: bool = False  # repay / deleverage / a high-or-critical steer's action
    block: int | None = None  # the block its transaction landed in (None: nothing sent)
    clipped: bool = False  # the cage sized it down to fit its limits (golem.safety.sizing)
    urgency: str | None = None  # routine | urgent | critical, when the gas gate classed it (golem.safety.urgency)
    learned: bool = False  # a learned PLAYBOOK rule proposed it (the offline deliberator's rules_applied)
    threats: list[str] = Field(default_factory=list)  # the DeFi threat detectors that fired on it (golem.safety.threats)


class LiquidationMark(BaseModel):
    """One Aave LiquidationCall event against the golem's account on a row, valued at the row's feed answers."""

    tx_hash: str
    debt_asset: str
    debt_covered: float  # debt asset units the liquidator repaid
    collateral_asset: str
    collateral_seized: float  # collateral units taken, the liquidation bonus included
    debt_covered_usd: float
    collateral_seized_usd: float

    @property
    def penalty_usd(self) -> float:
        """What the liquidation cost the golem: collateral seized beyond the debt it repaid (the bonus)."""
        return self.collateral_seized_usd - self.debt_covered_usd


class TickMark(BaseModel):
    """One path row after the golem had its chance to act on it (or not: no tick fell on the row)."""

    row: int  # 0-based position in the path
    timestamp: int
    label_regime: str | None = None  # the path's regime column
    pool_price: float  # as read back from the chain after the row was applied
    oracle_price: float
    gas_gwei: float
    # The golem's account marked to market at the oracle price: wallet tokens + pool share + lending
    # collateral − debt, minus the cumulative gas paid (native ETH is left out: it only pays gas).
    equity_usd: float
    # the same account as exposure to the collateral token's price + stable value (golem.safety.attribution)
    exposure: float | None = None
    stable_usd: float | None = None
    health_factor: float | None = None  # None: no debt
    liquidatable: bool = False  # the market's liquidation condition (HF < 1) still holds after the row
    # the health factor at the row's prices before the liquidator and the golem acted (None: no debt or not read),
    # and whether it was under 1 then
    row_health_factor: float | None = None
    underwater: bool = False
    # Aave LiquidationCall events against the golem's account on this row (read from the Pool's logs)
    liquidations: list[LiquidationMark] = Field(default_factory=list)
    # The golem's tick on this row (None: no tick fell on it, e.g. hold or a long theta)
    tick: int | None = None
    tier: str | None = None  # T0 | T1 | T2
    detected_regime: str | None = None  # the golem's MarketRegime value
    prediction_error: float | None = None
    actions: list[ActionMark] = Field(default_factory=list)
    verified: bool | None = None  # the tick's verify step: receipts confirmed, deviations in bounds (None: no verify)
    blocked: list[BlockedAction] = Field(default_factory=list)
    gas_usd: float = 0.0  # gas paid on this row
    # the health factor the tick's actions restored (re-read after minus before; None: no loan or nothing restored)
    hf_restored: float | None = None
    inference_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    wall_ms: float | None = None  # wall time of the row's tick (start of advance to its end)


class RunInfo(BaseModel):
    """What was run: shown at the top of the report."""

    name: str  # "golem", "hold", "rules", "memory-off", ...
    path: str
    rows: int
    golem_id: str | None = None
    memory: bool = True
    deliberator: str = ""
    started_at: str = ""
    wall_seconds: float = 0.0
    confirmation_blocks: int | None = None  # empty blocks the world mined for the golem's verify (backtest/replay.py)
    steps: str | None = None  # how the golem's tick steps ran: "local" or "activities" (None: no golem, hold)
    grimoire_from: str | None = None
    prices: dict[str, dict[str, float]] = Field(default_factory=dict)  # model → USD/MTok, from the router
    gas_limits: dict[str, float] = Field(default_factory=dict)  # the partition, its slice, the ceilings (status too)
