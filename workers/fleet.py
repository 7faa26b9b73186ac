"""A fleet worker: one process serving every golem placed on its host, on the host's task queue golem-host-<name>.

Each golem's services open on its first activity and close when idle; one web3 connection pool per RPC URL serves
them all (and one embedder: embedder_by_name keeps one per process). An activity finds its golem from its workflow id (golem.ids.golem_of), so the activity classes
are the single-golem worker's, one instance per golem (docs/design/fleet.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import inspect
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.worker import Interceptor, Worker
from web3 import Web3

from activities import ActivitySet
from activities.consolidator import ConsolidatorActivities
from activities.monitor import HostMonitorActivities
from golem.chain.web3client import make_web3
from golem.fleet import FleetRegistry
from golem.ids import clade_queue, golem_of, host_queue
from golem.learning.trial import TrialRunner
from golem.models.config import GolemConfig, WorkerSection, load_config
from workers.memory import start_trimmer
from workers.services import GolemServices
from workers.worker import (ACTIVITY_CLASSES, PaymentScopeInterceptor, activity_sets, build_clade_worker,
                            worker_options)
from workflows import ALL_WORKFLOWS

log = logging.getLogger("golem.fleet")

IDLE_SECONDS = WorkerSection().idle_seconds  # a golem whose last activity ended this long ago has its services closed
MAX_OPEN = WorkerSection().max_open_golems  # golems with open services at once; the least recently used idle one first
# What a halted golem carries to its next start (`golem stop`, then `spawn` again; `export`, then `import`): its state
# and config version, in its data dir. Taken (renamed *.taken) once its workflow starts from it.
MOVE_FILE = "carried-state.json"


@dataclass
class Hosted:
    """One golem's open services and its activity classes bound to them."""

    services: GolemServices
    sets: dict[type, ActivitySet]
    last_used: float = field(default_factory=time.monotonic)
    active: int = 0


