"""What the golem sees in one tick (the observe step)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from golem.models.regime_tag import RegimeTag
from golem.models.strategy_runs import StrategyActivity
from golem.models.enums import MarketRegime, ProbeSeverity


class ProbeResult(BaseModel):
    """One deterministic probe."""

    probe: str
    severity: ProbeSeverity = ProbeSeverity.NONE
    value: float = 0.0
    threshold: float = 0.0
    detail: str = ""


class Anomaly(BaseModel):
    probe: str
    severity: ProbeSeverity
    description: str
    # Topology curiosity (docs/design/gate.md#prediction-error), set by the observe step: the knowledge-graph
    # entity the event concerns, its hop distance from the golem's positions (None: no entity or unconnected)
    # and the modifier it adds to the curiosity composite (0.0 = adds nothing).
    entity: str | None = None
    topology_hops: int | None = None
    topology_modifier: float = 0.0


class PoolState(BaseModel):
    """The Uniswap V2 pair the golem trades, as read from chain (human units; token0 = WETH, token1 = the
    stable, whatever the pair's own address-sorted order)."""

    address: str
    token0: str
    token1: str
    reserve0: float
    reserve1: float
    price: float  # token1 per token0 (e.g. USDC per WETH)
    tvl: float  # in token1 units


class PositionState(BaseModel):
    """A position of the golem's account: its Aave V3 lending position (kind "lending") or its Uniswap V2
    liquidity (kind "lp")."""

    id: str
    kind: str = "lending"
    collateral: float = 0.0  # in collateral token units (the aToken balance: WETH supplied plus interest)
    debt: float = 0.0  # in debt token units (the variable debt token balance: USDC borrowed plus interest)
    health_factor: float | None = None  # Aave's getUserAccountData healthFactor; None when there is no debt
    # As Aave computes them (getUserAccountData, USD base currency): absent for a position read another way.
    collateral_usd: float | None = None
    debt_usd: float | None = None
    liquidation_threshold: float | None = None  # weighted average, 0.825 = 82.5 %
    ltv: float | None = None


class FeedState(BaseModel):
    """One Chainlink AggregatorV3-style feed as read by `latestRoundData()`."""

    symbol: str  # the asset it prices (WETH, USDC, DAI)
    address: str
    answer: float  # USD per unit
    round_id: int
    updated_at: int  # unix seconds of the round
    age_s: int  # block timestamp − updated_at
    heartbeat_s: int | None = None  # stale when age_s > heartbeat_s


class LiquidationEvent(BaseModel):
    """An Aave `LiquidationCall` against the golem's account, decoded from the Pool's log."""

    tx_hash: str
    log_index: int
    block_number: int
    collateral_asset: str  # symbol when known, else the address
    debt_asset: str
    debt_covered: float  # debt asset units repaid by the liquidator
    collateral_seized: float  # collateral units taken, the liquidation bonus included
    liquidator: str


class ChainSnapshot(BaseModel):
    """Raw chain reads; the input of the probes."""

    chain_id: int
    block_number: int
    block_timestamp: int
    gas_price_gwei: float
    pool: PoolState
    oracle_price: float
    balances: dict[str, float] = Field(default_factory=dict)  # symbol → human units
    native_balance_eth: float = 0.0
    positions: list[PositionState] = Field(default_factory=list)
    feeds: list[FeedState] = Field(default_factory=list)


class Observation(BaseModel):
    """Step 1's output: chain reads + probes + regime."""

    snapshot: ChainSnapshot
    probes: list[ProbeResult] = Field(default_factory=list)
    anomalies: list[Anomaly] = Field(default_factory=list)
    regime: MarketRegime = MarketRegime.UNKNOWN
    observed_at: str = ""  # ISO time the activity read the chain
    read_ms: float = 0.0
    # Confirmation tracking of earlier actions: a reorg forces T2.
    confirmation_depth: int = 2
    newly_confirmed_ticks: list[int] = Field(default_factory=list)
    reorged_ticks: list[int] = Field(default_factory=list)
    force_t2_reason: str | None = None
    # Liquidations of the golem's position found since the previous observation (Aave LiquidationCall).
    liquidations: list[LiquidationEvent] = Field(default_factory=list)
    # The strategies under strategies/ as this tick's clock found them (None: the golem has only STRATEGY.md)
    strategies: StrategyActivity | None = None
    # the tick's regime cells (volatility quintile, trend, gas and liquidity bands); absent on observations from
    # before the tag existed (docs/design/learning.md#the-regime-tag)
    regime_tag: RegimeTag | None = None

    @property
    def primary_price(self) -> float:
        return self.snapshot.pool.price

    def min_health_factor(self) -> float | None:
        hfs = [p.health_factor for p in self.snapshot.positions if p.health_factor is not None]
        return min(hfs) if hfs else None
