"""GolemWorkflow: one per golem (id golem-<id>), the durable heartbeat loop.

Holds GolemState; every theta interval (or at once on a steer) starts a ThetaTickWorkflow child; the steps between
ticks (gamma, delta, dream, death) are in workflows/golem_steps.py; continues-as-new every N ticks with the state.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ApplicationError, ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

from workflows import options

with workflow.unsafe.imports_passed_through():
    from activities.tick import TickActivities
    from golem import ids
    from golem.cognition.backpressure import dequeue
    from golem.cognition.control import apply_control, check_control
    from golem.cognition.fold import (accept_intervention, expire_rejections, new_golem_state, schedule_dream,
                                      should_run_delta)
    from golem.life.death import KillAnswer, KillRequest, accept_kill, check_kill
    from golem.extensions.hooks import fire, fire_async
    from golem.extensions.registry import ExtensionRegistry, registry_or_full
    from golem.models.config import GolemConfig
    from golem.models.config_version import (ConfigApplied, ConfigChange, ConfigVersionInfo, RunningConfig, short,
                                             validate_change)
    from golem.models.approvals import ApprovalAnswer, ApprovalAudit, ApprovalDecision, PrivilegedRequest
    from golem.models.enums import SteerSeverity
    from golem.models.golem import (ControlRequest, ControlState, GolemStatus, GolemWorkflowInput, WorldAdvanced,
                                    WorldTime)
    from golem.models.state import GolemState
    from golem.models.tick import TickResult
    from golem.safety import approvals as privileged
    from golem.usecases.config_apply import apply_change
    from golem.usecases.status import golem_status
    from golem.usecases.tick import fold_tick, missed_triggers, tick_context
    from workflows import golem_steps
    from workflows.clock import ReplayClock, WallClock
    from workflows.consolidation import DeltaConsolidationWorkflow, DreamCycleWorkflow
    from workflows.golem_steps import Held
    from workflows.tick import SA_GOLEM_ID, SA_PHASE, SA_TICK, ThetaTickWorkflow


@workflow.defn
class GolemWorkflow:
    def __init__(self) -> None:
        self._held = Held()  # the state, what the golem is doing, the running dream
        # The config version the golem runs on: swapped whole by apply_config, taken by the loop between ticks.
        self._cfg: GolemConfig | None = None
        self._config_info = ConfigVersionInfo()
        self._config_change = ""  # what the last apply changed, for the next tick's record
        self._child: workflow.ChildWorkflowHandle[Any, TickResult] | None = None
        self._child_id: str | None = None
        self._run_ticks = 0
        self._tick_snapshot_taken = False  # the running tick already holds its state snapshot
        # A backtest's replay clock is held from the start: the driver's rows may come before run() reads its input.
        self._world = ReplayClock()
        self._clock: WallClock = WallClock()
        self._local_steps = False  # the tick's T0 steps and gamma as local activities

    @property
    def _s(self) -> GolemState:
        return self._held.s

    @property
    def _config(self) -> GolemConfig:  # the config version the golem runs on, once run() holds it
        if self._cfg is None:
            raise ApplicationError("the golem's config is not loaded yet", non_retryable=True)
        return self._cfg

    def _now(self) -> datetime:  # the one clock the golem reads: the path's time in a backtest, workflow.now() live
        return self._clock.now()

    # ---- signals: validated here, deduplicated by id, rejections recorded in state ----------
    @workflow.signal
    async def steer(self, raw: Any) -> None:
        await self._accept("steer", raw)

    @workflow.signal
    async def follow_up(self, raw: Any) -> None:
        await self._accept("follow_up", raw)

    async def _accept(self, kind: Literal["steer", "follow_up"], raw: Any) -> None:
        if self._held.state is None:  # a signal that arrives before run() starts: wait for the state
            await workflow.wait_condition(lambda: self._held.state is not None)
        before = len(self._s.pending_steers)

        def accept() -> tuple[GolemState, str | None]:
            return accept_intervention(self._s, kind, raw, self._now().isoformat(),
                                       tick_running=self._tick_snapshot_taken)

        # A steer fires the steer hook (intervention queues it), a follow-up the input hook (input-router); no command.
        hook, member = ("steer", "intervention") if kind == "steer" else ("input", "input-router")
        _, results = fire(self._registry(), hook, {member: accept})
        self._held.state, reason = dict(results).get(member, (self._s, f"no {hook} handler in this build"))
        if reason:
            workflow.logger.warning("rejected %s: %s", kind, reason)
            return
        steer = self._s.pending_steers[-1] if kind == "steer" and len(self._s.pending_steers) > before else None
        if steer is not None and self._held.dream is not None and steer.severity == SteerSeverity.CRITICAL:
            # dreaming suspends the heartbeat; a critical steer ends the dream so the next tick takes it
            try:
                await self._held.dream.signal(DreamCycleWorkflow.wake, f"critical steer {steer.id}")
            except Exception as err:  # the dream may have just ended; the steer waits for the next tick anyway
                workflow.logger.info("dream not woken: %s", err)
        if kind == "steer" and len(self._s.pending_steers) > before and self._child is not None and (
                self._s.pending_steers[-1].source == "owner" or not workflow.patched("self-steers-wait")):
            # forwarded to the running tick, which takes it only if its FSM accepts steers; a self-steer is not: the
            # tick that sent it is finishing, and it is for the next one (docs/design/tick.md#self-steers)
            try:
                await self._child.signal(ThetaTickWorkflow.steer, self._s.pending_steers[-1])
            except Exception as err:  # the tick may have just finished; the steer stays pending
                workflow.logger.info("steer not forwarded: %s", err)

    # ---- the replay clock: a backtest's driver hands over one row at a time ------------------
    @workflow.update
    async def advance_world(self, t: WorldTime) -> WorldAdvanced:
        """The chain now shows row t: tick on it if theta has elapsed in path time (or a steer waits),
        otherwise run a gamma pulse if one is due. Returns once the golem is done with the row."""
        return await self._world.hand_over(t)

    @advance_world.validator
    def _check_world(self, t: WorldTime) -> None:
        if self._cfg is not None and not self._clock.replay:
            raise ValueError("this golem lives by the wall clock; advance_world is for a backtest's replay clock")
        self._world.check(t)

    # ---- the owner's stop buttons: updates, validated before they enter history ---------------
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
        self._held.state, answer = apply_control(self._s, what, req, self._now().isoformat())
        workflow.logger.info("golem %s: %s", self._s.golem_id, answer.note)
        return answer

    # ---- death by the owner: an update refused unless confirmed with the golem's id ---------
    @workflow.update
    def kill(self, req: KillRequest) -> KillAnswer:
        """`golem kill --reason R`: the running tick finishes, then Thanatopsis; the result is the certificate."""
        self._held.state, answer = accept_kill(self._s, req)
        workflow.logger.warning("golem %s: killed by %s: %s", self._s.golem_id, req.by, req.reason)
        return answer

    @kill.validator
    def _check_kill(self, req: KillRequest) -> None:
        if self._held.state is None:
            raise ValueError("the golem has not started yet; retry in a moment")
        check_kill(self._held.state.golem_id, req, self._held.state.life.death_cause)

    # ---- privileged requests: the owner's answer, an update validated before it enters history ------
    @workflow.update
    async def approve(self, req: ApprovalDecision) -> ApprovalAnswer:
        """`golem approve ID`: the request runs on the next tick to start, through every safety check."""
        return await self._answer(req, approve=True)

    @approve.validator
    def _check_approve(self, req: ApprovalDecision) -> None:
        privileged.check_decision(self._held.state, req)

    @workflow.update
    async def deny(self, req: ApprovalDecision) -> ApprovalAnswer:
        """`golem deny ID`: the request never runs."""
        return await self._answer(req, approve=False)

    @deny.validator
    def _check_deny(self, req: ApprovalDecision) -> None:
        privileged.check_decision(self._held.state, req)

    async def _answer(self, req: ApprovalDecision, approve: bool) -> ApprovalAnswer:
        try:  # the validator passed it in this same task; a refusal here fails only the update
            self._held.state, answer = privileged.decide(self._s, req, approve, self._now().isoformat())
        except ValueError as err:
            raise ApplicationError(str(err), type="ApprovalRefused", non_retryable=True) from None
        workflow.logger.info("golem %s: %s", self._s.golem_id, answer.message)
        self._show_approvals()
        await self._audit_approvals([answer.request])
        return answer

    async def _audit_approvals(self, requests: list[PrivilegedRequest]) -> None:
        """Every answer and expiry on the audit trail (an activity: the trail is a file on the golem's worker)."""
        await workflow.execute_activity_method(
            TickActivities.audit_approvals, ApprovalAudit(golem_id=self._s.golem_id, requests=requests),
            task_queue=workflow.info().task_queue, **options.audit())

    def _show_approvals(self) -> None:
        """Open requests in the Temporal UI's current details (no command: replays are unaffected)."""
        lines = [f"{a.id} {a.status.value}: {a.tool} {a.arguments} (tick {a.tick}; {a.reason})"
                 + (f"; expires at tick {a.expires_at_tick}: `golem approve {a.id}` or `golem deny {a.id}`"
                    if a.status.value == "pending" else "; runs on the next tick")
                 for a in self._s.approvals if a.status.open]
        text = ("Privileged requests:\n" + "\n".join(lines)) if lines else ""
        if text or workflow.get_current_details():
            workflow.set_current_details(text)

    @workflow.query
    def approvals(self) -> list[PrivilegedRequest]:
        return list(self._s.approvals) if self._held.state is not None else []

    # ---- config versions: a new golem.toml + STRATEGY.md, validated, applied whole ----------
    @workflow.update
    async def apply_config(self, change: ConfigChange) -> ConfigApplied:
        """Take a new config version. The running tick finishes on the version it started with; the next
        tick (and every activity in it) runs on this one. The update itself is the event in history."""
        next_tick = self._s.tick + (1 if self._child is not None else 0)
        try:  # the validator already passed it; an ApplicationError fails only the update, never the workflow task
            swap = apply_change(self._config, self._config_info, change, next_tick, self._now().isoformat())
        except ValueError as err:
            raise ApplicationError(str(err), type="ConfigRefused", non_retryable=True) from None
        if swap.note:  # a new version (the same one again changes nothing)
            self._cfg, self._config_info, self._config_change = swap.config, swap.info, swap.note
            workflow.logger.info("%s; effective from tick %s", swap.note, next_tick)
        return swap.answer

    @apply_config.validator
    def _check_config(self, change: ConfigChange) -> None:
        """A bad config is refused before it is accepted into history: the error names the key, and the
        old version keeps running."""
        if self._cfg is None or self._held.state is None:
            raise ValueError("the golem has not started yet; retry in a moment")
        try:
            validate_change(self._cfg, change)
        except ValueError as err:
            running = short(self._config_info.version)
            raise ValueError(f"{err}\nconfig refused: the golem keeps running on {running}") from None

    @workflow.query
    def config_version(self) -> RunningConfig | None:
        if self._cfg is None:
            return None
        return RunningConfig(info=self._config_info, config=self._cfg)

    @workflow.query
    def status(self) -> GolemStatus:
        activity = self._held.activity + (f"; delta cycle of tick {self._held.delta_tick} running beside the ticks"
                                          if self._held.delta is not None else "")
        return golem_status(self._s, self._cfg, activity=activity, run_ticks=self._run_ticks,
                            tick_workflow_id=self._child_id if self._child is not None else None,
                            config_version=self._config_info.version)

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
            self._held.state = inp.state or new_golem_state(cfg)

        # session(start): the grimoire member opened the stores at the worker's start; heartbeat's starts the state.
        fire(self._registry(), "session", {"heartbeat": start_heartbeat})
        self._local_steps = inp.local_steps
        if inp.clock == "replay":
            self._world.start(inp.world_time, inp.last_tick_at)
            self._clock = self._world
        replay, row = self._clock.replay, None
        while inp.max_ticks is None or self._s.tick < inp.max_ticks:
            if replay:
                row = await self._await_row(cfg)
                if row is None:
                    break
            if self._dying():
                return await self._end(row)
            if self._s.paused:
                workflow.deprecate_patch("stop-buttons")
                # `golem pause`: no new tick until `golem resume` (signals, queries and updates still answer).
                self._held.activity = "paused"
                while True:  # a background delta cycle that ends during the pause is folded in then (no command)
                    await workflow.wait_condition(lambda: not self._s.paused or bool(self._s.life.death_cause)
                                                  or (self._held.delta is not None and self._held.delta.done()))
                    if not self._s.paused or self._s.life.death_cause:
                        break
                    await golem_steps.finish_delta(self._held, self._now)
                if self._dying():
                    return await self._end(row)
            cfg = self._config  # an applied config version takes effect here, between ticks, whole
            await golem_steps.finish_delta(self._held, self._now)  # a background cycle that ended: folded in
            workflow.deprecate_patch("dream-scheduler")
            urgency = schedule_dream(self._s, cfg)
            if urgency.due and self._held.delta is None:  # a dream waits for a background delta cycle to end
                await golem_steps.dream(self._held, cfg, urgency, self._config_info.version, self._now,
                                         replay=self._clock.replay)
            if should_run_delta(self._s, cfg.clock) and self._held.delta is None:
                # the wall clock: the cycle runs beside the ticks (a trial takes minutes); the replay clock waits
                if not replay and workflow.patched("delta-background"):
                    await golem_steps.start_delta(self._held, cfg, self._now)
                else:
                    await golem_steps.consolidate(self._held, cfg, self._now)

            await self._tick()
            self._run_ticks += 1
            if self._dying():  # a clock ran out this tick (golem.life.lifespan), or the owner's kill landed
                return await self._end(row, ticked=True)
            if row is not None:
                self._row_done(row, ticked=True)
                if self._world.last:
                    break

            if self._run_ticks >= cfg.clock.continue_as_new_ticks:
                await golem_steps.finish_delta(self._held, self._now, wait=True)  # the new run would orphan it
                self._held.activity = "continuing-as-new"
                await workflow.wait_condition(workflow.all_handlers_finished)
                world_time, last_tick_at = self._world.carried() if replay else (None, None)
                workflow.continue_as_new(GolemWorkflowInput(
                    config=self._cfg, state=self._s, max_ticks=inp.max_ticks, clock=inp.clock,
                    config_info=self._config_info if self._config_info.version else None,
                    world_time=world_time, last_tick_at=last_tick_at, local_steps=inp.local_steps))
            if inp.max_ticks is not None and self._s.tick >= inp.max_ticks:
                break
            if replay:
                continue  # the next row brings the next tick; nothing waits on the wall clock
            if self._s.tick_queue.pending:  # theta triggers fell due while the tick ran: the next starts at once
                workflow.deprecate_patch("backpressure")
                continue
            await golem_steps.wait_theta(self._held, cfg, self._local_steps, self._now)
        await golem_steps.finish_delta(self._held, self._now, wait=True)
        self._held.activity = "stopped"
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._s

    async def _await_row(self, cfg: GolemConfig) -> WorldTime | None:
        """Replay clock: take rows until one makes a tick due (theta elapsed in path time, or a steer is
        pending); rows in between get a gamma pulse when one is due, as the live clock would give them.
        Returns the tick's row, or None once the path's last row was only watched."""
        world = self._world
        while not world.last:
            self._held.activity = "waiting for the next row"
            row = await world.take()
            if world.tick_due(self._s.theta_seconds) or self._s.pending_steers:
                return row
            pulsed = world.gamma_due()
            if pulsed:
                await golem_steps.gamma(self._held, cfg, self._local_steps, self._now)
                world.gamma_in(self._s.gamma.interval_seconds)
            world.answer(WorldAdvanced(row=row.row, gamma=pulsed))
        return None

    def _row_done(self, row: WorldTime, ticked: bool) -> None:
        last = self._s.recent_ticks[-1] if self._s.recent_ticks else None
        self._world.answer(WorldAdvanced(
            row=row.row, tick=last.tick if (ticked and last) else None,
            tier=last.tier.value if (ticked and last and last.tier) else None,
            failed=bool(ticked and last and last.failed),
        ))
        self._world.gamma_in(self._s.gamma.interval_seconds)

    async def _tick(self, settlement: bool = False) -> TickResult | None:
        """One ThetaTickWorkflow child on the config version current now (an update may have landed during a dream or
        a delta); a failed tick is recorded and the loop goes on, pending steers stay pending."""
        cfg, s = self._config, self._s
        n, wid = s.tick, ids.tick_workflow_id(s.golem_id, s.tick)
        queue, trigger = dequeue(s.tick_queue)
        self._held.state = s = s.model_copy(update={"tick_queue": queue})
        started = self._now()
        self._clock.ticked(started)
        version, change = self._config_info.version, self._config_change
        workflow.deprecate_patch("slim-tick-context")  # retired patches, deprecated where they were taken
        if version or change:
            workflow.deprecate_patch("config-version")
        if version:
            workflow.deprecate_patch("lean-tick-input")
            workflow.deprecate_patch("tick-wire-2")
        ctx = tick_context(s, cfg, version=version, change=change, started_at=started.isoformat(),
                           carried=trigger.probes if trigger else [], settlement=settlement,
                           local_steps=self._local_steps)
        self._config_change, self._tick_snapshot_taken, self._child_id = "", True, wid
        self._held.activity = "ticking" if not settlement else f"dying: settlement tick {n}"
        result: TickResult | None = None
        try:
            self._child = await workflow.start_child_workflow(
                ThetaTickWorkflow.run, ctx, id=wid, task_queue=workflow.info().task_queue,
                search_attributes=TypedSearchAttributes([SearchAttributePair(SA_GOLEM_ID, s.golem_id),
                                                         SearchAttributePair(SA_TICK, n)]),
                parent_close_policy=ParentClosePolicy.ABANDON, execution_timeout=timedelta(minutes=30))
            result = await self._child
        except ChildWorkflowError as err:
            self._child = None
            await golem_steps.tick_failed(self._held, err, cfg, workflow.info().task_queue, wid, self._now)
        finally:
            self._child, self._tick_snapshot_taken = None, False
        if result is not None:
            missed = missed_triggers(started, self._now(), s.theta_seconds)
            if missed:
                workflow.deprecate_patch("backpressure")
            workflow.deprecate_patch("chain-health")
            self._held.state, dropped = fold_tick(self._s, result, cfg, self._now(), missed)
            for line in dropped:
                workflow.logger.warning(line)
            if self._s.phase != s.phase:  # the behavioural phase on the golem's workflow too (the UI filters by it)
                workflow.deprecate_patch("phase-search-attribute")
                workflow.upsert_search_attributes([SA_PHASE.value_set(self._s.phase.value)])
        workflow.deprecate_patch("rejection-expiry")  # rejections leave `status` some ticks after their tick
        self._held.state = expire_rejections(self._s)
        self._held.state, expired = privileged.expire(self._s)  # unanswered privileged requests, before the next tick
        if expired:
            workflow.logger.info("golem %s: privileged request(s) expired: %s", self._s.golem_id,
                                 ", ".join(a.id for a in expired))
            await self._audit_approvals(expired)
        if self._s.approvals:
            self._show_approvals()
        return result

    def _dying(self) -> bool:
        if self._s.life.death_cause:
            workflow.deprecate_patch("thanatopsis")
        return bool(self._s.life.death_cause)

    def _registry(self) -> ExtensionRegistry:
        """The running config version's extension registry (pure: the same on replay). A switched-off list it refuses
        (only an applied version can bring one: the worker's start refused it) falls back to the full build."""
        registry, refused = registry_or_full(self._config.extensions.disabled)
        if refused:
            workflow.logger.error("[extensions] disabled refused (%s); hooks fire this build's full registry", refused)
        return registry

    async def _end(self, row: WorldTime | None = None, ticked: bool = False) -> GolemState:
        """on_end: lifespan's handler is Thanatopsis (`_die`); which members ran goes into life.on_end. Firing adds no
        command; only what the handler awaits (settlement ticks, the thanatopsis activity) is in history."""
        await golem_steps.finish_delta(self._held, self._now, wait=True)  # the end would close a background cycle
        fired, _ = await fire_async(self._registry(), "on_end", {"lifespan": lambda: self._die(row, ticked)})
        self._held.state = self._s.model_copy(update={"life": self._s.life.model_copy(update={"on_end": fired})})
        return self._s

    async def _die(self, row: WorldTime | None = None, ticked: bool = False) -> GolemState:
        """Thanatopsis (golem_steps.thanatopsis); completes the workflow with the state, whose life.certificate is
        the death certificate."""
        if self._clock.replay and row is not None:  # a backtest's row that started this tick is done
            self._row_done(row, ticked=ticked)
        await golem_steps.thanatopsis(self._held, self._config, lambda: self._tick(settlement=True), self._now)
        if self._clock.replay:  # a backtest's driver keeps handing rows: each is answered, nothing ticks
            await self._world.watch_to_end()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._s