class Fleet:
    """The golems of one host: the placement registry of its data dir, and their services on demand."""

    def __init__(self, client: Client, data: Path, host: str, *, trials: TrialRunner | None = None,
                 live: bool | None = None, idle_seconds: float = IDLE_SECONDS, max_open: int = MAX_OPEN,
                 loop: asyncio.AbstractEventLoop | None = None,
                 on_open: Callable[[GolemServices], None] | None = None) -> None:
        self.client, self.host, self.trials, self.live = client, host, trials, live
        self.on_open = on_open  # called with each golem's services as they open (the host's metrics listen to them)
        self.registry = FleetRegistry(data)
        self.idle_seconds, self.max_open = idle_seconds, max_open
        self.loop = loop
        self._open: OrderedDict[str, Hosted] = OrderedDict()
        self._lock = threading.Lock()
        self._opening: dict[str, threading.Lock] = {}
        self._web3: dict[str, Web3] = {}
        self.opened = 0  # services opened since start (a golem closed when idle and used again counts twice)

    # ---- shared pools ---------------------------------------------------------------------------
    def web3(self, rpc_url: str) -> Web3:
        with self._lock:
            if rpc_url not in self._web3:
                self._web3[rpc_url] = make_web3(rpc_url)
            return self._web3[rpc_url]

    # ---- golems -----------------------------------------------------------------------------------
    def config_of(self, golem_id: str) -> GolemConfig:
        """The golem's golem.toml, from its home under its data dir."""
        return load_config(self.registry.home(golem_id) / "golem.toml")

    def placed(self) -> list[str]:
        return [p.golem_id for p in self.registry.all(self.host) if p.running]

    def open_ids(self) -> list[str]:
        with self._lock:
            return list(self._open)

    def _check_placed(self, golem_id: str) -> None:
        placement = self.registry.get(golem_id)
        if placement is None or placement.host != self.host or not placement.running:
            where = "not placed here" if placement is None else f"{placement.status} on host {placement.host}"
            # retryable: a golem being imported here is registered a moment after its workflow may start
            raise ApplicationError(f"golem {golem_id} is {where} (host {self.host}, data {self.registry.root}): "
                                   f"`golem spawn` or `golem import` places it", type="GolemNotPlaced")

    def open(self, golem_id: str) -> Hosted:
        """The golem's services and activities, opened on first use (on the calling activity's thread)."""
        with self._lock:
            hosted = self._open.get(golem_id)
            if hosted is not None:
                self._open.move_to_end(golem_id)
                return hosted
            gate = self._opening.setdefault(golem_id, threading.Lock())
        with gate:  # one opening per golem; other golems open in parallel
            with self._lock:
                if golem_id in self._open:
                    return self._open[golem_id]
            self._check_placed(golem_id)
            config = self.config_of(golem_id)
            services = GolemServices(config, self.registry.layout(golem_id), live=self.live,
                                     w3=self.web3(config.chain.rpc_url))
            sets = activity_sets(self.client, services, self.trials, self.loop)
            if self.on_open is not None:
                self.on_open(services)
            hosted = Hosted(services, {type(s): s for s in sets})
            with self._lock:
                self._open[golem_id] = hosted
                self.opened += 1
            log.info("golem %s opened on host %s (%d open)", golem_id, self.host, len(self._open))
        self._evict_over_cap()
        return hosted

    def _evict_over_cap(self) -> None:
        with self._lock:
            idle = [gid for gid, h in self._open.items() if h.active == 0]
            while len(self._open) > self.max_open and idle:
                self._drop(idle.pop(0), "over the open cap")

    def _drop(self, golem_id: str, why: str) -> None:  # under self._lock
        from golem.grimoire.episodes import index as episode_index
        from golem.grimoire.semantic import index as entry_index

        hosted = self._open.pop(golem_id, None)
        if hosted is not None:  # its in-memory Grimoire indexes are process-wide, keyed by path: they go with it
            root = hosted.services.layout.root
            episode_index.forget(root)
            entry_index.forget(root)
        log.info("golem %s closed (%s); %d open", golem_id, why, len(self._open))

    def close_idle(self, now: float | None = None) -> list[str]:
        """Close the services of golems idle for idle_seconds, or no longer placed here (stopped, moved)."""
        now = time.monotonic() if now is None else now
        placed = set(self.placed())
        closed = []
        with self._lock:
            for gid, hosted in list(self._open.items()):
                if hosted.active == 0 and (gid not in placed or now - hosted.last_used >= self.idle_seconds):
                    self._drop(gid, "idle" if gid in placed else "no longer placed here")
                    closed.append(gid)
        return closed

    @contextlib.contextmanager
    def using(self, golem_id: str) -> Iterator[Hosted]:
        hosted = self.open(golem_id)
        with self._lock:
            hosted.active += 1
        try:
            yield hosted
        finally:
            with self._lock:
                hosted.active -= 1
                hosted.last_used = time.monotonic()


def _golem() -> str:
    wid = activity.info().workflow_id or ""
    golem_id = golem_of(wid)
    if golem_id is None:
        raise ApplicationError(f"activity of workflow {wid!r}: not a golem's workflow (golem-<id>...)",
                               type="NotAGolem", non_retryable=True)
    return golem_id


def _route(fleet: Fleet, cls: type, attr: str, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """An activity `name` that runs `cls.attr` on the calling workflow's golem's instance: the same signature and type
    hints as the method (copied with functools), so payloads decode as on a single-golem worker."""
    if inspect.iscoroutinefunction(fn):
        async def call(*args: Any) -> Any:
            golem_id = _golem()
            await asyncio.to_thread(fleet.open, golem_id)  # opening reads the chain and the disk: off the loop
            with fleet.using(golem_id) as hosted:
                return await getattr(hosted.sets[cls], attr)(*args)
        routed: Callable[..., Any] = call
    else:
        def call_sync(*args: Any) -> Any:
            with fleet.using(_golem()) as hosted:
                return getattr(hosted.sets[cls], attr)(*args)
        routed = call_sync
    functools.update_wrapper(routed, fn)
    sig = inspect.signature(fn)
    routed.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])  # type: ignore[attr-defined]
    delattr(routed, "__temporal_activity_definition")  # copied from the method with its __dict__: defined anew below
    return activity.defn(name=name)(routed)


