"""Inputs and outputs of the golem-level workflows (GolemWorkflow, delta, dream)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from golem.models.approvals import PrivilegedRequest
from golem.models.config import GolemConfig
from golem.models.config_version import ConfigVersionInfo
from golem.models.interventions import FollowUp, InterventionSummary, RejectedIntervention
from golem.models.state import ChainHealth, FsmState, GolemState, TickQueue, TickSummary
from golem.models.strategy_runs import StrategyRun


class GolemWorkflowInput(BaseModel):
    config: GolemConfig
    state: GolemState | None = None  # None on first start; carried across continue-as-new
    max_ticks: int | None = None  # stop after this many ticks in total (tests, bounded demos)
    # Which clock the golem lives by: "wall" (live: Temporal timers and workflow.now()) or "replay" (a
    # backtest: time is the recorded path's, delivered row by row with the advance_world update, and
    # nothing waits on the wall clock). Carried across continue-as-new with the path time reached.
    clock: Literal["wall", "replay"] = "wall"
    world_time: str | None = None  # replay: the path time of the last row taken
    last_tick_at: str | None = None  # replay: the path time of the last tick (theta counts from it)
    # Which version `config` is (golem.models.config_version); None = started before versions existed.
    config_info: ConfigVersionInfo | None = None
    # The tick's read-and-record steps (observe, analyze, gate, reflect) and the gamma read as local activities:
    # the same activity code run by the worker inside the workflow task, no server round trip per step (a
    # backtest's default, docs/how-to/backtesting.md). Carried across continue-as-new.
    local_steps: bool = False


class WorldTime(BaseModel):
    """A backtest row's time, sent by the replay driver once the chain shows that row."""

    row: int = Field(ge=0)
    at: str  # ISO-8601 path time of the row (UTC)
    last: bool = False  # the path's last row: the golem stops after it


class WorldAdvanced(BaseModel):
    """What the golem did with a row: ticked (which tick, its tier) or only watched it (a gamma pulse)."""

    row: int
    tick: int | None = None
    tier: str | None = None
    failed: bool = False
    gamma: bool = False


class GolemStatus(BaseModel):
    golem_id: str
    tick: int  # next tick number
    activity: str  # "ticking" | "waiting" | "dreaming" | "consolidating" | "stopped"
    current_tick_workflow_id: str | None = None
    fsm: FsmState = Field(default_factory=FsmState)
    tick_queue: TickQueue = Field(default_factory=TickQueue)  # triggers waiting, and those dropped (while dreaming too)
    last_tick: TickSummary | None = None
    regime: str
    phase: str
    vitality: float
    theta_seconds: float
    daily_spend_usd: float  # inference today
    # Today beside each budget (golem.safety.gas.spend_status); defaults keep older answers parsing.
    spend_day: str = ""  # the UTC day both spends are counted over
    max_daily_cost_usd: float = 0.0  # the daily inference budget
    daily_gas_usd: float = 0.0
    gas_budget_usd_per_day: float = 0.0  # the daily gas partition
    gas_emergency_usd: float = 0.0  # of which ring-fenced for protective actions
    # Urgency buys gas (golem.safety.urgency): the per-action and per-day ceilings of urgent / critical actions,
    # and the gas paid per 1.0 of health factor restored so far (None: nothing restored yet).
    gas_ceiling_per_action_usd: float = 0.0
    gas_ceiling_share_of_protected: float = 0.0
    gas_ceiling_per_day_usd: float = 0.0
    hf_restored_total: float = 0.0
    gas_per_hf_restored: float | None = None
    pending_steers: list[InterventionSummary] = Field(default_factory=list)
    pending_followups: list[InterventionSummary] = Field(default_factory=list)
    rejected_interventions: list[RejectedIntervention] = Field(default_factory=list)
    # privileged requests: pending (`golem approve | deny ID`), approved (run next tick), then the last decided
    approvals: list[PrivilegedRequest] = Field(default_factory=list)
    failed_ticks: list[int] = Field(default_factory=list)
    run_ticks: int = 0  # ticks in this run (before continue-as-new)
    # decision cache: lookups, hits, hit_rate, entries, invalidations
    decision_cache: dict[str, Any] = Field(default_factory=dict)
    learned_gating_active: bool = False  # past the cold start: Hedge + Thompson choose the tier
    config_version: str = ""  # the config version the golem runs on ("" = started before versions existed)
    chain: ChainHealth = Field(default_factory=ChainHealth)  # RPC health: last good read, errors in a row, alert
    paused: bool = False  # `golem pause`: no new ticks until `golem resume`
    entries_stopped: bool = False  # `golem stop-entries`: no new positions; risk-reducing actions and steers run
    control_note: str = ""
    # the dream cycle's quality figures, and how close the next dream is
    dream_yield: float | None = None  # share of staged dream outputs validated (healthy 10–30%)
    threat_coverage: float | None = None  # Tier 1 threats rehearsed in the last 7 cycles (target 100%)
    last_dream: str = ""
    dream_urgency: float | None = None
    # the three clocks, the credit, the affect, and death
    clocks: dict[str, float] = Field(default_factory=dict)  # economic, epistemic, stochastic
    credit_remaining_usd: float | None = None
    estimated_ttl_ticks: float | None = None
    runway_days: float | None = None  # the same runway in days of ticks
    burn_usd_per_tick: float | None = None  # what a tick costs (gas + inference, paid or billed), smoothed
    ticks_lived: int = 0
    hayflick_ticks: int | None = None  # [lifespan] hayflick_ticks: the Hayflick distance is this − ticks_lived
    generation: int = 0
    predecessor: str | None = None
    pad: dict[str, float] = Field(default_factory=dict)
    emotion: str | None = None
    somatic_markers: int = 0
    dying: str | None = None  # the death cause once death is triggered
    certificate: dict[str, Any] | None = None  # the DeathCertificate once dead
    strategies: list[StrategyRun] = Field(default_factory=list)  # each strategies/*.md: waiting, active, complete


