"""Durable decision state held by GolemWorkflow: what the golem decided travels here; bulk state stays on disk."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from golem.models.approvals import PrivilegedRequest
from golem.models.strategy_runs import StrategyRun
from golem.models.enums import BehavioralPhase, HeartbeatState, MarketRegime, Tier
from golem.models.interventions import FollowUp, RejectedIntervention, Steer
from golem.models.life import LifeState
from golem.models.observation import ProbeResult

PRICE_HISTORY_LEN = 64  # enough for the regime's 20-period SMA plus slack
GAS_HISTORY_LEN = 120  # ~1 hour of theta ticks at 30 s, for the gas probe's 1-hour average


class PADVector(BaseModel):
    """Pleasure–Arousal–Dominance affect, each in [-1, 1]."""

    pleasure: float = 0.0
    arousal: float = 0.0
    dominance: float = 0.0


class VitalityState(BaseModel):
    """Three mortality clocks; composite = economic × epistemic × stochastic."""

    economic: float = 1.0
    epistemic: float = 1.0
    stochastic: float = 1.0

    @property
    def composite(self) -> float:
        return self.economic * self.epistemic * self.stochastic


class LifeUpdate(BaseModel):
    """What one tick's after_turn chain hands back to GolemWorkflow (TickResult.life)."""

    life: LifeState
    vitality: VitalityState
    phase: BehavioralPhase
    pad: PADVector
    transition: str | None = None  # "stable→conservation" when the phase changed this tick


class FsmState(BaseModel):
    """Heartbeat FSM position with its interrupt substate (docs/design/tick.md#steers)."""

    state: HeartbeatState = HeartbeatState.IDLE
    substate: str = "Normal"  # Normal | Interrupted{steer_id} | CancelPending{reason} | Restricted{constraint}
    detail: str = ""
    entered_at: str | None = None  # ISO time the tick entered this step: status shows how long it is in it


class ChainHealth(BaseModel):
    """Can the golem read its chain? Fed by every tick's observe step (golem.cognition.chain_health)."""

    last_good_read_at: str | None = None  # when an observe last read the chain
    last_good_tick: int | None = None
    errors_in_row: int = 0  # ticks in a row whose observe could not read the chain
    last_error: str | None = None  # the root cause of the newest failed read
    alert: str | None = None  # set once errors_in_row reaches the alert threshold; cleared by a good read


class TickSummary(BaseModel):
    """The few facts of a finished tick the golem keeps in memory."""

    tick: int
    tier: Tier | None = None
    regime: MarketRegime | None = None
    prediction_error: float | None = None
    actions: int = 0
    failed: bool = False
    error: str | None = None
    workflow_id: str = ""
    run_id: str = ""


# ---- System 1 learned and fast state (docs/design/gate.md) ----
# Defined here because GolemState carries them; the formulas live in golem/cognition/.

# The five expert signals Hedge combines (docs/design/gate.md#learned-gating): oracle residual, regime surprise,
# source inconsistency and risk severity, plus the prediction error.
GATING_EXPERTS = ("oracle_residual", "regime_surprise", "source_inconsistency", "risk_severity", "prediction_error")
AROUSAL_BUCKETS = ("low", "medium", "high")  # arousal: < 0.3, < 0.7, ≥ 0.7


def _uniform() -> list[float]:
    return [1.0 / len(GATING_EXPERTS)] * len(GATING_EXPERTS)


class HedgeState(BaseModel):
    """Discounted Hedge over the expert signals: weights always a probability distribution."""

    experts: list[str] = Field(default_factory=lambda: list(GATING_EXPERTS))
    weights: list[float] = Field(default_factory=_uniform)
    cumulative_loss: list[float] = Field(default_factory=lambda: [0.0] * len(GATING_EXPERTS))
    rounds: int = 0


class BetaBoundary(BaseModel):
    """Beta belief about where one tier boundary sits on the composite-score axis [0, 1]."""

    alpha: float
    beta: float

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)


def _boundary_priors() -> list[BetaBoundary]:
    # heartbeat ThompsonThresholds::new: T2/T1 ~0.8, T1/T0 ~0.5, T0/suppress ~0.2
    return [BetaBoundary(alpha=8.0, beta=2.0), BetaBoundary(alpha=5.0, beta=5.0), BetaBoundary(alpha=2.0, beta=8.0)]


