"""GolemWorkflow's steps besides starting a theta tick: a failed tick's record, the wait for theta with its gamma
pulses, the delta consolidation, the dream cycle, and death (Thanatopsis).

Each reads and writes the golem's state through `Held`, so a signal that lands while a step awaits is kept.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

from workflows import options

with workflow.unsafe.imports_passed_through():
    from activities.life import LifeActivities, ThanatopsisInput
    from activities.tick import TickActivities
    from golem import ids
    from golem.inference.budget import budget_fraction, daily_spend_on
    from golem.cognition.chain_health import fold_chain_failure, is_chain_read_failure
    from golem.cognition.clock import budget_throttle, gamma_pulse
    from golem.cognition.fold import fold_dream_result, fold_tick_failure, fold_upkeep_cost
    from golem.cognition.learned_gating import learn_at_delta
    from golem.life.death import death_certificate
    from golem.cognition.dream_scheduler import DreamUrgency
    from golem.cognition.backpressure import DREAM_TRIGGER
    from golem.usecases.tick import missed_triggers, queue_missed
    from golem.models.config import GolemConfig
    from golem.models.golem import ConsolidationInput, ConsolidationResult, DreamInput, DreamResult, TickFailure
    from golem.models.interventions import FollowUp
    from golem.models.state import GolemState
    from golem.models.tick import TickResult
    from workflows.consolidation import DeltaConsolidationWorkflow, DreamCycleWorkflow
    from workflows.errors import root_cause
    from workflows.tick import SA_PHASE


@dataclass
class Held:
    """What GolemWorkflow holds between its handlers and its steps."""

    state: GolemState | None = None
    activity: str = "starting"
    dream: workflow.ChildWorkflowHandle[Any, DreamResult] | None = None  # the running dream: a critical steer wakes it
    # a delta cycle running beside the ticks (wall clock): folded in when it ends (golem_steps.fold_delta)
    delta: workflow.ChildWorkflowHandle[Any, ConsolidationResult] | None = None
    delta_tick: int = 0  # the running background cycle's tick

    @property
    def s(self) -> GolemState:
        """The golem's state once run() holds it (a signal that can come first waits for it)."""
        if self.state is None:
            raise ApplicationError("the golem's state is not loaded yet", non_retryable=True)
        return self.state

    def drop_followups(self, delivered: list[str]) -> None:
        kept = [f for f in self.s.pending_followups if f.id not in set(delivered)]
        self.state = self.s.model_copy(update={"pending_followups": kept})

    def window(self, name: str) -> list[FollowUp]:
        """The pending follow-ups delivered at this window."""
        return [f for f in self.s.pending_followups if f.window.value == name]


async def gamma(held: Held, cfg: GolemConfig, local: bool, now: Callable[[], datetime]) -> None:
    """One gamma pulse: a chain read, then pure state updates (docs/concepts/the-tick.md)."""
    golem_id, opts = held.s.golem_id, options.gamma(cfg.heartbeat.step_timeout_seconds)
    try:
        if local:
            snapshot = await workflow.execute_local_activity_method(TickActivities.gamma, golem_id, **opts)
        else:
            snapshot = await workflow.execute_activity_method(TickActivities.gamma, golem_id,
                                                              task_queue=workflow.info().task_queue, **opts)
    except ActivityError as err:  # perception is best effort; the next theta tick reads again
        workflow.logger.warning("gamma read failed: %s", err.cause or err)
        return
    hb = cfg.heartbeat
    factor = budget_throttle(budget_fraction(held.s.daily_spend_usd, hb), hb.cost_warning_threshold,
                             hb.cost_soft_cap_threshold)
    held.state, report = gamma_pulse(held.s, snapshot, now().timestamp(), cfg.probes, budget_factor=factor,
                                     gamma_min=cfg.clock.gamma_min_seconds, gamma_max=cfg.clock.gamma_max_seconds)
    if report.violations:
        workflow.logger.info("gamma: %s prediction violations", report.violations)


