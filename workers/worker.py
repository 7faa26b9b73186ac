"""Build and run the worker that owns one golem's data directory and task queue (golem-<id>)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import (ActivityInboundInterceptor, ExecuteActivityInput, Interceptor,
                               UnsandboxedWorkflowRunner, Worker)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from activities import ActivitySet
from activities.consolidation import ConsolidationActivities
from activities.consolidator import ConsolidatorActivities
from activities.dream import DreamActivities
from activities.doctor import DoctorActivities
from activities.life import LifeActivities
from infra.forks import ForkRegistry
from activities.monitor import MonitorActivities
from activities.tick import TickActivities
from golem.ids import clade_queue, task_queue
from golem.layout import DataLayout
from golem.learning.trial import TrialRunner
from golem.extensions import registry_for
from golem.models.config import GolemConfig
from workers.memory import start_trimmer
from workers.services import GolemServices
from workers.trial import BacktestTrialRunner
from workflows import ALL_WORKFLOWS
from workflows.clade_exchange import CladeExchangeWorkflow
from workflows.consolidator import MemoryConsolidatorWorkflow
from workflows.pheromones import PheromoneFieldWorkflow

log = logging.getLogger("golem.worker")


class PaymentScopeInterceptor(Interceptor):
    """Every activity's model calls pay inside one x402 payment scope keyed by its workflow run and activity id, the
    same on each retry: a retried call presents the authorization it signed before (docs/design/payments.md)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Scoped(next)


