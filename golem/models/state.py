"""Durable decision state held by GolemWorkflow (ARCHITECTURE "State ownership")."""

from __future__ import annotations

from pydantic import BaseModel, Field

from golem.models.enums import BehavioralPhase, HeartbeatState, MarketRegime, Tier
from golem.models.interventions import FollowUp, RejectedIntervention, Steer

PRICE_HISTORY_LEN = 64  # enough for the 20-period SMA of §S9 plus slack
GAS_HISTORY_LEN = 120  # ~1 hour of theta ticks at 30 s, for the gas probe's 1-hour average


class PADVector(BaseModel):
    """Pleasure–Arousal–Dominance affect, each in [-1, 1]."""

    pleasure: float = 0.0
    arousal: float = 0.0
    dominance: float = 0.0


class VitalityState(BaseModel):
    """Three mortality clocks; composite = economic × epistemic × stochastic (runtime-extensions)."""

    economic: float = 1.0
    epistemic: float = 1.0
    stochastic: float = 1.0

    @property
    def composite(self) -> float:
        return self.economic * self.epistemic * self.stochastic


class FsmState(BaseModel):
    """Heartbeat FSM position with the §S7 interrupt substate."""

    state: HeartbeatState = HeartbeatState.IDLE
    substate: str = "Normal"  # Normal | Interrupted{steer_id} | CancelPending{reason} | Restricted{constraint}
    detail: str = ""


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


class GolemState(BaseModel):
    golem_id: str
    tick: int = 0  # number of the next tick to run
    regime: MarketRegime = MarketRegime.UNKNOWN
    pad: PADVector = Field(default_factory=PADVector)
    vitality: VitalityState = Field(default_factory=VitalityState)
    phase: BehavioralPhase = BehavioralPhase.THRIVING
    strategy_confidence: float = 0.5
    # Cost ledger (heartbeat §S12): spend resets at UTC midnight.
    spend_day: str = ""
    daily_spend_usd: float = 0.0
    total_inference_usd: float = 0.0
    total_gas_usd: float = 0.0
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
    range_bound_run: int = 0
    # Loop bookkeeping
    theta_seconds: float = 60.0
    last_delta_tick: int = 0
    last_dream_tick: int = 0
    consecutive_failures: int = 0
    recent_ticks: list[TickSummary] = Field(default_factory=list)  # bounded tail
    failed_ticks: list[int] = Field(default_factory=list)  # bounded tail
    dreaming: bool = False
