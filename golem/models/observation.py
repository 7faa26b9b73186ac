"""What the golem sees in one tick (heartbeat §S3 step 1, §S9)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from golem.models.enums import MarketRegime, ProbeSeverity


class ProbeResult(BaseModel):
    """One deterministic probe (heartbeat §S9)."""

    probe: str
    severity: ProbeSeverity = ProbeSeverity.NONE
    value: float = 0.0
    threshold: float = 0.0
    detail: str = ""


class Anomaly(BaseModel):
    probe: str
    severity: ProbeSeverity
    description: str
    # Topology curiosity (grimoire "Feeding the Curiosity Scorer"), set by the observe step: the knowledge-graph
    # entity the event concerns, its hop distance from the golem's positions (None: no entity or unconnected)
    # and the modifier it adds to the curiosity composite (0.0 = adds nothing).
    entity: str | None = None
    topology_hops: int | None = None
    topology_modifier: float = 0.0


class PoolState(BaseModel):
    """The constant-product pool as read from chain (human units, token1 per token0)."""

    address: str
    token0: str
    token1: str
    reserve0: float
    reserve1: float
    price: float  # token1 per token0 (e.g. USDC per WETH)
    tvl: float  # in token1 units


class PositionState(BaseModel):
    """A lending position of the golem's account."""

    id: str
    kind: str = "lending"
    collateral: float = 0.0  # in collateral token units
    debt: float = 0.0  # in debt token units
    health_factor: float | None = None  # None when there is no debt (infinite health)


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


class Observation(BaseModel):
    """Step 1's output: chain reads + probes + regime."""

    snapshot: ChainSnapshot
    probes: list[ProbeResult] = Field(default_factory=list)
    anomalies: list[Anomaly] = Field(default_factory=list)
    regime: MarketRegime = MarketRegime.UNKNOWN
    observed_at: str = ""  # ISO time the activity read the chain
    read_ms: float = 0.0
    # Confirmation tracking of earlier actions (heartbeat §S10): a reorg forces T2.
    confirmation_depth: int = 2
    newly_confirmed_ticks: list[int] = Field(default_factory=list)
    reorged_ticks: list[int] = Field(default_factory=list)
    force_t2_reason: str | None = None

    @property
    def primary_price(self) -> float:
        return self.snapshot.pool.price

    def min_health_factor(self) -> float | None:
        hfs = [p.health_factor for p in self.snapshot.positions if p.health_factor is not None]
        return min(hfs) if hfs else None
