"""What every `golem` command shares: the golem home's config, the data dir, the Temporal client and address,
one-line errors. Only the standard library and golem.errors load with this module (`golem --help` imports it);
pydantic, temporalio and the rest load inside the helper that needs them."""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta, timezone
from argparse import ArgumentParser, Namespace
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from golem.errors import UserError

if TYPE_CHECKING:  # types only: these modules load inside the helpers that need them
    from temporalio.client import Client, WorkflowHandle
    from temporalio.service import RPCError

    from golem.models.config import GolemConfig
    from workers.client import Frontend

T = TypeVar("T")

# What each cli module's register() receives: adds the named sub-command (with its help line) and returns its parser.
Command = Callable[[str, str], ArgumentParser]


def default_home() -> Path:
    return Path(os.environ.get("GOLEM_HOME", "examples/golem-home")).resolve()


def default_data() -> Path:
    return Path(os.environ.get("GOLEM_DATA", ".golem-data")).resolve()


def one_line(text: object) -> str:
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip()).replace(":; ", ": ")


def config(args: Namespace) -> GolemConfig:
    """The GolemConfig of --home's golem.toml; a bad file exits with one line naming the key."""
    from golem.models.config import ConfigError, load_config

    try:
        return load_config(Path(args.home) / "golem.toml")
    except ConfigError as err:
        sys.exit(f"golem: {one_line(err)}")


def golem_config(args: Namespace) -> GolemConfig:
    """For the commands that only talk to the running golem (status, steer, pause, replay, ...): they need its id,
    not the rest of golem.toml. A file mid-edit that does not validate must not lock the owner out of `status` or
    a steer — the golem runs on its applied version until `golem config apply` — so such a file is read for its
    [golem] section alone, with a warning naming what is wrong. A file without a valid [golem] section (or not
    TOML) still exits with one line."""
    from golem.models.config import ConfigError, GolemConfig, load_config, parse_config_table, read_config_table

    path = Path(args.home) / "golem.toml"
    try:
        return load_config(path)
    except ConfigError as err:
        cfg: GolemConfig | None
        try:
            raw = read_config_table(path)
            cfg, using = parse_config_table({"golem": raw.get("golem", {})}, str(path)), "its [golem] section only"
        except ConfigError:
            cfg, using = _last_stored_config(args), f"the golem id of the last version stored in {args.data}"
        if cfg is None:
            sys.exit(f"golem: {one_line(err)}")
        print(f"golem: warning: {one_line(err).rstrip('.')}. The running golem keeps its applied config; fix the file, then "
              f"`golem config apply`. Using {using}.", file=sys.stderr)
        return cfg


def _last_stored_config(args: Namespace) -> GolemConfig | None:
    """The newest config version `golem run` / `config apply` stored in --data, or None."""
    from golem.layout import DataLayout
    from workers.config_versions import stored_config

    folder = DataLayout(args.data).config_versions
    versions = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
    return stored_config(args.data, versions[-1].stem) if versions else None


def data_dir(args: Namespace) -> Path:
    """The golem's data directory, which must exist: reading commands never create one (a typo in
    --data used to print an empty table from a fresh, empty store)."""
    data = Path(args.data)
    if not data.is_dir():
        raise UserError(f"no data directory at {data}: point --data (or GOLEM_DATA) at the golem's data dir; "
                        "`golem run` creates it")
    return data


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def arun(coro: Coroutine[Any, Any, T]) -> T:
    import asyncio  # ~75 ms: only for the commands that talk to Temporal

    return asyncio.run(coro)


def temporal_target(args: Namespace) -> Frontend:
    """The Temporal frontend the command talks to: [temporal] of --home's golem.toml (that section alone: a file
    mid-edit elsewhere must not lock the owner out), GOLEM_TEMPORAL_* overrides, then --address. A missing or
    non-TOML golem.toml leaves the defaults (the command's own config read reports it); a bad [temporal] key exits
    naming it."""
    from golem.models.config import ConfigError, read_config_table
    from workers.client import frontend

    try:
        table = read_config_table(Path(args.home) / "golem.toml").get("temporal", {})
    except ConfigError:
        table = {}
    return frontend(table, address=args.address)


def address(args: Namespace) -> str:
    """The Temporal address the command talks to: --address, else GOLEM_TEMPORAL_ADDRESS, else [temporal] address,
    else the default."""
    from workers.client import temporal_address

    try:
        return temporal_target(args).address
    except UserError:  # a bad [temporal] is reported where the command connects; a message still names an address
        return args.address or temporal_address()


