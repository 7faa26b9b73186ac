"""DoctorWorkflow: `golem doctor` asks the worker itself, not the CLI's environment.

One activity on the golem's task queue, so the answer is what the worker that runs the golem sees: its
deliberator and why, whether its environment has the API key, the config version it loaded, its data dir.
"""

from __future__ import annotations

from temporalio import workflow

from workflows import options

with workflow.unsafe.imports_passed_through():
    from activities.doctor import DoctorActivities


@workflow.defn
class DoctorWorkflow:
    @workflow.run
    async def run(self, golem_id: str) -> str:
        return await workflow.execute_activity_method(
            DoctorActivities.doctor, golem_id, **options.doctor(),
        )