class ConsolidationInput(BaseModel):
    golem_id: str
    tick: int
    config: GolemConfig
    followups: list[FollowUp] = Field(default_factory=list)  # window next-curator
    # Today's spend when the cycle starts (budget.daily_spend_on): the future-utility calls are planned
    # against the daily budget like a tick's (default 0.0 keeps old histories replaying).
    daily_spend_usd: float = Field(default=0.0, ge=0.0)


class UtilityFallback(BaseModel):
    """A candidate whose future utility came from the deterministic estimate although a router was configured."""

    candidate: str  # the first 120 characters of its content
    reason: str


class AdmissionStats(BaseModel):
    """What the admission gate did with this cycle's distilled candidates (one per supporting episode)."""

    candidates: int = 0
    distinct: int = 0  # distinct candidate texts (the unit of one future-utility call)
    admitted: int = 0
    admitted_low: int = 0  # 0.45–0.55: stored at confidence 0.3
    merged: int = 0
    skipped: int = 0
    quarantined: int = 0
    rejected: int = 0
    utility_source: str = "estimate"  # llm | estimate | mixed | none (nothing needed a utility score)
    utility_model: str | None = None
    llm_calls: int = 0
    utility_llm: int = 0  # distinct candidates rated by the LLM
    utility_estimate: int = 0  # distinct candidates rated by the deterministic estimate
    utility_fallbacks: list[UtilityFallback] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class QuarantineOutcome(BaseModel):
    id: str
    outcome: str  # released | kept | dropped
    reason: str
    review_cycles: int = 0
    admission_action: str | None = None  # what admit() did with a released entry
    entry_id: str | None = None  # the stored entry it became (or merged into)


class QuarantineReviewStats(BaseModel):
    reviewed: int = 0
    released: int = 0
    kept: int = 0
    dropped: int = 0
    outcomes: list[QuarantineOutcome] = Field(default_factory=list)


class ConsolidationResult(BaseModel):
    tick: int
    episodes_scanned: int = 0
    episodes_decayed: int = 0
    below_prune_floor: int = 0
    heuristics_derived: int = 0
    playbook_revision: int | None = None
    playbook_path: str = ""
    followups_delivered: list[str] = Field(default_factory=list)
    # embedding drift check: status, max distance, nn stability
    embedding_drift: dict[str, Any] = Field(default_factory=dict)
    admission: AdmissionStats = Field(default_factory=AdmissionStats)
    quarantine_review: QuarantineReviewStats = Field(default_factory=QuarantineReviewStats)
    inference_cost_usd: float = 0.0  # future-utility calls; GolemWorkflow adds it to the daily spend
    retention: dict[str, Any] = Field(default_factory=dict)  # [retention]: what was compacted into daily archives
    # the ExpeL Curator's operations (ADD/UPVOTE/DOWNVOTE/EDIT/REFUSED), focus, demoted and retired ids
    curator: dict[str, Any] = Field(default_factory=dict)
    dream_tags: int = 0  # episodes tagged dream_priority: high and not dreamed yet (DreamScheduler input)
    # PLAYBOOK.md as a view of the admitted semantic store: heuristics offered to the gate, and why
    # eligible ones stayed out (quarantined, superseded, decayed, rejected)
    playbook_view: dict[str, Any] = Field(default_factory=dict)
    # the learned rules' trials this cycle (docs/design/learning.md): each rule's verdict and figures, or why none ran
    trials: dict[str, Any] = Field(default_factory=dict)
    # hindsight settlement this cycle (docs/design/learning.md#hindsight-settlement): rows settled, their verdicts, waiting
    settlement: dict[str, Any] = Field(default_factory=dict)
    # the window's return split into market beta, strategy / knowledge alpha and noise, and the loop that should
    # answer a loss (golem.safety.attribution); absent before the settle step existed or with under two records
    attribution: dict[str, Any] | None = None
    # the reflection consistency, measured weekly (golem.events.quality.ReflectionConsistency); None between
    reflection_consistency: dict[str, Any] | None = None
    # earlier learning changes judged in matched regimes this cycle (rolled back, improved, inconclusive) and the
    # outcome change points found (docs/design/learning.md#regime-matched-evaluation)
    regime_eval: dict[str, Any] = Field(default_factory=dict)
    # rules that entered, were revised in or left PLAYBOOK.md this cycle (each judged at a later cycle)
    playbook_changes: list[dict[str, Any]] = Field(default_factory=list)
    # the strategy judged by what it achieved over the window (golem.safety.experience); absent before that step
    viability: dict[str, Any] | None = None


