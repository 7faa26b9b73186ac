"""GolemWorkflow: one per golem (id golem-<id>), the durable heartbeat loop.

Holds GolemState; every theta interval (or at once on a steer) starts a ThetaTickWorkflow child;
every delta_theta_ticks starts DeltaConsolidationWorkflow; when due, DreamCycleWorkflow suspends
ticking until it ends (§S7 SLEEPING.DREAMING); continues-as-new every N ticks carrying the state.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from collections.abc import Callable
from typing import Any, Literal

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

from workflows import options

with workflow.unsafe.imports_passed_through():
    from activities.life import LifeActivities, ThanatopsisInput
    from golem import ids
    from activities.tick import TickActivities
    from golem.cognition.backpressure import dequeue, enqueue
    from golem.cognition.budget import budget_fraction, daily_spend_on
    from golem.cognition.chain_health import fold_chain_failure, fold_chain_read, is_chain_read_failure
    from golem.cognition.clock import budget_throttle, gamma_pulse
    from golem.cognition.control import apply_control, check_control
    from golem.cognition.decision_cache import hit_rate_report
    from golem.cognition.fold import (
        accept_intervention,
        expire_rejections,
        fold_tick_failure,
        fold_tick_result,
        fold_dream_result,
        fold_upkeep_cost,
        new_golem_state,
        schedule_dream,
        state_for_tick,
        should_dream,
        should_run_delta,
        steers_to_followups,
    )
    from golem.cognition.learned_gating import learn_at_delta
    from golem.models.golem import (
        ConsolidationInput,
        ControlRequest,
        ControlState,
        DreamInput,
        DreamResult,
        GolemStatus,
        GolemWorkflowInput,
        TickFailure,
        WorldAdvanced,
        WorldTime,
    )
    from golem.models.config import GolemConfig
    from golem.models.config_version import (
        ConfigApplied,
        ConfigChange,
        ConfigVersionInfo,
        RunningConfig,
        config_diff,
        config_version,
        short,
        validate_change,
    )
    from golem.life.death import KillAnswer, KillRequest, check_kill
    from golem.life.extensions.registry import ExtensionRegistry, registry_or_full
    from golem.life.extensions.hooks import fire, fire_async
    from golem.models.enums import HeartbeatState, SteerSeverity
    from golem.models.life import DeathCertificate
    from golem.life.dream_scheduler import DreamUrgency
    from golem.models.interventions import FollowUp, summarize
    from golem.models.state import TICK_SLICE, DecisionCacheState, FsmState, GolemState, PendingTick
    from golem.models.tick import TickContext, TickResult
    from golem.safety.gas import restore_status, spend_status
    from workflows.consolidation import DeltaConsolidationWorkflow, DreamCycleWorkflow
    from workflows.errors import root_cause
    from workflows.tick import SA_GOLEM_ID, SA_PHASE, SA_TICK, ThetaTickWorkflow


def tick_workflow_id(golem_id: str, tick: int) -> str:
    return ids.tick_workflow_id(golem_id, tick)


@workflow.defn
class GolemWorkflow:
    def __init__(self) -> None:
        self._state: GolemState | None = None
        self._cfg: GolemConfig | None = None
        # The one config version the golem runs on (issue 12): swapped whole by the apply_config update,
        # read by the loop between ticks; every tick carries the version it was started with.
        self._config_info = ConfigVersionInfo()
        self._config_change = ""  # what the last apply changed, for the next tick's record
        self._activity = "starting"
        self._child: workflow.ChildWorkflowHandle[Any, TickResult] | None = None
        self._child_id: str | None = None
        self._dream_child: workflow.ChildWorkflowHandle[Any, DreamResult] | None = None  # the running DreamCycleWorkflow (issue 18): a critical steer wakes it
        self._run_ticks = 0
        self._tick_snapshot_taken = False  # the running tick already holds its state snapshot
        # The replay clock (a backtest): rows arrive by the advance_world update and are answered when done.
        self._replay = False
        self._world_now: datetime | None = None
        self._last_tick_at: datetime | None = None
        self._next_gamma_at: datetime | None = None
        self._world_rows: list[WorldTime] = []
        self._world_done: dict[int, WorldAdvanced] = {}
        self._world_last = False
        self._local_steps = False  # GolemWorkflowInput.local_steps: the tick's T0 steps and gamma as local activities

    @property
    def _s(self) -> GolemState:
        """The golem's state once run() holds it (a signal that can come first waits for it)."""
        if self._state is None:
            raise ApplicationError("the golem's state is not loaded yet", non_retryable=True)
        return self._state

    @property
    def _config(self) -> GolemConfig:
        """The config version the golem runs on, once run() holds it."""
        if self._cfg is None:
            raise ApplicationError("the golem's config is not loaded yet", non_retryable=True)
        return self._cfg

    def _now(self) -> datetime:
        """The one clock the golem reads: the path's time in a backtest, workflow.now() live."""
        return self._world_now if self._replay and self._world_now is not None else workflow.now()

    # ---- signals: validated here, deduplicated by id, rejections recorded in state ----------
    @workflow.signal
    async def steer(self, raw: Any) -> None:
        await self._accept("steer", raw)

    @workflow.signal
    async def follow_up(self, raw: Any) -> None:
        await self._accept("follow_up", raw)

    async def _accept(self, kind: Literal["steer", "follow_up"], raw: Any) -> None:
        if self._state is None:  # a signal that arrives before run() starts: wait for the state
            await workflow.wait_condition(lambda: self._state is not None)
        before = len(self._s.pending_steers)

        def accept() -> tuple[GolemState, str | None]:
            return accept_intervention(self._s, kind, raw, self._now().isoformat(),
                                       tick_running=self._tick_snapshot_taken)

        # runtime-extensions §3: a steer fires the steer hook (intervention validates and queues it), a follow-up
        # the input hook (input-router queues it for its delivery window). Pure Python, no command.
        hook, member = ("steer", "intervention") if kind == "steer" else ("input", "input-router")
        _, results = fire(self._registry(), hook, {member: accept})
        self._state, reason = dict(results).get(member, (self._s, f"no {hook} handler in this build"))
        if reason:
            workflow.logger.warning("rejected %s: %s", kind, reason)
            return
        steer = self._s.pending_steers[-1] if kind == "steer" and len(self._s.pending_steers) > before else None
        if steer is not None and self._dream_child is not None and steer.severity == SteerSeverity.CRITICAL:
            # §S7: dreaming suspends the heartbeat; a critical steer ends the dream so the next tick takes it.
            try:
                await self._dream_child.signal(DreamCycleWorkflow.wake, f"critical steer {steer.id}")
            except Exception as err:  # the dream may have just ended; the steer waits for the next tick anyway
                workflow.logger.info("dream not woken: %s", err)
        if kind == "steer" and len(self._s.pending_steers) > before and self._child is not None:
            # Forward to the running tick; it takes it only if its FSM accepts steers (§S7).
            try:
                await self._child.signal(ThetaTickWorkflow.steer, self._s.pending_steers[-1])
            except Exception as err:  # the tick may have just finished; the steer stays pending
                workflow.logger.info("steer not forwarded: %s", err)

    # ---- the replay clock: a backtest's driver hands over one row at a time ------------------
    @workflow.update
    async def advance_world(self, t: WorldTime) -> WorldAdvanced:
        """The chain now shows row t: tick on it if theta has elapsed in path time (or a steer waits),
        otherwise run a gamma pulse if one is due. Returns once the golem is done with the row."""
        self._world_rows.append(t)
        await workflow.wait_condition(lambda: t.row in self._world_done)
        return self._world_done.pop(t.row)

    @advance_world.validator
    def _check_world(self, t: WorldTime) -> None:
        if self._cfg is not None and not self._replay:
            raise ValueError("this golem lives by the wall clock; advance_world is for a backtest's replay clock")
        at = datetime.fromisoformat(t.at)
        if at.tzinfo is None:
            raise ValueError(f"row {t.row}: time {t.at!r} needs a UTC offset")
        if self._world_now is not None and at < self._world_now:
            raise ValueError(f"row {t.row}: time {t.at} is before the path time already reached ({self._world_now.isoformat()})")

    # ---- the owner's stop buttons (issue 19): updates, validated before they enter history ---------
    @workflow.update
    def pause(self, req: ControlRequest) -> ControlState:
        """No new ticks until resume (the running tick finishes); state and pending steers are kept."""
        return self._control("pause", req)

    @pause.validator
    def _check_pause(self, req: ControlRequest) -> None:
        check_control(self._s, "pause", req)

    @workflow.update
    def resume(self, req: ControlRequest) -> ControlState:
        return self._control("resume", req)

    @resume.validator
    def _check_resume(self, req: ControlRequest) -> None:
        check_control(self._s, "resume", req)

    @workflow.update
    def stop_entries(self, req: ControlRequest) -> ControlState:
        """No new positions from the next tick on; risk-reducing actions and steers still run."""
        return self._control("stop_entries", req)

    @stop_entries.validator
    def _check_stop_entries(self, req: ControlRequest) -> None:
        check_control(self._s, "stop_entries", req)

    @workflow.update
    def allow_entries(self, req: ControlRequest) -> ControlState:
        return self._control("allow_entries", req)

    @allow_entries.validator
    def _check_allow_entries(self, req: ControlRequest) -> None:
        check_control(self._s, "allow_entries", req)

    def _control(self, what: str, req: ControlRequest) -> ControlState:
        self._state, answer = apply_control(self._s, what, req, self._now().isoformat())
        workflow.logger.info("golem %s: %s", self._s.golem_id, answer.note)
        return answer

    # ---- death by the owner (issue 17): an update refused unless confirmed with the golem's id ---------
    @workflow.update
    def kill(self, req: KillRequest) -> KillAnswer:
        """`golem kill --reason R`: the running tick finishes, then Thanatopsis (acceptance, settlement through
        the normal write path, reflection, legacy) and the workflow completes with its death certificate."""
        life = self._s.life.model_copy(update={"death_cause": "owner", "death_detail": req.reason.strip()})
        self._state = self._s.model_copy(update={"life": life})
        workflow.logger.warning("golem %s: killed by %s: %s", self._s.golem_id, req.by, req.reason)
        return KillAnswer(accepted=True, golem_id=self._s.golem_id,
                          note=f"golem {self._s.golem_id} dies after its running tick: settlement, reflection, "
                               "legacy; the workflow's result is its death certificate")

    @kill.validator
    def _check_kill(self, req: KillRequest) -> None:
        if self._state is None:
            raise ValueError("the golem has not started yet; retry in a moment")
        check_kill(self._state.golem_id, req, self._state.life.death_cause)

    # ---- config versions: a new golem.toml + STRATEGY.md, validated, applied whole ----------
    @workflow.update
    async def apply_config(self, change: ConfigChange) -> ConfigApplied:
        """Take a new config version. The running tick finishes on the version it started with; the next
        tick (and every activity in it) runs on this one. The update itself is the event in history."""
        try:  # the validator already passed it; an ApplicationError fails only the update, never the workflow task
            new = validate_change(self._cfg, change)
        except ValueError as err:
            raise ApplicationError(str(err), type="ConfigRefused", non_retryable=True) from None
        version = config_version(new, change.strategy_sha256)
        previous = self._config_info.version
        next_tick = self._s.tick + (1 if self._child is not None else 0)
        if version == previous:
            return ConfigApplied(version=version, previous=previous, effective_from_tick=self._config_info.applied_at_tick)
        changed = config_diff(self._config, new)
        if change.strategy_sha256 != self._config_info.strategy_sha256:
            changed.append(f"[STRATEGY.md] sha256 {self._config_info.strategy_sha256[:12] or '?'} -> "
                           f"{change.strategy_sha256[:12]}")
        self._cfg = new
        self._config_info = ConfigVersionInfo(
            version=version, strategy_sha256=change.strategy_sha256, applied_at_tick=next_tick,
            applied_at=self._now().isoformat(), previous=previous, source=change.source,
        )
        self._config_change = (f"config {short(version)} applied (was {short(previous)}, from {change.source or '?'}): "
                               + ("; ".join(changed) or "no value changed"))
        workflow.logger.info("%s; effective from tick %s", self._config_change, next_tick)
        return ConfigApplied(version=version, previous=previous, effective_from_tick=next_tick, changed=changed)

    @apply_config.validator
    def _check_config(self, change: ConfigChange) -> None:
        """A bad config is refused before it is accepted into history: the error names the key, and the
        old version keeps running."""
        if self._cfg is None or self._state is None:
            raise ValueError("the golem has not started yet; retry in a moment")
        try:
            validate_change(self._cfg, change)
        except ValueError as err:
            raise ValueError(f"{err}\nconfig refused: the golem keeps running on {short(self._config_info.version)}") from None

    @workflow.query
    def config_version(self) -> RunningConfig | None:
        if self._cfg is None:
            return None
        return RunningConfig(info=self._config_info, config=self._cfg)

    @workflow.query
    def status(self) -> GolemStatus:
        s = self._s
        if s is None:
            return GolemStatus(golem_id="?", tick=0, activity=self._activity, regime="unknown", phase="thriving",
                               vitality=1.0, theta_seconds=0.0, daily_spend_usd=0.0)
        return GolemStatus(
            golem_id=s.golem_id,
            tick=s.tick,
            activity=self._activity,
            current_tick_workflow_id=self._child_id if self._child is not None else None,
            fsm=FsmState(state=HeartbeatState.DREAMING) if s.dreaming else FsmState(),
            last_tick=s.recent_ticks[-1] if s.recent_ticks else None,
            regime=s.regime.value,
            phase=s.phase.value,
            vitality=s.vitality.composite,
            theta_seconds=s.theta_seconds,
            **spend_status(s, self._cfg),  # type: ignore[arg-type]  # the keys are GolemStatus fields
            **restore_status(s),  # type: ignore[arg-type]  # gas per 1.0 of health factor restored (golem.safety.gas)
            pending_steers=[summarize(x) for x in s.pending_steers],
            pending_followups=[summarize(x) for x in s.pending_followups],
            rejected_interventions=s.rejected_interventions[-5:],
            failed_ticks=s.failed_ticks[-10:],
            run_ticks=self._run_ticks,
            decision_cache=s.decision_cache_stats or hit_rate_report(s.decision_cache),
            learned_gating_active=self._cfg is not None and s.tick >= self._cfg.gating.cold_start_ticks,
            config_version=self._config_info.version,
            chain=s.chain,
            paused=s.paused,
            entries_stopped=s.entries_stopped,
            control_note=s.control_note,
            dream_yield=s.dream_yield,
            threat_coverage=s.threat_coverage,
            last_dream=s.last_dream,
            dream_urgency=schedule_dream(s, self._cfg).urgency if self._cfg is not None else None,
            clocks={"economic": s.vitality.economic, "epistemic": s.vitality.epistemic,
                    "stochastic": s.vitality.stochastic},
            credit_remaining_usd=s.life.credit_remaining_usd, estimated_ttl_ticks=s.life.estimated_ttl_ticks,
            ticks_lived=s.life.ticks_lived, generation=s.life.generation, predecessor=s.life.predecessor,
            hayflick_ticks=self._cfg.lifespan.hayflick_ticks if self._cfg is not None else None,
            pad={"pleasure": s.pad.pleasure, "arousal": s.pad.arousal, "dominance": s.pad.dominance},
            emotion=s.life.emotion.value if s.life.emotion else None, somatic_markers=len(s.life.markers),
            dying=s.life.death_cause,
            certificate=s.life.certificate.model_dump(mode="json") if s.life.certificate else None,
        )

    @workflow.query
    def state(self) -> GolemState | None:
        return self._s

    # ---- the loop ---------------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: GolemWorkflowInput) -> GolemState:
        cfg = inp.config
        self._cfg = cfg
        if inp.config_info is not None:
            self._config_info = inp.config_info

        def start_heartbeat() -> None:  # a new golem's state, or the one a continue-as-new / successor carries
            self._state = inp.state or new_golem_state(cfg)

        # session(start) (runtime-extensions §3: grimoire → heartbeat): the grimoire member opened the stores at the
        # worker's start (GolemServices); heartbeat's starts the loop's state here. Pure Python, no command.
        fire(self._registry(), "session", {"heartbeat": start_heartbeat})
        self._replay = inp.clock == "replay"
        self._local_steps = inp.local_steps
        if self._replay:
            self._world_now = datetime.fromisoformat(inp.world_time) if inp.world_time else None
            self._last_tick_at = datetime.fromisoformat(inp.last_tick_at) if inp.last_tick_at else None

        while inp.max_ticks is None or self._s.tick < inp.max_ticks:
            if self._replay:
                row = await self._await_row(cfg)
                if row is None:
                    break
            if self._s.life.death_cause and workflow.patched("thanatopsis"):
                return await self._end(row if self._replay else None)
            if self._s.paused and workflow.patched("stop-buttons"):
                # `golem pause`: no new tick until `golem resume` (signals, queries and updates still answer).
                self._activity = "paused"
                await workflow.wait_condition(lambda: not self._s.paused or bool(self._s.life.death_cause))
                if self._s.life.death_cause and workflow.patched("thanatopsis"):
                    return await self._end(row if self._replay else None)
            cfg = self._config  # an applied config version takes effect here, between ticks, whole
            if workflow.patched("dream-scheduler"):
                urgency = schedule_dream(self._s, cfg)
                if urgency.due:
                    await self._dream(cfg, urgency)
            elif should_dream(self._s, cfg.clock):
                await self._dream(cfg)
            if should_run_delta(self._s, cfg.clock):
                await self._consolidate(cfg)

            await self._tick(cfg)
            self._run_ticks += 1
            if self._s.life.death_cause and workflow.patched("thanatopsis"):
                # A clock ran out this tick (golem.life.lifespan), or the owner's kill landed during it.
                return await self._end(row if self._replay else None, ticked=True)
            if self._replay and row is not None:
                self._row_done(row, ticked=True)
                if self._world_last:
                    break

            if self._run_ticks >= cfg.clock.continue_as_new_ticks:
                self._activity = "continuing-as-new"
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(GolemWorkflowInput(
                    config=self._cfg, state=self._s, max_ticks=inp.max_ticks, clock=inp.clock,
                    config_info=self._config_info if self._config_info.version else None,
                    world_time=self._world_now.isoformat() if self._replay and self._world_now else None,
                    last_tick_at=self._last_tick_at.isoformat() if self._replay and self._last_tick_at else None,
                    local_steps=inp.local_steps,
                ))

            if inp.max_ticks is not None and self._s.tick >= inp.max_ticks:
                break
            if self._replay:
                continue  # the next row brings the next tick; nothing waits on the wall clock
            # Theta triggers that fell due while the tick ran are queued (§S12 backpressure): the next
            # tick starts at once instead of waiting again.
            if self._s.tick_queue.pending and workflow.patched("backpressure"):
                continue
            # Theta clock: sleep the adaptive interval, but wake at once when a steer arrives. Inside a
            # long theta wait the gamma pulse (5–15 s) resolves predictions and updates fast state.
            self._activity = "waiting"
            await self._wait_theta(cfg)
        self._activity = "stopped"
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._s

    async def _await_row(self, cfg: GolemConfig) -> WorldTime | None:
        """Replay clock: take rows until one makes a tick due (theta elapsed in path time, or a steer is
        pending); rows in between get a gamma pulse when one is due, as the live clock would give them.
        Returns the tick's row, or None once the path's last row was only watched."""
        while not self._world_last:
            self._activity = "waiting for the next row"
            await workflow.wait_condition(lambda: bool(self._world_rows))
            row = self._world_rows.pop(0)
            self._world_now = datetime.fromisoformat(row.at)
            self._world_last = row.last
            theta = timedelta(seconds=self._s.theta_seconds)
            if self._last_tick_at is None or self._world_now >= self._last_tick_at + theta or self._s.pending_steers:
                return row
            pulsed = False
            if self._next_gamma_at is None or self._world_now >= self._next_gamma_at:
                await self._gamma(cfg)
                self._next_gamma_at = self._world_now + timedelta(seconds=self._s.gamma.interval_seconds)
                pulsed = True
            self._world_done[row.row] = WorldAdvanced(row=row.row, gamma=pulsed)
        return None

    def _row_done(self, row: WorldTime, ticked: bool) -> None:
        last = self._s.recent_ticks[-1] if self._s.recent_ticks else None
        self._world_done[row.row] = WorldAdvanced(
            row=row.row, tick=last.tick if (ticked and last) else None,
            tier=last.tier.value if (ticked and last and last.tier) else None,
            failed=bool(ticked and last and last.failed),
        )
        self._next_gamma_at = self._now() + timedelta(seconds=self._s.gamma.interval_seconds)

    async def _wait_theta(self, cfg: GolemConfig) -> None:
        deadline = workflow.now() + timedelta(seconds=self._s.theta_seconds)
        while not self._s.pending_steers:
            remaining = (deadline - workflow.now()).total_seconds()
            if remaining <= 0:
                return
            gamma_due = self._s.gamma.interval_seconds
            use_gamma = gamma_due < remaining and workflow.patched("gamma-clock")
            try:
                await workflow.wait_condition(
                    lambda: bool(self._s.pending_steers) or bool(self._s.life.death_cause),
                    timeout=timedelta(seconds=gamma_due if use_gamma else remaining),
                )
                return  # a steer arrived (or the owner's kill)
            except TimeoutError:
                if not use_gamma:
                    return
            await self._gamma(cfg)

    async def _gamma(self, cfg: GolemConfig) -> None:
        """One gamma pulse: a chain read, then pure state updates (heartbeat "Three Concurrent Scales")."""
        try:
            if self._local_steps:
                snapshot = await workflow.execute_local_activity_method(
                    TickActivities.gamma, self._s.golem_id, **options.gamma(cfg.heartbeat.step_timeout_seconds))
            else:
                snapshot = await workflow.execute_activity_method(
                    TickActivities.gamma, self._s.golem_id, task_queue=ids.task_queue(self._s.golem_id),
                    **options.gamma(cfg.heartbeat.step_timeout_seconds),
                )
        except ActivityError as err:  # perception is best effort; the next theta tick reads again
            workflow.logger.warning("gamma read failed: %s", err.cause or err)
            return
        fraction = budget_fraction(self._s.daily_spend_usd, cfg.heartbeat)
        factor = budget_throttle(fraction, cfg.heartbeat.cost_warning_threshold, cfg.heartbeat.cost_soft_cap_threshold)
        self._state, report = gamma_pulse(
            self._s, snapshot, self._now().timestamp(), cfg.probes, budget_factor=factor,
            gamma_min=cfg.clock.gamma_min_seconds, gamma_max=cfg.clock.gamma_max_seconds,
        )
        if report.violations:
            workflow.logger.info("gamma: %s prediction violations", report.violations)

    async def _tick(self, cfg: GolemConfig, settlement: bool = False) -> TickResult | None:
        # The version current when the tick starts (an update may have landed during dream or delta): the
        # tick's config and its config_version always name the same version.
        cfg = self._config
        s = self._s
        n = s.tick
        wid = tick_workflow_id(s.golem_id, n)
        queue, trigger = dequeue(s.tick_queue)
        carried = trigger.probes if trigger else []
        self._state = s = s.model_copy(update={"tick_queue": queue})
        started = self._now()
        self._last_tick_at = started
        # The tick gets the state without the learned-gating log (only this workflow uses it): a smaller
        # payload in every activity input of the tick.
        tick_state = state_for_tick(s) if workflow.patched("slim-tick-context") else s
        ctx = TickContext(golem_id=s.golem_id, tick=n, config=cfg, state=tick_state, started_at=started.isoformat(),
                          carried_probes=carried, settlement=settlement)
        if (self._config_info.version or self._config_change) and workflow.patched("config-version"):
            # The tick runs on this version: its activities resolve STRATEGY.md by it, its record names it.
            ctx = ctx.model_copy(update={"config_version": self._config_info.version,
                                         "config_change": self._config_change})
            self._config_change = ""
        if ctx.config_version and workflow.patched("lean-tick-input"):
            # Lean (issue 12): the config by its version hash (the worker loads it from its disk) and only the
            # state fields the tick reads, so neither this history nor the tick's carries them whole.
            ctx = ctx.model_copy(update={"config": None, "step_timeout_seconds": cfg.heartbeat.step_timeout_seconds,
                                         "state_slice": TICK_SLICE})
            if workflow.patched("tick-wire-2"):  # one marker per run of this workflow, none per tick
                ctx = ctx.model_copy(update={"wire": 2})
        if self._local_steps:  # a new input field only: a golem started without it issues the same commands
            ctx = ctx.model_copy(update={"local_steps": True})
        self._tick_snapshot_taken = True
        self._activity = "ticking" if not settlement else f"dying: settlement tick {n}"
        result: TickResult | None = None
        phase_before = s.phase
        self._child_id = wid
        try:
            self._child = await workflow.start_child_workflow(
                ThetaTickWorkflow.run,
                ctx,
                id=wid,
                task_queue=ctx.task_queue,
                search_attributes=TypedSearchAttributes([SearchAttributePair(SA_GOLEM_ID, s.golem_id), SearchAttributePair(SA_TICK, n)]),
                parent_close_policy=ParentClosePolicy.ABANDON,
                execution_timeout=timedelta(minutes=30),
            )
            result = await self._child
            self._child = None
            self._state = fold_tick_result(
                self._s, result, self._now().isoformat(), cfg.clock, cfg.heartbeat, result.gating, cfg.gating
            )
            self._state = steers_to_followups(self._s, result.steers_to_followups)
            if result.decision_cache_stats is not None:
                # The cache lives on the worker (issue 12); the state keeps its counters, and drops a cache
                # carried from before.
                self._state = self._s.model_copy(update={"decision_cache_stats": result.decision_cache_stats,
                                                             "decision_cache": DecisionCacheState()})
            elif result.decision_cache is not None:  # a tick result from before the move
                self._state = self._s.model_copy(update={"decision_cache": result.decision_cache})
            self._queue_missed_triggers(started, s.theta_seconds)
            if workflow.patched("chain-health"):
                self._state = fold_chain_read(self._s, n, self._now().isoformat())
            if self._s.phase != phase_before and workflow.patched("phase-search-attribute"):
                # The golem's behavioural phase on its own workflow too (the Web UI filters golems by it).
                workflow.upsert_search_attributes([SA_PHASE.value_set(self._s.phase.value)])
        except ChildWorkflowError as err:
            # A failed tick is recorded and the loop goes on; pending steers stay pending.
            self._child = None
            # The root cause ("observe: ConnectionError: ... refused"), not "Activity task failed".
            chain_health = workflow.patched("chain-health")
            step, reason = root_cause(err) if chain_health else (None, str(err.cause or err))
            workflow.logger.error("tick %s failed: %s", n, reason)
            info = TickFailure(golem_id=s.golem_id, tick=n, workflow_id=wid, error=reason,
                               failed_at=self._now().isoformat())
            try:
                await workflow.execute_activity_method(
                    TickActivities.record_failure, info, task_queue=ctx.task_queue, **options.record_failure(),
                )
            except Exception as rec_err:  # recording is best effort; the failure is also in state
                workflow.logger.error("could not record failure of tick %s: %s", n, rec_err)
            self._state = fold_tick_failure(self._s, n, reason, wid, "", self._now().isoformat())
            if chain_health and is_chain_read_failure(step):
                self._state, alert = fold_chain_failure(self._s, reason, cfg.clock.theta_max_seconds)
                if alert:
                    workflow.logger.error("golem %s: %s", s.golem_id, alert)
        finally:
            self._tick_snapshot_taken = False
        if workflow.patched("rejection-expiry"):
            # Rejections leave `status` some ticks after the tick that reported them (issue 12).
            self._state = expire_rejections(self._s)
        return result

    def _registry(self) -> ExtensionRegistry:
        """The extension registry of the config version the golem runs on (pure: built from the config, the same
        on replay). A switched-off list the registry refuses (it stopped the worker's start, so only an applied
        version can bring one) falls back to the full build, logged."""
        registry, refused = registry_or_full(self._config.extensions.disabled)
        if refused:
            workflow.logger.error("[extensions] disabled refused (%s); hooks fire this build's full registry", refused)
        return registry

    async def _end(self, row: WorldTime | None = None, ticked: bool = False) -> GolemState:
        """on_end (runtime-extensions §3: lifespan): the golem is ending, and lifespan's handler is Thanatopsis
        (`_die`). Which members ran goes into the state (life.on_end). Firing adds no command: the registry is pure
        Python; only what the handler awaits (the settlement ticks, the thanatopsis activity) is in history."""
        fired, _ = await fire_async(self._registry(), "on_end", {"lifespan": lambda: self._die(row, ticked)})
        self._state = self._s.model_copy(update={"life": self._s.life.model_copy(update={"on_end": fired})})
        return self._s

    async def _die(self, row: WorldTime | None = None, ticked: bool = False) -> GolemState:
        """Thanatopsis (golem.life.death): Acceptance → Settlement (ticks whose decision is the unwind, through the
        normal write path) → Reflection and Legacy (the thanatopsis activity). Completes the workflow with the
        state, whose life.certificate is the death certificate."""
        cfg = self._config
        s = self._s
        life = s.life
        cause = life.death_cause or "owner"
        self._activity = f"dying: acceptance ({cause})"
        workflow.logger.warning("golem %s dies: %s (%s)", s.golem_id, cause, life.death_detail)
        if self._replay and row is not None:  # a backtest's row that started this tick is done
            self._row_done(row, ticked=ticked)
        settled: list[int] = []
        txs: list[str] = []
        for _ in range(cfg.lifespan.settlement_ticks):
            n = self._s.tick
            result = await self._tick(cfg, settlement=True)
            settled.append(n)
            if result is not None:
                txs += result.tx_hashes
            if result is None or not result.actions_proposed or not result.actions_executed:
                break  # nothing left, or nothing the write path lets through: what is open goes on the certificate
        v = self._s.vitality
        cert = DeathCertificate(
            golem_id=s.golem_id, generation=life.generation, predecessor=life.predecessor, cause=cause,
            detail=life.death_detail, born_tick=life.born_tick, died_at_tick=s.tick, died_at=self._now().isoformat(),
            vitality={"economic": v.economic, "epistemic": v.epistemic, "stochastic": v.stochastic,
                      "composite": v.composite},
            phase=self._s.phase, settlement_ticks=settled, settlement_txs=txs,
            reflection_model=cfg.lifespan.reflection, phases=["acceptance", "settlement"],
        )
        self._activity = "dying: reflection and legacy"
        gating = self._s.learned_gating.model_copy(update={"log": []})
        cert = await workflow.execute_activity_method(
            LifeActivities.thanatopsis,
            ThanatopsisInput(certificate=cert, gating=gating, markers=self._s.life.markers,
                             reflection=cfg.lifespan.reflection),
            task_queue=ids.task_queue(s.golem_id), **options.thanatopsis(),
        )
        self._state = self._s.model_copy(update={"life": self._s.life.model_copy(update={"certificate": cert})})
        workflow.upsert_search_attributes([SA_PHASE.value_set("dead")])
        self._activity = f"dead ({cert.cause})"
        if self._replay:  # a backtest's driver keeps handing rows: each is answered, nothing ticks
            while not self._world_last:
                await workflow.wait_condition(lambda: bool(self._world_rows))
                r = self._world_rows.pop(0)
                self._world_now = datetime.fromisoformat(r.at)
                self._world_last = r.last
                self._world_done[r.row] = WorldAdvanced(row=r.row)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._s

    def _queue_missed_triggers(self, started: datetime, theta: float) -> None:
        """A tick that overran theta missed triggers: queue them (max 3, oldest dropped, §S12)."""
        missed = int((self._now() - started).total_seconds() // max(theta, 1e-3))
        if not missed or not workflow.patched("backpressure"):
            return
        queue = self._s.tick_queue
        seen: dict[str, list[Any]] = {}
        for _ in range(missed):
            queue, events = enqueue(queue, PendingTick(trigger="theta", enqueued_at=self._now().timestamp()))
            for event in events:
                seen.setdefault(event.kind, []).append(event)
        # One line per kind per tick (logging only: no command, replay-safe): at a fast theta a slow tick
        # misses dozens of triggers, and a line per trigger grew the worker log ~17 MB per 1,000 ticks (soak).
        for kind, events in seen.items():
            more = f" (x{len(events)} this tick)" if len(events) > 1 else ""
            workflow.logger.warning("%s: %s%s", kind, events[-1].detail, more)
        self._state = self._s.model_copy(update={"tick_queue": queue})

    async def _consolidate(self, cfg: GolemConfig) -> None:
        s = self._s
        self._activity = "consolidating"
        # Learned gating closes its feedback loop at delta frequency (§S5 "Outcome feedback").
        self._state, feedback = learn_at_delta(self._s, cfg.gating)
        workflow.logger.info("gating feedback at tick %s: %s", s.tick, feedback)
        result = await self._upkeep_child(
            DeltaConsolidationWorkflow.run, "delta", "next-curator",
            lambda notes: ConsolidationInput(golem_id=s.golem_id, tick=s.tick, config=cfg, followups=notes,
                                             daily_spend_usd=daily_spend_on(s, self._now().isoformat())),
        )
        if result is not None and result.inference_cost_usd > 0 and workflow.patched("delta-inference-spend"):
            # The delta cycle's future-utility calls (Rev. 3) count against the §S12 daily budget.
            self._state = fold_upkeep_cost(self._s, result.inference_cost_usd, self._now().isoformat())
        # §S11: a PLAYBOOK revision invalidates cached decisions: the worker's cache does it at its next lookup
        # (an entry stamped with another revision is dropped; golem.cognition.decision_cache.lookup).
        self._state = self._s.model_copy(update={"last_delta_tick": s.tick})
        if result is not None:  # issue 18: the curator's dream_priority tags feed the DreamScheduler (0: older results)
            self._state = self._s.model_copy(update={"dream_tags": result.dream_tags})

    async def _upkeep_child(self, run: Any, kind: str, window: str,
                            make_input: Callable[[list[FollowUp]], Any]) -> Any:
        """Run a delta or dream child with the follow-ups of its window; upkeep failing never stops the
        heartbeat (the failure is logged and None returned)."""
        s = self._s
        notes = [f for f in s.pending_followups if f.window.value == window]
        try:
            result = await workflow.execute_child_workflow(
                run, make_input(notes), id=ids.cycle_workflow_id(s.golem_id, kind, s.tick), task_queue=ids.task_queue(s.golem_id),
                execution_timeout=timedelta(minutes=10),
            )
        except ChildWorkflowError as err:
            workflow.logger.error("%s cycle at tick %s failed: %s", kind, s.tick, err.cause or err)
            return None
        self._drop_followups(result.followups_delivered)
        return result

    def _drop_followups(self, delivered: list[str]) -> None:
        kept = [f for f in self._s.pending_followups if f.id not in set(delivered)]
        self._state = self._s.model_copy(update={"pending_followups": kept})

    async def _dream(self, cfg: GolemConfig, urgency: DreamUrgency | None = None) -> None:
        s = self._s
        self._activity = "dreaming"
        self._state = s.model_copy(update={"dreaming": True})
        if urgency is not None:  # issue 18: the phased cycle, wakeable by a critical steer
            try:
                await self._dream_cycle(cfg, urgency)
            finally:
                self._dream_child = None
                # the dream replayed the tagged episodes (NREM, tagged first); the next delta recounts what is open
                self._state = self._s.model_copy(update={"dreaming": False, "last_dream_tick": s.tick,
                                                         "dream_tags": 0})
            return
        try:
            await self._upkeep_child(
                DreamCycleWorkflow.run, "dream", "next-dream",
                lambda notes: DreamInput(golem_id=s.golem_id, tick=s.tick, config=cfg, followups=notes),
            )
        finally:
            self._state = self._s.model_copy(update={"dreaming": False, "last_dream_tick": s.tick})

    async def _dream_cycle(self, cfg: GolemConfig, urgency: DreamUrgency) -> None:
        s = self._s
        notes = [f for f in s.pending_followups if f.window.value == "next-dream"]
        inp = DreamInput(golem_id=s.golem_id, tick=s.tick, config=cfg, followups=notes,
                         config_version=self._config_info.version, urgency=urgency.urgency,
                         reasons=urgency.reasons, threat_rehearsals=urgency.threat_rehearsals,
                         clock="replay" if self._replay else "wall")
        try:
            self._dream_child = await workflow.start_child_workflow(
                DreamCycleWorkflow.run, inp, id=ids.cycle_workflow_id(s.golem_id, "dream", s.tick),
                task_queue=ids.task_queue(s.golem_id), execution_timeout=timedelta(minutes=30),
            )
            result = await self._dream_child
        except ChildWorkflowError as err:
            workflow.logger.error("dream cycle at tick %s failed: %s", s.tick, err.cause or err)
            return
        self._drop_followups(result.followups_delivered)
        self._state = fold_dream_result(self._s, result)