def routed_activities(fleet: Fleet) -> list[Callable[..., Any]]:
    out = []
    for cls in ACTIVITY_CLASSES:
        for attr in dir(cls):
            member = getattr(cls, attr, None)
            defn = getattr(member, "__temporal_activity_definition", None)
            if callable(member) and defn is not None:
                out.append(_route(fleet, cls, attr, member, defn.name))
    return out


def build_host_worker(client: Client, fleet: Fleet, *, max_cached_workflows: int = 1000,
                      interceptors: tuple[Interceptor, ...] = (), sandboxed: bool = True,
                      threads: int = WorkerSection().activity_threads) -> Worker:
    """The worker of golem-host-<name>: every workflow kind, and each activity routed to its golem."""
    start_trimmer()  # malloc's free pages back to the OS every 30 s, as on a single golem's worker
    # the host's own activities, not any one golem's: its heartbeat monitor, and memory-consolidators over its golems
    own = [*HostMonitorActivities(fleet.registry, fleet.host).activities(), ConsolidatorActivities().consolidate]
    return Worker(client, task_queue=host_queue(fleet.host), workflows=ALL_WORKFLOWS,
                  activities=[*routed_activities(fleet), *own], activity_executor=ThreadPoolExecutor(max_workers=threads),
                  max_concurrent_activities=threads,
                  max_cached_workflows=max_cached_workflows,
                  interceptors=[PaymentScopeInterceptor(), *interceptors], **worker_options(sandboxed=sandboxed))


async def reap(fleet: Fleet, every: float = 30.0) -> None:
    """Close idle golems' services every `every` seconds (until cancelled)."""
    while True:
        await asyncio.sleep(every)
        closed = await asyncio.to_thread(fleet.close_idle)
        if closed:
            log.info("closed idle golems: %s", ", ".join(closed))


@contextlib.asynccontextmanager
async def serving(client: Client, data: Path, host: str, *, live: bool | None = None,
                  trials: TrialRunner | None = None, idle_seconds: float | None = None,
                  sandboxed: bool = True, reap_every: float = 30.0, interceptors: tuple[Interceptor, ...] = (),
                  on_open: Callable[[GolemServices], None] | None = None, tuning: WorkerSection | None = None) -> Any:
    """Serve the host's queue (and the clades of the golems placed on it) while the block runs; yields the Fleet.
    `tuning`: the host's [worker] settings (threads, caches, idle and open bounds)."""
    tuning = tuning or WorkerSection()
    fleet = Fleet(client, data, host, trials=trials, live=live, loop=asyncio.get_running_loop(), on_open=on_open,
                  idle_seconds=tuning.idle_seconds if idle_seconds is None else idle_seconds,
                  max_open=tuning.max_open_golems)
    workers: list[Worker] = [build_host_worker(client, fleet, sandboxed=sandboxed, interceptors=interceptors,
                                               threads=tuning.activity_threads,
                                               max_cached_workflows=tuning.max_cached_workflows)]
    clades = {fleet.config_of(g).clade.id for g in fleet.placed()} - {""}
    for clade in sorted(clades):
        one = build_clade_worker(client, fleet.config_of(next(g for g in fleet.placed()
                                                             if fleet.config_of(g).clade.id == clade)),
                                 sandboxed=sandboxed)
        if one is not None:
            workers.append(one)
            log.info("host %s serves %s too", host, clade_queue(clade))
    reaper = asyncio.create_task(reap(fleet, reap_every))
    try:
        async with contextlib.AsyncExitStack() as stack:
            for w in workers:
                await stack.enter_async_context(w)
            yield fleet
    finally:
        reaper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reaper


