"""Delta consolidation and dream cycles: child workflows started by GolemWorkflow.

DELTA (~every 50 theta ticks): the curator pass — decay, distillation, upkeep, dream promotion, learning, trials,
the PLAYBOOK.md rewrite, follow-ups, retention, the drift check — one activity per step, so the Web UI shows each and
a retry redoes one. DREAM: NREM replay, REM imagination, threat rehearsal and integration, one activity per phase,
while the heartbeat is suspended; a time budget or a critical steer's `wake` stops it between phases and ticking
resumes. Why: docs/design/dreams.md.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError
from temporalio.workflow import ActivityCancellationType

from workflows import options

with workflow.unsafe.imports_passed_through():
    from activities.consolidation import ConsolidationActivities
    from activities.dream import DreamActivities
    from golem.models.golem import (
        ConsolidationInput,
        ConsolidationResult,
        DeltaReport,
        DeltaStep,
        DreamInput,
        DreamPhaseInput,
        DreamResult,
    )

# A phase with forks: a few seconds per scenario on a local chain; the budget (not this timeout) bounds a cycle.
_PHASES = (("nrem", DreamActivities.nrem, 2), ("rem", DreamActivities.rem, 10), ("threats", DreamActivities.threats, 10))


@workflow.defn
class DeltaConsolidationWorkflow:
    @workflow.run
    async def run(self, inp: ConsolidationInput) -> ConsolidationResult:
        if not workflow.patched("delta-steps"):  # cycles started before the steps were activities
            return await workflow.execute_activity_method(ConsolidationActivities.consolidate, inp,
                                                          **options.cycle_step())
        fields: dict[str, Any] = {"tick": inp.tick}
        # since learned rules pay for themselves: a trial step between the Curator and PLAYBOOK.md's compile
        trial = workflow.patched("delta-trial")
        # since acted ticks are settled in hindsight: a settle step before the distillation and the Curator
        steps: tuple[str, ...] = (ConsolidationActivities.DELTA_STEPS_SETTLE if trial and workflow.patched("delta-settle")
                 else ConsolidationActivities.DELTA_STEPS_TRIAL if trial else ConsolidationActivities.DELTA_STEPS)
        # since a strategy is judged by what it achieved: a last step over the window's records
        if steps is ConsolidationActivities.DELTA_STEPS_SETTLE and workflow.patched("delta-viability"):
            steps = ConsolidationActivities.DELTA_STEPS_VIABILITY
        for name in steps:
            opts = options.trial_step(inp.config.learning.trial_timeout_seconds) if name == "trial" \
                else options.cycle_step()
            step: DeltaStep = await workflow.execute_activity_method(getattr(ConsolidationActivities, name), inp, **opts)
            fields.update(step.fields)
        result = ConsolidationResult.model_validate(fields)
        await workflow.execute_activity_method(
            ConsolidationActivities.report, DeltaReport(golem_id=inp.golem_id, result=result),
            **options.cycle_step(minutes=1))
        return result


@workflow.defn
class DreamCycleWorkflow:
    def __init__(self) -> None:
        self._wake: str | None = None

    @workflow.signal
    def wake(self, reason: str) -> None:
        """A critical steer (or the owner) wakes the golem: the cycle stops at once, ticking resumes."""
        if self._wake is None:
            self._wake = reason or "woken"

    @workflow.run
    async def run(self, inp: DreamInput) -> DreamResult:
        if not workflow.patched("dream-phases"):
            return await workflow.execute_activity_method(ConsolidationActivities.dream, inp, **options.cycle_step())
        d = inp.config.dream
        # a backtest's dream has no wall-clock budget: where it stopped would depend on the machine's load
        untimed = inp.clock == "replay" and workflow.patched("replay-dream-untimed")
        deadline = None if untimed else workflow.now() + timedelta(seconds=d.budget_seconds)
        phase_inp = DreamPhaseInput(
            golem_id=inp.golem_id, tick=inp.tick, config_version=inp.config_version, replay_count=d.replay_count,
            rem_scenarios=d.rem_scenarios, rehearse_threats=d.rehearse_threats, forks=d.forks,
            threat_rehearsals=inp.threat_rehearsals, deadline=deadline.isoformat() if deadline else "",
            urgency=inp.urgency,
            reasons=inp.reasons, followups=inp.followups,  # next-dream notes focus NREM (activities/dream.py)
        )
        stopped_at = stop_reason = None
        for name, method, minutes in _PHASES:
            if self._wake is not None or (deadline is not None and workflow.now() >= deadline):
                stopped_at, stop_reason = name, self._wake or f"time budget of {d.budget_seconds:g} s spent"
                break
            # Waits for a cancelled phase to end, so it cannot write its journal part after integration; phases
            # heartbeat per scenario, and a short heartbeat timeout keeps the SDK's heartbeat throttle (0.8×) short,
            # so the cancel reaches them within seconds.
            handle = workflow.start_activity_method(
                method, phase_inp, **options.dream_phase(minutes),
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            await workflow.wait_condition(lambda: handle.done() or self._wake is not None)
            if not handle.done():  # woken mid-phase: cancel it (its forks stop in its finally, or at the next sweep)
                handle.cancel()
                try:
                    await handle
                except (ActivityError, asyncio.CancelledError):
                    stopped_at, stop_reason = name, self._wake
                    break
                continue  # it finished before the cancel reached it: the next phase is where the cycle stops
            try:
                result = handle.result()
                if getattr(result, "stopped_early", False):
                    stopped_at, stop_reason = name, f"time budget of {d.budget_seconds:g} s spent"
                    break
            except ActivityError as err:  # a failed phase is journalled by its absence; the cycle goes on
                workflow.logger.error("dream phase %s failed: %s", name, err.cause or err)
        return await workflow.execute_activity_method(
            DreamActivities.integrate,
            phase_inp.model_copy(update={"followups": inp.followups, "stopped_at": stopped_at,
                                         "stop_reason": stop_reason}),
            **options.cycle_step(minutes=2),
        )