async def tick_failed(held: Held, err: ChildWorkflowError, cfg: GolemConfig, task_queue: str, wid: str,
                      now: Callable[[], datetime]) -> None:
    """A failed tick, recorded with its root cause ("observe: ConnectionError: ... refused") and folded into the
    state; a failed chain read marks the chain's health and may raise its alert. Pending steers stay pending."""
    workflow.deprecate_patch("chain-health")
    n = held.s.tick
    step, reason = root_cause(err)
    workflow.logger.error("tick %s failed: %s", n, reason)
    info = TickFailure(golem_id=held.s.golem_id, tick=n, workflow_id=wid, error=reason, failed_at=now().isoformat())
    try:
        await workflow.execute_activity_method(TickActivities.record_failure, info, task_queue=task_queue,
                                               **options.record_failure())
    except Exception as rec_err:  # recording is best effort; the failure is also in state
        workflow.logger.error("could not record failure of tick %s: %s", n, rec_err)
    held.state = fold_tick_failure(held.s, n, reason, wid, "", now().isoformat())
    if is_chain_read_failure(step):
        held.state, alert = fold_chain_failure(held.s, reason, cfg.clock.theta_max_seconds)
        if alert:
            workflow.logger.error("golem %s: %s", held.s.golem_id, alert)


async def wait_theta(held: Held, cfg: GolemConfig, local: bool, now: Callable[[], datetime]) -> None:
    """Sleep the adaptive theta interval, waking at once on a steer (or the owner's kill); inside a long wait the
    gamma pulse resolves predictions and updates fast state."""
    held.activity = "waiting"
    deadline = workflow.now() + timedelta(seconds=held.s.theta_seconds)
    while not held.s.pending_steers:
        remaining = (deadline - workflow.now()).total_seconds()
        if remaining <= 0:
            return
        gamma_due = held.s.gamma.interval_seconds
        use_gamma = gamma_due < remaining
        if use_gamma:
            workflow.deprecate_patch("gamma-clock")
        try:
            await workflow.wait_condition(lambda: bool(held.s.pending_steers) or bool(held.s.life.death_cause),
                                          timeout=timedelta(seconds=gamma_due if use_gamma else remaining))
            return  # a steer arrived (or the owner's kill)
        except TimeoutError:
            if not use_gamma:
                return
        await gamma(held, cfg, local, now)


def _delta_input(held: Held, cfg: GolemConfig, now: Callable[[], datetime]) -> ConsolidationInput:
    s = held.s
    held.state, feedback = learn_at_delta(s, cfg.gating)
    workflow.logger.info("gating feedback at tick %s: %s", s.tick, feedback)
    return ConsolidationInput(golem_id=s.golem_id, tick=s.tick, config=cfg, followups=held.window("next-curator"),
                              daily_spend_usd=daily_spend_on(s, now().isoformat()))


async def consolidate(held: Held, cfg: GolemConfig, now: Callable[[], datetime]) -> None:
    """Learned gating's feedback, then DeltaConsolidationWorkflow, ticking waits for it (the replay clock: a path's
    learning lands on the same row however loaded the machine); its failure never stops the heartbeat."""
    held.activity = "consolidating"
    inp = _delta_input(held, cfg, now)
    try:
        result = await workflow.execute_child_workflow(
            DeltaConsolidationWorkflow.run, inp, id=ids.cycle_workflow_id(inp.golem_id, "delta", inp.tick),
            task_queue=workflow.info().task_queue, execution_timeout=timedelta(minutes=10))
    except ChildWorkflowError as err:
        workflow.logger.error("delta cycle at tick %s failed: %s", inp.tick, err.cause or err)
        result = None
    fold_delta(held, inp.tick, result, now)


async def start_delta(held: Held, cfg: GolemConfig, now: Callable[[], datetime]) -> None:
    """The wall clock: DeltaConsolidationWorkflow starts beside the ticks — a trial's backtests take minutes, and a
    golem with a loan must not sleep through them (docs/design/tick.md#consolidation-beside-the-ticks). The cycle's
    tick counts as its delta tick at once, so no second cycle starts while it runs."""
    inp = _delta_input(held, cfg, now)
    held.delta = await workflow.start_child_workflow(
        DeltaConsolidationWorkflow.run, inp, id=ids.cycle_workflow_id(inp.golem_id, "delta", inp.tick),
        task_queue=workflow.info().task_queue, execution_timeout=timedelta(minutes=10))
    held.delta_tick = inp.tick
    held.state = held.s.model_copy(update={"last_delta_tick": inp.tick})


async def finish_delta(held: Held, now: Callable[[], datetime], *, wait: bool = False) -> None:
    """Fold a background delta cycle that ended (or, `wait`, wait for it: before continue-as-new or the end, which
    would close the child)."""
    handle = held.delta
    if handle is None or not (wait or handle.done()):
        return
    if wait and not handle.done():
        held.activity = "consolidating"
    tick = held.delta_tick
    try:
        result = await handle
    except ChildWorkflowError as err:
        workflow.logger.error("delta cycle at tick %s failed: %s", tick, err.cause or err)
        result = None
    held.delta = None
    fold_delta(held, tick, result, now)


