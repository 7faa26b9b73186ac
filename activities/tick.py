"""The tick's activities: thin wrappers that call golem.* services and do the I/O.

Each is a method of TickActivities, which receives its clients (web3, LanceDB, SQLite, deliberator)
from the worker. Activities never decide what runs next; ThetaTickWorkflow does.
Bad input raises a non-retryable ApplicationError whose message says what to fix.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from web3.exceptions import Web3Exception

from activities import ActivitySet
from activities.heartbeat import auto_heartbeat
from golem import ids
from golem.inference.budget import apply_budget, daily_spend_on, escalate_every_tick
from golem.cognition.decide import decide_with_cache, offered
from golem.cognition.learned_gating import gate_tick, tick_seed
from golem.cognition.lines import lift, live_forecast, strategy_lines, wake_check
from golem.cognition.prediction_error import compute_prediction_error
from golem.cognition.retrieve import retrieve_for_decide
from golem.cognition.threshold import compute_adaptive_threshold
from golem.chain.liquidations import force_t2_reason
from golem.chain.market_window import read_market_window
from golem.clade.deposits import deposits_from
from golem.clade.exchange import CladeLedger
from golem.clade.proposals import ProposalInbox
from golem.models.clade import ExchangeStep
from golem.models.pheromones import DepositBatch, PheromoneReadings
from golem.chain.reader import ChainReadError
from golem.chain.simulate import SimulationError
from golem.chain.journal import TxIntent
from golem.chain.tick_reads import TickReads
from golem.grimoire.memory_tools import CombinedReads, MemoryReads
from golem.chain.tools.schemas import ToolArgumentError
from golem.events import bridge as events
from golem.events.models import make_event
from golem.grimoire.semantic.graph import KnowledgeGraph
from golem.grimoire.playbook.compile import read_revision
from golem.grimoire.semantic.topology import TopologyTracker, assert_llm_facts
from golem.inference.decision import DECIDE, REQUEST_PRIVILEGED, decision_tools, requestable
from golem.inference.deliberator import Route
from golem.inference.offline import MODEL_NAME as OFFLINE_MODEL
from golem.learning.reflexion_llm import worded
from golem.inference.router import InferenceRejected, InferenceRetryable
from golem.inference.strategies import StrategySet, credits
from golem.safety.urgency import LineRule, line_rules
from golem.inference.strategy import Strategy, metrics_from, rules_in
from golem.safety.experience import restriction_at
from golem.learning.expectation import scaled
from golem.learning.loop import allocation_defaults, reflexion_of
from golem.life.after_turn import after_turn_in_reflect
from golem.life.death import settlement_deliberation
from golem.extensions.agent_start import AgentStart, before_agent_start, system_prompt
from golem.extensions.hooks import fire
from golem.extensions.registry import registry_for
from golem.cognition.reflect import build_record, strategies_after, tick_result
from golem.models.enums import ActionStatus, Tier
from golem.models.config import GolemConfig
from golem.models.golem import TickFailure
from golem.models.observation import ChainSnapshot, Observation
from golem.models.record import (
    ActionRecord,
    DecisionCycleRecord,
    DeliberationRecord,
    OutcomeRecord,
    Reflexion,
)
from golem.models.slices import as_slice
from golem.models.threats import MarketWindow
from golem.models.config_version import strategy_sha256
from golem.models.tick import (
    whole,
    AnalyzeInput,
    AnalyzeResult,
    DecideInput,
    Deliberation,
    ExecuteInput,
    ExecuteResult,
    GateInput,
    GateResult,
    ObserveInput,
    ProposedAction,
    ReflectInput,
    RetrievedKnowledge,
    RetrieveInput,
    SimulateInput,
    SimulationResult,
    TickContext,
    TickResult,
    ValidateInput,
    ValidationResult,
    VerifyInput,
)
from golem.models.approvals import ApprovalAudit
from golem.safety.approvals import approvals_ran, approved, audit_payload, with_approved
from golem.safety.run_actions import renumbered
from golem.safety.gas import utc_day_of
from golem.safety.urgency import next_deferred, release_reason, with_deferred
from activities.pheromones import PheromoneLink
from activities.clade import CladeBus, exchange_events, exchange_pass, ledger_path
from activities.runs import reset_origin
from activities.step_results import StepResults
from golem.services import Services
from golem.usecases.observe import observe as observe_tick

# Every step's input: a lean one names earlier results (refs) and its config by version until made whole.
StepInput = TypeVar("StepInput", ObserveInput, AnalyzeInput, GateInput, RetrieveInput, DecideInput, SimulateInput,
                    ValidateInput, ExecuteInput, VerifyInput, ReflectInput)



def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def _run_id() -> str | None:
    """The Temporal run this activity works for: another run of the tick (a reset, a rerun) has another."""
    return activity.info().workflow_run_id if activity.in_activity() else None


def bad_input(message: str, kind: str = "BadInput") -> ApplicationError:
    return ApplicationError(message, type=kind, non_retryable=True)


class TickActivities(ActivitySet):
    def __init__(self, services: Services, temporal: Client | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.s = services
        # The worker's Temporal client: reflect reads a reset run's reason from its history, and lean step inputs
        # get the earlier steps' results they name from the tick run's history.
        self.temporal = temporal
        if loop is None:  # a fleet worker builds a golem's activities on a thread and hands its loop in
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
        self.results = StepResults(temporal, loop) if temporal is not None else None
        self._loop = loop
        # the clade's pheromone field, through the same client (docs/design/pheromones.md)
        self.pheromones = PheromoneLink(temporal) if temporal is not None else None
        self._clade_bus: CladeBus | None = None  # the clade's entry exchange, on the same client
        self._ledger: CladeLedger | None = None
        self._topology: TopologyTracker | None = None
        self._strategies: dict[str, StrategySet] = {}  # config version → its strategy files, parsed once

    def _results(self) -> StepResults:
        if self.results is None:
            raise bad_input("this worker has no Temporal client to read earlier steps' results with", "NoClient")
        return self.results

    @staticmethod
    def _wanted(inp: StepInput) -> dict[str, tuple[str, Any]]:
        fields = type(inp).model_fields
        refs: dict[str, str] = getattr(inp, "refs", {})
        return {name: (step, fields[name].annotation) for name, step in refs.items()}

    @staticmethod
    def _run() -> tuple[str, str]:
        info = activity.info()
        return info.workflow_id or "", info.workflow_run_id or ""

    def _resolved(self, inp: StepInput, step: str) -> StepInput:
        """The step's whole input (sync activities): see _completed."""
        if getattr(inp, "refs", None):
            inp = inp.model_copy(update=self._results().fetch_sync(*self._run(), self._wanted(inp)))
        return self._completed(inp, step)

    async def _aresolved(self, inp: StepInput, step: str) -> StepInput:
        """The step's whole input (async activities): see _completed."""
        if getattr(inp, "refs", None):
            inp = inp.model_copy(update=await self._results().fetch(*self._run(), self._wanted(inp)))
        return self._completed(inp, step)

    def _completed(self, inp: StepInput, step: str) -> StepInput:
        """A lean input made whole: earlier steps' results it names are read back from the tick run's
        history (activities.step_results), its config comes from the version it names, and its state and observation
        slices are rebuilt so that reading a field a slice lacks raises."""
        ctx = inp.ctx
        update: dict[str, Any] = {}
        if ctx.config is None:
            try:
                update["config"] = self.s.config_for(ctx.config_version)
            except ValueError as err:
                raise bad_input(str(err), "ConfigVersionMissing") from None
        if ctx.slice_field_names:
            update["state"] = as_slice(ctx.state, frozenset(ctx.slice_field_names),
                                       f"golem.models.state.STEP_STATE_FIELDS[{step!r}]")
        fields = getattr(inp, "observation_fields", None)
        out = inp.model_copy(update={"ctx": ctx.model_copy(update=update)}) if update else inp
        observation = getattr(inp, "observation", None)
        if fields and observation is not None:
            out = out.model_copy(update={"observation": as_slice(observation, frozenset(fields),
                                                                 f"golem.models.tick.STEP_OBSERVATION_FIELDS[{step!r}]")})
        return out

    def topology(self) -> TopologyTracker:
        """The knowledge graph's topology tracker, in the semantic store's file."""
        if self._topology is None:
            self._topology = TopologyTracker(KnowledgeGraph(self.s.semantic.db_path), self.s.w3, self.s.deployment)
        return self._topology

    @activity.defn(name="observe")
    def observe(self, inp: ObserveInput) -> Observation:
        """The tick's perception (golem.usecases.observe), on its config version's STRATEGY.md."""
        inp = self._resolved(inp, "observe")
        obs = observe_tick(self.s, inp.ctx, self._strategy_set(inp.ctx), self.topology())
        readings = self._read_field(inp.ctx, obs)
        return obs.model_copy(update={"pheromones": readings}) if readings is not None else obs

    def _entities(self, obs: Observation) -> list[str]:
        """The topology entities this golem touches (its pool, the oracle, the lending market: the knowledge
        graph's node ids) and its chain (where congestion is laid)."""
        protocol = self.topology().protocol
        return sorted({*(protocol.entities.values() if protocol is not None else ()),
                       f"chain:{obs.snapshot.chain_id}"})

    def _read_field(self, ctx: TickContext, obs: Observation) -> PheromoneReadings | None:
        """The clade's pheromone field on this golem's entities (None: a lone golem, or clade switched off)."""
        clade = ctx.cfg.clade
        if not clade.id or not registry_for(ctx.cfg.extensions.disabled).active("clade"):
            return None
        entities = self._entities(obs)
        if self.pheromones is None or self._loop is None:
            return PheromoneReadings(clade=clade.id, entities=entities,
                                     error="this worker has no Temporal client to read the pheromone field with")
        pending = asyncio.run_coroutine_threadsafe(
            self.pheromones.read(clade.id, entities, ctx.golem_id, clade.read_timeout_s), self._loop)
        try:
            return pending.result(timeout=clade.read_timeout_s + 5)
        except TimeoutError:  # the worker's event loop did not get to it: the tick goes on without the field
            pending.cancel()
            return PheromoneReadings(clade=clade.id, entities=entities,
                                     error=f"pheromone field not read within {clade.read_timeout_s + 5:.0f} s")

    async def lay_pheromones(self, record: DecisionCycleRecord, cfg: GolemConfig) -> list[str]:
        """The clade member of after_turn: what the tick saw and did, laid on the clade's field (one batch per tick,
        so a retried reflect or a reset run lays nothing twice). Temporal not answering loses this tick's deposits and says so
        in the log; the tick goes on."""
        deposits = deposits_from(record, cfg.clade)
        if not deposits or self.pheromones is None:
            return []
        # one batch per tick: a retried reflect, or a reset run replaying the tick's old observation, lays nothing again
        batch = DepositBatch(id=f"{record.golem_id}/{record.tick}", deposits=deposits)
        try:
            await self.pheromones.lay(cfg.clade.id, batch, timeout_s=cfg.clade.read_timeout_s + 3)
        except Exception as err:  # Temporal itself is not reachable: this tick's deposits are not laid
            activity.logger.warning("pheromones of tick %s not laid on clade %s: %s", record.tick, cfg.clade.id, err)
            return []
        return [f"{d.kind} {d.intensity:.2f} on {d.entity}" for d in deposits]

    def _strategy_set(self, ctx: TickContext) -> StrategySet:
        """The strategy files of the tick's version, parsed once per version (every step reads them); STRATEGY.md's
        error in `main_error` when it does not parse (decide reports it; System 1 keeps the [probes] defaults)."""
        version = ctx.config_version
        if version and version in self._strategies:  # a version's files never change
            return self._strategies[version]
        try:
            strategies = self.s.load_strategies(ctx)
        except ValueError as err:  # the version is not on this disk: not kept, read again next time
            return StrategySet(main=None, main_error=str(err))
        if strategies.main is None:
            activity.logger.warning("STRATEGY.md unreadable (System 1 keeps the [probes] defaults): %s",
                                    strategies.main_error)
        if version:
            if len(self._strategies) >= 16:  # a few golems' current versions; an old one is re-read if it returns
                self._strategies.pop(next(iter(self._strategies)))
            self._strategies[version] = strategies
        return strategies

    def _strategy_or_none(self, ctx: TickContext, obs: Observation) -> Strategy | None:
        """The tick's effective strategy: STRATEGY.md joined by the strategies observe found active (None when
        STRATEGY.md does not parse)."""
        return self._strategy_set(ctx).effective(obs.strategies.active if obs.strategies is not None else [])

    def _compiled(self, ctx: TickContext, obs: Observation) -> Strategy:
        """decide's compiler: the effective strategy, or STRATEGY.md's error (a bad input the tick records)."""
        strategy = self._strategy_or_none(ctx, obs)
        if strategy is None:
            raise ValueError(self._strategy_set(ctx).main_error)
        return strategy

    @activity.defn(name="gamma")
    def gamma(self, golem_id: str) -> ChainSnapshot:
        """The gamma pulse's perception: one batched chain read, nothing else."""
        return self.s.read_snapshot()

    @activity.defn(name="analyze")
    def analyze(self, inp: AnalyzeInput) -> AnalyzeResult:
        inp = self._resolved(inp, "analyze")
        obs = whole(inp.observation, "observation")
        cfg = inp.ctx.cfg
        pe, sources = compute_prediction_error(inp.ctx.state, obs, cfg.oracle.enabled,
                                               cfg.gating.topology_weight)
        return AnalyzeResult(prediction_error=pe, sources=sources)

    @activity.defn(name="gate")
    def gate(self, inp: GateInput) -> GateResult:
        inp = self._resolved(inp, "gate")
        obs = whole(inp.observation, "observation")
        ctx = inp.ctx
        threshold = compute_adaptive_threshold(ctx.state, ctx.cfg.heartbeat.base_deliberation_threshold)
        # System 1 never lets a line of STRATEGY.md be crossed in silence (docs/design/wakefulness.md)
        strategy = self._strategy_or_none(ctx, obs)
        # PLAYBOOK.md's learned rules too: decide applies them, so one that would fire wakes the tick as an owner's does
        learned = rules_in(self.s.playbook_text(), "PLAYBOOK.md", strategy) if strategy is not None else []
        wake = wake_check(strategy, obs, ctx.state.health_history, ctx.state.last_price, ctx.cfg.probes, ctx.cfg.wake,
                          learned)
        if ctx.settlement:  # Thanatopsis: the dying golem's unwind is decided in full
            return GateResult(tier=Tier.T2, threshold=threshold, forced=True, wake=wake,
                              reason="forced T2: Thanatopsis settlement (the golem is dying: unwind)")
        spend = daily_spend_on(ctx.state, ctx.started_at)
        if obs.force_t2_reason:  # a reorg re-marked earlier episodes: full attention
            tier, why = apply_budget(Tier.T2, spend, ctx.cfg.heartbeat)
            reason = f"forced T2: {obs.force_t2_reason}" + (f"; {why}" if why else "")
            tier, reason, wake = lift(tier, reason, wake)
            return GateResult(tier=tier, threshold=threshold, reason=reason, forced=True, wake=wake)
        # Forced T2, then fixed thresholds (cold start) or learned gating, then the daily budget cap.
        out = gate_tick(
            inp.prediction_error, threshold, ctx.state, inp.steers, obs,
            probe_thresholds=ctx.cfg.probes, heartbeat=ctx.cfg.heartbeat, gating=ctx.cfg.gating,
            daily_spend=spend, seed=tick_seed(ctx.golem_id, ctx.tick),
        )
        tier, reason = out.tier, out.reason
        if ctx.cfg.gating.mode == "always":
            tier, note = escalate_every_tick(tier, spend, ctx.cfg.heartbeat)
            reason = f"{reason}; {note}" if note else reason
        tier, reason, wake = lift(tier, reason, wake)  # the wake floor: last, so nothing above keeps it at T0
        waiting = approved(ctx.state)
        if tier is Tier.T0 and waiting:  # the owner approved a privileged request: it runs on this tick
            tier, reason = Tier.T1, f"{reason}; lifted to T1: the owner approved {', '.join(a.id for a in waiting)}"
        if tier is Tier.T0:  # a deferred intent comes back once gas falls or urgency rises (golem.safety.urgency)
            released = release_reason(ctx.state.deferred_intents, obs.snapshot.gas_price_gwei, ctx.state.gas_history,
                                      wake.forecast, strategy_lines(strategy, ctx.cfg.probes, ctx.cfg.wake).floor,
                                      day=utc_day_of(ctx.started_ts) if ctx.started_ts is not None else "")
            if released:
                tier, reason = Tier.T1, f"{reason}; lifted to T1: {released}"
        return GateResult(tier=tier, threshold=out.threshold, reason=reason, forced=out.forced, gating=out.decision,
                          wake=wake)

    @activity.defn(name="retrieve")
    def retrieve(self, inp: RetrieveInput) -> RetrievedKnowledge:
        """What the decide step gets from memory (golem.cognition.retrieve): abstains when nothing is relevant."""
        inp = self._resolved(inp, "retrieve")
        return retrieve_for_decide(inp, self.s.episodes, self.s.semantic, self.s.learning)

    @activity.defn(name="decide")
    @auto_heartbeat  # a steer's cancel reaches a decide waiting on the model through these beats
    async def decide(self, inp: DecideInput) -> Deliberation:
        inp = await self._aresolved(inp, "decide")
        obs = whole(inp.observation, "observation")
        ctx = inp.ctx
        if ctx.settlement:  # Thanatopsis: the unwind plan, no model, no cache (golem.life.death)
            return self._numbered(inp, settlement_deliberation(obs, ctx.cfg, self._strategy_or_none(ctx, obs)))
        try:  # before_agent_start: tools → context → compiler → model-router → safety (extensions.agent_start)
            start = await asyncio.to_thread(self._before_agent_start, inp, obs)
        except ValueError as err:
            raise bad_input(str(err), "StrategyError") from None
        strategy, must, policy = start.strategy, start.must, start.context_policy
        registry = registry_for(ctx.cfg.extensions.disabled)
        prompt = await asyncio.to_thread(  # system_prompt: playbook → PLAYBOOK.md (golem.extensions.agent_start)
            system_prompt, registry, playbook=self.s.playbook_text)
        tools = offered(start.tools, must)
        # agent_start: the session is set up, nothing asked yet — the ui-bridge's heartbeat.deliberation_started
        agent_start, _ = fire(registry, "agent_start", {"ui-bridge": lambda: self._emit(ctx, "heartbeat.deliberation_started", dict(
            tier=inp.tier.value, model=start.route.model if start.route else None,
            tools=[t["name"] for t in tools or []], steers=[s.id for s in inp.steers]))})

        def agent_end(outcome: str, record: DeliberationRecord | None = None) -> list[str]:
            """agent_end: the session closes (answered or not) — the ui-bridge's heartbeat.deliberation_ended."""
            figures = {} if record is None else dict(
                model=record.model, decision=record.decision, cost_usd=record.cost, tool_rounds=record.tool_rounds,
                input_tokens=record.input_tokens, output_tokens=record.output_tokens,
                reads=len(record.reads), actions=len(record.tool_calls))
            fired, _ = fire(registry, "agent_end", {"ui-bridge": lambda: self._emit(
                ctx, "heartbeat.deliberation_ended", dict(tier=inp.tier.value, outcome=outcome, **figures))})
            return fired
        try:
            deliberation = await decide_with_cache(
                inp, deliberator=self.s.deliberator, cache_store=self.s.decision_cache, strategy=strategy, must=must,
                tools=tools, route=start.route, reads=self._reads(inp, obs, tools or []),
                playbook_text=prompt.playbook_text, playbook_revision=read_revision(self.s.playbook_path),
                context_policy_revision=policy.revision, remember_facts=lambda d: self._remember_facts(inp, d),
            )
        except InferenceRetryable as err:  # rate limit, overload, timeout: Temporal retries with backoff
            agent_end(f"retrying: {err.reason}"[:200])
            delay = timedelta(seconds=err.retry_after_s) if err.retry_after_s else None
            raise ApplicationError(err.reason, type="InferenceRetryable", next_retry_delay=delay) from None
        except InferenceRejected as err:  # a bad request will not get better by retrying
            agent_end(f"rejected: {err.reason}"[:200])
            raise bad_input(err.reason, "InferenceRejected") from None
        ended = agent_end("answered", deliberation.record)
        record = deliberation.record.model_copy(update={"before_agent_start": start.fired,
                                                        "system_prompt": prompt.fired, "agent_start": agent_start,
                                                        "agent_end": ended})
        deliberation = deliberation.model_copy(update={"record": record})
        own = list(deliberation.actions)  # the decision's own proposals: the strategies they serve are credited below
        if ctx.state.deferred_intents:  # the gas gate's deferred intents come back and are judged again
            actions = with_deferred(deliberation.actions, ctx.state.deferred_intents)
            if len(actions) > len(deliberation.actions):
                carried = ", ".join(f"{a.tool} ({a.rationale})" for a in actions[len(deliberation.actions):])
                record = record.model_copy(update={"recommends_action": True,
                                                   "reasoning_summary": f"{record.reasoning_summary} | carried: {carried}"})
                deliberation = deliberation.model_copy(update={"record": record, "actions": actions})
        waiting = approved(ctx.state)
        if waiting:  # the owner's approved privileged requests run now, judged by the whole validate chain
            actions = with_approved(deliberation.actions, waiting)
            ran = ", ".join(f"{a.tool} ({a.approval_id})" for a in actions[len(deliberation.actions):])
            record = deliberation.record.model_copy(update={
                "recommends_action": True, "reasoning_summary": f"{deliberation.record.reasoning_summary} | approved by "
                                                                f"the owner: {ran}"})
            deliberation = deliberation.model_copy(update={"record": record, "actions": actions})
        return self._credited(inp, obs, own, self._numbered(inp, deliberation))

    def _credited(self, inp: DecideInput, obs: Observation, own: list[ProposedAction],
                  deliberation: Deliberation) -> Deliberation:
        """Which active strategy each of the decision's own actions serves, on its record (reflect counts the executed
        ones toward `after N actions`: golem.inference.strategies.credits). Numbered as the actions that go on."""
        if obs.strategies is None or not obs.strategies.active or not own:
            return deliberation
        rec = deliberation.record
        found = credits(own, {r.action_index: r.rule for r in rec.rules_applied}, rec.strategy,
                        self._strategy_set(inp.ctx), obs.strategies.active)
        moved = {a.action_index: b.action_index for a, b in zip(own, deliberation.actions)}  # a rerun renumbers
        found = [c.model_copy(update={"action_index": moved[c.action_index]}) for c in found]
        return deliberation.model_copy(update={"record": rec.model_copy(update={"credits": found})})

    def _emit(self, ctx: TickContext, kind: str, payload: dict[str, Any]) -> None:
        """One live event of this tick (the ui-bridge's members), outside the record's own events."""
        self.s.events.emit([make_event(ctx.golem_id, ctx.tick, _now_iso(), kind, "", **payload)])

    def _reads(self, inp: DecideInput, obs: Observation, tools: list[dict[str, Any]]) -> CombinedReads:
        """The tool loop's reads and `speculate` for the write tools offered this tick (golem.chain.tick_reads), and
        the memory tools (golem.grimoire.memory_tools)."""
        policy = inp.ctx.cfg.policy  # speculate tries the grant's write tools and the privileged ones it may ask for
        granted = [t["name"] for t in tools or [] if t["name"] not in (DECIDE, REQUEST_PRIVILEGED)]
        asked = requestable(policy.approved_assets, list(policy.privileged_tools)) if any(
            t["name"] == REQUEST_PRIVILEGED for t in tools or []) else []
        chain = TickReads(self.s.w3, self.s.deployment, self.s.account, obs, write_tools=[*granted, *asked])
        memory = MemoryReads(self.s.episodes, self.s.semantic, golem_id=inp.ctx.golem_id, tick=inp.ctx.tick,
                             regime=obs.regime.value, block=obs.snapshot.block_number,
                             regime_tag=obs.regime_tag.cell if obs.regime_tag is not None else None)
        return CombinedReads(chain, memory)

    def _before_agent_start(self, inp: DecideInput, obs: Observation) -> AgentStart:
        ctx = inp.ctx

        def viable(strategy: Any) -> Any:
            viability = self.s.strategy_viability(obs, ctx.state.phase, ctx)
            if not viability.viable:  # stop trading until the owner fixes STRATEGY.md (and steers)
                raise bad_input(f"STRATEGY_UNVIABLE: {viability.explanation()}", "StrategyUnviable")
            return viability

        return before_agent_start(
            registry_for(ctx.cfg.extensions.disabled),
            tools=lambda: decision_tools(ctx.cfg.policy.approved_assets, list(ctx.cfg.policy.privileged_tools),
                                         obs.strategies.active if obs.strategies is not None else []),
            context=lambda: self.s.learning.context_policy(allocation_defaults(ctx.cfg)),
            compile=lambda: self._compiled(ctx, obs), viability=viable, route=lambda: self._route(inp),
            # before any LLM call: STRATEGY.md MUST lines (breaches audited; forbidden tools never run)
            safety=lambda strategy: self.s.safety.pre_llm_gate(ctx.golem_id, ctx.tick, strategy, obs))

    def _route(self, inp: DecideInput) -> Route:
        """The model-router's answer, except while the strategy is unviable from experience: then the offline
        deliberator (its rules still protect the position) and no paid model call."""
        restricted = self._restriction(inp.ctx)
        if restricted:
            return Route(model=OFFLINE_MODEL, why=f"restricted (strategy unviable from experience): {restricted[:200]}")
        return self.s.deliberator.route(inp)

    def _numbered(self, inp: DecideInput, deliberation: Deliberation) -> Deliberation:
        """Another run of this tick (a reset, a rerun) already used action slots: this run's actions are
        numbered after them, so what it sends gets its own permits and journal entries."""
        run_id = _run_id()
        if run_id is None:
            return deliberation
        first = self.s.safety.run_actions.first_free_index(inp.ctx.golem_id, inp.ctx.tick, run_id)
        return deliberation.model_copy(update={"actions": renumbered(deliberation.actions, first)})

    def _remember_facts(self, inp: DecideInput, deliberation: Deliberation) -> Deliberation:
        """The model's relations go into the knowledge graph once checked against
        it; what was asserted and what was refused (and why) is on the record. Memory only — never a write."""
        outcome = assert_llm_facts(self.topology().kg, deliberation.kg_facts,
                                   block=whole(inp.observation, "observation").snapshot.block_number,
                                   tick=inp.ctx.tick)
        rec = deliberation.record
        record = rec.model_copy(update={"kg_facts": outcome.asserted,
                                        "rejections": [*rec.rejections, *(f"decide.{r}" for r in outcome.refused)]})
        return deliberation.model_copy(update={"record": record})

    @activity.defn(name="simulate")
    def simulate(self, inp: SimulateInput) -> SimulationResult:
        inp = self._resolved(inp, "simulate")
        obs = whole(inp.observation, "observation")
        return self.s.simulate(inp.actions, obs)

    @activity.defn(name="validate")
    def validate(self, inp: ValidateInput) -> ValidationResult:
        inp = self._resolved(inp, "validate")
        simulation = whole(inp.simulation, "simulation")
        obs = whole(inp.observation, "observation")
        # safety → risk → permits, most restrictive wins; STRATEGY.md MUST lines are checked too.
        ctx = inp.ctx
        strategy = self._strategy_or_none(ctx, obs)  # parsed once per config version
        lines = strategy_lines(strategy, ctx.cfg.probes, ctx.cfg.wake)
        # The gas partition's day is the tick's clock (path time in a backtest), and the owner's high/critical
        # steers of this tick make its actions protective (golem.safety.gas).
        result, _ = self.s.safety.validate(
            ctx.golem_id, ctx.tick, ctx.state.phase, inp.actions, simulation, obs, strategy=strategy,
            steers=[*ctx.state.pending_steers, *inp.steers], now=ctx.started_ts,
            run_id=_run_id(), config=ctx.cfg,  # the tick's config version's limits, not the worker's file
            entries_stopped=ctx.state.entries_stopped,  # the owner's stop-entries
            markers=ctx.state.life.markers, last_price=ctx.state.last_price,  # somatic markers
            resimulate=lambda sized: self.s.simulate(sized, obs),  # size to fit: a clipped set is simulated again
            # urgency buys gas: the health factor's forecast against STRATEGY.md's lines that can act now — a rule's
            # line whose other conditions are false makes no sell urgent (golem.safety.urgency)
            forecast=live_forecast(lines, strategy, obs, ctx.state.health_history,
                                   metrics_from(obs, ctx.state.last_price), ctx.cfg.wake),
            floor=lines.floor, gas_history=ctx.state.gas_history,
            # a sell answering a rule's crossed line (STRATEGY.md's or a learned one in PLAYBOOK.md) is urgent
            line_rules=self._line_rules(strategy, obs, ctx.state.last_price),
            approvals={a.id: a.tool for a in approved(ctx.state)},  # the owner widened the grant for these alone
            market=self._market_window(obs, ctx.cfg.policy.threat_window_blocks),  # the DeFi threat detectors
            restricted=self._restriction(ctx),  # the strategy judged unviable by experience (golem.safety.experience)
        )
        return result

    def _restriction(self, ctx: TickContext) -> str | None:
        """The unacknowledged critical findings of the last delta cycle on the STRATEGY.md this tick runs (None: the
        golem is not restricted)."""
        if not ctx.cfg.viability.enabled or not self.s.layout.viability.exists():  # most ticks: no cycle judged yet
            return None
        try:  # keyed by the home's STRATEGY.md (what the delta cycle judged): a new file lifts the restriction
            text = self.s.strategy_text()
        except ValueError:
            return None
        return restriction_at(self.s.layout.viability, strategy_sha256(text))

    def _market_window(self, obs: Observation, blocks: int) -> MarketWindow:
        """The pair and the feed over the blocks before the observation (golem.chain.market_window); a node that cannot
        answer leaves it empty, and the detectors' verdicts say they had nothing to judge."""
        try:
            return read_market_window(self.s.w3, self.s.deployment, obs.snapshot.block_number, blocks)
        except ChainReadError as e:
            activity.logger.warning("threat detectors: the recent blocks could not be read: %s", e)
            return MarketWindow()

    def _line_rules(self, strategy: Strategy | None, obs: Observation, last_price: float | None) -> list[LineRule]:
        """The rules decide read (STRATEGY.md's and PLAYBOOK.md's) that fire now on a crossed health-factor line with
        a sell (golem.safety.urgency.line_rules)."""
        if strategy is None:
            return []
        rules = [*strategy.rules, *rules_in(self.s.playbook_text(), "PLAYBOOK.md", strategy)]
        return line_rules(rules, metrics_from(obs, last_price))

    @activity.defn(name="execute")
    def execute(self, inp: ExecuteInput) -> ExecuteResult:
        inp = self._resolved(inp, "execute")
        validation = whole(inp.validation, "validation")
        obs = whole(inp.observation, "observation")
        activity.heartbeat("executing")
        ctx = inp.ctx
        if inp.cancelled_reason:  # a high-severity steer: cancel what is not sent yet (never what is)
            return ExecuteResult(records=self.s.safety.cancel_unsent(
                ctx.golem_id, ctx.tick, inp.actions, validation, inp.cancelled_reason
            ))
        if inp.restricted:  # Restricted: an earlier action of the batch failed, nothing approved after it is sent
            cut = self.s.safety.cancel_unsent(ctx.golem_id, ctx.tick, inp.actions, validation, inp.restricted,
                                              restricted=True)
            if cut:
                return ExecuteResult(records=cut)  # else not approved anyway, or already on its way: as below
        records: list[ActionRecord] = []
        verdicts = {v.action_index: v for v in validation.actions}
        for action in inp.actions:
            verdict = verdicts.get(action.action_index)
            base: dict[str, Any] = dict(action_index=action.action_index, action_type=action.tool,
                                        tool_name=action.tool, should=verdict.should if verdict is not None else [],
                                        threats=verdict.threats if verdict is not None else [])
            if verdict is not None and verdict.sent_by_run:  # another run of this tick sent this very action
                records.append(ActionRecord(**base, status=ActionStatus.ALREADY_SENT, block_reason=verdict.reason,
                                            sent_by_run=verdict.sent_by_run))
                continue
            if verdict is None or not verdict.approved or not verdict.permit_id:
                reason = verdict.reason if verdict else "not validated"
                # deferred by the gas gate: waits in GolemState for gas to fall or urgency to rise
                status = ActionStatus.DEFERRED if verdict is not None and verdict.deferred else ActionStatus.BLOCKED
                records.append(ActionRecord(**base, status=status, block_reason=reason))
                continue
            if not self.s.live:
                records.append(
                    ActionRecord(**base, permit_id=verdict.permit_id, status=ActionStatus.DEFERRED,
                                 block_reason="dry-run: external RPC and not started with --live",
                                 protective=verdict.protective, clipped=verdict.clipped)
                )
                continue
            record = self._execute_one(inp, action, verdict.permit_id, obs)
            records.append(record.model_copy(update={"protective": verdict.protective, "clipped": verdict.clipped,
                                                     "should": verdict.should, "threats": verdict.threats}))
            activity.heartbeat(f"action {action.action_index} done")
        return ExecuteResult(records=records)

    def _execute_one(self, inp: ExecuteInput, action: ProposedAction, permit_id: str, obs: Observation) -> ActionRecord:
        """One permitted action, with tool_execution_start / _update / _end fired around it (the ui-bridge's live
        actions.sending, actions.tx and actions.landed events)."""
        ctx = inp.ctx
        registry = registry_for(ctx.cfg.extensions.disabled)

        def emit(stage: str, key: str = "", **payload: Any) -> None:
            self.s.events.emit([events.execution_event(ctx.golem_id, ctx.tick, _now_iso(), stage, action.action_index,
                                                       action.tool, key=key, **payload)])

        fire(registry, "tool_execution_start", {"ui-bridge": lambda: emit("sending", permit_id=permit_id,
                                                                           arguments=action.arguments)})
        try:
            record = self.s.execute(ctx, action, permit_id, obs, run_id=_run_id())
        except Exception as err:
            fire(registry, "tool_execution_end", {"ui-bridge": lambda: emit("landed", status="error",
                                                                             reason=str(err)[:300])})
            raise
        for intent in self.s.safety.journal.intents_for(ctx.golem_id, ctx.tick, action.action_index):
            def tx(i: TxIntent = intent) -> None:
                emit("tx", str(i.call_index), tx_hash=i.tx_hash, nonce=i.nonce, label=i.label, status=i.status)
            fire(registry, "tool_execution_update", {"ui-bridge": tx})
        fire(registry, "tool_execution_end", {"ui-bridge": lambda: emit(
            "landed", status=record.status.value, tx_hash=record.tx_hash, block=record.block_number,
            gas_used=record.gas_used, gas_usd=record.gas_cost, reason=record.block_reason)})
        return record

    @activity.defn(name="verify")
    def verify(self, inp: VerifyInput) -> OutcomeRecord:
        inp = self._resolved(inp, "verify")
        obs = whole(inp.observation, "observation")
        return self.s.verify(inp.ctx, inp.actions, inp.simulation, inp.records, obs, inp.run_label)

    @activity.defn(name="reflect")
    @auto_heartbeat
    async def reflect(self, inp: ReflectInput) -> TickResult:
        inp = await self._aresolved(inp, "reflect")
        if inp.analysis is None or inp.gate is None:
            raise bad_input("reflect needs the tick's analysis and gate results (inline or named in refs)",
                            "ReflectInputIncomplete")
        gate = inp.gate
        if inp.run is not None and inp.run.kind == "reset" and inp.run.reset_reason is None and self.temporal:
            inp = inp.model_copy(update={"run": await reset_origin(self.temporal, inp.workflow_id, inp.run)})
        record = build_record(inp, inp.ctx.started_at or _now_iso())  # the tick's clock (path time in a backtest)
        if record.observation.strategies is not None:  # what the strategies' rules executed; completions
            record.strategies = strategies_after(record, self._strategy_set(inp.ctx), record.timestamp)
        if record.outcome is not None and inp.deliberation is not None:
            spend = daily_spend_on(inp.ctx.state, inp.ctx.started_at)
            evaluation = await self.s.evaluate(record, inp.deliberation.actions, spend)
            if evaluation is not None:
                record.evaluation = evaluation.model_dump(mode="json")
                record.inference_cost += evaluation.cost
                record.total_cost += evaluation.cost
        proposed = inp.deliberation.actions if inp.deliberation else []
        regime_changed = inp.ctx.state.regime != record.regime
        # Reflexion's numbers (the half-size counterfactual simulated on the pre-tick block), worded by Claude
        # when one is configured (T1 routine, T2 anomalous)
        reflexion = await asyncio.to_thread(self._reflexion, record, proposed)
        if reflexion is not None:
            reflexion, cost = await worded(reflexion, record, router=self.s.router,
                                           regime_changed=regime_changed,
                                           daily_spend=daily_spend_on(inp.ctx.state, inp.ctx.started_at))
            record.inference_cost += cost
            record.total_cost += cost
        # after_turn in the registry's order: heartbeat → lifespan → daimon → memory → … → telemetry
        chain, path, episode = await after_turn_in_reflect(
            self.s, record, inp.ctx.state, inp.ctx.cfg, proposed=proposed, reflexion=reflexion,
            regime_changed=regime_changed, clade=self._clade_member(inp),
            emit=lambda r: self.s.events.emit(events.record_events(r, _now_iso(), **events.tick_context(inp.ctx, r))))
        await self._self_steer(inp, chain.record)
        result = tick_result(chain.record, path, episode, wire=inp.ctx.wire)
        result.life = chain.update
        result.actions_proposed = len(proposed)
        # what the gas gate deferred waits in GolemState, one intent per tool (golem.safety.urgency)
        out = chain.record.outcome
        if out is not None and out.health_factor_after is not None and out.health_factor_before is not None:
            result.hf_restored = max(out.health_factor_after - out.health_factor_before, 0.0) or None
        result.deferred_intents = next_deferred(inp.ctx.state.deferred_intents, record.tick, proposed,
                                                chain.record.actions, record.observation.snapshot.gas_price_gwei,
                                                day=utc_day_of(inp.ctx.started_ts) if inp.ctx.started_ts is not None else "")
        if inp.deliberation is not None:  # privileged requests: asked this tick, and the approved ones it ran
            result.privileged_requests = list(inp.deliberation.requests)
            result.approvals_ran = approvals_ran(proposed, chain.record.actions)
        result.gating = gate.gating  # folded into the learned-gating log for delta feedback
        result.decision_cache_stats = inp.deliberation.decision_cache_stats if inp.deliberation else None
        if record.strategies is not None:
            result.strategy_runs = record.strategies.runs
        # what the cage counts, so `golem status` shows the same (docs/design/spending.md#the-ledger)
        result.gas_ledger = await asyncio.to_thread(self.s.safety.risk.gas_ledger, record.golem_id, inp.ctx.started_ts)
        return result

    def _clade_member(self, inp: ReflectInput) -> Any:
        """after_turn's clade member for this run: lays the tick's pheromones. Only the golem's own tick lays (a
        `golem rerun` of an old tick must not tell the clade about a market long gone)."""
        if not inp.ctx.cfg.clade.id or self.pheromones is None:
            return None
        if activity.info().workflow_id != ids.tick_workflow_id(inp.ctx.golem_id, inp.ctx.tick):
            return None
        cfg = inp.ctx.cfg

        async def clade(c: Any) -> None:
            c.record.pheromones_laid = await self.lay_pheromones(c.record, cfg)
            if cfg.clade.share:
                await self.exchange_entries(c.record.golem_id, c.record.tick, cfg)
        return clade

    async def exchange_entries(self, golem_id: str, tick: int, cfg: GolemConfig) -> ExchangeStep:
        """The clade member's other half: share this golem's clade entries, take in its siblings', move each inbound
        entry one stage on (docs/design/clade.md). Events say what moved; the tick never fails on the clade."""
        if self.pheromones is None:
            return ExchangeStep(error="no Temporal client on this worker")
        if self._clade_bus is None:
            self._clade_bus = CladeBus(self.pheromones.client)
        ledger = self._clade_ledger()
        step = await exchange_pass(
            self._clade_bus, ledger, self.s.semantic, self.s.cycles.recent_records, clade=cfg.clade.id, me=golem_id,
            tick=tick, timeout_s=cfg.clade.read_timeout_s + 3, window=cfg.clade.sandbox_ticks,
            quarantine_ticks=cfg.clade.quarantine_ticks)
        # a memory-consolidator's proposals: this golem's own admission gate decides (docs/design/clade.md)
        inbox = ProposalInbox(ledger.path)
        decided = await asyncio.to_thread(inbox.decide, self.s.semantic, tick)
        events = exchange_events(golem_id, tick, _now_iso(), step) + [
            make_event(golem_id, tick, _now_iso(), "grimoire.proposal_decided", d.proposal.id, status=d.status,
                       consolidator=d.proposal.consolidator, content=d.proposal.content[:200],
                       score=round(d.score, 4) if d.score is not None else None) for d in decided]
        if events:
            await asyncio.to_thread(self.s.events.emit, events)
        if step.error:
            activity.logger.warning("clade exchange of tick %s on clade %s: %s", tick, cfg.clade.id, step.error)
        return step

    def _clade_ledger(self) -> CladeLedger:
        path = ledger_path(self.s.layout.root)
        if self._ledger is None or self._ledger.path != path:
            self._ledger = CladeLedger(path)
        return self._ledger

    async def _self_steer(self, inp: ReflectInput, record: DecisionCycleRecord) -> None:
        """The record's self-steers go to the golem's workflow as `steer` signals (docs/design/tick.md#self-steers),
        the owner's pathway, so the Temporal UI shows each with its source. Only the golem's own tick sends them (a
        `golem rerun` of an old tick must not steer today's golem); a retried reflect resends the same ids, which the
        golem drops."""
        if not record.self_steers or self.temporal is None:
            return
        golem = inp.ctx.golem_id
        if activity.info().workflow_id != ids.tick_workflow_id(golem, inp.ctx.tick):
            return
        handle = self.temporal.get_workflow_handle(ids.golem_workflow_id(golem))
        for steer in record.self_steers:
            try:
                await handle.signal("steer", steer.model_dump(mode="json"))
            except RPCError as err:  # the golem's workflow is gone (a test's lone tick): the record keeps the steer
                activity.logger.warning("self-steer %s not delivered: %s", steer.id, err)

    def _reflexion(self, record: DecisionCycleRecord, proposed: list[ProposedAction]) -> Reflexion | None:
        return reflexion_of(record, proposed, self._half_size(record, proposed))

    def _half_size(self, record: DecisionCycleRecord,
                   proposed: list[ProposedAction]) -> tuple[float | None, str] | None:
        """The half-size counterfactual simulated with eth_simulateV1 on the pre-tick block; None when
        the tick sent nothing or the simulation cannot answer (the record then says the projection stood in)."""
        if not proposed or not any(a.status.value in ("executed", "failed") for a in record.actions):
            return None
        block = record.observation.snapshot.block_number
        try:
            hf = self.s.simulate_health_factor(scaled(proposed, 0.5), record.observation, block)
        except (SimulationError, ToolArgumentError, ValueError, Web3Exception, OSError) as err:
            activity.logger.info("half-size counterfactual not simulated at block %s: %s", block, err)
            return None
        return hf, f"eth_simulateV1 at the pre-tick block {block}"

    @activity.defn(name="audit_approvals")
    def audit_approvals(self, inp: ApprovalAudit) -> None:
        """The owner's answers to privileged requests, and the ones that expired, on the audit trail."""
        for request in inp.requests:
            self.s.safety.audit.append(inp.golem_id, f"approval.{request.status.value}", audit_payload(request))
        self.s.events.emit([events.approval_event(inp.golem_id, r, _now_iso()) for r in inp.requests])

    @activity.defn(name="record_failure")
    def record_failure(self, inp: TickFailure) -> None:
        """A tick failed (GolemWorkflow, or a reset's / rerun's own run): the failure is recorded whatever is
        switched off (`golem ticks`, `golem show`: a failed tick is never lost), then the error hook fires
        (docs/design/life.md#extensions), whose member emits the `heartbeat.tick_failed` event (the events
        stream, /metrics, alerts). Switched off in golem.toml: the record, no event."""
        self.s.cycles.record_failure(inp)

        def observability() -> None:
            self.s.events.emit([events.failure_event(inp.golem_id, inp.tick, inp.failed_at, inp.error,
                                                     inp.workflow_id, inp.run_label)])

        fired, _ = fire(registry_for(self.s.config.extensions.disabled), "error", {"observability": observability})
        if not fired:
            activity.logger.info("tick %s failed: recorded, no tick_failed event (observability is switched off)",
                                 inp.tick)
