"""What flows between the steps of one theta tick (docs/design/tick.md).

Every activity takes one of these models and returns one, so fields can be added later
without breaking running workflows. Nothing here may carry a key.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, TypeVar

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, field_serializer, model_serializer

from golem.ids import task_queue
from golem.models.approvals import PrivilegedRequest
from golem.models.strategy_runs import StrategyRun
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
from golem.models.slices import slice_dump
from golem.models.threats import ThreatVerdict
from golem.models.state import DecisionCacheState, DeferredIntent, GatingDecision, GolemState, LifeUpdate, slice_fields
from golem.models.wake import Wakefulness


T = TypeVar("T")


class IncompleteInput(ValueError):
    """A lean input used before the worker made it whole (a field it names by reference still unread)."""


def whole(value: T | None, what: str) -> T:
    """A lean input's field once the worker has made the input whole: the config by version, results
    by reference. None here means the worker skipped that, which is a bug: it says which field."""
    if value is None:
        raise IncompleteInput(f"{what} is not on this input and was not read back (a lean input used before "
                              f"the worker made it whole)")
    return value


class TickContext(BaseModel):
    """Input of ThetaTickWorkflow: a snapshot of the golem at tick start."""

    golem_id: str
    tick: int
    # None on a lean context: the worker loads the config by `config_version` from its disk
    # (<data>/config-versions/<version>.json), so no activity input carries the whole config.
    config: GolemConfig | None = None
    state: GolemState
    # Non-empty: only the GolemState fields of this named slice are on the wire (a step's, or "tick" for the
    # tick's input; golem.models.state.slice_fields; docs/design/tick.md#lean-histories); the activity rebuilds them as
    # a slice that refuses to read any other (golem.models.slices). The name, not the list, goes on the wire: the list
    # cost ~0.3 KB in every activity input. Empty (and no state_fields): the whole state.
    state_slice: str = ""
    # The same as an explicit field list: what inputs written before state_slice carry (still read).
    state_fields: list[str] = Field(default_factory=list)
    step_timeout_seconds: float | None = None  # [heartbeat] step_timeout_seconds of a lean context
    started_at: str = ""  # workflow.now() at tick start, ISO
    rerun_of: str | None = None  # workflow id of the failed tick this re-executes
    carried_probes: list[ProbeResult] = Field(default_factory=list)  # from ticks dropped by backpressure
    # The config version `config` is (golem.models.config_version); the worker resolves STRATEGY.md by it.
    # "" = a golem started before versions existed: the worker reads STRATEGY.md from the home.
    config_version: str = ""
    # Set on the first tick of a newly applied version only: what changed (for the record).
    config_change: str = ""
    # A Thanatopsis settlement tick: gate forces T2, decide returns the unwind plan
    # (golem.life.death.settlement_actions), the write path is the normal one.
    settlement: bool = False
    # The tick's wire version, chosen by GolemWorkflow under one patch per parent run ("tick-wire-2"), so a tick
    # pays no patch marker of its own (each `workflow.patched` call costs a tick a marker and a search-attribute
    # upsert in its history). 2: lean steps without the "lean-step-inputs" marker, Regime and Tier in one upsert
    # after gate, and a TickResult without the fields the parent never reads (record path, episode id). 0: a tick
    # started before (its history replays as it ran).
    wire: int = 0
    # GolemWorkflowInput.local_steps: observe, analyze, gate and reflect run as local activities, with their inputs
    # whole (a local result is not in the run's history until the workflow task ends, so nothing can name it)
    local_steps: bool = False

    @property
    def slice_field_names(self) -> list[str]:
        """The state fields on the wire ([] = all): state_fields, else the named slice's."""
        if self.state_fields:
            return self.state_fields
        return sorted(slice_fields(self.state_slice)) if self.state_slice else []

    @field_serializer("state", mode="wrap")
    def _only_the_slice(self, state: GolemState, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(state)
        fields = self.slice_field_names
        if fields and isinstance(data, dict):
            return slice_dump(data, fields)
        return data

    @property
    def task_queue(self) -> str:
        return task_queue(self.golem_id)

    @property
    def cfg(self) -> GolemConfig:
        """The config of a whole context (a lean one gets it from its version on the worker)."""
        return whole(self.config, "ctx.config")

    @property
    def step_timeout(self) -> float:
        if self.config is not None:
            return self.config.heartbeat.step_timeout_seconds
        if self.step_timeout_seconds is None:
            raise ValueError("a lean TickContext needs step_timeout_seconds")
        return self.step_timeout_seconds

    def for_step(self, step: str) -> TickContext:
        """This context as one step's activity input: the step's state slice only."""
        return self.model_copy(update={"state_slice": step, "state_fields": []})

    @property
    def started_ts(self) -> float | None:
        """started_at in unix seconds: the tick's clock (path time in a backtest); None when unset."""
        if not self.started_at:
            return None
        dt = datetime.fromisoformat(self.started_at.replace("Z", "+00:00"))
        return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


# The Observation fields each step after observe reads (docs/design/tick.md#lean-histories; decide and reflect read it
# whole). The activity rebuilds the slice (golem.models.slices): reading another field raises, naming this list.
STEP_OBSERVATION_FIELDS: dict[str, frozenset[str]] = {
    "analyze": frozenset({"snapshot", "anomalies", "regime", "pheromones"}),
    "gate": frozenset({"snapshot", "probes", "regime", "force_t2_reason", "strategies"}),
    "retrieve": frozenset({"snapshot", "anomalies", "regime"}),
    "simulate": frozenset({"snapshot"}),
    "validate": frozenset({"snapshot", "regime", "strategies"}),  # regime: the somatic markers' situation
    "execute": frozenset({"snapshot"}),
    "verify": frozenset({"snapshot"}),
}


# Results of earlier steps a lean step input names instead of carrying: field → the activity type
# whose completed result (in this tick run's own history) it is. decide's is the last completed decide.
STEP_REFS: dict[str, dict[str, str]] = {
    "analyze": {"observation": "observe"},
    "gate": {"observation": "observe"},
    "retrieve": {"observation": "observe"},
    "decide": {"observation": "observe", "retrieved": "retrieve"},
    "simulate": {"observation": "observe"},
    "validate": {"observation": "observe", "simulation": "simulate"},
    "execute": {"observation": "observe", "validation": "validate"},
    "verify": {"observation": "observe", "simulation": "simulate"},
    "reflect": {"observation": "observe", "analysis": "analyze", "gate": "gate", "retrieved": "retrieve",
                "deliberation": "decide"},
}


class StepInput(BaseModel):
    """An activity input that may carry a slice of the tick's Observation (only `observation_fields`) and
    may name earlier steps' results instead of carrying them (`refs`, read back by the worker)."""

    observation_fields: list[str] = Field(default_factory=list)  # empty: the whole observation
    refs: dict[str, str] = Field(default_factory=dict)  # field → activity type whose result it is

    @model_serializer(mode="wrap")
    def _without_refs(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if self.refs and isinstance(data, dict):
            for name in self.refs:
                data.pop(name, None)
        return data

    @field_serializer("observation", mode="wrap", check_fields=False)
    def _only_the_slice(self, observation: Observation | None, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(observation)
        if self.observation_fields and isinstance(data, dict):
            return {k: v for k, v in data.items() if k in self.observation_fields}
        return data


def observation_fields(step: str) -> list[str]:
    return sorted(STEP_OBSERVATION_FIELDS.get(step, ()))


class ObserveInput(BaseModel):
    ctx: TickContext


class AnalyzeInput(StepInput):
    ctx: TickContext
    observation: Observation | None = None  # None on the wire when refs names it


class AnalyzeResult(BaseModel):
    prediction_error: float
    sources: dict[str, float] = Field(default_factory=dict)


class GateInput(StepInput):
    ctx: TickContext
    observation: Observation | None = None  # None on the wire when refs names it
    prediction_error: float
    steers: list[Steer] = Field(default_factory=list)


class GateResult(BaseModel):
    tier: Tier
    threshold: float
    reason: str
    forced: bool = False
    gating: GatingDecision | None = None  # learned-gating choice + shadow baseline, for outcome feedback
    wake: Wakefulness | None = None  # the forecast and rule preview, and the floor they put under the tier


class RetrieveInput(StepInput):
    ctx: TickContext
    observation: Observation | None = None  # None on the wire when refs names it
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
    # Size to fit: the proposal's own arguments when the cage clipped it (a rerun of the tick proposing them again
    # finds the action already sent: golem.safety.run_actions)
    clipped_from: dict[str, Any] | None = None
    approval_id: str | None = None  # a privileged request the owner approved (golem.safety.approvals)


class DecideInput(StepInput):
    ctx: TickContext
    observation: Observation | None = None  # None on the wire when refs names it
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
    # Deliberations recorded before the cache moved to the worker carried the whole cache here; now
    # only its counters (decision_cache.hit_rate_report) come back, for `golem status`.
    decision_cache: DecisionCacheState | None = None
    decision_cache_stats: dict[str, Any] | None = None
    # relations the model proposed for the knowledge graph (docs/design/grimoire.md#knowledge-graph), before checking
    kg_facts: list[tuple[str, str, str]] = Field(default_factory=list)
    # writes outside the grant the model asked the owner for (decision.request_privileged), checked, with ids
    requests: list[PrivilegedRequest] = Field(default_factory=list)


class SimulatedAction(BaseModel):
    action_index: int
    ok: bool
    revert_reason: str | None = None
    gas_estimate: int = 0
    expected: dict[str, float] = Field(default_factory=dict)  # e.g. {"amount_out": 123.4}


class SimulateInput(StepInput):
    ctx: TickContext
    observation: Observation | None = None  # None on the wire when refs names it
    actions: list[ProposedAction]


class SimulationResult(BaseModel):
    actions: list[SimulatedAction] = Field(default_factory=list)
    block_number: int = 0


class ValidateInput(StepInput):
    ctx: TickContext
    observation: Observation | None = None  # None on the wire when refs names it
    actions: list[ProposedAction]
    simulation: SimulationResult | None = None
    # Steers that interrupted decide (the tick's earlier ones are ctx.state.pending_steers): a high or
    # critical one makes the tick's actions protective for the gas gate (golem.safety.policy).
    steers: list[Steer] = Field(default_factory=list)


class ValidatedAction(BaseModel):
    action_index: int
    approved: bool
    reason: str = ""
    permit_id: str | None = None  # set when approved: the permit execute must present
    protective: str | None = None  # why the gas gate let it through as protective (the gas partition's emergency slice)
    sent_by_run: str | None = None  # another run of this tick already sent this very action: not again
    # Size to fit (golem.safety.sizing): the action at the size the cage allowed, when it clipped the proposal;
    # the permit is bound to this size and execute sends exactly it. `clipped` says from what, to what and why.
    action: ProposedAction | None = None
    clipped: str | None = None
    should: list[str] = Field(default_factory=list)  # SHOULD lines the proposal went past (sizing shrank it)
    deferred: bool = False  # the gas gate said "later", not "never": the intent waits in GolemState
    # the DeFi threat detectors that fired and bore on this action (golem.safety.threats), in words
    threats: list[str] = Field(default_factory=list)


class ValidationResult(BaseModel):
    actions: list[ValidatedAction] = Field(default_factory=list)
    # every threat detector's verdict of the tick, fired or not (docs/design/safety.md#defi-threats)
    threats: list[ThreatVerdict] = Field(default_factory=list)
    # The simulation of the tick's actions at their validated sizes, when any was clipped (None: the simulate
    # step's result stands); verify compares the receipts with this one.
    simulation: SimulationResult | None = None

    def sized(self, actions: list[ProposedAction]) -> list[ProposedAction]:
        """The actions as validated: each clipped one at its allowed size (the others as proposed)."""
        by_index = {v.action_index: v.action for v in self.actions if v.action is not None}
        return [by_index.get(a.action_index, a) for a in actions]

    @property
    def approved(self) -> list[ValidatedAction]:
        return [a for a in self.actions if a.approved]


class ExecuteInput(StepInput):
    ctx: TickContext
    observation: Observation | None = None  # prices for valuing gas in USD
    actions: list[ProposedAction]
    validation: ValidationResult | None = None  # None on the wire when refs names it
    cancelled_reason: str | None = None  # a high-severity steer cancelled what was not yet sent
    restricted: str | None = None  # a constraint hit earlier in the batch blocks the rest (docs/design/tick.md#steers)


class ExecuteResult(BaseModel):
    records: list[ActionRecord] = Field(default_factory=list)


class VerifyInput(StepInput):
    ctx: TickContext
    observation: Observation | None = None  # None on the wire when refs names it
    actions: list[ProposedAction]
    simulation: SimulationResult | None = None
    records: list[ActionRecord]
    run_label: str = ""  # "" for the tick's first run: names the outcome file (outcomes/tick-NNNNNN[-label].json)


class ReflectInput(StepInput):
    ctx: TickContext
    observation: Observation | None = None  # None on the wire when refs names it
    analysis: AnalyzeResult | None = None  # None on the wire when refs names it (set on the worker)
    gate: GateResult | None = None  # None on the wire when refs names it (set on the worker)
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


class GasLedger(BaseModel):
    """The gas the risk store holds for a golem: the UTC day of the tick's clock, that day's USD, all of it."""

    day: str
    today_usd: float
    total_usd: float


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
    steers_to_followups: list[str] = Field(default_factory=list)  # low severity while Executing
    episode_id: str | None = None
    record_path: str = ""
    errors: list[str] = Field(default_factory=list)
    phase: str = ""
    gating: GatingDecision | None = None
    run_label: str = ""  # the run whose reflect wrote record_path ("" = the tick's first run)
    decision_cache: DecisionCacheState | None = None  # results from before the cache moved to the worker
    decision_cache_stats: dict[str, Any] | None = None  # hit_rate_report of the worker's cache after this tick
    # The after_turn chain's lifespan and daimon: the golem's next clocks, phase, affect and markers.
    # None from a reflect before it existed (the fold then keeps its older arousal / budget formulas).
    life: LifeUpdate | None = None
    actions_proposed: int = 0  # what decide proposed (a settlement tick with none left ends Settlement)
    tx_hashes: list[str] = Field(default_factory=list)  # of the actions sent (the death certificate lists them)
    # The gas gate's deferred intents after this tick (golem.safety.urgency.next_deferred); None from a reflect
    # before they existed (the fold keeps the state's).
    deferred_intents: list[DeferredIntent] | None = None
    hf_restored: float | None = None  # the health factor this tick's actions restored (re-read after − before, > 0)
    privileged_requests: list[PrivilegedRequest] = Field(default_factory=list)  # asked this tick: pending from now
    approvals_ran: dict[str, str] = Field(default_factory=dict)  # approved request id → what the act path made of it
    # The strategies' states after this tick (golem.inference.strategies); None: the golem has only STRATEGY.md
    strategy_runs: list[StrategyRun] | None = None
    # The gas ledger the cage counts (the risk store) after this tick, every run of every tick in it: a reset's or a
    # rerun's transactions too. None from a reflect before it existed (the fold adds gas_cost alone).
    gas_ledger: GasLedger | None = None