async def run_host(data: Path, host: str, address: str | None = None, live: bool | None = None,
                   wait_for_temporal: float = 0.0, config: GolemConfig | None = None,
                   monitor: dict[str, float] | None = None) -> None:
    """`golem worker --host NAME`: serve every golem placed on this host until SIGINT/SIGTERM."""
    import signal

    from golem.layout import DataLayout
    from workers.client import connect, frontend
    from workers.host_monitor import ensure_host_monitor
    from workers.metrics import HostMetrics, free_port, metrics_port, serve_metrics, temporal_runtime
    from workers.telemetry import shutdown_tracing, tracing_interceptor
    from workers.trial import BacktestTrialRunner

    target = frontend(config.temporal if config is not None else None, address=address)
    # the host's /metrics (every golem's figures, labelled golem=<id>) and its traces, as a one-golem worker has
    port, runtime, server, core_port = metrics_port(), None, None, 0
    if port:
        core_port = free_port()
        runtime = temporal_runtime(core_port)
    client = await connect(target=target, runtime=runtime, wait_seconds=wait_for_temporal)
    metrics = HostMetrics(host)
    interceptors: list[Interceptor] = [tracing_interceptor(DataLayout(data), "", host=host)]
    if port:
        server = serve_metrics(metrics.inst, port, core_port)
        interceptors.append(metrics.interceptor())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with serving(client, data, host, live=live, trials=BacktestTrialRunner(), interceptors=tuple(interceptors),
                           on_open=metrics.attach if port else None,
                           tuning=config.worker if config is not None else None) as fleet:
            log.info("%s", await ensure_host_monitor(client, host, fleet.placed(), **(monitor or {})))
            log.info("host %s serving %s: %d golem(s) placed (data %s) on Temporal at %s", host, host_queue(host),
                     len(fleet.placed()), data, target.describe())
            await stop.wait()
    finally:
        shutdown_tracing()
        if server is not None:
            server.stop()
    log.info("host %s stopped", host)


async def start_placed(client: Client, registry: FleetRegistry, golem_id: str, *, max_ticks: int | None = None,
                       state: Any = None, config_info: Any = None, config: GolemConfig | None = None,
                       source: str = "golem spawn") -> Any:
    """Start a placed golem's GolemWorkflow on its host's queue: a newborn (state None) or one carrying the state an
    export took (its tick numbers go on). Returns the workflow handle."""
    from golem.ids import golem_workflow_id
    from golem.models.golem import GolemWorkflowInput
    from golem.life.succession import inherited_state
    from workers.config_versions import save_version, start_info, version_of
    from workflows.golem import GolemWorkflow

    placement = registry.get(golem_id)
    if placement is None or not placement.running:
        raise ValueError(f"golem {golem_id} is not placed in {registry.root}: `golem spawn {golem_id}` first")
    layout = registry.layout(golem_id)
    carried_file = layout.root / MOVE_FILE
    if state is None and carried_file.exists():  # a stopped golem started again: it goes on from its last tick
        state, config_info, config = carried(json.loads(carried_file.read_text()))
    if config is None:
        config = load_config(registry.home(golem_id) / "golem.toml")
    if config_info is None:
        local = version_of(config)
        save_version(layout, local)
        config_info = start_info(local, state.tick if state is not None else 0, source, None)
    if state is None:
        state = inherited_state(config, layout.root)
    handle = await client.start_workflow(
        GolemWorkflow.run, GolemWorkflowInput(config=config, state=state, max_ticks=max_ticks, config_info=config_info),
        id=golem_workflow_id(golem_id), task_queue=host_queue(placement.host))
    if carried_file.exists():
        carried_file.replace(carried_file.with_suffix(".taken"))
    return handle


def carried(moved: dict[str, Any]) -> tuple[Any, Any, GolemConfig | None]:
    """The state, config version and config a halted golem left in its carried-state file."""
    from golem.models.config_version import ConfigVersionInfo
    from golem.models.state import GolemState

    state = GolemState.model_validate(moved["state"])
    if not moved.get("was_paused"):  # paused by the halt only: it goes on ticking
        state = state.model_copy(update={"paused": False})
    info = ConfigVersionInfo.model_validate(moved["config_info"]) if moved.get("config_info") else None
    config = GolemConfig.model_validate(moved["config"]) if moved.get("config") else None
    return state, info, config




