"""A fleet host's heartbeat monitor (HostMonitorWorkflow, id host-<name>-monitor): started once per host by
`golem worker --host`, `golem spawn`, `golem import` and `golem run --golems`, left running across restarts; it
watches whatever golems are placed on the host at each check (docs/design/fleet.md#the-host-monitor).
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.exceptions import WorkflowAlreadyStartedError

from golem.ids import host_monitor_workflow_id, host_queue
from golem.life.vitals import HostMonitorInput


async def ensure_host_monitor(client: Client, host: str, *, check_seconds: float | None = None,
                              window_seconds: float | None = None) -> str:
    """Start the host's monitor unless it runs; one line saying which. A running monitor keeps its cadence (to change
    it: terminate host-<name>-monitor, then start the worker with the new flags)."""
    from workflows.monitor import HostMonitorWorkflow

    wid = host_monitor_workflow_id(host)
    inp = HostMonitorInput(host=host)
    inp.check_seconds = check_seconds or inp.check_seconds
    inp.window_seconds = window_seconds or inp.window_seconds
    try:
        await client.start_workflow(HostMonitorWorkflow.run, inp, id=wid,
                                    task_queue=host_queue(host))
    except WorkflowAlreadyStartedError:
        return f"heartbeat-monitor {wid} running"
    return f"heartbeat-monitor {wid} started"