class _Scoped(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:  # the activity's own result
        from golem.inference.payment_scope import payment_scope

        info = activity.info()
        with payment_scope(f"{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}"):
            return await self.next.execute_activity(input)


def build_worker(
    client: Client,
    services: GolemServices,
    *,
    max_cached_workflows: int = 1000,
    interceptors: Sequence[Interceptor] = (),
    sandboxed: bool = True,
    trials: TrialRunner | None | bool = True,
    deadlock_detection: bool = True,
) -> Worker:
    """`trials`: the runner of learned rules' trials (default: backtests in a child process, workers/trial.py);
    None: no trials on this worker. `deadlock_detection=False`: a backtest's worker (see worker_options)."""
    sets = activity_sets(client, services, BacktestTrialRunner() if trials is True else trials or None)
    # malloc's free pages back to the OS every 30 s (a soak's heap kept growing without it; GOLEM_MALLOC_TRIM_SECONDS)
    start_trimmer()
    return Worker(
        client,
        task_queue=task_queue(services.config.golem.id),
        workflows=ALL_WORKFLOWS,
        activities=[fn for one in sets for fn in one.activities()],
        # Sync activities (web3, LanceDB, SQLite) run on threads; the workflow loop stays free.
        activity_executor=ThreadPoolExecutor(max_workers=8),
        max_cached_workflows=max_cached_workflows,
        interceptors=[PaymentScopeInterceptor(), *interceptors],
        **worker_options(sandboxed=sandboxed, deadlock_detection=deadlock_detection),
    )


def activity_sets(client: Client, services: GolemServices, trials: TrialRunner | None,
                  loop: asyncio.AbstractEventLoop | None = None) -> list[ActivitySet]:
    """One golem's activity classes, bound to its services (a fleet worker builds them per golem, workers/fleet.py)."""
    ticks = TickActivities(services, client, loop)
    consolidation = ConsolidationActivities(services, trials=trials)
    dream = DreamActivities(services, ForkRegistry(services.data_dir))
    # Forks a killed worker left behind : stopped before this worker takes the golem's queue.
    swept = dream.forks.sweep()
    if swept:
        log.warning("stopped %d dream fork(s) a previous worker left running: pids %s", len(swept), swept)
    # The extension registry's start-up check: a layer violation, a missing dependency or
    # a non-optional extension switched off in golem.toml stops the worker here, naming both sides.
    registry_for(services.config.extensions.disabled)
    return [ticks, consolidation, dream, DoctorActivities(services), MonitorActivities(services),
            LifeActivities(services)]


ACTIVITY_CLASSES: tuple[type[ActivitySet], ...] = (TickActivities, ConsolidationActivities, DreamActivities,
                                                   DoctorActivities, MonitorActivities, LifeActivities)


def build_clade_worker(client: Client, config: GolemConfig, *, sandboxed: bool = True) -> Worker | None:
    """The worker of the golem's clade queue (clade-<id>): every member serves its clade's pheromone field and entry
    bus, so they live while any member's worker does (docs/design/pheromones.md). None for a lone golem."""
    if not config.clade.id:
        return None
    return Worker(client, task_queue=clade_queue(config.clade.id),
                  workflows=[PheromoneFieldWorkflow, CladeExchangeWorkflow, MemoryConsolidatorWorkflow],
                  activities=[ConsolidatorActivities().consolidate], **worker_options(sandboxed=sandboxed))


def sandbox_bytecode(cache: Path | None = None) -> Path | None:
    """Compiled workflow modules for the sandbox, which imports a workflow's modules afresh for every new workflow run
    (each tick): under PYTHONDONTWRITEBYTECODE (set here and in the worker image) Python keeps no .pyc, so every tick
    compiled workflows/ from source, half the fleet worker's CPU at 100 golems. Python then reads the .pyc written here
    (sys.pycache_prefix, outside the source tree). Returns the folder, or None where Python keeps its own .pyc
    (docs/design/fleet.md#what-a-tick-costs-the-worker)."""
    import compileall
    import sys
    import tempfile

    import workflows

    if not sys.dont_write_bytecode:
        return None
    if sys.pycache_prefix is None:
        sys.pycache_prefix = str(cache or Path(tempfile.gettempdir()) / f"golem-bytecode-{os.getuid()}")
    compileall.compile_dir(str(Path(workflows.__file__).parent), quiet=2, workers=1)  # only what is stale
    return Path(sys.pycache_prefix)


def worker_options(*, sandboxed: bool = True, deadlock_detection: bool = True) -> dict[str, Any]:
    """How the worker runs workflow code. `deadlock_detection=False` (a backtest): the SDK fails a workflow task whose
    activation does not yield within 2 s of wall clock; on a loaded machine a backtest's tick workflow, sharing the
    GIL with its activities, tripped it, and its shutdown then waited forever on a workflow it could not evict. The
    SDK's only switch is debug mode (activations run inline on the event loop), so a backtest runs with it
    (docs/how-to/backtesting.md#the-same-path-gives-the-same-run-however-loaded-the-machine)."""
    if sandboxed:
        sandbox_bytecode()
    return {
        # sandboxed=False (a backtest's fast route): the same workflow code without the sandbox, which re-imported
        # every workflows/ module for each new tick workflow; the sandbox's checks still run on `golem run` and in
        # the replay tests (docs/how-to/backtesting.md)
        "workflow_runner": SandboxedWorkflowRunner() if sandboxed else UnsandboxedWorkflowRunner(),
        "graceful_shutdown_timeout": timedelta(seconds=5),
        "debug_mode": not deadlock_detection,
    }


async def run_worker(config: GolemConfig, layout: DataLayout, address: str | None = None,
                     live: bool | None = None, wait_for_temporal: float = 0.0) -> None:
    """Serve one golem's task queue on the data layout its entry built (one per golem: nothing reads a global)."""
    from workers.client import connect, frontend
    from workers.metrics import free_port, install_metrics, metrics_port, temporal_runtime
    from workers.telemetry import shutdown_tracing, tracing_interceptor

    # [temporal] of golem.toml, GOLEM_TEMPORAL_* overrides, then address (--address): a bad key or an unreachable
    # frontend stops the worker with one line naming it, before its services load
    target = frontend(config.temporal, address=address)
    port, runtime, server, core_port = metrics_port(), None, None, 0
    if port:  # Prometheus /metrics with the Temporal SDK's own metrics (its core serves them inside)
        core_port = free_port()
        runtime = temporal_runtime(core_port)
    # under `golem run` a worker restarted while the dev server is restarting too waits for it instead of crashing
    client = await connect(target=target, runtime=runtime, wait_seconds=wait_for_temporal)
    services = GolemServices(config, layout, live=live)
    interceptors: list[Interceptor] = [tracing_interceptor(layout, config.golem.id)]
    if port:
        _, server, timed = install_metrics(services, port, core_port)
        interceptors.append(timed)
    worker = build_worker(client, services, interceptors=interceptors)
    clade = build_clade_worker(client, config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker serving %s (data %s) on Temporal at %s", task_queue(config.golem.id), layout.root,
             target.describe())
    try:
        async with contextlib.AsyncExitStack() as workers:  # graceful shutdown on exit (graceful_shutdown_timeout)
            await workers.enter_async_context(worker)
            if clade is not None:
                await workers.enter_async_context(clade)
                log.info("worker serving %s (the clade's pheromone field)", clade_queue(config.clade.id))
            await stop.wait()
        log.info("worker stopped")
    finally:
        shutdown_tracing()
        if server is not None:
            server.stop()