def fold_delta(held: Held, tick: int, result: ConsolidationResult | None, now: Callable[[], datetime]) -> None:
    """A delta cycle's result into the golem's state."""
    if result is not None:
        held.drop_followups(result.followups_delivered)
    if result is not None and result.inference_cost_usd > 0:
        workflow.deprecate_patch("delta-inference-spend")  # the delta's LLM calls count against the daily budget
        held.state = fold_upkeep_cost(held.s, result.inference_cost_usd, now().isoformat())
    # A PLAYBOOK revision invalidates cached decisions: the worker's cache drops them at its next lookup.
    held.state = held.s.model_copy(update={"last_delta_tick": max(tick, held.s.last_delta_tick)})
    if result is not None:  # the curator's dream_priority tags feed the dream scheduler
        held.state = held.s.model_copy(update={"dream_tags": result.dream_tags})


async def dream(held: Held, cfg: GolemConfig, urgency: DreamUrgency, config_version: str,
                now: Callable[[], datetime], replay: bool = False) -> None:
    """The phased dream cycle; ticking waits until it ends, a critical steer wakes it (held.dream). On the wall clock,
    the theta triggers that fell due meanwhile are queued like a slow tick's (at most 3, the oldest dropped as
    heartbeat.tick_dropped_during_dream; docs/design/dreams.md#the-heartbeat-while-dreaming)."""
    s = held.s
    started = now()
    held.activity = "dreaming"
    held.state = s.model_copy(update={"dreaming": True})
    inp = DreamInput(golem_id=s.golem_id, tick=s.tick, config=cfg, followups=held.window("next-dream"),
                     config_version=config_version, urgency=urgency.urgency, reasons=urgency.reasons,
                     threat_rehearsals=urgency.threat_rehearsals, clock="replay" if replay else "wall")
    try:
        held.dream = await workflow.start_child_workflow(
            DreamCycleWorkflow.run, inp, id=ids.cycle_workflow_id(s.golem_id, "dream", s.tick),
            task_queue=workflow.info().task_queue, execution_timeout=timedelta(minutes=30))
        result = await held.dream
        held.drop_followups(result.followups_delivered)
        held.state = fold_dream_result(held.s, result)
    except ChildWorkflowError as err:
        workflow.logger.error("dream cycle at tick %s failed: %s", s.tick, err.cause or err)
    finally:
        held.dream = None
        # the dream replayed the tagged episodes (tagged first); the next delta recounts what is open
        held.state = held.s.model_copy(update={"dreaming": False, "last_dream_tick": s.tick, "dream_tags": 0})
    if not replay and workflow.patched("dream-tick-queue"):
        end = now()
        held.state, lines = queue_missed(held.s, missed_triggers(started, end, held.s.theta_seconds),
                                         end.timestamp(), trigger=DREAM_TRIGGER)
        for line in lines:
            workflow.logger.warning(line)


async def thanatopsis(held: Held, cfg: GolemConfig, settlement_tick: Callable[[], Awaitable[TickResult | None]],
                      now: Callable[[], datetime]) -> None:
    """Death (golem.life.death): Acceptance, Settlement (ticks whose decision is the unwind, through the normal write
    path), then Reflection and Legacy (the thanatopsis activity); the certificate goes into the state."""
    s = held.s
    cause = s.life.death_cause or "owner"
    held.activity = f"dying: acceptance ({cause})"
    workflow.logger.warning("golem %s dies: %s (%s)", s.golem_id, cause, s.life.death_detail)
    settled: list[int] = []
    txs: list[str] = []
    for _ in range(cfg.lifespan.settlement_ticks):
        settled.append(held.s.tick)
        result = await settlement_tick()
        txs += result.tx_hashes if result is not None else []
        if result is None or not result.actions_proposed or not result.actions_executed:
            break  # nothing left, or nothing the write path lets through: what is open goes on the certificate
    cert = death_certificate(s, held.s, settled, txs, cfg.lifespan.reflection, now().isoformat())
    held.activity = "dying: reflection and legacy"
    gating = held.s.learned_gating.model_copy(update={"log": []})
    cert = await workflow.execute_activity_method(
        LifeActivities.thanatopsis, ThanatopsisInput(certificate=cert, gating=gating, markers=held.s.life.markers,
                                                     reflection=cfg.lifespan.reflection),
        task_queue=workflow.info().task_queue, **options.thanatopsis())
    held.state = held.s.model_copy(update={"life": held.s.life.model_copy(update={"certificate": cert})})
    workflow.upsert_search_attributes([SA_PHASE.value_set("dead")])
    held.activity = f"dead ({cert.cause})"