class ThompsonBoundaries(BaseModel):
    """[0] T2/T1 split, [1] T1/T0 split, [2] T0/suppress split."""

    boundaries: list[BetaBoundary] = Field(default_factory=_boundary_priors)


class EpsilonGreedyState(BaseModel):
    """Shadow baseline over the arms T0/T1/T2 (never routes; its would-be choices are logged)."""

    epsilon: float = 0.2
    arm_means: list[float] = Field(default_factory=lambda: [0.0, 0.0, 0.0])
    arm_counts: list[int] = Field(default_factory=lambda: [0, 0, 0])


class GatingDecision(BaseModel):
    """One tick's gate as the learner needs it later; the outcome fields are filled when the tick folds."""

    tick: int
    mode: str = "fixed"  # fixed (cold start) | learned | forced
    gated_tier: Tier = Tier.T0  # the gate's choice before the budget cap
    tier: Tier = Tier.T0  # what ran
    prediction_error: float = 0.0
    signals: list[float] = Field(default_factory=list)  # GATING_EXPERTS order
    composite: float = 0.0
    boundaries: list[float] = Field(default_factory=list)  # Thompson sample after arousal / dominance shifts
    arousal_bucket: str = "low"
    learned_tier: Tier | None = None  # what learned gating chose (also during cold start, in shadow)
    shadow_tier: Tier | None = None  # epsilon-greedy's would-be choice
    # outcome, filled at fold
    regime: MarketRegime | None = None
    regime_changed: bool = False
    actions: int = 0
    failed: bool = False


class GatingStats(BaseModel):
    judged: int = 0
    correct: int = 0  # the tier that ran was the tier the window needed
    unnecessary: int = 0  # escalated more than needed (wasted inference)
    insufficient: int = 0  # escalated less than needed (missed event)
    learned_correct: int = 0  # learned gating's choice (live or shadow) was right
    shadow_correct: int = 0  # epsilon-greedy's would-be choice was right


class LearnedGatingState(BaseModel):
    hedge: HedgeState = Field(default_factory=HedgeState)
    thompson: dict[str, ThompsonBoundaries] = Field(
        default_factory=lambda: {b: ThompsonBoundaries() for b in AROUSAL_BUCKETS}
    )
    baseline: EpsilonGreedyState = Field(default_factory=EpsilonGreedyState)
    log: list[GatingDecision] = Field(default_factory=list)  # bounded; consumed at delta feedback
    judged_through_tick: int = -1  # ticks ≤ this already gave feedback
    feedback_rounds: int = 0
    stats: GatingStats = Field(default_factory=GatingStats)
    inherited_from: str | None = None


class Prediction(BaseModel):
    """A falsifiable expectation the gamma clock resolves (Adaptive Clock, "resolve pending predictions")."""

    kind: str  # price | health | gas
    subject: str  # "pool" or a position id
    expected: float
    tolerance: float  # |relative residual| (price, gas) or |absolute residual| (health) above this is a violation
    made_tick: int
    made_at: float  # unix seconds (workflow time)
    due_at: float


class GammaState(BaseModel):
    """Fast state kept by the gamma pulse: pending predictions and residual statistics per kind."""

    pending: list[Prediction] = Field(default_factory=list)
    residual_bias: dict[str, float] = Field(default_factory=dict)  # EMA of signed residual (ResidualCorrector)
    residual_abs: dict[str, float] = Field(default_factory=dict)  # EMA of |residual|
    resolved: int = 0
    violations: int = 0
    last_violations: int = 0
    interval_seconds: float = 15.0


class CachedDecision(BaseModel):
    """One decision cache entry (docs/design/gate.md#decision-cache)."""

    pattern_hash: str
    mental_models_applied: list[str] = Field(default_factory=list)
    consistent_action: str
    consistency_count: int = 1
    last_validated: float = 0.0  # unix seconds
    expires_at: float = 0.0
    conditions: dict[str, float] = Field(default_factory=dict)
    cache_tick: int = 0
    cache_regime: str = ""
    playbook_revision: int = 0
    context_policy_revision: int = 0
    # the rules behind the cached actions (RuleApplied dicts), so a learned rule reused by System 1 is credited
    rules_applied: list[dict[str, Any]] = Field(default_factory=list)


class DecisionCacheState(BaseModel):
    entries: list[CachedDecision] = Field(default_factory=list)
    lookups: int = 0
    hits: int = 0
    invalidations: dict[str, int] = Field(default_factory=dict)  # reason → count

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0


