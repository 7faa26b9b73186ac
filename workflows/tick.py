"""ThetaTickWorkflow: one heartbeat tick as a durable pipeline of activities.

observe → analyze → gate → [retrieve → decide → simulate → validate → execute → verify] → reflect.
A T0 tick runs observe → analyze → gate → reflect only. The heartbeat FSM is queryable.
Ordering and durability live here; every formula lives in golem/, every side effect in activities/.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError

from workflows import options
from workflows.errors import root_cause

with workflow.unsafe.imports_passed_through():
    from activities.tick import TickActivities
    from golem.extensions.registry import registry_for
    from golem.extensions.hooks import fire
    from golem.life.runs import tick_run
    from golem.models.enums import HeartbeatState, SteerSeverity, Tier
    from golem.models.golem import TickFailure
    from golem.models.interventions import FollowUp, Steer, parse_intervention
    from golem.models.observation import Observation
    from golem.models.record import ActionRecord, StepTiming, TickRun
    from golem.models.state import FsmState
    from golem.safety.restricted import restriction
    from golem.models.tick import (
        AnalyzeInput,
        DecideInput,
        Deliberation,
        ExecuteInput,
        GateInput,
        ObserveInput,
        ReflectInput,
        RetrievedKnowledge,
        RetrieveInput,
        SimulateInput,
        TickContext,
        TickResult,
        ValidateInput,
        VerifyInput,
        STEP_REFS,
        observation_fields,
    )

# Search attributes registered on the dev server (infra/temporal.py); the UI filters ticks by them.
SA_GOLEM_ID = SearchAttributeKey.for_keyword("GolemId")
SA_TICK = SearchAttributeKey.for_int("Tick")
SA_TIER = SearchAttributeKey.for_keyword("Tier")
SA_REGIME = SearchAttributeKey.for_keyword("Regime")
SA_PHASE = SearchAttributeKey.for_keyword("Phase")

# The steps a tick with local_steps runs as local activities: a T0 tick's whole path. The write path (simulate,
# validate, execute, verify) and decide (cancelled by a steer through its heartbeats) stay activities.
LOCAL_STEPS = frozenset({"observe", "analyze", "gate", "reflect"})


@workflow.defn
class ThetaTickWorkflow:
    def __init__(self) -> None:
        self._fsm = FsmState()
        self._trace: list[str] = []
        self._timings: list[StepTiming] = []
        self._interrupt_steers: list[Steer] = []
        self._cancel_reason: str | None = None
        self._steers_to_followups: list[str] = []
        # What the escalated steps produced so far (kept when a later step fails).
        self._retrieved: RetrievedKnowledge | None = None
        self._deliberation: Deliberation | None = None
        self._records: list[ActionRecord] = []
        self._outcome = None
        self._run_label = ""  # "" for the tick's first run; a reset's or rerun's label names its files
        self._lean = False  # each activity gets its step's state slice, not the tick's whole context
        self._refs = False  # ... and names earlier steps' results instead of carrying them again

    # ---- queries and signals -------------------------------------------------------------
    @workflow.query
    def fsm(self) -> FsmState:
        return self._fsm

    @workflow.signal
    def steer(self, raw: Any) -> None:
        """A steer forwarded by GolemWorkflow while this tick runs (docs/design/tick.md#steers): the steer
        hook's intervention member takes it. Pure Python, no command. Only optional extensions can be switched
        off and intervention is not one, so this build's registry has every golem's steer order (the tick's config
        may arrive by version only)."""
        fire(registry_for(), "steer", {"intervention": lambda: self._take_steer(raw)})

    def _take_steer(self, raw: Any) -> None:
        try:
            steer = parse_intervention("steer", raw)
        except ValueError:
            return  # GolemWorkflow already validated, recorded and kept it; nothing to do here
        assert isinstance(steer, Steer)
        state = self._fsm.state
        if not state.accepts_steer:
            return  # stays pending in GolemWorkflow for the next tick
        if state == HeartbeatState.DECIDING:
            self._interrupt_steers.append(steer)
            self._fsm = FsmState(state=state, substate=f"Interrupted{{steer_id={steer.id}}}",
                                 entered_at=self._fsm.entered_at)
        elif state == HeartbeatState.EXECUTING and steer.severity.rank >= SteerSeverity.HIGH.rank:
            self._cancel_reason = f"steer {steer.id}: {steer.message}"
            self._fsm = FsmState(state=state, substate=f"CancelPending{{reason={steer.message}}}",
                                 entered_at=self._fsm.entered_at)
        elif state in (HeartbeatState.SIMULATING, HeartbeatState.VALIDATING) and steer.severity.rank >= SteerSeverity.HIGH.rank:
            # Nothing is sent yet: a high-severity steer cancels the whole write path.
            self._cancel_reason = f"steer {steer.id}: {steer.message}"
        elif state == HeartbeatState.EXECUTING:
            self._steers_to_followups.append(steer.id)  # low severity while acting: queued as a follow-up

    # ---- helpers ---------------------------------------------------------------------------
    def _enter(self, state: HeartbeatState, substate: str = "Normal") -> None:
        # entered_at: `golem status` shows how long the tick has been in this step (a hung RPC shows here).
        self._fsm = FsmState(state=state, substate=substate, entered_at=workflow.now().isoformat())
        self._trace.append(state.value)

    def _for(self, ctx: TickContext, step: str) -> TickContext:
        """The context one step's activity gets: only the state fields that step reads."""
        return ctx.for_step(step) if self._lean else ctx

    def _seen(self, step: str, **results: Any) -> dict[str, Any]:
        """Lean: the Observation fields one step's activity may read, and the earlier steps' results
        its input names instead of carrying (the worker reads them from this run's history). `results`: the
        input's values of the other referable fields; one that is None (no such step ran) is not named."""
        if not self._lean:
            return {}
        lean: dict[str, Any] = {"observation_fields": observation_fields(step)}
        if self._refs:
            lean["refs"] = {name: activity for name, activity in STEP_REFS[step].items()
                            if name == "observation" or results.get(name) is not None}
        return lean

    async def _step(self, method: Any, arg: Any, ctx: TickContext, **kw: Any) -> Any:
        started = workflow.now()
        try:
            if ctx.local_steps and method.__name__ in LOCAL_STEPS:
                result = await workflow.execute_local_activity_method(method, arg,
                                                                      **options.local_step(ctx.step_timeout))
            else:
                result = await workflow.execute_activity_method(
                    method,
                    arg,
                    **options.tick_step(ctx.step_timeout, **kw),
                )
        except ActivityError:
            self._timed(method.__name__, started)
            raise
        # Not in a `finally`: on cache eviction the coroutine is closed outside the workflow loop.
        self._timed(method.__name__, started)
        return result

    def _timed(self, step: str, started: datetime) -> None:
        ms = (workflow.now() - started).total_seconds() * 1000.0
        self._timings.append(StepTiming(step=step, ms=round(ms, 3)))

    # ---- the tick --------------------------------------------------------------------------
    @workflow.run
    async def run(self, ctx: TickContext) -> TickResult:
        info = workflow.info()
        # Which run of the tick this is: a reset or rerun writes its own record beside the first run's.
        run = tick_run(info.workflow_id, info.run_id, info.first_execution_run_id, attempt=info.attempt,
                       continued_run_id=info.continued_run_id, rerun_of=ctx.rerun_of)
        self._run_label = run.label
        # Wire 2 (the parent's "tick-wire-2") is lean by its input; older ticks decided it by their own patch.
        self._lean = ctx.wire >= 2 or workflow.patched("lean-step-inputs")
        # a local step's result is not in the run's history until the workflow task ends: nothing can name it
        self._refs = self._lean and not ctx.local_steps
        try:
            return await self._tick(ctx, info, run)
        except ActivityError as err:
            # The parent records the first run's failure; nobody waits for a later run (a reset, a rerun),
            # so it records its own before failing.
            if run.label and workflow.patched("record-run-failure"):
                await self._record_run_failure(ctx, info, run, _describe(err))
            raise

    async def _record_run_failure(self, ctx: TickContext, info: workflow.Info, run: TickRun, error: str) -> None:
        failure = TickFailure(golem_id=ctx.golem_id, tick=ctx.tick, workflow_id=info.workflow_id, run_id=run.run_id,
                              error=error, failed_at=workflow.now().isoformat(), run_label=run.label,
                              run_kind=run.kind)
        try:
            await workflow.execute_activity_method(
                TickActivities.record_failure, failure, **options.record_failure(),
            )
        except ActivityError as rec_err:  # best effort: the failure is in the run's history too
            workflow.logger.error("could not record the failure of run %s: %s", run.label, rec_err)

    async def _tick(self, ctx: TickContext, info: workflow.Info, run: TickRun) -> TickResult:
        steers = list(ctx.state.pending_steers)
        followups = list(ctx.state.pending_followups)
        errors: list[str] = []

        # Step 1: OBSERVE — without an observation there is no tick; failure fails the tick.
        self._enter(HeartbeatState.OBSERVING)
        observation = await self._step(TickActivities.observe, ObserveInput(ctx=self._for(ctx, "observe")), ctx)
        if ctx.wire < 2:
            workflow.upsert_search_attributes([SA_REGIME.value_set(observation.regime.value)])

        # Step 3: ANALYZE (retrieval moves after gating: only an escalated tick retrieves)
        self._enter(HeartbeatState.ANALYZING)
        analysis = await self._step(TickActivities.analyze, AnalyzeInput(ctx=self._for(ctx, "analyze"), **self._seen("analyze"), observation=observation), ctx)

        # Step 4: GATE
        self._enter(HeartbeatState.GATING)
        gate = await self._step(
            TickActivities.gate,
            GateInput(ctx=self._for(ctx, "gate"), **self._seen("gate"), observation=observation, prediction_error=analysis.prediction_error, steers=steers),
            ctx,
        )
        # Wire 2: Regime goes up with Tier, one upsert event (and one visibility write) instead of two.
        workflow.upsert_search_attributes(
            [SA_REGIME.value_set(observation.regime.value), SA_TIER.value_set(gate.tier.value)] if ctx.wire >= 2
            else [SA_TIER.value_set(gate.tier.value)])

        if gate.tier != Tier.T0:
            try:
                await self._escalated(ctx, observation, analysis.prediction_error, gate.tier, steers, followups)
            except ActivityError as err:
                # e.g. malformed LLM output or a bad STRATEGY.md: recorded with whatever the earlier
                # steps produced, never fatal to the golem.
                errors.append(_describe(err))
        retrieved, deliberation = self._retrieved, self._deliberation
        records, outcome = self._records, self._outcome

        # Step 9: REFLECT
        self._enter(HeartbeatState.REFLECTING)
        consumed_steers = [s.id for s in steers] + [s.id for s in self._interrupt_steers]
        reflect_input = ReflectInput(
            ctx=self._for(ctx, "reflect"), **self._seen("reflect", analysis=analysis, gate=gate, retrieved=retrieved,
                                                                deliberation=deliberation),
            observation=observation,
            analysis=analysis,
            gate=gate,
            retrieved=retrieved,
            deliberation=deliberation,
            records=records,
            outcome=outcome,
            steers=steers + self._interrupt_steers,
            followups=followups,
            step_timings=self._timings,
            fsm_trace=self._trace,
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            errors=errors,
            run=run if run.kind != "original" else None,
        )
        result: TickResult = await self._step(TickActivities.reflect, reflect_input, ctx)
        if result.run_label != run.label and workflow.patched("record-every-run"):
            # A reset to a point after reflect: the first run's record came back from history. This run
            # re-executed no step, but it is a run of the tick and writes its own record too.
            result = await self._step(TickActivities.reflect, reflect_input, ctx)
        workflow.upsert_search_attributes([SA_PHASE.value_set(result.phase or ctx.state.phase.value)])
        # Steers only count as handled when the tick deliberated on them.
        result.steers_consumed = consumed_steers if deliberation is not None else []
        result.followups_consumed = (
            [f.id for f in followups if f.window.value in ("next-decide", "next-reflect")]
            if deliberation is not None
            else [f.id for f in followups if f.window.value == "next-reflect"]
        )
        result.steers_to_followups = self._steers_to_followups
        self._enter(HeartbeatState.IDLE)
        return result

    async def _escalated(self, ctx: TickContext, observation: Observation, prediction_error: float, tier: Tier,
                         steers: list[Steer], followups: list[FollowUp]) -> None:
        # Step 2: RETRIEVE
        self._enter(HeartbeatState.RETRIEVING)
        self._retrieved = await self._step(
            TickActivities.retrieve, RetrieveInput(ctx=self._for(ctx, "retrieve"), **self._seen("retrieve"), observation=observation, tier=tier), ctx
        )

        # DECIDE — re-run with the steer injected when one interrupts deliberation.
        self._deliberation = await self._decide(
            ctx, observation, prediction_error, tier, self._retrieved, steers, followups
        )
        actions = self._deliberation.actions
        if not actions or not self._deliberation.record.recommends_action:
            return

        # Step 5: SIMULATE
        self._enter(HeartbeatState.SIMULATING)
        simulation = await self._step(
            TickActivities.simulate, SimulateInput(ctx=self._for(ctx, "simulate"), **self._seen("simulate"), observation=observation, actions=actions), ctx
        )
        # Step 6: VALIDATE (PolicyCage; issues single-use permits for approved actions)
        self._enter(HeartbeatState.VALIDATING)
        validation = await self._step(
            TickActivities.validate,
            # Steers that interrupted decide go along: a high/critical one makes the actions protective.
            ValidateInput(ctx=self._for(ctx, "validate"), **self._seen("validate", simulation=simulation), observation=observation, actions=actions, simulation=simulation,
                          steers=self._interrupt_steers),
            ctx,
        )
        # Size to fit: what goes on is each action at the size validation allowed (its permit is bound to it), and
        # verify compares against the simulation at those sizes (carried, not named: simulate's result is stale).
        actions = validation.sized(actions)
        sized_simulation = validation.simulation
        # Step 7: EXECUTE — one activity per action so a steer can cancel what is not yet sent.
        self._enter(HeartbeatState.EXECUTING)
        restricted: str | None = None
        for action in actions:
            execute_input = ExecuteInput(
                ctx=self._for(ctx, "execute"), **self._seen("execute", validation=validation), observation=observation, actions=[action], validation=validation,
                cancelled_reason=self._cancel_reason, restricted=restricted,
            )
            result = await self._step(TickActivities.execute, execute_input, ctx, heartbeat=options.EXECUTE_HEARTBEAT)
            self._records.extend(result.records)
            hit = restriction(result.records)
            if hit and restricted is None and self._cancel_reason is None:  # the rest of the batch is blocked
                restricted = hit
                self._fsm = FsmState(state=HeartbeatState.EXECUTING, substate=f"Restricted{{constraint={hit}}}",
                                     entered_at=self._fsm.entered_at)
                self._trace.append(self._fsm.substate)  # the record's trace keeps the substate that blocked the rest
        if not any(r.tx_hash for r in self._records):
            return
        # Step 8: VERIFY
        self._enter(HeartbeatState.VERIFYING)
        self._outcome = await self._step(
            TickActivities.verify,
            VerifyInput(
                ctx=self._for(ctx, "verify"), **self._seen("verify", simulation=None if sized_simulation else simulation),
                observation=observation, actions=actions, simulation=sized_simulation or simulation, records=self._records,
                run_label=self._run_label,
            ),
            ctx,
        )

    async def _decide(self, ctx: TickContext, observation: Observation, prediction_error: float, tier: Tier,
                      retrieved: RetrievedKnowledge, steers: list[Steer], followups: list[FollowUp]) -> Deliberation:
        decide_followups = [f for f in followups if f.window.value == "next-decide"]
        while True:
            self._enter(HeartbeatState.DECIDING)
            seen = len(self._interrupt_steers)
            handle = workflow.start_activity_method(
                TickActivities.decide,
                DecideInput(
                    ctx=self._for(ctx, "decide"), **self._seen("decide", retrieved=retrieved),
                    observation=observation,
                    tier=tier,
                    prediction_error=prediction_error,
                    retrieved=retrieved,
                    steers=steers + self._interrupt_steers,
                    followups=decide_followups,
                    interrupted_by=[s.id for s in self._interrupt_steers],
                ),
                # A cancel reaches an activity only through a heartbeat; the router beats every 5 s.
                **options.tick_step(ctx.step_timeout, heartbeat=options.DECIDE_HEARTBEAT),
            )
            started = workflow.now()
            await workflow.wait_condition(lambda: handle.done() or len(self._interrupt_steers) > seen)
            if handle.done() and len(self._interrupt_steers) == seen:
                self._timed("decide", started)
                return await handle
            # A steer arrived mid-thought: cancel and deliberate again with it in context.
            handle.cancel()
            try:
                await handle
            except Exception:
                pass


def _describe(err: ActivityError) -> str:
    return root_cause(err)[1]
