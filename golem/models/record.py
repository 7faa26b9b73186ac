"""The DecisionCycleRecord: the typed output of one tick."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, SerializationInfo, SerializerFunctionWrapHandler, model_serializer

from golem.models.approvals import PrivilegedRequest
from golem.models.strategy_runs import StrategyActivity, StrategyCredit
from golem.models.enums import ActionStatus, BehavioralPhase, MarketRegime, PlutchikLabel, Tier
from golem.models.interventions import InterventionSummary, RejectedIntervention, Steer
from golem.models.observation import Anomaly, Observation, ProbeResult
from golem.models.state import PADVector, VitalityState
from golem.models.wake import Wakefulness


class ToolCallRecord(BaseModel):
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    rationale: str = ""


class ReadCallRecord(BaseModel):
    """One read or speculation the deliberator ran in its tool loop, as the model got it (after the result-filter)."""

    round: int
    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str = ""  # the filtered JSON text the model read
    error: str | None = None  # what the tool refused, or why the read failed
    filtered: list[str] = Field(default_factory=list)  # what the result-filter cut or withheld
    ms: float = 0.0


class ExpectedOutcome(BaseModel):
    """What a decision that acts says it expects (docs/design/learning.md#predict-then-compare), projected from
    the pre-tick state by golem/learning/expectation.py for either deliberator."""

    health_factor_before: float | None = None
    health_factor_after: float | None = None  # None: no loan to project
    value_change_usd: float = 0.0  # net account value change the actions should cause (swap fee and slippage)
    slippage_bps: float = 0.0  # expected on the swapped notional
    basis: str = ""  # how it was projected, in words


class RuleApplied(BaseModel):
    """Which rule produced an action (owner = STRATEGY.md, learned = a PLAYBOOK.md heuristic)."""

    action_index: int
    rule: str  # "STRATEGY.md:12", "PLAYBOOK.md:9"
    origin: str  # owner | learned
    entry_id: str | None = None  # the heuristic's id for a learned rule
    text: str = ""  # the rule as written


class PaymentRecord(BaseModel):
    """One x402 payment for a model call: what the gateway quoted, the authorization's nonce, the settlement."""

    model: str
    price_usd: float  # the amount paid, in USD (USDC at par)
    amount: int  # in the asset's base units
    asset: str
    pay_to: str
    network: str  # CAIP-2, e.g. eip155:31337
    nonce: str  # the EIP-3009 authorization nonce, 0x-hex
    settlement_tx: str | None = None  # the facilitator's transferWithAuthorization
    reused: bool = False  # a retried call presented the journaled authorization again (paid once)


class DeliberationRecord(BaseModel):
    model: str  # "offline-deliberator" when no LLM was used
    tier: Tier
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_summary: str = ""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    decision: str = ""
    confidence: float = 0.0
    latency_ms: float = 0.0
    cost: float = 0.0
    recommends_action: bool = False
    steers_considered: list[str] = Field(default_factory=list)  # steer ids injected into the decision
    cache_creation_tokens: int = 0
    rejections: list[str] = Field(default_factory=list)  # model output refused (unknown tool, bad args, ...)
    privileged_requests: list[PrivilegedRequest] = Field(default_factory=list)  # asked of the owner this tick
    interrupted_by: list[str] = Field(default_factory=list)  # steers that interrupted deliberation
    kg_facts: list[str] = Field(default_factory=list)  # "subject predicate object" the model added to the graph
    expected: ExpectedOutcome | None = None  # set when the decision acts
    rules_applied: list[RuleApplied] = Field(default_factory=list)  # offline deliberator: rule behind each action
    before_agent_start: list[str] = Field(default_factory=list)  # the hook's members that ran before decide
    agent_start: list[str] = Field(default_factory=list)  # agent_start's members that ran (ui-bridge)
    agent_end: list[str] = Field(default_factory=list)  # agent_end's members that ran once decide answered
    system_prompt: list[str] = Field(default_factory=list)  # system_prompt's members that ran (playbook)
    reads: list[ReadCallRecord] = Field(default_factory=list)  # the tool loop's reads and speculations, in order
    tool_rounds: int = 0  # Messages calls the tool loop made (0: no model was called)
    mental_models: list[str] = Field(default_factory=list)  # the models the LLM said it applied (its own output)
    before_provider_request: list[str] = Field(default_factory=list)  # the hook's members that ran (x402-payment)
    payments: list[PaymentRecord] = Field(default_factory=list)  # x402 payments for this decision's model calls
    context: list[str] = Field(default_factory=list)  # the context hook's members that ran (turn-context)
    held_back: list[str] = Field(default_factory=list)  # workspace sections held back, readable with `workspace`
    # The strategy the LLM said its decision serves (decide.strategy, checked against the active ones; "" when it named
    # none), and which active strategy each of the decision's own actions serves (docs/design/strategies.md)
    strategy: str = ""
    credits: list[StrategyCredit] = Field(default_factory=list)


class ActionRecord(BaseModel):
    action_index: int
    action_type: str
    tool_name: str
    permit_id: str | None = None
    tx_hash: str | None = None
    status: ActionStatus
    block_reason: str | None = None
    gas_used: int = 0
    gas_cost: float = 0.0  # USD
    block_number: int | None = None
    protective: str | None = None  # the gas gate's note when it passed the action as protective
    clipped: str | None = None  # the cage sized the proposal down to fit its limits: from what, to what, by which
    # SHOULD lines the proposal went past (sizing shrank it; the evaluator weighs it): "<file> line N `text`"
    should: list[str] = Field(default_factory=list)
    # ALREADY_SENT: the run of this tick that sent this same action (its tx is in block_reason); not sent again
    sent_by_run: str | None = None
    # the DeFi threat detectors that fired on this action's tick (sandwich exposure, oracle manipulation, flash-loan
    # moves) and what the cage did, in words (docs/design/safety.md#defi-threats)
    threats: list[str] = Field(default_factory=list)


class OutcomeRecord(BaseModel):
    verified: bool
    invariant_violations: list[str] = Field(default_factory=list)
    verification_path: str | None = None  # the full OutcomeVerification (logs, per-action gas) on disk
    expected: str = ""
    actual: str = ""
    pnl_impact: float | None = None
    ground_truth_source: str = "receipt"
    cause_variable: str | None = None
    effect_variable: str | None = None
    deviations_bps: dict[str, float] = Field(default_factory=dict)
    # min health factor re-read before and after execution (None: no loan); what Reflexion compares with
    health_factor_before: float | None = None
    health_factor_after: float | None = None


class Counterfactual(BaseModel):
    label: str  # "not acting" | "half size"
    health_factor_after: float | None = None
    value_change_usd: float = 0.0
    source: str = ""  # how it was obtained


class Reflexion(BaseModel):
    """Predict-then-compare after an acted tick ."""

    verdict: str  # positive | negative | neutral  (positive = PnL > 0 or risk metric improved)
    expected: ExpectedOutcome
    verified_health_factor: float | None = None
    verified_value_change_usd: float | None = None
    health_factor_error: float | None = None  # verified - expected
    value_error_usd: float | None = None  # verified - expected
    counterfactuals: list[Counterfactual] = Field(default_factory=list)
    insight: str = ""  # the candidate offered to the admission gate at confidence 0.5
    insight_admission: str | None = None  # the gate's action (admitted, merged, quarantined, rejected, ...)
    insight_entry_id: str | None = None
    model: str = "offline"  # who wrote the text (offline: deterministic)


class CreditGiven(BaseModel):
    """One entry credited by a verified outcome (credit assignment, docs/design/learning.md#credit-assignment)."""

    entry_id: str
    kind: str  # entry (semantic store) | heuristic
    delta: int  # +1 strengthened / upvote, -1 weakened / downvote
    reason: str


class RetrievedEntrySummary(BaseModel):
    id: str
    kind: str = "episode"
    summary: str
    score: float
    source: str = "episode"  # episode | entry (semantic store)
    scores: dict[str, float] = Field(default_factory=dict)  # per rerank factor
    # set when retrieved for an owner's question about an earlier tick: what was in force at that tick
    as_of: int | None = None


class ContextBundleSummary(BaseModel):
    categories: dict[str, int] = Field(default_factory=dict)  # category → approx tokens
    total_tokens: int = 0


class TickRun(BaseModel):
    """Which run of its tick a record comes from. Every run writes its own record: the
    tick's first run, `golem rerun` (a new workflow), a Temporal reset (a new run of the same workflow)
    or a retry of the whole workflow."""

    kind: str = "original"  # original | rerun | reset | retry
    label: str = ""  # "" for the tick's first run; else "rerun-1", "reset-1a2b3c4d", "rerun-1-reset-…"
    run_id: str = ""
    original_run_id: str = ""  # the first run of this workflow: what a reset or retry started from
    reset_reason: str | None = None  # the reason given to the reset (Web UI, CLI, service API)
    reset_from_run_id: str | None = None  # the run a reset forked from (may itself be a reset run)


class StepTiming(BaseModel):
    step: str
    ms: float


class DecisionCycleRecord(BaseModel):
    # Identity
    tick: int
    timestamp: str
    golem_id: str
    workflow_id: str = ""
    run_id: str = ""
    rerun_of: str | None = None
    # Which run of the tick this is (see TickRun); "" label = the tick's first run, cycle-NNNNNN.json.
    run_kind: str = "original"
    run_label: str = ""
    original_run_id: str | None = None
    reset_reason: str | None = None
    reset_from_run_id: str | None = None
    # Observation
    observation: Observation
    regime: MarketRegime
    probe_results: list[ProbeResult] = Field(default_factory=list)
    anomalies: list[Anomaly] = Field(default_factory=list)
    # Appraisal
    pad_before: PADVector = Field(default_factory=PADVector)  # the golem's affect going into the tick
    # Absent (None, omitted from the JSON) until the daimon appraises the tick's outcome: a copy of
    # pad_before or a fixed Plutchik label would pose as a measurement. Older records carry both; they load.
    pad_after: PADVector | None = None
    somatic_markers_fired: list[str] = Field(default_factory=list)
    primary_emotion: PlutchikLabel | None = None
    appraisal: dict[str, Any] | None = None  # the daimon's appraisal checks (golem.life.daimon.Appraisal)
    somatic_marker_laid: str | None = None  # the marker a loss laid this tick
    # Gating
    prediction_error: float
    prediction_error_sources: dict[str, float] = Field(default_factory=dict)
    deliberation_threshold: float
    tier: Tier
    gating_reason: str
    # System 1's wake check (docs/design/wakefulness.md): forecast to the nearest STRATEGY.md line, rules previewed
    # to fire, the floor under the tier; absent on records from before it existed
    wake: Wakefulness | None = None
    # The strategies under strategies/ after this tick: started, ended, completed (and why), files in error;
    # absent when the golem has only STRATEGY.md (docs/design/strategies.md)
    strategies: StrategyActivity | None = None
    # Context
    context_bundle_summary: ContextBundleSummary = Field(default_factory=ContextBundleSummary)
    retrieved_entries: list[RetrievedEntrySummary] = Field(default_factory=list)
    active_interventions: list[InterventionSummary] = Field(default_factory=list)
    rejected_interventions: list[RejectedIntervention] = Field(default_factory=list)
    # Deliberation / action / outcome
    deliberation: DeliberationRecord | None = None
    actions: list[ActionRecord] = Field(default_factory=list)
    outcome: OutcomeRecord | None = None
    # generator/evaluator separation (docs/design/inference.md#the-evaluator): a fresh-context judgement of the outcome,
    # metrics win.
    evaluation: dict[str, Any] | None = None
    # predict-then-compare and the credit the verified outcome gave (absent on ticks that did not act)
    reflexion: Reflexion | None = None
    credit: list[CreditGiven] = Field(default_factory=list)
    context_policy_revision: int | None = None  # cybernetics: the ContextPolicy revision in force after this tick
    # Learning
    episodes_written: list[str] = Field(default_factory=list)
    grimoire_mutations: list[str] = Field(default_factory=list)
    # Mortality
    vitality: VitalityState = Field(default_factory=VitalityState)
    phase: BehavioralPhase = BehavioralPhase.THRIVING
    credit_consumed: float | None = None  # the tick's inference + gas (USD), the lifespan's burn
    credit_remaining: float | None = None  # [lifespan] credits_usd left after the tick; absent without credits
    estimated_ttl_ticks: float | None = None  # credit left / burn per tick
    phase_transition: str | None = None  # "stable→conservation" on the tick the phase changed
    death_cause: str | None = None  # set on the tick a clock ran out (the golem then dies, golem.life.death)
    after_turn: list[str] = Field(default_factory=list)  # the after_turn chain as it ran, in order
    # the risk extension's after_turn: net value, its high-water mark, drawdown vs the max (golem.life.after_turn)
    risk: dict[str, Any] | None = None
    # the change since the last recorded tick split into market beta, strategy / knowledge alpha and noise
    # (golem.safety.attribution); absent on a golem's first tick
    attribution: dict[str, Any] | None = None
    # steers the golem's own systems sent after this tick (risk daemon, mortality engine, PolicyCage;
    # golem.life.self_steer), each also a signal to the golem's workflow
    self_steers: list[Steer] = Field(default_factory=list)
    # Cost
    inference_cost: float = 0.0
    gas_cost: float = 0.0
    total_cost: float = 0.0
    # Timing of each step as the activities measured it
    step_timings: list[StepTiming] = Field(default_factory=list)
    fsm_trace: list[str] = Field(default_factory=list)
    # A step that failed after its retries (e.g. malformed LLM output): the tick is still recorded.
    errors: list[str] = Field(default_factory=list)
    # The config version (golem.toml + STRATEGY.md hash) this tick ran on; the workflow and every activity
    # of the tick read that one version. config_change: set on the first tick of a new version.
    config_version: str = ""
    config_change: str = ""

    @model_serializer(mode="wrap")
    def _omit_unmeasured(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        """A field whose system does not exist yet is left out of the record, not written as null."""
        data: dict[str, Any] = handler(self)
        for name in UNMEASURED_FIELDS:
            if data.get(name, 0) is None:
                del data[name]
        return data


# Record fields only set when their system measured something on the tick (the daimon's appraisal, the lifespan's
# credit ledger, a phase transition, a death); None is left out of the JSON record and NULL in the cycle index.
UNMEASURED_FIELDS = ("pad_after", "primary_emotion", "credit_consumed", "appraisal", "somatic_marker_laid",
                     "credit_remaining", "estimated_ttl_ticks", "phase_transition", "death_cause", "risk", "wake",
                     "attribution")
