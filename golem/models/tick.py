"""What flows between the steps of one theta tick (ARCHITECTURE "One tick, as data").

Every activity takes one of these models and returns one, so fields can be added later
without breaking running workflows. Nothing here may carry a key.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

from golem.models.config import GolemConfig
from golem.models.enums import Tier
from golem.models.interventions import FollowUp, Steer
from golem.models.observation import Observation, ProbeResult
from golem.models.record import (
    ActionRecord,
    ContextBundleSummary,
    DeliberationRecord,
    OutcomeRecord,
    RetrievedEntrySummary,
    StepTiming,
    TickRun,
)
from golem.models.state import DecisionCacheState, GatingDecision, GolemState


class TickContext(BaseModel):
    """Input of ThetaTickWorkflow: a snapshot of the golem at tick start."""

    golem_id: str
    tick: int
    config: GolemConfig
    state: GolemState
    started_at: str = ""  # workflow.now() at tick start, ISO
    rerun_of: str | None = None  # workflow id of the failed tick this re-executes
    carried_probes: list[ProbeResult] = Field(default_factory=list)  # from ticks dropped by backpressure (§S12)
    # The config version `config` is (golem.models.config_version); the worker resolves STRATEGY.md by it.
    # "" = a golem started before versions existed: the worker reads STRATEGY.md from the home.
    config_version: str = ""
    # Set on the first tick of a newly applied version only: what changed (for the record).
    config_change: str = ""

    @property
    def task_queue(self) -> str:
        return f"golem-{self.golem_id}"

    @property
    def started_ts(self) -> float | None:
        """started_at in unix seconds: the tick's clock (path time in a backtest); None when unset."""
        if not self.started_at:
            return None
        dt = datetime.fromisoformat(self.started_at.replace("Z", "+00:00"))
        return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


class ObserveInput(BaseModel):
    ctx: TickContext


class AnalyzeInput(BaseModel):
    ctx: TickContext
    observation: Observation


class AnalyzeResult(BaseModel):
    prediction_error: float
    sources: dict[str, float] = Field(default_factory=dict)


class GateInput(BaseModel):
    ctx: TickContext
    observation: Observation
    prediction_error: float
    steers: list[Steer] = Field(default_factory=list)


class GateResult(BaseModel):
    tier: Tier
    threshold: float
    reason: str
    forced: bool = False
    gating: GatingDecision | None = None  # learned-gating choice + shadow baseline, for outcome feedback


class RetrieveInput(BaseModel):
    ctx: TickContext
    observation: Observation
    tier: Tier


class PastQuestion(BaseModel):
    """An owner's steer or follow-up about an earlier tick, and what retrieval found in force then."""

    id: str  # the steer's / follow-up's id
    as_of: int
    abstained: bool = False
    reason: str = ""
    entry_ids: list[str] = Field(default_factory=list)


class RetrievedKnowledge(BaseModel):
    query: str = ""
    reason: str = ""  # why retrieval ran (or did not: Self-RAG decision)
    abstained: bool = False  # nothing cleared the semantic floor
    entries: list[RetrievedEntrySummary] = Field(default_factory=list)
    # owner steers / follow-ups that asked about an earlier tick, each answered from what was in force then
    past_questions: list[PastQuestion] = Field(default_factory=list)
    summary: ContextBundleSummary = Field(default_factory=ContextBundleSummary)


class ProposedAction(BaseModel):
    """One write the deliberator wants; arguments are in human units and token symbols."""

    action_index: int
    tool: str  # swap | supply | withdraw | borrow | repay
    arguments: dict[str, Any] = Field(default_factory=dict)
    rationale: str = ""


class DecideInput(BaseModel):
    ctx: TickContext
    observation: Observation
    tier: Tier
    prediction_error: float
    retrieved: RetrievedKnowledge = Field(default_factory=RetrievedKnowledge)
    steers: list[Steer] = Field(default_factory=list)
    followups: list[FollowUp] = Field(default_factory=list)
    interrupted_by: list[str] = Field(default_factory=list)  # steer ids that arrived while Deciding


