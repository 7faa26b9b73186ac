"""`golem config show|diff|apply`: the config version a running golem runs on.

show   the running version's hash, since which tick, and its config (a workflow query)
diff   golem.toml + STRATEGY.md on disk against the running version, key by key
apply  send the files on disk to the running golem (GolemWorkflow's apply_config update): the workflow's
       validator refuses a bad config with the key named and the old version keeps running; a good
       one is taken whole from the next tick (workflow and activities alike)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cli.common import arun, client


def _local(args):
    from golem.models.config import ConfigError
    from workers.config_versions import local_version

    try:
        return local_version(Path(args.home) / "golem.toml")
    except ConfigError as err:
        sys.exit(f"golem config: {err}")


async def _running(args, golem_id: str):
    from temporalio.service import RPCError

    from golem.ids import golem_workflow_id
    from workers.config_versions import running_config

    temporal = await client(args)
    try:
        running = await running_config(temporal, golem_id)
    except RPCError as err:
        sys.exit(f"golem config: {golem_workflow_id(golem_id)} is not reachable ({err}). Is `golem run` up?")
    if running is None:
        sys.exit(f"golem config: {golem_workflow_id(golem_id)} has not started yet; try again in a moment")
    return temporal, running


def _golem_id(args, local) -> str:
    if local.config is not None:
        return local.config.golem.id
    golem = local.table.get("golem")
    gid = golem.get("id") if isinstance(golem, dict) else None
    if not isinstance(gid, str):
        sys.exit(f"golem config: {local.error}")
    return gid


def _show(args) -> int:
    from golem.models.config_version import short

    local = _local(args)
    _, running = arun(_running(args, _golem_id(args, local)))
    info = running.info
    if args.json:
        print(running.model_dump_json(indent=2))
        return 0
    print(f"running config version {info.version or '(unversioned: started before config versions)'}")
    print(f"  since tick {info.applied_at_tick}" + (f" ({info.applied_at})" if info.applied_at else "")
          + (f", from {info.source}" if info.source else "") + (f"; replaced {short(info.previous)}" if info.previous else ""))
    print(f"  STRATEGY.md sha256 {info.strategy_sha256 or '?'}")
    print(f"  on disk:  {local.version or 'INVALID: ' + local.error}"
          + ("  (same)" if local.version == info.version else "  (differs: golem config diff)"))
    print(json.dumps(running.config.model_dump(mode="json"), indent=2))
    return 0


def _diff(args) -> int:
    from golem.models.config_version import config_diff, short

    local = _local(args)
    _, running = arun(_running(args, _golem_id(args, local)))
    if local.config is None:
        print(f"golem.toml on disk does not validate (apply would be refused):\n{local.error}")
        return 1
    lines = config_diff(running.config, local.config)
    if local.strategy_sha256 != running.info.strategy_sha256:
        lines.append(f"[STRATEGY.md] sha256 {running.info.strategy_sha256[:12] or '?'} -> {local.strategy_sha256[:12]}")
    if local.version == running.info.version or not lines:
        print(f"no difference: the golem runs on {short(local.version)}, the files on disk")
        return 0
    print(f"running {short(running.info.version)} -> on disk {short(local.version)}:")
    print("\n".join(f"  {line}" for line in lines))
    return 1  # like diff(1): 1 = the files differ


def _apply(args) -> int:
    from golem.models.config_version import short
    from workers.config_versions import ConfigRefused, apply_version

    local = _local(args)
    golem_id = _golem_id(args, local)

    async def go():
        return await apply_version(await client(args), golem_id, local, Path(args.data), "golem config apply")

    from temporalio.service import RPCError

    from golem.ids import golem_workflow_id

    wid = golem_workflow_id(golem_id)
    try:
        applied = arun(go())
    except RPCError as err:
        sys.exit(f"golem config apply: {wid} is not running ({err}); `golem run` starts it on the files")
    except ConfigRefused as err:
        sys.exit(f"golem config apply: refused by {wid}:\n{err}")
    if applied.version == applied.previous:
        print(f"{wid} already runs on {short(applied.version)}; nothing to apply")
        return 0
    print(f"{wid}: config {short(applied.version)} applied (was {short(applied.previous)}), "
          f"from tick {applied.effective_from_tick}")
    print("\n".join(f"  {line}" for line in applied.changed))
    print("Keys the worker reads at start (chain.rpc_url, chain.key_env, chain.address_book, grimoire.embedder, "
          "[inference] provider and models) take effect when the worker restarts (`golem run` again).")
    return 0


def register(command) -> None:
    p = command("config", "the config version a running golem runs on: show | diff | apply")
    sub = p.add_subparsers(dest="config_cmd", required=True)

    def action(name: str, help: str, fn):
        s = sub.add_parser(name, help=help)
        for opt in ("--home", "--data", "--address"):  # accepted after the action too (`golem config diff --data D`)
            s.add_argument(opt, default=argparse.SUPPRESS)
        s.set_defaults(fn=fn)
        return s

    action("show", "the running version, its hash and config", _show).add_argument("--json", action="store_true")
    action("diff", "golem.toml + STRATEGY.md on disk against the running version", _diff)
    action("apply", "validate and send the files on disk to the running golem", _apply)
