"""`golem list | stop | export | import` and `golem spawn ID` without --inherit: the golems placed on this host's data
dir (<data>/golems/<id>/), served by `golem worker --host NAME` on golem-host-<name> (docs/how-to/fleet.md)."""

from __future__ import annotations

import json
from argparse import Namespace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cli.common import Command, arun, client, rpc_status
from golem.errors import UserError


def spawn_placed(args: Namespace) -> int:
    """`golem spawn ID [--kind K] [--home DIR] [--host NAME]`: a new golem on this host, its home copied from
    --home, its workflow started on the host's queue unless --no-start."""
    from golem.fleet import FleetRegistry, default_host, prepare_home
    from golem.ids import host_queue

    registry = FleetRegistry(args.data)
    host = args.host or default_host()
    placed = registry.get(args.new_id)
    if placed is not None and placed.running:
        raise UserError(f"golem {args.new_id} is already placed on host {placed.host} ({registry.path})")
    try:
        home = prepare_home(registry, args.new_id, Path(args.home), key_env=args.key_env) \
            if not (registry.home(args.new_id) / "golem.toml").exists() else registry.home(args.new_id)
    except (ValueError, FileNotFoundError) as err:
        raise UserError(str(err)) from None
    registry.place(args.new_id, host, args.kind)
    print(f"golem {args.new_id} ({args.kind}) placed on host {host}: data {registry.layout(args.new_id).root}, "
          f"home {home}")
    if args.no_start:
        print(f"  start it: golem spawn {args.new_id} (again, without --no-start) beside `golem worker --host {host}`")
        return 0
    arun(_start(args, registry, args.new_id))
    print(f"  started on {host_queue(host)}: `golem worker --host {host} --data {registry.root}` serves it")
    return 0


async def _start(args: Namespace, registry: Any, golem_id: str) -> None:
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from workers.fleet import start_placed

    try:
        await start_placed(await client(args), registry, golem_id)
    except WorkflowAlreadyStartedError:
        raise UserError(f"golem {golem_id} is already running on Temporal (`golem list`)") from None


def _registry(args: Namespace) -> Any:
    from golem.fleet import FleetRegistry

    registry = FleetRegistry(args.data)
    if not registry.path.exists():
        raise UserError(f"no fleet in {args.data} (no fleet.sqlite): `golem spawn ID` places a golem there")
    return registry


def _equity(layout: Any) -> str:
    """Net value of the golem's newest record (wallet + position at the oracle), from its data dir on this host."""
    from golem.life.cycle_store import CycleStore
    from golem.safety.risk import net_value_usd

    store = CycleStore(layout)
    rows = store.recent(1) if layout.cycle_index.exists() else []
    if not rows:
        return "-"
    return f"${net_value_usd(store.load(rows[0]['tick']).observation.snapshot):,.0f}"


def _alerts(layout: Any, status: Any) -> str:
    """Today's alerts on the golem's Event Fabric (the monitor's and its own), and a chain alert standing now."""
    from golem.events.store import EventStore

    today = datetime.now(timezone.utc).strftime("%Y-%m-%dT00:00:00+00:00")
    n = len(EventStore(layout).read(kinds=["alerts"], since=today, limit=10_000)) if layout.events.exists() else 0
    chain = status.chain.alert if status is not None and status.chain.alert else ""
    return f"{n}" + (f" + chain: {chain[:40]}" if chain else "")


OWN_WORKER = "(own worker)"  # the host column of a golem served on its own queue golem-<id>, not a host's


def _own_golem(args: Namespace) -> str | None:
    """The id of the one golem whose data dir --data is (`golem run`'s), read quietly from --home's golem.toml."""
    from golem.layout import DataLayout
    from golem.models.config import ConfigError, load_config

    if not DataLayout(args.data).cycle_index.exists():
        return None
    try:
        return load_config(Path(args.home) / "golem.toml").golem.id
    except (ConfigError, OSError):
        return None


