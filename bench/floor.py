"""The floor the tick benchmarks measure against: one workflow running one no-op activity on the same server."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn
async def noop(x: int) -> int:
    return x


@workflow.defn(sandboxed=False)  # imported from a bench script run as __main__, which the sandbox cannot re-import
class FloorWorkflow:
    @workflow.run
    async def run(self, x: int) -> int:
        return await workflow.execute_activity(noop, x, start_to_close_timeout=timedelta(seconds=10))
