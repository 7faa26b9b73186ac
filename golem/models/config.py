"""golem.toml, validated. Travels in workflow input, so it must never hold a secret."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from golem.models.enums import MarketRegime


class ConfigError(ValueError):
    """Raised with a message naming the bad key and how to fix it."""


class GolemSection(BaseModel):
    model_config = {"extra": "forbid"}
    id: str = Field(default="demo", pattern=r"^[a-z0-9][a-z0-9-]{0,40}$")
    # Where STRATEGY.md / HEARTBEAT.md live; relative paths resolve against golem.toml's folder.
    home: str = "."


class ChainSection(BaseModel):
    model_config = {"extra": "forbid"}
    rpc_url: str = "http://127.0.0.1:8545"
    # Against an external RPC the golem only dry-runs unless live = true (or --live).
    live: bool = False
    # Name of the environment variable holding the signing key; the key itself never enters config.
    key_env: str = "GOLEM_PRIVATE_KEY"
    confirmations: int = Field(default=2, ge=0, le=64)  # 2-block confirmation
    # Which protocol deployments the golem speaks to: "embedded" (the dev world `golem run` deploys, its
    # resolved book in <data>/deployment.json) or the path of an address-book TOML (relative to golem.toml)
    # naming the tokens, Uniswap V2's router and Aave V3's PoolAddressesProvider on the chain at rpc_url.
    address_book: str = "embedded"


class ClockSection(BaseModel):
    """Adaptive clock: theta 30–120 s by default (docs/design/gate.md#the-clock)."""

    model_config = {"extra": "forbid"}
    theta_base_seconds: float = Field(default=60.0, ge=0.05)
    theta_min_seconds: float = Field(default=30.0, ge=0.05)
    theta_max_seconds: float = Field(default=120.0, ge=0.05)
    delta_theta_ticks: int = Field(default=50, ge=1)  # DELTA every ~50 theta ticks
    continue_as_new_ticks: int = Field(default=100, ge=1)
    dream_every_ticks: int = Field(default=200, ge=1)
    gamma_min_seconds: float = Field(default=5.0, ge=0.05)  # GAMMA perception pulse, 5–15 s
    gamma_max_seconds: float = Field(default=15.0, ge=0.05)
    # per regime: trending_down and volatile tick 2x faster, range_bound 0.5x slower.
    regime_multipliers: dict[MarketRegime, float] = Field(
        default_factory=lambda: {
            MarketRegime.TRENDING_UP: 1.0,
            MarketRegime.TRENDING_DOWN: 0.5,
            MarketRegime.RANGE_BOUND: 2.0,
            MarketRegime.VOLATILE: 0.5,
            MarketRegime.UNKNOWN: 1.0,
        }
    )

    @model_validator(mode="after")
    def _ordered(self) -> "ClockSection":
        if not self.theta_min_seconds <= self.theta_base_seconds <= self.theta_max_seconds:
            raise ValueError(
                "need theta_min_seconds <= theta_base_seconds <= theta_max_seconds "
                f"(got {self.theta_min_seconds}, {self.theta_base_seconds}, {self.theta_max_seconds})"
            )
        return self


class ProbeThresholds(BaseModel):
    """Probe thresholds (docs/design/gate.md#probes)."""

    model_config = {"extra": "forbid"}
    price_delta_low_bps: float = 50
    price_delta_high_bps: float = 200
    tvl_change_low_pct: float = 1.0
    tvl_change_high_pct: float = 5.0
    health_factor_low: float = 1.5
    health_factor_high: float = 1.2
    gas_ratio_low: float = 2.0
    gas_ratio_high: float = 5.0
    oracle_deviation_low_bps: float = 100  # circuit breaker: NAV/oracle deviation warning
    oracle_deviation_high_bps: float = 500  # circuit breaker: halt
    world_model_drift_low: float = 0.10
    world_model_drift_high: float = 0.25
    kill_switch_path: str = "/tmp/golem_killswitch"


class WakeSection(BaseModel):
    """`[wake]`: System 1 never lets a line of STRATEGY.md be crossed in silence (docs/design/wakefulness.md)."""

    model_config = {"extra": "forbid"}
    # Position probe Low = the highest health-factor line a STRATEGY.md rule reacts to + this ([probes] health_factor_low
    # when the strategy names none).
    probe_low_margin: float = Field(default=0.1, ge=0.0, le=2.0)
    # Position probe High = the MUST health_factor floor + this ([probes] health_factor_high when there is none).
    probe_high_margin: float = Field(default=0.1, ge=0.0, le=2.0)
    # At least T1 when the health factor reaches a line within this many ticks, at its recent slope or worst move.
    horizon_ticks: float = Field(default=3.0, ge=0.0, le=100.0)
    # Recent = this many ticks of health-factor history (GolemState keeps 16).
    window_ticks: int = Field(default=12, ge=2, le=16)
    # Preview STRATEGY.md's market-readable rules every tick; a rule that would fire lifts the tick to T1 at least.
    preview_rules: bool = True


class HeartbeatSection(BaseModel):
    """The gate's base threshold and the daily inference budget (docs/design/gate.md#the-daily-budget)."""

    model_config = {"extra": "forbid"}
    base_deliberation_threshold: float = Field(default=0.3, gt=0.0, le=1.0)
    max_daily_cost_usd: float = Field(default=10.0, ge=0.0)
    cost_warning_threshold: float = Field(default=0.7, gt=0.0, le=1.0)
    cost_soft_cap_threshold: float = Field(default=0.9, gt=0.0, le=1.0)
    step_timeout_seconds: float = Field(default=60.0, ge=1.0)


# The write tools' names (golem.chain.tools.schemas.WRITE_TOOLS, which a unit test holds this to): config names them.
WriteToolName = Literal["swap", "supply", "withdraw", "borrow", "repay", "add_liquidity", "remove_liquidity"]


class PolicySection(BaseModel):
    """PolicyCage limits. The LLM can never widen these."""

    model_config = {"extra": "forbid"}
    approved_assets: list[str] = Field(default_factory=lambda: ["WETH", "USDC"])
    max_trade_size_usd: float = Field(default=5_000.0, gt=0.0)
    max_slippage_bps: float = Field(default=100.0, ge=0.0)
    # Size to fit (docs/concepts/spending.md): a swap's price impact against the pair's reserves, the 0.3 % fee included
    max_price_impact_bps: float = Field(default=300.0, gt=0.0)
    # a proposal the cage clips is refused when what is left is worth less than this ...
    min_trade_usd: float = Field(default=25.0, ge=0.0)
    # ... or less than this many times its own gas
    min_trade_gas_multiple: float = Field(default=2.0, ge=0.0)
    # Urgency buys gas (docs/concepts/spending.md): the most one urgent or critical action may pay for gas, in USD ...
    gas_ceiling_per_action_usd: float = Field(default=20.0, ge=0.0)
    # ... and as a share of the value it protects (the debt it repays, the collateral it adds, what it sells)
    gas_ceiling_share_of_protected: float = Field(default=0.02, ge=0.0, le=1.0)
    # an urgent action answering the position, or a critical one, may take the day's gas up to this total, no further
    gas_ceiling_per_day_usd: float = Field(default=30.0, ge=0.0)
    # Privileged tools (docs/how-to/approvals.md): write tools outside the golem's grant; the model may only ask the
    # owner for them (`golem approve | deny ID`), and an approved one still passes every limit above
    privileged_tools: list[WriteToolName] = Field(default_factory=list)
    approval_ttl_ticks: int = Field(default=20, ge=1, le=10_000)  # an unanswered request expires after this many ticks
    # DeFi threats (docs/design/safety.md#defi-threats): the most a front-runner may take from a swap, bps of its value
    # (above it the cage tightens the swap's slippage bound, or clips it) ...
    max_sandwich_loss_bps: float = Field(default=30.0, gt=0.0)
    # ... a price move that counts as manipulation or a flash-loan-shaped move ...
    threat_move_bps: float = Field(default=300.0, gt=0.0)
    # ... and how many blocks before the observation the detectors read
    threat_window_blocks: int = Field(default=5, ge=2, le=60)

    @field_validator("privileged_tools")
    @classmethod
    def _once(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(v))

    @model_serializer(mode="wrap")
    def _omit_default_late_keys(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Keys added after config versions existed are left out while at their defaults, so adding them changed
        no version hash, policy hash or recorded payload (an absent key decodes to its default)."""
        data = handler(self)
        if isinstance(data, dict):
            for name in LATE_POLICY_KEYS:
                if name in data and getattr(self, name) == type(self).model_fields[name].get_default(
                        call_default_factory=True):
                    del data[name]
        return data


LATE_POLICY_KEYS = ("max_price_impact_bps", "min_trade_usd", "min_trade_gas_multiple", "gas_ceiling_per_action_usd",
                    "gas_ceiling_share_of_protected", "gas_ceiling_per_day_usd", "privileged_tools", "approval_ttl_ticks",
                    "max_sandwich_loss_bps", "threat_move_bps", "threat_window_blocks")


class InferenceSection(BaseModel):
    model_config = {"extra": "forbid"}

    @model_validator(mode="before")
    @classmethod
    def _drop_retired_keys(cls, data: Any) -> Any:
        """`heartbeat_seconds` is no longer read (activities heartbeat at their boundary); configs,
        workflow inputs and histories written before still decode, the key is dropped."""
        if isinstance(data, dict) and "heartbeat_seconds" in data:
            data = {k: v for k, v in data.items() if k != "heartbeat_seconds"}
        return data

    provider: str = Field(default="offline", pattern=r"^(offline|anthropic)$")
    api_key_env: str = "ANTHROPIC_API_KEY"
    t1_model: str = "claude-haiku-4-5"
    t2_model: str = "claude-sonnet-4-6"
    # Optional tuning; None = the defaults of golem.inference.config.InferenceConfig, which validates
    # these (and every model's price) when the worker or `golem doctor` starts.
    t2_ceiling_model: str | None = None
    evaluator_model: str | None = None
    prices: dict[str, dict[str, float]] | None = None  # model → {input, output, cache_write, cache_read} USD/MTok
    max_output_tokens_t1: int | None = None
    max_output_tokens_t2: int | None = None
    timeout_seconds: float | None = None
    allocations_t1: dict[str, int] | None = None
    allocations_t2: dict[str, int] | None = None
    tool_rounds_t1: int | None = None  # read/speculate rounds before a T1 decision (0: decide in one call)
    tool_rounds_t2: int | None = None  # the same at T2
    tool_loop_max_tokens: int | None = None  # tokens over a whole tool loop; past it the next call must decide
    offline_speculate: bool | None = None  # the offline deliberator tries each swap it proposes (record only)
    conversation_tail: int | None = None
    # "none": the provider bills the API key; "x402": the golem pays each call from its wallet (docs/how-to/x402.md)
    payment: str = Field(default="none", pattern=r"^(none|x402)$")
    gateway_url: str = "http://127.0.0.1:8402"  # the paid inference gateway (x402); `golem run` starts it there
    max_payment_usd: float = Field(default=0.25, gt=0.0)  # x402: refuse a quote above this for one call
    gateway_upstream_url: str = "https://api.anthropic.com"  # where the gateway forwards paid calls
    gateway_price_markup: float = Field(default=1.0, ge=1.0, le=10.0)  # the gateway's price over list price


class GatingSection(BaseModel):
    """`[gating]`: learned gating after the cold start (docs/design/gate.md#learned-gating)."""

    model_config = {"extra": "forbid"}
    cold_start_ticks: int = Field(default=100, ge=0)  # "after the cold-start period (~100 ticks)"
    hedge_eta: float = Field(default=0.1, gt=0.0, le=5.0)
    hedge_discount: float = Field(default=0.99, gt=0.0, le=1.0)  # 0.99, ~69-round half-life
    arousal_shift: float = Field(default=0.2, ge=0.0, lt=1.0)  # base × (1 − 0.2·arousal)
    dominance_bias: float = Field(default=0.1, ge=0.0, le=0.5)  # t + daimon_bias × 0.1
    thompson_decay: float = Field(default=0.99, gt=0.0, le=1.0)  # per judged tick, toward the priors
    boundary_margin: float = Field(default=0.05, gt=0.0, lt=0.5)
    epsilon: float = Field(default=0.2, ge=0.0, le=1.0)  # 0.2 decaying to 0.01 at 0.999
    epsilon_min: float = Field(default=0.01, ge=0.0, le=1.0)
    epsilon_decay: float = Field(default=0.999, gt=0.0, le=1.0)
    feedback_horizon_ticks: int = Field(default=1, ge=1, le=20)  # "the next Theta window"
    event_pe: float = Field(default=0.3, gt=0.0, le=1.0)  # significant event (the base threshold)
    severe_pe: float = Field(default=0.6, gt=0.0, le=1.0)  # needs T2 (2 × base, the cold-start T2 line)
    decision_log_len: int = Field(default=120, ge=10, le=1000)  # ≥ delta_theta_ticks + horizon
    # Prediction error added per anomaly at topology modifier 1.0 (it only adds). 0.05 = the per-anomaly weight;
    # 0 turns the topology term off (docs/design/gate.md#prediction-error).
    topology_weight: float = Field(default=0.05, ge=0.0, le=0.2)
    # "adaptive": System 1 gates every tick. "always": no System 1 gating — every tick is at least T1, so
    # STRATEGY.md's rules are applied every tick (the backtest's rules baseline); the daily budget cap still holds.
    mode: str = Field(default="adaptive", pattern=r"^(adaptive|always)$")


class DecisionCacheSection(BaseModel):
    """`[decision_cache]`: System 2 → System 1 distillation."""

    model_config = {"extra": "forbid"}
    ttl_seconds: float = Field(default=1800.0, gt=0)  # 15–45 minutes
    min_consistency: int = Field(default=3, ge=1)  # "analyzed 3+ times with consistent outputs"
    max_drift: float = Field(default=0.20, gt=0)  # drift > 20 % invalidates
    max_entries: int = Field(default=32, ge=1, le=256)  # keeps GolemState small


class OracleSection(BaseModel):
    """`[oracle]`: with the oracle off, prediction error uses the signal-only form."""

    model_config = {"extra": "forbid"}
    enabled: bool = True


# The embedders golem.grimoire.store.embeddings.make_embedder can build (its EMBEDDERS table describes them).
EMBEDDER_CHOICES = ("wordllama", "wordllama-64", "all-minilm-l6-v2", "all-minilm-l6-v2-onnx", "nomic-embed-text-v1.5")


class GrimoireSection(BaseModel):
    """`[grimoire]`: the embedding model. Changing it re-embeds every stored vector."""

    model_config = {"extra": "forbid"}
    embedder: str = "wordllama"  # offline, bundled; nomic-embed-text-v1.5 needs `pip install 'golem[nomic]'`
    model_cache_dir: str | None = None  # fastembed cache holding the nomic model (relative: to the golem home)
    # Set: retrieval also abstains when no candidate's cosine reaches it; unset: the calibrated decision alone.
    semantic_floor: float | None = Field(default=None, ge=0.0, le=1.0)
    # Memory off (a backtest baseline, or an owner who wants a golem without learned knowledge): retrieval
    # returns nothing and delta consolidation admits nothing; episodes and records are still written.
    memory: bool = True

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, v: str) -> str:
        if v not in EMBEDDER_CHOICES:
            raise ValueError(f"unknown embedder {v!r}: use one of {', '.join(EMBEDDER_CHOICES)}")
        return v


class RetentionSection(BaseModel):
    """`[retention]`: how long the data dir keeps per-tick files. Older decision records and trace
    lines are compacted into one gzipped JSON-lines archive per day (`golem show` still reads them); the
    Temporal dev server keeps closed workflow histories `temporal_days`."""

    model_config = {"extra": "forbid"}
    days: float = Field(default=14.0, gt=0)  # cycles/cycle-*.json, outcomes/*.json and traces kept as files
    temporal_days: int = Field(default=3, ge=1)  # the namespace's retention of closed workflows (the server's minimum is 1 day)


class LearningSection(BaseModel):
    """[learning]: a learned rule's trial on the golem's own recent rows, with and without it (docs/design/learning.md)."""

    model_config = {"extra": "forbid"}
    trial: bool = True  # false: learned rules are promoted by the Curator's votes alone, unmeasured
    trial_rows: int = Field(default=60, ge=5, le=2000)  # the last N recorded ticks a trial replays (bounds its time)
    trial_warmup_rows: int = Field(default=20, ge=0, le=500)  # rows replayed before the judged window (probes and regime warm up)
    trial_every: int = Field(default=1, ge=1)  # re-judge promoted rules every k delta cycles (an ADD is judged at once)
    settle_ticks: int = Field(default=10, ge=1, le=1000)  # an acted tick's outcome is settled this many ticks later
    trial_timeout_seconds: float = Field(default=360.0, gt=0)  # the cycle's time for trials (the delta cycle has 10 min)
    sortino_margin: float = Field(default=0.0, ge=0.0)  # Sortino per tick must beat the run without the rule by more
    drawdown_tolerance: float = Field(default=0.0, ge=0.0)  # max drawdown may be worse by at most this (fraction)
    health_factor_tolerance: float = Field(default=0.0, ge=0.0)  # min HF may be lower by at most this
    regime_window_ticks: int = Field(default=50, ge=5, le=2000)  # before/after window of a learning change's evaluation
    regime_min_matched: int = Field(default=10, ge=3)  # matched ticks a side before a change is judged
    regime_rollback: bool = True  # false: a change found harmful in matched regimes is reported, not rolled back


class ViabilitySection(BaseModel):
    """[viability]: a strategy judged by what it achieved, at each delta cycle (docs/design/safety.md#unviable-from-experience)."""

    model_config = {"extra": "forbid"}
    enabled: bool = True  # false: only the validation pipeline (before trading, on a new STRATEGY.md) judges viability
    window_ticks: int = Field(default=100, ge=10, le=5000)  # the recorded ticks each delta cycle judges
    min_cost_usd: float = Field(default=5.0, ge=0.0)  # gas + inference below this is never "costs exceed returns"
    min_trades: int = Field(default=3, ge=1)  # earning trades (not protective) needed before returns are judged
    thin_liquidity_events: int = Field(default=3, ge=1)  # swaps clipped/refused for price impact or slippage
    refusals: int = Field(default=5, ge=1)  # proposals the cage refused in the window...
    refusal_share: float = Field(default=0.5, gt=0.0, le=1.0)  # ...and their share of all proposals


class AlertsSection(BaseModel):
    """[alerts]: where the heartbeat-monitor's batched ProbeAlerts go besides the Event Fabric."""

    model_config = {"extra": "forbid"}
    webhook_url: str = ""  # POSTed one JSON batch per window; "" = events only

    @field_validator("webhook_url")
    @classmethod
    def _http(cls, v: str) -> str:
        if v and not v.startswith(("http://", "https://")):
            raise ValueError(f"webhook_url {v!r} must be an http:// or https:// URL (or \"\" for none)")
        return v


class DreamSection(BaseModel):
    """[dream]: the DreamScheduler and the dream cycle's phases. `[clock] dream_every_ticks` stays the
    interval at which a calm golem dreams; urgency (golem.cognition.dream_scheduler) brings a troubled one's forward."""

    model_config = {"extra": "forbid"}
    min_gap_ticks: int = Field(default=20, ge=1)  # never dream again sooner than this
    budget_seconds: float = Field(default=300.0, gt=0.0)  # the cycle stops between phases past this (ticking resumes)
    replay_count: int = Field(default=10, ge=0)  # NREM: episodes replayed
    rem_scenarios: int = Field(default=2, ge=0)  # REM: source episodes imagined on forks (up to 3 scenarios each)
    rehearse_threats: bool = True  # Tier 1 threat rehearsal (live-chain checks + a fork per threat)
    forks: bool = True  # false: no Anvil forks (live-chain checks only, e.g. a node that cannot be forked)


class LifespanSection(BaseModel):
    """[lifespan]: the three mortality clocks and death."""

    model_config = {"extra": "forbid"}
    # Economic clock: the golem's credit (USD) for inference and gas over its life; economic vitality is the
    # fraction left, runway = credit / burn. None: no credit clock (then the daily budget alone weighs on it).
    credits_usd: float | None = Field(default=None, gt=0.0)
    # The projected runway ((wallet USDC + credit) / burn) in days below which the economic clock falls (× runway /
    # runway_days). The heartbeat monitor alerts below a 30-day runway. None: off.
    runway_days: float | None = Field(default=None, gt=0.0)
    # Stochastic clock: the Hayflick limit (ticks lived) and a per-tick hazard, seeded (replayable).
    hayflick_ticks: int | None = Field(default=None, ge=1)
    hazard_per_tick: float = Field(default=0.0, ge=0.0, le=1.0)
    hazard_seed: int = 0
    terminal_ticks: int = Field(default=5, ge=1)  # Terminal this many ticks in a row: death
    epistemic_ema: float = Field(default=0.1, gt=0.0, le=1.0)  # weight of one tick's prediction accuracy
    mortal: bool = True  # false: the clocks run and phases take effect, but nothing triggers death
    settlement_ticks: int = Field(default=5, ge=0, le=20)  # unwind ticks at most during Settlement
    reflection: str = Field(default="offline", pattern=r"^(offline|claude)$")  # the death reflection's author


class ExtensionsSection(BaseModel):
    """[extensions]: optional extensions this golem switches off."""

    model_config = {"extra": "forbid"}
    disabled: list[str] = Field(default_factory=list)


class CladeSection(BaseModel):
    """[clade]: the golems of one owner sharing a pheromone field and their Grimoire entries (docs/how-to/clade.md).
    Off by default."""

    model_config = {"extra": "forbid"}
    id: str = Field(default="", pattern=r"^$|^[a-z0-9][a-z0-9-]{0,40}$")  # the clade's name; "" = a lone golem
    threat_half_life_s: float = Field(default=3600.0, gt=0, le=30 * 86400)  # how fast a threat we lay fades
    opportunity_half_life_s: float = Field(default=900.0, gt=0, le=30 * 86400)  # ... an opportunity
    congestion_half_life_s: float = Field(default=300.0, gt=0, le=30 * 86400)  # ... congestion (gas)
    read_timeout_s: float = Field(default=2.0, gt=0, le=30)  # observe waits this long for the field, then goes on
    share: bool = True  # exchange Grimoire entries with the siblings (docs/how-to/clade.md#the-entry-exchange)
    sandbox_ticks: int = Field(default=50, ge=1, le=5000)  # own recent ticks a sibling's entry is replayed on
    quarantine_ticks: int = Field(default=1440, ge=1)  # an entry without consensus this long is rejected


# The [temporal] keys, each also settable as GOLEM_TEMPORAL_<KEY> (workers/client.py applies the overrides).
TEMPORAL_PATH_KEYS = ("server_ca_cert", "client_cert", "client_key")


class TemporalSection(BaseModel):
    """[temporal]: the Temporal frontend this host's worker and CLI connect to (docs/how-to/fleet.md); each key can be
    overridden by GOLEM_TEMPORAL_<KEY> (GOLEM_TEMPORAL_ADDRESS, ...), and --address overrides the address. Where to
    connect, not how the golem behaves: kept out of the config version and of workflow payloads."""

    model_config = {"extra": "forbid"}
    # host:port of the frontend; unset: the dev server `golem run` starts (127.0.0.1:7233)
    address: str | None = None
    namespace: str = Field(default="default", min_length=1)  # Temporal Cloud: "namespace.account-id"
    # TLS on/off; unset: on when a certificate or an API key is configured; true without a CA: the system's roots
    tls: bool | None = None
    server_ca_cert: str | None = None  # PEM of the CA that signed the frontend's certificate (relative: to golem.toml)
    server_name: str | None = None  # the name the frontend's certificate carries, when not the address' host
    client_cert: str | None = None  # mTLS: this host's PEM certificate ...
    client_key: str | None = None  # ... and its PEM private key (both or neither)
    # Temporal Cloud API key: the NAME of the environment variable holding it; the key never goes in this file
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")

    @field_validator("address")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if "://" in v:
            raise ValueError(f"[temporal] address {v!r}: write host:port without a scheme (TLS is the tls key)")
        host, _, port = v.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"[temporal] address {v!r} is not host:port (e.g. \"temporal.internal:7233\")")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "TemporalSection":
        if self.client_key and not self.client_cert:
            raise ValueError("[temporal] client_key is set without client_cert: mTLS needs both (or remove client_key)")
        if self.client_cert and not self.client_key:
            raise ValueError("[temporal] client_cert is set without client_key: mTLS needs both (or remove client_cert)")
        if self.tls is False:
            given = [k for k in (*TEMPORAL_PATH_KEYS, "server_name", "api_key_env") if getattr(self, k)]
            if given:
                raise ValueError(f"[temporal] tls = false but {', '.join(given)} set: those need TLS (an API key would "
                                 "travel in clear); set tls = true or remove them")
            if self.address and self.address.rpartition(":")[0].endswith(".tmprl.cloud"):
                raise ValueError(f"[temporal] tls = false but address {self.address} is Temporal Cloud, which only "
                                 "speaks TLS: set tls = true (with client_cert/client_key or api_key_env)")
        return self


class WorkerSection(BaseModel):
    """[worker]: how this host's worker process runs its golems (docs/how-to/fleet.md#how-many-golems-per-worker);
    read by `golem worker --host` from its --home's golem.toml. How a process runs, not how a golem behaves: kept out
    of the config version and of workflow payloads."""

    model_config = {"extra": "forbid"}
    # threads for the synchronous activities (chain reads, SQLite, LanceDB), and the activities the worker takes at
    # once (the rest wait on the server, where bench/fleet.py sees them as queue time); 64 measured no better at 50
    activity_threads: int = Field(default=16, ge=1, le=1024)
    max_cached_workflows: int = Field(default=1000, ge=0)  # workflows kept in memory (two per ticking golem)
    idle_seconds: float = Field(default=600.0, gt=0)  # a golem's services close this long after its last activity
    max_open_golems: int = Field(default=128, ge=1)  # golems with open services at once; least recently used closes


class GolemConfig(BaseModel):
    model_config = {"extra": "forbid"}
    golem: GolemSection = Field(default_factory=GolemSection)
    chain: ChainSection = Field(default_factory=ChainSection)
    clock: ClockSection = Field(default_factory=ClockSection)
    heartbeat: HeartbeatSection = Field(default_factory=HeartbeatSection)
    probes: ProbeThresholds = Field(default_factory=ProbeThresholds)
    wake: WakeSection = Field(default_factory=WakeSection)
    policy: PolicySection = Field(default_factory=PolicySection)
    inference: InferenceSection = Field(default_factory=InferenceSection)
    gating: GatingSection = Field(default_factory=GatingSection)
    oracle: OracleSection = Field(default_factory=OracleSection)
    decision_cache: DecisionCacheSection = Field(default_factory=DecisionCacheSection)
    grimoire: GrimoireSection = Field(default_factory=GrimoireSection)
    retention: RetentionSection = Field(default_factory=RetentionSection)
    dream: DreamSection = Field(default_factory=DreamSection)
    lifespan: LifespanSection = Field(default_factory=LifespanSection)
    extensions: ExtensionsSection = Field(default_factory=ExtensionsSection)
    learning: LearningSection = Field(default_factory=LearningSection)
    viability: ViabilitySection = Field(default_factory=ViabilitySection)
    clade: CladeSection = Field(default_factory=CladeSection)
    # Read by the worker from golem.toml; kept out of the config version and of workflow payloads (exclude), so
    # adding the section changed no version hash and no recorded history. A new URL needs a worker restart.
    alerts: AlertsSection = Field(default_factory=AlertsSection, exclude=True)
    # Where this host connects (workers/client.py), excluded the same way: a fleet's hosts differ in it.
    temporal: TemporalSection = Field(default_factory=TemporalSection, exclude=True)
    # How the host's worker process runs (threads, caches), excluded the same way.
    worker: WorkerSection = Field(default_factory=WorkerSection, exclude=True)

    @model_serializer(mode="wrap")
    def _omit_default_sections(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Sections added after config versions existed are left out while at their defaults, so adding one
        changed no version hash and no recorded payload (an absent section decodes to its defaults)."""
        data = handler(self)
        if isinstance(data, dict):
            for name in LATE_SECTIONS:
                if name in data and getattr(self, name) == type(getattr(self, name))():
                    del data[name]
        return data


LATE_SECTIONS = ("wake", "learning", "viability", "clade")


def read_config_table(path: str | Path) -> dict[str, Any]:
    """golem.toml as a TOML table, its relative paths (golem.home, chain.address_book, [temporal]'s certificates)
    resolved against the file's folder, not yet validated: what `golem config apply` sends and the workflow's validator checks."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{p}: not found. Copy examples/golem-home/golem.toml and edit it.") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML ({e}). Fix the syntax at that line.") from None
    golem = raw.setdefault("golem", {}) if isinstance(raw.get("golem", {}), dict) else None
    if golem is not None:
        home = golem.get("home", GolemSection.model_fields["home"].default)
        if isinstance(home, str) and not Path(home).is_absolute():
            golem["home"] = str((p.parent / home).resolve())
    chain = raw.get("chain")
    book = chain.get("address_book") if isinstance(chain, dict) else None
    if isinstance(chain, dict) and isinstance(book, str) and book != "embedded" and not Path(book).is_absolute():
        chain["address_book"] = str((p.parent / book).resolve())
    temporal = raw.get("temporal")
    if isinstance(temporal, dict):
        for key in TEMPORAL_PATH_KEYS:
            value = temporal.get(key)
            if isinstance(value, str) and value and not Path(value).is_absolute():
                temporal[key] = str((p.parent / value).resolve())
    return raw


def parse_config_table(raw: dict[str, Any], source: str = "golem.toml") -> GolemConfig:
    """Validate a golem.toml table; the error names every bad key ([section.key]) and the fix."""
    try:
        return GolemConfig.model_validate(raw)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            key = ".".join(str(x) for x in err["loc"])
            hint = "unknown key: remove it or check its spelling" if err["type"] == "extra_forbidden" else err["msg"]
            lines.append(f"  [{key}] {hint}")
        raise ConfigError(f"{source}: invalid configuration:\n" + "\n".join(lines)) from None


def load_config(path: str | Path) -> GolemConfig:
    """Read and validate golem.toml; errors name the key and the fix."""
    return parse_config_table(read_config_table(path), str(path))