class PendingTick(BaseModel):
    """A tick trigger waiting while another tick runs (docs/design/gate.md#backpressure)."""

    trigger: str  # theta | steer | gamma
    enqueued_at: float = 0.0
    probes: list[ProbeResult] = Field(default_factory=list)


class TickQueue(BaseModel):
    pending: list[PendingTick] = Field(default_factory=list)
    carried_probes: list[ProbeResult] = Field(default_factory=list)  # merged from dropped ticks
    dropped: int = 0
    warnings: int = 0
    dropped_during_dream: int = 0  # of `dropped`: triggers that fell due while the golem dreamt


class DeferredIntent(BaseModel):
    """An action the gas gate deferred (not dropped): it comes back on a later tick when gas falls under its recent
    median or its urgency rises (golem.safety.urgency; docs/design/spending.md). One per tool."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    since_tick: int  # the tick it was first deferred on
    last_tick: int  # the tick it was last deferred on
    reason: str = ""
    gas_gwei: float = 0.0  # the gas price it was deferred at
    # what deferred it, which says what releases it: "price" (gas above its median, a spike, over a ceiling: gas must
    # fall) or "budget" (the day's gas is spent: a new day); and its urgency then (a rise releases it too)
    cause: str = "price"
    day: str = ""  # the UTC day of the tick it was deferred on (a "budget" intent waits for another)
    level: str = "routine"


class GolemState(BaseModel):
    golem_id: str
    tick: int = 0  # number of the next tick to run
    regime: MarketRegime = MarketRegime.UNKNOWN
    pad: PADVector = Field(default_factory=PADVector)
    vitality: VitalityState = Field(default_factory=VitalityState)
    phase: BehavioralPhase = BehavioralPhase.THRIVING
    strategy_confidence: float = 0.5
    # Cost ledger: spend resets at UTC midnight. Gas (its own daily partition) is counted over
    # the same UTC day, so status shows both for one "today"; the gas gate itself reads the risk store.
    spend_day: str = ""
    daily_spend_usd: float = 0.0  # inference
    daily_gas_usd: float = 0.0
    total_inference_usd: float = 0.0
    total_gas_usd: float = 0.0
    hf_restored_total: float = 0.0  # health factor the golem's ticks restored (after − before, where it rose)
    gas_restoring_usd: float = 0.0  # gas paid on those ticks (status: gas per 1.0 of HF restored)
    # Interventions
    pending_steers: list[Steer] = Field(default_factory=list)
    pending_followups: list[FollowUp] = Field(default_factory=list)
    seen_intervention_ids: list[str] = Field(default_factory=list)  # dedupe (signals are at-least-once)
    rejected_interventions: list[RejectedIntervention] = Field(default_factory=list)
    # Rolling histories for probes and regime detection
    price_history: list[float] = Field(default_factory=list)
    gas_history: list[float] = Field(default_factory=list)
    last_tvl: float | None = None
    last_oracle_price: float | None = None
    position_health: dict[str, float] = Field(default_factory=dict)
    # The min health factor of the last ticks with a loan, oldest first (golem.cognition.lines: the forecast)
    health_history: list[float] = Field(default_factory=list)
    deferred_intents: list[DeferredIntent] = Field(default_factory=list)  # deferred by the gas gate, waiting
    # Privileged requests the model made (golem.safety.approvals): open ones, then the last decided ones for status
    approvals: list[PrivilegedRequest] = Field(default_factory=list)
    range_bound_run: int = 0
    # Loop bookkeeping
    theta_seconds: float = 60.0
    last_delta_tick: int = 0
    last_dream_tick: int = 0
    consecutive_failures: int = 0
    recent_ticks: list[TickSummary] = Field(default_factory=list)  # bounded tail
    failed_ticks: list[int] = Field(default_factory=list)  # bounded tail
    dreaming: bool = False
    # System 1 (golem/cognition): learned gating, gamma fast state, decision cache, tick backpressure
    learned_gating: LearnedGatingState = Field(default_factory=LearnedGatingState)
    gamma: GammaState = Field(default_factory=GammaState)
    # The cache itself lives on the worker (golem.cognition.decision_cache.DecisionCacheStore); this
    # field only holds what a state from before that carried, cleared at the first tick that reports stats.
    decision_cache: DecisionCacheState = Field(default_factory=DecisionCacheState)
    decision_cache_stats: dict[str, Any] = Field(default_factory=dict)  # hit_rate_report after the last decide
    tick_queue: TickQueue = Field(default_factory=TickQueue)
    chain: ChainHealth = Field(default_factory=ChainHealth)
    # The owner's stop buttons (after Freqtrade's /stopentry, /stop): paused = no new ticks, state kept;
    # entries_stopped = no new positions (validate blocks what opens exposure), risk-reducing actions and steers run.
    paused: bool = False
    entries_stopped: bool = False
    control_note: str = ""  # the last stop-button change: what, when, why
    # The last dream cycle's quality figures and what it did; `golem dreams` reads the journals.
    dream_yield: float | None = None
    threat_coverage: float | None = None
    last_dream: str = ""
    dream_tags: int = 0  # episodes the curator tagged dream_priority: high, open at the last delta
    # The lifespan's clocks and the daimon's markers (golem.life); `certificate` once dead.
    life: LifeState = Field(default_factory=LifeState)
    # Each strategy file under strategies/: waiting, active or complete (golem.inference.strategies)
    strategy_runs: list[StrategyRun] = Field(default_factory=list)

    @property
    def last_price(self) -> float | None:
        """The newest price in price_history (None when empty). Read through __dict__, so a step whose slice
        carries only the tail (`price_history[-1:]`) can read it while price_history itself stays refused."""
        history = self.__dict__.get("price_history") or []
        return history[-1] if history else None


# ---- state slices ------------------------------------------------------------
# Every activity input of a tick used to carry the whole GolemState; now each step gets the fields it reads.
# The lists name what each step's code reads (golem.cognition.*, golem.inference.*, golem.safety.*,
# golem.cognition.reflect); the activity rebuilds the slice (golem.models.slices), which refuses to read any other
# field, so a new read shows up as a failing test instead of a silently defaulted value.
ALWAYS_IN_SLICE = frozenset({"golem_id", "tick"})
_SPEND = {"spend_day", "daily_spend_usd"}
# "<list field>[-1:]": only the newest element goes on the wire and the field itself stays unreadable; the
# step reads it through a property (price_history → GolemState.last_price).
LAST_PRICE = "price_history[-1:]"
STEP_STATE_FIELDS: dict[str, frozenset[str]] = {
    "observe": frozenset({"price_history", "gas_history", "last_oracle_price", "last_tvl", "range_bound_run",
                          "regime", "pending_steers", "strategy_runs", *_SPEND}),
    "analyze": frozenset({"pending_steers", "pending_followups", "position_health", LAST_PRICE, "regime"}),
    "gate": frozenset({"pad", "pending_steers", "pending_followups", "strategy_confidence", "vitality",
                       "learned_gating", "regime", "phase", LAST_PRICE, "position_health", "health_history",
                       "deferred_intents", "gas_history", "approvals",
                       *_SPEND}),
    "retrieve": frozenset({"pad", "pending_steers", "pending_followups"}),
    "decide": frozenset({LAST_PRICE, "phase", "pad", "pending_steers", "strategy_confidence", "deferred_intents", "approvals",
                         "vitality", "regime", *_SPEND}),
    "simulate": frozenset(),
    "validate": frozenset({"phase", "pending_steers", "daily_gas_usd", "entries_stopped", "life", LAST_PRICE, "approvals",
                           "health_history", "gas_history", *_SPEND}),
    "execute": frozenset(),
    "verify": frozenset({"regime"}),
    "reflect": frozenset({"pad", "phase", "vitality", "regime", "rejected_interventions", "daily_gas_usd", "life",
                          "gamma", "position_health", "deferred_intents", LAST_PRICE, *_SPEND}),
}
# What ThetaTickWorkflow itself reads (steers, follow-ups, the phase search attribute), plus every step's.
TICK_STATE_FIELDS: frozenset[str] = frozenset(
    {"pending_steers", "pending_followups", "phase"}.union(*STEP_STATE_FIELDS.values()) | ALWAYS_IN_SLICE
) - {LAST_PRICE}  # observe reads price_history whole


TICK_SLICE = "tick"  # the name of TICK_STATE_FIELDS on the wire


def slice_fields(step: str) -> frozenset[str]:
    """The state fields of a named slice: a step's, or TICK_SLICE's (the tick's whole input)."""
    if step == TICK_SLICE:
        return TICK_STATE_FIELDS
    return STEP_STATE_FIELDS[step] | ALWAYS_IN_SLICE