class DeltaStep(BaseModel):
    """One delta step's share of the cycle's ConsolidationResult: the fields it fills."""

    fields: dict[str, Any] = Field(default_factory=dict)


class DeltaReport(BaseModel):
    """The finished cycle, for the Event Fabric."""

    golem_id: str
    result: ConsolidationResult


class DreamInput(BaseModel):
    golem_id: str
    tick: int
    config: GolemConfig
    replay_count: int = 10
    followups: list[FollowUp] = Field(default_factory=list)  # window next-dream
    # why the scheduler dreamed now, and the thin-liquidity doubling of Tier 1 rehearsal (defaults: older inputs)
    config_version: str = ""
    urgency: float | None = None
    reasons: list[str] = Field(default_factory=list)
    threat_rehearsals: int = Field(default=1, ge=1, le=2)
    # "replay": a backtest's golem, whose path time stands still while it dreams: the cycle runs every phase, with
    # no wall-clock budget to cut it short by how loaded the machine is (docs/how-to/backtesting.md)
    clock: Literal["wall", "replay"] = "wall"


class DreamResult(BaseModel):
    tick: int
    replayed: list[str] = Field(default_factory=list)
    heuristics_touched: int = 0
    report_path: str = ""  # the cycle's DreamJournal (<data>/dreams/cycle-<tick>.json)
    followups_delivered: list[str] = Field(default_factory=list)
    focus: str | None = None  # what a next-dream follow-up made NREM replay first, as the journal says
    # the phases run and where the cycle stopped (defaults keep older results parsing)
    phases_done: list[str] = Field(default_factory=list)
    stopped_at: str | None = None  # the phase a critical steer or the time budget stopped the cycle before
    stop_reason: str | None = None
    imagined: int = 0
    rehearsed: int = 0
    broken: int = 0  # rehearsals whose response failed a check (each left a warning)
    forks: int = 0
    staged: int = 0
    promoted: int = 0
    dream_yield: float | None = None  # share of staged items validated (healthy 10–30%)
    threat_coverage: float | None = None  # Tier 1 threats rehearsed in the last 7 cycles (target 100%)


class DreamPhaseInput(BaseModel):
    """Input of one dream phase activity: what the phase needs, the rest stays on the worker's disk."""

    golem_id: str
    tick: int  # the cycle's tick: journal, staging ids and replay idempotence are keyed by it
    config_version: str = ""  # the worker loads the config by it (lean, like a tick's)
    replay_count: int = 10
    rem_scenarios: int = 2
    rehearse_threats: bool = True
    forks: bool = True
    threat_rehearsals: int = Field(default=1, ge=1, le=2)  # 2 = doubled on thin liquidity (docs/design/dreams.md)
    deadline: str = ""  # ISO time past which the phase stops between scenarios (the cycle's budget)
    urgency: float | None = None
    reasons: list[str] = Field(default_factory=list)
    followups: list[FollowUp] = Field(default_factory=list)  # next-dream notes: NREM's focus; integrate delivers them
    stopped_at: str | None = None  # integrate: where the cycle stopped, for the journal
    stop_reason: str | None = None


class DreamPhaseResult(BaseModel):
    phase: str
    items: int = 0  # replayed / imagined / rehearsed
    broken: int = 0
    forks: int = 0
    stopped_early: bool = False  # the deadline passed between scenarios


class TickFailure(BaseModel):
    golem_id: str
    tick: int
    workflow_id: str
    run_id: str = ""
    error: str
    failed_at: str
    # A later run of the tick (a reset, a rerun) that failed records itself: the parent has moved on.
    run_label: str = ""
    run_kind: str = "original"


class ControlRequest(BaseModel):
    """A stop button pressed (GolemWorkflow's pause / resume / stop_entries / allow_entries updates)."""

    reason: str = Field(default="", max_length=500)
    source: str = Field(default="cli", max_length=40)  # cli | dashboard | ...


class ControlState(BaseModel):
    """What the golem answers a stop button with."""

    paused: bool
    entries_stopped: bool
    tick: int  # the next tick number
    note: str
