"""`golem run | worker | dashboard | codec-server | sim`: the processes — the embedded stack, a worker, the web
dashboard, the Web UI's codec server and the market simulator."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cli.common import Command, arun, config, data_dir, temporal_target
from golem.errors import UserError


def cmd_run(args: argparse.Namespace) -> int:
    from infra.stack import run_stack

    if args.golems < 0:
        raise UserError(f"--golems {args.golems}: give a number of golems (1 or more), or leave it out for the demo golem")
    return run_stack(Path(args.home), Path(args.data), scenario=args.scenario, quiet=args.quiet, address=args.address,
                     golems=args.golems)


def cmd_worker(args: argparse.Namespace) -> int:
    import logging

    from workers.memory import arrow_on_malloc, fix_mmap_threshold, limit_arenas

    limit_arenas()  # before the worker's threads start (workers/memory.py)
    fix_mmap_threshold()
    arrow_on_malloc()
    from golem.layout import DataLayout
    from workers.worker import run_worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.host:  # every golem placed on this host (<data>/fleet.sqlite), on golem-host-<name>
        from workers.fleet import run_host

        monitor = {k: v for k, v in (("check_seconds", args.monitor_every), ("window_seconds", args.alert_window))
                   if v is not None}
        if any(v <= 0 for v in monitor.values()):
            raise UserError("--monitor-every and --alert-window are seconds above 0, e.g. --monitor-every 60")
        try:
            arun(run_host(Path(args.data), args.host, args.address, live=True if args.live else None,
                          wait_for_temporal=args.wait_for_temporal, monitor=monitor,
                          config=config(args) if (Path(args.home) / "golem.toml").exists() else None))
        except KeyboardInterrupt:
            pass
        return 0
    cfg = config(args)
    layout = DataLayout(Path(args.data))  # the worker's one layout, handed down to every store it opens
    try:
        arun(run_worker(cfg, layout, args.address, live=True if args.live else None,
                        wait_for_temporal=args.wait_for_temporal))
    except KeyboardInterrupt:
        pass
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    import logging

    from workers.dashboard.run import run_dashboard

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} is not a TCP port (0-65535; 0 picks a free one)")
    data = data_dir(args)
    # a fleet's data dir (`golem spawn`, `golem run --golems N`) without --golem: the fleet page
    fleet = not getattr(args, "golem", None) and (data / "fleet.sqlite").exists()
    golem_id = "" if fleet else config(args).golem.id
    try:
        arun(run_dashboard(golem_id, data, target=temporal_target(args), port=args.port,
                           temporal_ui=args.temporal_ui, fleet=fleet,
                           home=Path(args.home), backtests=Path(args.backtests).resolve()))
    except OSError as err:
        raise UserError(f"cannot serve on 127.0.0.1:{args.port} ({err.strerror or err}): pick another --port") from None
    except KeyboardInterrupt:
        pass
    return 0


def cmd_codec_server(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from workers.codec import CodecConfigError, codec_from_env
    from workers.codec_server import DEFAULT_ORIGINS, serve_codec

    try:
        codec = codec_from_env()
    except CodecConfigError as err:
        raise UserError(str(err)) from None
    if codec is None:
        raise UserError("GOLEM_PAYLOAD_KEYS is not set: give the codec server the keys the worker seals with "
                        "(key-id:base64-key, comma separated)")

    async def serve() -> None:
        runner = await serve_codec(codec, args.port, tuple(args.cors_origin or DEFAULT_ORIGINS))
        print(f"codec server: http://127.0.0.1:{args.port} (POST /decode, /encode; key id {codec.key_id}; "
              f"CORS for {', '.join(args.cors_origin or DEFAULT_ORIGINS)})", flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    try:
        arun(serve())
    except OSError as err:
        raise UserError(f"cannot serve on 127.0.0.1:{args.port} ({err.strerror or err}): pick another --port") from None
    return 0


def cmd_sim(args: argparse.Namespace) -> int:
    if args.rest[:1] == ["export"]:  # `golem sim export ...`: a scenario as a market-path CSV, no chain needed
        from golem.backtest.export import export_main

        return export_main(args.rest[1:])
    from golem.world.simulator.__main__ import main as simulate

    return simulate(args.rest) or 0


def register(command: Command) -> None:
    s = command("run", "start the embedded stack and a live golem (Ctrl-C stops it)")
    s.add_argument("--scenario", default="calm", choices=["calm", "trending", "volatile", "crash"])
    s.add_argument("--quiet", action="store_true", help="no line per tick on the console after start-up")
    s.add_argument("--golems", type=int, default=0, metavar="N",
                   help="N golems in one worker (<id>1..<id>N, each its own home, data dir and wallet)")
    s.set_defaults(fn=cmd_run)
    s = command("worker", "serve this golem's task queue, or with --host every golem placed on this host")
    s.add_argument("--host", help="serve golem-host-<HOST>: the golems `golem spawn` / `import` placed in --data")
    s.add_argument("--monitor-every", type=float, metavar="SECONDS",
                   help="with --host: how often the host's heartbeat monitor reads its golems' vitals (default 60)")
    s.add_argument("--alert-window", type=float, metavar="SECONDS",
                   help="with --host: the monitor's alert batching window per golem (default 300)")
    s.add_argument("--live", action="store_true", help="execute transactions even against an external RPC")
    s.add_argument("--wait-for-temporal", type=float, default=0.0, metavar="SECONDS",
                   help="a frontend not listening yet is tried again for this long before the worker gives up "
                        "(golem run passes 60: its dev server may be restarting)")
    s.set_defaults(fn=cmd_worker)
    s = command("dashboard", "serve the live web dashboard on 127.0.0.1 (golem run starts it too)")
    s.add_argument("--port", type=int, default=int(os.environ.get("GOLEM_DASHBOARD_PORT", 8300)))
    s.add_argument("--temporal-ui", default=os.environ.get("GOLEM_TEMPORAL_UI", "http://127.0.0.1:8233"),
                   help="the Temporal Web UI the tick links point at")
    s.add_argument("--backtests", default=os.environ.get("GOLEM_BACKTESTS", "backtests"),
                   help="the folder whose backtest reports the page lists (`golem backtest`'s default --out parent)")
    s.set_defaults(fn=cmd_dashboard)
    s = command("codec-server", "decode encrypted payloads for the Temporal Web UI (Temporal codec-server protocol)")
    s.add_argument("--port", type=int, default=8234)
    s.add_argument("--cors-origin", action="append", help="a UI origin allowed to call it (default the dev server UI)")
    s.set_defaults(fn=cmd_codec_server)
    s = command("sim", "run the market simulator (arguments pass through)")
    s.add_argument("rest", nargs=argparse.REMAINDER)
    s.set_defaults(fn=cmd_sim)
