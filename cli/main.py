"""The `golem` command: run the embedded stack, serve a worker, and inspect / steer / replay a golem."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

from cli import (backtest, config, control, dreams, events, fleet, gating, grimoire, inference, life, pheromones,
                 records, replay, safety, stack, status, steer)
from cli.common import address, default_data, default_home, one_line, rpc_error
from golem.errors import UserError

# Each module adds its commands with register(command), in this order (the order of `golem --help`). Every
# module imports only the standard library at the top: what a command needs loads when that command runs.
COMMAND_GROUPS = (stack, status, records, steer, replay, control, gating, grimoire, inference, safety, dreams,
                  backtest, config, events, life, fleet, pheromones)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="golem", description=__doc__)
    p.add_argument("--home", default=str(default_home()), help="golem home with golem.toml, STRATEGY.md (GOLEM_HOME)")
    p.add_argument("--data", default=str(default_data()), help="data directory (GOLEM_DATA)")
    p.add_argument("--address", default=os.environ.get("GOLEM_TEMPORAL_ADDRESS"), help="Temporal host:port")
    p.add_argument("--golem", metavar="ID", help="a golem placed in --data (`golem list`): its home and data dir "
                                                 "(<data>/golems/<ID>/) stand for --home and --data")
    # The same options are accepted after the command too (`golem show 3 --data DIR`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", default=argparse.SUPPRESS)
    common.add_argument("--data", default=argparse.SUPPRESS)
    common.add_argument("--address", default=argparse.SUPPRESS)
    common.add_argument("--golem", default=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="cmd", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, parents=[common])

    for group in COMMAND_GROUPS:
        group.register(command)
    return p


# Fleet commands name their golem themselves and read the host's data dir (--data), not a golem's.
_FLEET_COMMANDS = {"spawn", "list", "stop", "export", "import"}


def _resolve_golem(args: argparse.Namespace) -> None:
    """`--golem ID`: the placed golem's own home and data dir stand for --home and --data (docs/how-to/fleet.md)."""
    if not getattr(args, "golem", None) or args.cmd in _FLEET_COMMANDS:
        return
    from golem.fleet import FleetRegistry

    registry = FleetRegistry(args.data)
    if registry.get(args.golem) is None:
        raise UserError(f"--golem {args.golem}: no such golem placed in {args.data} (`golem list`; `golem spawn "
                        f"{args.golem}` places one)")
    args.home, args.data = str(registry.home(args.golem)), str(registry.layout(args.golem).root)


def _user_error_message(args: argparse.Namespace, err: BaseException) -> str | None:
    """The one line for an exception that is the user's to fix, or None for a bug (which keeps its traceback).
    Types are recognised by module so that commands which never load pydantic or temporalio do not import them."""
    config_module = sys.modules.get("golem.models.config")
    if config_module is not None and isinstance(err, config_module.ConfigError):
        return f"golem: {one_line(err)}"
    rpc = rpc_error(err)
    if rpc is None:
        return None
    status = rpc.status.name
    if status == "NOT_FOUND":
        return (f"golem {args.cmd}: {one_line(rpc.message)} on Temporal at {address(args)}: is the golem started "
                "(`golem run`), and is --home's golem id the right one?")
    if status in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return (f"golem {args.cmd}: lost Temporal at {address(args)} ({one_line(rpc.message)[:160]}): "
                "is `golem run` still up?")
    return None


def _stdout_closed() -> int:
    """The reader of our stdout went away (`golem ticks | head`): nothing to report, and the rest of the
    output goes to /dev/null so the interpreter's final flush does not fail again. 141 = 128 + SIGPIPE,
    what a shell reports for a writer killed by a closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


def _run(args: argparse.Namespace) -> int:
    """Run the command; user errors leave as SystemExit with one line (what, why, the fix)."""
    try:
        _resolve_golem(args)
        code = args.fn(args) or 0
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at interpreter exit
        return code
    except UserError as err:
        raise SystemExit(f"golem {args.cmd}: {err}") from None
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        print(f"golem {args.cmd}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        message = _user_error_message(args, err)
        if message is None:
            raise  # a bug: its traceback is what a maintainer needs
        raise SystemExit(message) from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if argv is not None:  # called in-process (tests): SystemExit and errors leave as raised
        _check(args)
        return _run(args)
    # The process's own command. The Temporal core logs through Python, never onto stdout; its threads can call into
    # Python while the interpreter finalizes ("PyGILState_Release ... finalizing", SIGABRT after the work was done,
    # seen in CI), so every command leaves with os._exit once its output is flushed and its logs closed.
    from workers.client import install_default_runtime

    install_default_runtime()
    try:
        _check(args)
        code = _run(args)
    except SystemExit as stop:
        if stop.code not in (None, 0) and not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:  # a bug: its traceback is what a maintainer needs, and the exit code says it failed
        traceback.print_exc()
        code = 1
    _leave(code)
    return code  # not reached


def _check(args: argparse.Namespace) -> None:
    if args.cmd == "replay" and args.tick is None and not args.workflow_id:
        sys.exit("golem replay: give a tick number or --workflow-id")


def _leave(code: int) -> None:
    """Flush what the command wrote and close its logs (the interpreter's exit would), then end the process without
    finalizing it."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _stdout_closed()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
