"""`golem dashboard`: a golem's page, or on a fleet's data dir the fleet page with each golem's page under it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from workers.client import Frontend
from workers.dashboard.fleet import FleetDashboard
from workers.dashboard.server import (DEFAULT_PORT, DEFAULT_TEMPORAL_UI, Dashboard, Served, _one_line, bound_port,
                                      log, start_dashboard)


async def run_dashboard(golem_id: str, data_dir: Path, address: str | None = None, *, port: int = DEFAULT_PORT,
                        temporal_ui: str = DEFAULT_TEMPORAL_UI, home: Path | None = None,
                        backtests: Path | None = None, target: Frontend | None = None, fleet: bool = False) -> None:
    """`golem dashboard`: serve until interrupted. Without Temporal the page still shows history and events.
    target: the configured frontend (workers.client.frontend); else plain on address. fleet: data_dir is a fleet's
    (fleet.sqlite): the fleet page at /, each golem's page under /golems/<id>/."""
    import signal

    from workers.client import connect, temporal_address

    target = target or Frontend(address or temporal_address())
    client = None
    try:
        client = await connect(target=target)
    except Exception as err:  # the page still renders history; status and steering say Temporal is unreachable
        log.warning("Temporal at %s not reachable (%s): status and steering are off", target.address, _one_line(err))
    board: Served
    if fleet:
        board = FleetDashboard(data_dir, client=client, temporal_ui=temporal_ui, namespace=target.namespace,
                               backtests=backtests)
    else:
        board = Dashboard(data_dir, golem_id, client=client, temporal_ui=temporal_ui, namespace=target.namespace,
                          home=home, backtests=backtests)
    runner = await start_dashboard(board, port)
    what = f"the fleet of {data_dir}: one row per golem" if fleet else f"golem {golem_id}, data {data_dir}"
    print(f"dashboard: http://127.0.0.1:{bound_port(runner)}/  ({what})", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