async def _rows(args: Namespace) -> list[dict[str, Any]]:
    from golem.fleet import FleetRegistry
    from golem.ids import golem_workflow_id
    from golem.layout import DataLayout
    from workflows.golem import GolemWorkflow

    registry = FleetRegistry(args.data)
    placements = {p.golem_id: p for p in registry.all()} if registry.path.exists() else {}
    temporal = await client(args)
    hosts: dict[str, str] = {}  # running GolemWorkflows on any host's queue: the fleet past this data dir
    async for wf in temporal.list_workflows("WorkflowType = 'GolemWorkflow' AND ExecutionStatus = 'Running'"):
        if not wf.id.startswith("golem-"):
            continue
        gid = wf.id[len("golem-"):]
        if wf.task_queue.startswith("golem-host-"):
            hosts[gid] = wf.task_queue[len("golem-host-"):]
        elif wf.task_queue == wf.id:  # a golem on its own worker's queue (`golem run`, `golem worker --home`)
            hosts[gid] = OWN_WORKER
    own = _own_golem(args)
    rows = []
    for gid in sorted(set(placements) | set(hosts)):
        p = placements.get(gid)
        status = None
        if gid in hosts or (p is not None and p.running):
            try:
                status = await temporal.get_workflow_handle(golem_workflow_id(gid)).query(GolemWorkflow.status)
            except Exception as err:
                if rpc_status(err) not in ("NOT_FOUND", "FAILED_PRECONDITION") and \
                        type(err).__name__ != "WorkflowQueryFailedError":
                    raise
        local = (p is not None and p.status == "placed") or (p is None and gid == own)
        layout = registry.layout(gid) if p is not None else DataLayout(args.data)
        last = status.last_tick if status is not None else None
        rows.append({
            "id": gid, "host": hosts.get(gid) or (p.host if p else "-"),
            "state": status.activity if status is not None else (p.status if p else "-"),
            "tick": status.tick if status is not None else "-",
            "tier": (last.tier.value if last and last.tier else "-"),
            "phase": status.phase if status is not None else "-",
            "equity": _equity(layout) if local else "-",
            "spend_today": (f"${status.daily_spend_usd + status.daily_gas_usd:.4f}" if status is not None else "-"),
            "alerts": _alerts(layout, status) if local else "-",
        })
    return rows


def cmd_list(args: Namespace) -> int:
    rows = arun(_rows(args))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        print(f"no golems placed in {args.data} and none running on Temporal (`golem run`, or `golem spawn ID`)")
        return 0
    cols = ["id", "host", "state", "tick", "tier", "phase", "equity", "spend_today", "alerts"]
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(width[c]) for c in cols))
    return 0


async def _stop(args: Namespace) -> None:
    from workers.fleet import stop_golem

    registry = _registry(args)
    placed = registry.get(args.golem_id)
    if placed is None:
        raise UserError(f"golem {args.golem_id} is not placed in {args.data} (`golem list`)")
    moved = await stop_golem(await client(args), registry, args.golem_id, args.reason or "golem stop")
    where = registry.layout(args.golem_id).root
    if moved is None:
        print(f"golem {args.golem_id} was not running; marked stopped (data in {where})")
    else:
        print(f"golem {args.golem_id} stopped before tick {moved['state']['tick']} on host {placed.host}; its data "
              f"stays in {where}; `golem spawn {args.golem_id}` starts it again from there")


def cmd_stop(args: Namespace) -> int:
    arun(_stop(args))
    return 0


def cmd_export(args: Namespace) -> int:
    from workers.fleet import export_golem

    registry = _registry(args)
    out = Path(args.out or f"{args.golem_id}.golem.tar.gz")

    async def go() -> dict[str, Any]:
        return await export_golem(await client(args), registry, args.golem_id, out)

    try:
        moved = arun(go())
    except ValueError as err:
        raise UserError(str(err)) from None
    print(f"golem {args.golem_id} exported to {out} at tick {moved['state']['tick']} (its next); on the other host: "
          f"golem import {out.name} --host NAME")
    return 0


def cmd_import(args: Namespace) -> int:
    from golem.fleet import FleetRegistry, default_host
    from golem.ids import host_queue
    from workers.fleet import import_golem

    registry = FleetRegistry(args.data)
    host = args.host or default_host()

    async def go() -> tuple[str, Any]:
        return await import_golem(await client(args), registry, Path(args.bundle), host, start=not args.no_start)

    try:
        golem_id, handle = arun(go())
    except (ValueError, FileNotFoundError) as err:
        raise UserError(str(err)) from None
    print(f"golem {golem_id} imported to host {host} ({registry.layout(golem_id).root})"
          + (f"; its workflow goes on from where it stopped on {host_queue(host)}" if handle is not None else ""))
    return 0


def register(command: Command) -> None:
    p = command("list", "the golems of this host's data dir and of every host queue: tick, tier, phase, equity, ...")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_list)
    p = command("stop", "stop a golem between two ticks (its data stays; `golem spawn ID` starts it again)")
    p.add_argument("golem_id")
    p.add_argument("--reason", help="why (in Temporal's termination reason)")
    p.set_defaults(fn=cmd_stop)
    p = command("export", "move a golem off this host: stop it between ticks, pack its data dir and state")
    p.add_argument("golem_id")
    p.add_argument("--out", help="the bundle (default <ID>.golem.tar.gz)")
    p.set_defaults(fn=cmd_export)
    p = command("import", "take a golem exported on another host: unpack, place here, continue its ticks")
    p.add_argument("bundle")
    p.add_argument("--host", help="this host's name (GOLEM_HOST, else the machine's)")
    p.add_argument("--no-start", action="store_true", help="place it without starting its workflow")
    p.set_defaults(fn=cmd_import)
