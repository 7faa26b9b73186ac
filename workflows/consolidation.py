"""Delta consolidation and dream cycles: child workflows started by GolemWorkflow.

DELTA (~every 50 theta ticks, heartbeat "The Adaptive Clock"): curator pass — decay, heuristic
distillation, PLAYBOOK.md rewrite. DREAM: offline replay of the highest-utility episodes while the
heartbeat is suspended (§S7 SLEEPING.DREAMING).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.consolidation import ConsolidationActivities
    from golem.models.golem import ConsolidationInput, ConsolidationResult, DreamInput, DreamResult

_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)


@workflow.defn
class DeltaConsolidationWorkflow:
    @workflow.run
    async def run(self, inp: ConsolidationInput) -> ConsolidationResult:
        return await workflow.execute_activity_method(
            ConsolidationActivities.consolidate,
            inp,
            start_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=timedelta(seconds=60),
            retry_policy=_RETRY,
        )


@workflow.defn
class DreamCycleWorkflow:
    @workflow.run
    async def run(self, inp: DreamInput) -> DreamResult:
        return await workflow.execute_activity_method(
            ConsolidationActivities.dream,
            inp,
            start_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=timedelta(seconds=60),
            retry_policy=_RETRY,
        )