async def halt(client: Client, golem_id: str, reason: str, timeout: float = 180.0) -> dict[str, Any]:
    """End a golem's workflow between two ticks: pause it, wait until no tick, dream or delta cycle runs, take its
    state and config version, terminate. Returns what a restart elsewhere needs (the move file's content)."""
    from golem.ids import golem_workflow_id
    from golem.models.golem import ControlRequest, ControlState
    from workflows.golem import GolemWorkflow

    handle = client.get_workflow_handle(golem_workflow_id(golem_id))
    status = await handle.query(GolemWorkflow.status)
    was_paused = status.paused
    if not was_paused:
        await handle.execute_update("pause", ControlRequest(reason=reason, source="fleet"), result_type=ControlState)
    deadline = time.monotonic() + timeout
    while True:
        status = await handle.query(GolemWorkflow.status)
        if status.activity == "paused" and status.current_tick_workflow_id is None:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"golem {golem_id} did not come to rest within {timeout:g}s (it is {status.activity})")
        await asyncio.sleep(0.2)
    state = await handle.query(GolemWorkflow.state)
    running = await handle.query(GolemWorkflow.config_version)
    if state is None:
        raise RuntimeError(f"golem {golem_id} has no state yet (it has not started): try again in a moment")
    await handle.terminate(reason=reason)
    return {"golem_id": golem_id, "state": state.model_dump(mode="json"),
            "config_info": running.info.model_dump(mode="json") if running is not None else None,
            "config": running.config.model_dump(mode="json") if running is not None else None,
            "was_paused": was_paused}


async def stop_golem(client: Client, registry: FleetRegistry, golem_id: str, reason: str) -> dict[str, Any] | None:
    """`golem stop`: halt the golem, keep what its next start needs in its data dir, mark it stopped here. None when
    its workflow was not running."""
    from temporalio.service import RPCError

    try:
        moved = await halt(client, golem_id, reason)
    except RPCError as err:
        if err.status.name != "NOT_FOUND":
            raise
        moved = None
    if moved is not None:
        (registry.layout(golem_id).root / MOVE_FILE).write_text(json.dumps(moved, indent=1))
    registry.mark(golem_id, "stopped")
    return moved


async def export_golem(client: Client, registry: FleetRegistry, golem_id: str, out: Path) -> dict[str, Any]:
    """`golem export`: halt the golem, pack its data dir (home included) and its move file into `out` (tar.gz), and
    mark it moved here. Its next tick is the one after the state's."""
    import tarfile

    placement = registry.get(golem_id)
    if placement is None or not placement.running:
        raise ValueError(f"golem {golem_id} is not placed in {registry.root}" +
                         (f" ({placement.status})" if placement else ""))
    moved = await halt(client, golem_id, f"golem export: moving off host {placement.host}")
    moved["from_host"] = placement.host
    root = registry.layout(golem_id).root
    (root / MOVE_FILE).write_text(json.dumps(moved, indent=1))
    registry.mark(golem_id, "moved")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w:gz") as tar:
        tar.add(root, arcname=golem_id)
    return moved


async def import_golem(client: Client, registry: FleetRegistry, bundle: Path, host: str, *,
                       start: bool = True) -> tuple[str, Any]:
    """`golem import`: unpack an export under `<data>/golems/<id>/`, place it on `host` and start its workflow there
    with the state it left with (its tick numbers go on). Returns the id and the workflow handle (None: not started)."""
    import tarfile

    with tarfile.open(bundle, "r:gz") as tar:
        names = {m.name.split("/", 1)[0] for m in tar.getmembers()}
        if len(names) != 1:
            raise ValueError(f"{bundle}: not a golem export (one folder named after the golem), found {sorted(names)}")
        golem_id = names.pop()
        dest = registry.layout(golem_id).root
        if dest.exists() and any(dest.iterdir()):
            raise ValueError(f"{dest} is not empty: golem {golem_id} already has data on this host")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tar.extractall(dest.parent, filter="data")
    if not (dest / MOVE_FILE).exists():
        raise ValueError(f"{bundle}: no {MOVE_FILE} in it: not made by `golem export`")
    registry.place(golem_id, host)
    handle = await start_placed(client, registry, golem_id, source="golem import") if start else None
    return golem_id, handle

