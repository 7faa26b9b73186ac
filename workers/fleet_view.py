"""What an owner sees of a fleet: one row per golem placed in a host's data dir or running on any host queue (id,
host, state, tick, tier, phase, equity, spend today, alerts today). `golem list` prints these rows and the
dashboard's fleet page shows them (docs/how-to/fleet.md).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from temporalio.client import Client

from golem.fleet import FleetRegistry
from golem.ids import golem_workflow_id
from golem.layout import DataLayout

COLUMNS = ("id", "host", "state", "tick", "tier", "phase", "equity", "spend_today", "alerts")
OWN_WORKER = "(own worker)"  # the host column of a golem served on its own queue golem-<id>, not a host's
QUERY_TIMEOUT_S = 10.0  # one golem's status query; a worker too busy to answer leaves its row without it
QUERY_GONE = ("NOT_FOUND", "FAILED_PRECONDITION")  # a workflow that ended between the list and the query


def newest_record(layout: DataLayout) -> dict[str, Any]:
    """The golem's newest record in its data dir on this host: its tick, tier, phase, equity (net value of wallet
    + position at the oracle); {} before its first record."""
    from golem.life.cycle_store import CycleStore
    from golem.safety.risk import net_value_usd

    store = CycleStore(layout)
    rows = store.recent(1) if layout.cycle_index.exists() else []
    if not rows:
        return {}
    row = rows[0]
    value = net_value_usd(store.load(row["tick"]).observation.snapshot)
    return {"tick": row["tick"], "tier": row["tier"], "phase": row["phase"], "equity": f"${value:,.0f}",
            "time": _ago(row["timestamp"])}


def _ago(timestamp: str) -> str:
    """An ISO timestamp as `HH:MM:SS UTC (Ns ago)`."""
    when = datetime.fromisoformat(timestamp)
    age = (datetime.now(timezone.utc) - when).total_seconds()
    return f"{when.astimezone(timezone.utc):%H:%M:%S} UTC ({age:,.0f} s ago)"


def alerts_today(layout: DataLayout, status: Any) -> str:
    """Today's alerts on the golem's Event Fabric (the monitor's and its own), and a chain alert standing now."""
    from golem.events.store import EventStore

    today = datetime.now(timezone.utc).strftime("%Y-%m-%dT00:00:00+00:00")
    n = len(EventStore(layout).read(kinds=["alerts"], since=today, limit=10_000)) if layout.events.exists() else 0
    chain = status.chain.alert if status is not None and status.chain.alert else ""
    return f"{n}" + (f" + chain: {chain[:40]}" if chain else "")


async def running_on_hosts(client: Client) -> dict[str, str]:
    """golem id → host of every running GolemWorkflow: on a host queue (the fleet past this data dir), or OWN_WORKER
    for a golem on its own worker's queue (`golem run`, `golem worker --home`)."""
    hosts: dict[str, str] = {}
    async for wf in client.list_workflows("WorkflowType = 'GolemWorkflow' AND ExecutionStatus = 'Running'"):
        if not wf.id.startswith("golem-"):
            continue
        gid = wf.id[len("golem-"):]
        if wf.task_queue.startswith("golem-host-"):
            hosts[gid] = wf.task_queue[len("golem-host-"):]
        elif wf.task_queue == wf.id:
            hosts[gid] = OWN_WORKER
    return hosts


async def _status(client: Client, golem_id: str) -> Any:
    from temporalio.client import WorkflowQueryFailedError
    from temporalio.service import RPCError

    from golem.models.golem import GolemStatus

    try:  # by name: importing GolemWorkflow would load every activity's clients
        return await client.get_workflow_handle(golem_workflow_id(golem_id)).query(
            "status", result_type=GolemStatus, rpc_timeout=timedelta(seconds=QUERY_TIMEOUT_S))
    except WorkflowQueryFailedError:
        return None
    except RPCError as err:  # gone, or no answer in time (a busy worker): its row shows what this host knows
        if err.status.name not in QUERY_GONE + ("DEADLINE_EXCEEDED", "CANCELLED"):
            raise
        return None


async def fleet_rows(client: Client, data: Path, own_golem: str | None = None) -> list[dict[str, Any]]:
    """The rows, sorted by id; the status queries run together. Equity and alerts are read where the golem's data
    is on this host ("-" for a golem whose data is elsewhere). own_golem: the one golem whose data dir `data` itself
    is (`golem run`'s), read there."""
    registry = FleetRegistry(data)
    placements = {p.golem_id: p for p in registry.all()} if registry.path.exists() else {}
    hosts = await running_on_hosts(client)
    ids = sorted(set(placements) | set(hosts))

    async def one(gid: str) -> dict[str, Any]:
        p = placements.get(gid)
        status = await _status(client, gid) if gid in hosts or (p is not None and p.running) else None
        local = (p is not None and p.status == "placed") or (p is None and gid == own_golem)
        layout = registry.layout(gid) if p is not None else DataLayout(data)
        last = status.last_tick if status is not None else None
        local_reads = await asyncio.to_thread(lambda: (newest_record(layout), alerts_today(layout, status))) \
            if local else ({}, "-")
        record = local_reads[0]
        if status is None and record and (gid in hosts or (p is not None and p.running)):
            # running, but its worker did not answer in time: its newest record says where it was
            state, tick, tier, phase = "no answer (record)", record["tick"], record["tier"], record["phase"]
        else:
            state = status.activity if status is not None else (p.status if p else "-")
            tick = status.tick if status is not None else "-"
            tier = last.tier.value if last and last.tier else "-"
            phase = status.phase if status is not None else "-"
        return {
            "id": gid, "host": hosts.get(gid) or (p.host if p else "-"),
            "state": state, "tick": tick, "tier": tier, "phase": phase,
            "equity": record.get("equity", "-"),
            "spend_today": (f"${status.daily_spend_usd + status.daily_gas_usd:.4f}" if status is not None else "-"),
            "alerts": local_reads[1],
            "local": local and p is not None,  # placed in this data dir: the fleet page links to its page
        }

    return list(await asyncio.gather(*(one(g) for g in ids)))