async def client(args: Namespace) -> Client:
    """A Temporal client (the worker's converter and codec); an unreachable server exits with one line and the fix."""
    from workers.client import FrontendUnreachable, connect

    target = temporal_target(args)  # a bad [temporal] key: a UserError naming it
    try:
        return await connect(target=target)
    except FrontendUnreachable as err:
        sys.exit(f"golem: {err}: is `golem run` (or the frontend) up, and --address (GOLEM_TEMPORAL_ADDRESS) or "
                 "golem.toml's [temporal] right?")
    except Exception as err:
        if type(err).__name__ == "CodecConfigError":  # a bad GOLEM_PAYLOAD_KEYS: its own fix, not Temporal's
            sys.exit(f"golem: {err}")
        raise


def rpc_error(err: BaseException) -> RPCError | None:
    """err as a Temporal RPC error, or None when it is not one (checked without importing temporalio, which
    commands that never reach Temporal do not load)."""
    if type(err).__name__ != "RPCError" or not type(err).__module__.startswith("temporalio"):
        return None
    from temporalio.service import RPCError  # already loaded: err is one of its errors

    return err if isinstance(err, RPCError) else None


def rpc_status(err: BaseException) -> str | None:
    """The Temporal RPC status of err, or None when err is not a Temporal RPC error."""
    rpc = rpc_error(err)
    return rpc.status.name if rpc is not None else None


# How long a command waits for a golem's worker to answer a query (the SDK's own wait is 30 s, then a traceback).
QUERY_WAIT_S = 10


class NoAnswer(UserError):
    """The golem's workflow is running and no worker answered a query in time."""


@overload
async def query_golem(args: Namespace, cfg: GolemConfig, handle: WorkflowHandle[Any, Any], query: str,
                      result_type: type[T], *, or_none: Literal[False] = False) -> T: ...


@overload
async def query_golem(args: Namespace, cfg: GolemConfig, handle: WorkflowHandle[Any, Any], query: str,
                      result_type: type[T], *, or_none: Literal[True]) -> T | None: ...


async def query_golem(args: Namespace, cfg: GolemConfig, handle: WorkflowHandle[Any, Any], query: str,
                      result_type: type[T], *, or_none: bool = False) -> T | None:
    """A query on the golem's workflow by name (importing GolemWorkflow would load every activity's
    clients: web3, LanceDB, anthropic; seconds for a one-line answer), with `golem not started` said as such.
    or_none: the query answers None until the golem has the value."""
    # The SDK annotates result_type as a class; its data converter decodes any type hint, `T | None` included.
    hint = result_type | None if or_none else result_type
    try:
        answer: T | None = await handle.query(query, result_type=hint,  # type: ignore[arg-type]
                                              rpc_timeout=timedelta(seconds=QUERY_WAIT_S))
        return answer
    except Exception as err:
        if rpc_status(err) in ("CANCELLED", "DEADLINE_EXCEEDED"):  # the client's deadline: no worker answered
            raise NoAnswer(f"golem '{cfg.golem.id}' is running, but no worker answered its '{query}' query within "
                           f"{QUERY_WAIT_S} s (its worker is down, restarting or too busy): start it with `golem worker` "
                           f"(`golem run` restarts a crashed one by itself), then ask again") from None
        if rpc_status(err) != "NOT_FOUND":
            raise
        raise UserError(f"no golem '{cfg.golem.id}' on Temporal at {address(args)} (workflow {handle.id} "
                        f"not found): start it with `golem run`, or check --home's golem id{_placed_hint(args)}") from None


def _placed_hint(args: Namespace) -> str:
    """The golems placed in --data (a fleet's data dir, `golem run --golems N`): the owner likely meant one of them."""
    from golem.fleet import FleetRegistry

    if not (Path(args.data) / "fleet.sqlite").is_file():  # not a fleet's data dir (and none is created by asking)
        return ""
    try:
        placed = [p.golem_id for p in FleetRegistry(args.data).all() if p.running][:5]
    except Exception:  # an unreadable registry: nothing to add
        return ""
    return f"; golems placed in {args.data}: {', '.join(placed)} (`golem status --golem {placed[0]}`)" if placed else ""


def root_cause(err: BaseException) -> str:
    """The innermost cause of a Temporal failure chain (the activity's own error, not "Activity task failed")."""
    while (cause := getattr(err, "cause", None)) is not None:
        err = cause
    return one_line(getattr(err, "message", None) or err)[:300]
