"""A fleet host's heartbeat monitor (HostMonitorWorkflow, id host-<name>-monitor): started once per host by
`golem worker --host`, `golem spawn`, `golem import` and `golem run --golems`, left running across restarts; it
watches whatever golems are placed on the host at each check (docs/design/fleet.md#the-host-monitor).
"""

from __future__ import annotations

from collections.abc import Iterable

from temporalio.client import Client
from temporalio.exceptions import WorkflowAlreadyStartedError

from golem.ids import host_monitor_workflow_id, host_queue, monitor_workflow_id
from golem.life.vitals import HostMonitorInput


async def ensure_host_monitor(client: Client, host: str, golems: Iterable[str] = (), *,
                              check_seconds: float | None = None, window_seconds: float | None = None) -> str:
    """Start the host's monitor unless it runs, and end the per-golem monitors of `golems` that ran on a host queue
    (`golem run --golems` started those before): no golem is watched twice. One line saying what it did. A running
    monitor keeps its cadence (to change it: terminate host-<name>-monitor, then start the worker with new flags)."""
    from workflows.monitor import HostMonitorWorkflow

    retired = await _retire_golem_monitors(client, host, golems)
    done = f"; ended the per-golem monitors of {', '.join(retired)}" if retired else ""
    wid = host_monitor_workflow_id(host)
    inp = HostMonitorInput(host=host)
    inp.check_seconds = check_seconds or inp.check_seconds
    inp.window_seconds = window_seconds or inp.window_seconds
    try:
        await client.start_workflow(HostMonitorWorkflow.run, inp, id=wid,
                                    task_queue=host_queue(host))
    except WorkflowAlreadyStartedError:
        return f"heartbeat-monitor {wid} running{done}"
    return f"heartbeat-monitor {wid} started{done}"


async def _retire_golem_monitors(client: Client, host: str, golems: Iterable[str]) -> list[str]:
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    retired = []
    for gid in golems:
        handle = client.get_workflow_handle(monitor_workflow_id(gid))
        try:
            desc = await handle.describe()
        except RPCError:  # none: the usual case
            continue
        # a lone golem's monitor runs on golem-<id>, beside it: that one stays
        if desc.status == WorkflowExecutionStatus.RUNNING and desc.task_queue.startswith(host_queue("")):
            await handle.terminate(reason=f"replaced by {host_monitor_workflow_id(host)}, which watches every golem "
                                          f"placed on host {host}")
            retired.append(gid)
    return retired
