"""MemoryConsolidatorWorkflow: the memory-consolidator as a workflow kind — a golem without a wallet. A
Temporal Schedule starts one run per interval on the clade's queue; the run's one activity reads the golems'
episodes, runs the curator's distillation across them and writes proposals to each golem's inbox, which the golem's
own admission gate decides on. Design: docs/design/clade.md#the-memory-consolidator.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from golem.models.clade import ConsolidatorInput, ConsolidatorReport


@workflow.defn
class MemoryConsolidatorWorkflow:
    @workflow.run
    async def run(self, inp: ConsolidatorInput) -> ConsolidatorReport:
        report: ConsolidatorReport = await workflow.execute_activity(
            "consolidate_golems", inp, result_type=ConsolidatorReport, start_to_close_timeout=timedelta(minutes=10),
            retry_policy=RetryPolicy(maximum_attempts=3, non_retryable_error_types=["BadInput"]))
        return report