class Deliberation(BaseModel):
    record: DeliberationRecord
    actions: list[ProposedAction] = Field(default_factory=list)
    context: ContextBundleSummary | None = None  # the workspace's category → tokens
    decision_cache: DecisionCacheState | None = None  # the cache after this tick's lookup / record (§S11)
    # relations the model proposed for the knowledge graph (grimoire "Graph Maintenance" 1), before checking
    kg_facts: list[tuple[str, str, str]] = Field(default_factory=list)


class SimulatedAction(BaseModel):
    action_index: int
    ok: bool
    revert_reason: str | None = None
    gas_estimate: int = 0
    expected: dict[str, float] = Field(default_factory=dict)  # e.g. {"amount_out": 123.4}


class SimulateInput(BaseModel):
    ctx: TickContext
    observation: Observation
    actions: list[ProposedAction]


class SimulationResult(BaseModel):
    actions: list[SimulatedAction] = Field(default_factory=list)
    block_number: int = 0


class ValidateInput(BaseModel):
    ctx: TickContext
    observation: Observation
    actions: list[ProposedAction]
    simulation: SimulationResult
    # Steers that interrupted decide (the tick's earlier ones are ctx.state.pending_steers): a high or
    # critical one makes the tick's actions protective for the gas gate (golem.safety.policy).
    steers: list[Steer] = Field(default_factory=list)


class ValidatedAction(BaseModel):
    action_index: int
    approved: bool
    reason: str = ""
    permit_id: str | None = None  # set when approved: the permit execute must present
    protective: str | None = None  # why the gas gate let it through as protective (§S10 emergency slice)
    sent_by_run: str | None = None  # another run of this tick already sent this very action: not again


class ValidationResult(BaseModel):
    actions: list[ValidatedAction] = Field(default_factory=list)

    @property
    def approved(self) -> list[ValidatedAction]:
        return [a for a in self.actions if a.approved]


class ExecuteInput(BaseModel):
    ctx: TickContext
    observation: Observation | None = None  # prices for valuing gas in USD
    actions: list[ProposedAction]
    validation: ValidationResult
    cancelled_reason: str | None = None  # a high-severity steer cancelled what was not yet sent


class ExecuteResult(BaseModel):
    records: list[ActionRecord] = Field(default_factory=list)


class VerifyInput(BaseModel):
    ctx: TickContext
    observation: Observation
    actions: list[ProposedAction]
    simulation: SimulationResult
    records: list[ActionRecord]
    run_label: str = ""  # "" for the tick's first run: names the outcome file (outcomes/tick-NNNNNN[-label].json)


class ReflectInput(BaseModel):
    ctx: TickContext
    observation: Observation
    analysis: AnalyzeResult
    gate: GateResult
    retrieved: RetrievedKnowledge | None = None
    deliberation: Deliberation | None = None
    records: list[ActionRecord] = Field(default_factory=list)
    outcome: OutcomeRecord | None = None
    steers: list[Steer] = Field(default_factory=list)
    followups: list[FollowUp] = Field(default_factory=list)
    step_timings: list[StepTiming] = Field(default_factory=list)
    fsm_trace: list[str] = Field(default_factory=list)
    workflow_id: str = ""
    run_id: str = ""
    errors: list[str] = Field(default_factory=list)
    run: TickRun | None = None  # None: the tick's first run (histories recorded before runs were told apart)


class TickResult(BaseModel):
    """What the tick hands back to GolemWorkflow to fold into GolemState."""

    tick: int
    tier: Tier
    regime: str
    prediction_error: float
    threshold: float
    price: float
    gas_price_gwei: float
    tvl: float
    oracle_price: float
    position_health: dict[str, float] = Field(default_factory=dict)
    actions_executed: int = 0
    inference_cost: float = 0.0
    gas_cost: float = 0.0
    steers_consumed: list[str] = Field(default_factory=list)
    followups_consumed: list[str] = Field(default_factory=list)
    steers_to_followups: list[str] = Field(default_factory=list)  # low severity while Executing (§S7)
    episode_id: str | None = None
    record_path: str = ""
    errors: list[str] = Field(default_factory=list)
    phase: str = ""
    gating: GatingDecision | None = None
    run_label: str = ""  # the run whose reflect wrote record_path ("" = the tick's first run)
    decision_cache: DecisionCacheState | None = None
