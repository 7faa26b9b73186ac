"""The heartbeat monitor (docs/design/life.md#the-heartbeat-monitor): HeartbeatMonitorWorkflow, one per lone golem
(id golem-<id>-monitor), and HostMonitorWorkflow, one per fleet host over every golem placed there
(docs/design/fleet.md). Read-only: it never signals a golem nor writes its state. Every check_seconds it reads the
vitals (an activity over the recorded ticks); alerts are batched in windows (5 minutes by default) and each window's
batch is delivered once per golem (Event Fabric + optional webhook).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from workflows import options

with workflow.unsafe.imports_passed_through():
    from golem import ids
    from activities.monitor import HostMonitorActivities, MonitorActivities
    from golem.life.vitals import AlertBatch, HostMonitorInput, HostVitalsInput, MonitorInput, ProbeAlert, VitalsInput


def monitor_workflow_id(golem_id: str) -> str:
    return ids.monitor_workflow_id(golem_id)


@workflow.defn
class HeartbeatMonitorWorkflow:
    def __init__(self) -> None:
        self._pending: dict[str, ProbeAlert] = {}
        self._delivered: list[AlertBatch] = []

    @workflow.query
    def pending(self) -> list[ProbeAlert]:
        return list(self._pending.values())

    @workflow.run
    async def run(self, inp: MonitorInput) -> int:
        queue = workflow.info().task_queue
        window_start = workflow.now()
        checks = batches = 0
        while inp.max_checks is None or checks < inp.max_checks:
            try:
                report = await workflow.execute_activity_method(
                    MonitorActivities.check_vitals,
                    VitalsInput(golem_id=inp.golem_id, now=workflow.now().isoformat(), theta_seconds=inp.theta_seconds),
                    task_queue=queue, **options.monitor(),
                )
                for alert in report:  # the latest reading of each vital in the window
                    self._pending[alert.vital] = alert
            except ActivityError as err:  # a missed reading; the next check reads again
                workflow.logger.warning("vitals check failed: %s", err.cause or err)
            checks += 1
            if workflow.now() - window_start >= timedelta(seconds=inp.window_seconds):
                if self._pending:
                    batch = AlertBatch(golem_id=inp.golem_id, batch_id=f"{workflow.info().run_id[:8]}-{batches}",
                                       window_start=window_start.isoformat(), window_end=workflow.now().isoformat(),
                                       alerts=list(self._pending.values()), checks=checks)
                    try:
                        await workflow.execute_activity_method(
                            MonitorActivities.deliver_alerts, batch, task_queue=queue,
                            **options.monitor(),
                        )
                    except ActivityError as err:
                        workflow.logger.error("alert batch %s not delivered: %s", batch.batch_id, err.cause or err)
                    batches += 1
                self._pending = {}
                window_start = workflow.now()
            if checks % inp.continue_every == 0:
                workflow.continue_as_new(inp)
            await workflow.sleep(timedelta(seconds=inp.check_seconds))
        return batches


@workflow.defn
class HostMonitorWorkflow:
    """The heartbeat monitor of a fleet host (id host-<name>-monitor, on golem-host-<name>): each check reads the
    vitals of every golem placed on the host now, so a golem spawned later is watched from its first tick and a
    stopped or moved one drops out; each window delivers one batch per golem, naming it."""

    def __init__(self) -> None:
        self._pending: dict[str, dict[str, ProbeAlert]] = {}
        self._watched: list[str] = []

    @workflow.query
    def pending(self) -> dict[str, list[ProbeAlert]]:
        return {gid: list(alerts.values()) for gid, alerts in self._pending.items()}

    @workflow.query
    def watched(self) -> list[str]:
        """The golems the last check read."""
        return list(self._watched)

    @workflow.run
    async def run(self, inp: HostMonitorInput) -> int:
        queue = workflow.info().task_queue
        window_start = workflow.now()
        checks = batches = 0
        while inp.max_checks is None or checks < inp.max_checks:
            try:
                report = await workflow.execute_activity_method(
                    HostMonitorActivities.check_host_vitals,
                    HostVitalsInput(host=inp.host, now=workflow.now().isoformat()), task_queue=queue,
                    **options.monitor(),
                )
                self._watched = report.watched
                for gid, alerts in report.alerts.items():  # the latest reading of each golem's vitals in the window
                    self._pending.setdefault(gid, {}).update({a.vital: a for a in alerts})
                for gid, why in report.unreadable.items():
                    workflow.logger.warning("vitals of golem %s not read: %s", gid, why)
            except ActivityError as err:  # a missed reading; the next check reads again
                workflow.logger.warning("host %s vitals check failed: %s", inp.host, err.cause or err)
            checks += 1
            if workflow.now() - window_start >= timedelta(seconds=inp.window_seconds):
                for gid in sorted(self._pending):
                    if gid not in self._watched:  # stopped or moved off the host within the window
                        continue
                    batch = AlertBatch(golem_id=gid, batch_id=f"{workflow.info().run_id[:8]}-{batches}",
                                       window_start=window_start.isoformat(), window_end=workflow.now().isoformat(),
                                       alerts=list(self._pending[gid].values()), checks=checks)
                    try:
                        await workflow.execute_activity_method(
                            HostMonitorActivities.deliver_host_alerts, batch, task_queue=queue, **options.monitor())
                    except ActivityError as err:
                        workflow.logger.error("alert batch %s of %s not delivered: %s", batch.batch_id, gid,
                                              err.cause or err)
                    batches += 1
                self._pending = {}
                window_start = workflow.now()
            if checks % inp.continue_every == 0:
                workflow.continue_as_new(inp)
            await workflow.sleep(timedelta(seconds=inp.check_seconds))
        return batches
