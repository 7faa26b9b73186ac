"""The embedded stack behind `golem run` / `make run`.

Starts a Temporal dev server (SQLite under the data dir, Web UI on :8233), Anvil (state persisted
under the data dir), deploys our contracts on first start, the market simulator, a worker, and the
golem's GolemWorkflow. Ctrl-C stops every process it started. Running it again resumes the same
golem: the dev server's SQLite keeps the workflow (same id, next tick) and Anvil's state file keeps
the chain. While it runs, infra.supervisor restarts any of them that crashes, the dev server included.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from golem.ids import golem_workflow_id, task_queue
from golem.errors import UserError
from golem.fleet import default_host
from golem.layout import DataLayout
from golem.world.devchain import ANVIL_KEYS
from infra.anvil import AnvilError, AnvilProcess
from infra.console import ignore_sigpipe, mirror_to, say
from infra.supervisor import (
    CRASH_LIMIT,
    CRASH_WINDOW_SECONDS,
    LEFTOVER_GRACE_SECONDS,
    STOP_BUDGET_SECONDS,
    AnvilChild,
    Child,
    ProcessChild,
    SupervisionGaveUp,
    SupervisionJournal,
    Supervisor,
    TemporalChild,
    log_tail,
    sweep_children,
)
from infra.temporal import TemporalDevServer

if TYPE_CHECKING:
    from golem.chain.contracts import Deployment
    from golem.models.config import GolemConfig
    from golem.models.state import GolemState

T = TypeVar("T")

log = logging.getLogger("golem.stack")

from infra.world_cache import GOLEM_KEY_INDEX
from golem.life.succession import inherited_state

# The owner's window; GOLEM_DASHBOARD_PORT / GOLEM_METRICS_PORT move them.
DASHBOARD_PORT = int(os.environ.get("GOLEM_DASHBOARD_PORT", 8300))
METRICS_PORT = int(os.environ.get("GOLEM_METRICS_PORT", 9464))
WORKER_WAITS_FOR_TEMPORAL_SECONDS = 60  # a restarted worker waits this long for a dev server restarting beside it


def metrics_line(port: int = METRICS_PORT) -> str:
    """Where the worker's Prometheus endpoint is, for the start-up banner (0: switched off)."""
    return f"metrics: http://127.0.0.1:{port}/metrics" if port else "metrics off (GOLEM_METRICS_PORT=0)"


def _rpc_port(rpc_url: str) -> int:
    return urlparse(rpc_url).port or 8545


def ensure_world(rpc_url: str, data_dir: Path) -> tuple[Deployment, bool]:
    """Deploy the real protocols (Uniswap V2, Aave V3, feeds) unless the saved deployment is live on this chain;
    a fresh Anvil loads the cached state dump of an earlier deploy instead of redeploying (infra.world_cache)."""
    from golem.chain.contracts import Deployment, DeploymentError
    from golem.chain.web3client import make_web3
    from infra.world_cache import deploy_or_load

    w3 = make_web3(rpc_url)
    path = DataLayout(data_dir).deployment
    if path.exists():
        try:
            dep = Deployment.load(path)
        except DeploymentError:  # a world from an older version of the project: deploy anew
            dep = None
        if dep is not None and w3.eth.get_code(w3.to_checksum_address(dep.addresses["AAVE_POOL"])):
            return dep, False
    dep, fresh = deploy_or_load(w3, rpc_url, use_cache=w3.eth.block_number == 0)
    dep.save(path)
    return dep, True


async def ensure_monitor_running(address: str | None, config: GolemConfig, queue: str | None = None) -> str:
    """The heartbeat-monitor beside the golem (golem-<id>-monitor): started once, left running across restarts.
    Connects as the worker does: config's [temporal], its GOLEM_TEMPORAL_* overrides, then address."""
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from golem.life.vitals import MonitorInput
    from workers.client import connect, frontend
    from workflows.monitor import HeartbeatMonitorWorkflow, monitor_workflow_id

    client = await connect(target=frontend(config.temporal, address=address))
    wid = monitor_workflow_id(config.golem.id)
    try:
        await client.start_workflow(
            HeartbeatMonitorWorkflow.run, MonitorInput(golem_id=config.golem.id,
                                                       theta_seconds=config.clock.theta_base_seconds),
            id=wid, task_queue=queue or task_queue(config.golem.id))  # a fleet golem's: its host's queue
    except WorkflowAlreadyStartedError:
        return f"heartbeat-monitor {wid} running"
    return f"heartbeat-monitor {wid} started"


def supervised_wait(fn: Callable[[], T], supervisor: Supervisor, stopped: Callable[[], bool], worker_log: Path,
                    say_after_s: float = 15.0) -> T | None:
    """fn() (starting or resuming the golem: it talks to the workflow, which needs a worker) on a thread, while the
    supervisor keeps watching: a worker that dies at start is reported and restarted instead of the start hanging
    on a workflow nobody serves, and Ctrl-C still stops. None when stopped before fn finished."""
    import threading

    values: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            values.append(fn())
        except BaseException as err:  # handed to the caller's thread
            errors.append(err)

    thread = threading.Thread(target=run, name="golem-start", daemon=True)
    thread.start()
    waited, said = 0.0, False
    while thread.is_alive():
        if stopped():
            return None
        supervisor.check()
        thread.join(0.5)
        waited += 0.5
        if waited >= say_after_s and not said:
            say(f"waiting for the golem to answer (its worker serves it; see {worker_log}) ...")
            said = True
    if errors:
        raise errors[0]
    return values[0]


def after_recorded_ticks(config: GolemConfig, data_dir: Path | None, state: GolemState | None) -> GolemState | None:
    """A golem started without its workflow state on a data dir that holds records (its Temporal history gone or
    unreadable) numbers its ticks on from the last recorded one: tick N's record is never overwritten."""
    from golem.cognition.fold import new_golem_state
    from golem.life.cycle_store import CycleStore

    last = (CycleStore(data_dir).recent(1, former=True)  # past every record, a former life's included
            if data_dir is not None and DataLayout(data_dir).cycles.is_dir() else [])
    if not last:
        return state
    base = state or new_golem_state(config)
    return base.model_copy(update={"tick": max(base.tick, int(last[0]["tick"]) + 1)})


class GolemStuck(UserError):
    """The golem's workflow is running but its task fails on this build: the stack stays up so the owner can act."""


async def ensure_golem_running(address: str | None, config: GolemConfig, data_dir: Path | None = None) -> str:
    """Start GolemWorkflow, or resume the running one; a closed one restarts from its last state.
    The config version on disk (golem.toml + STRATEGY.md) is what the golem runs on afterwards: a running
    golem on another version gets it through its apply_config update (refused whole if bad: the old
    version keeps running and the answer says why)."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.exceptions import WorkflowAlreadyStartedError
    from temporalio.service import RPCError, RPCStatusCode

    from golem.models.config_version import short
    from golem.models.golem import GolemWorkflowInput
    from workers.client import connect, frontend
    from workers.config_versions import ConfigRefused, apply_version, save_version, start_info, version_of
    from workflows.golem import GolemWorkflow

    target = frontend(config.temporal, address=address)
    client = await connect(target=target)
    from infra.temporal import set_retention

    try:
        await set_retention(client, config.retention.temporal_days, client.namespace)  # [retention] temporal_days
    except RPCError as err:
        if not target.remote:
            raise
        # a shared cluster's namespace belongs to its operator (Temporal Cloud: the account's admins)
        say(f"retention left as the cluster has it: updating namespace {client.namespace} was refused ({err.message})")
    wid = golem_workflow_id(config.golem.id)
    handle = client.get_workflow_handle(wid)
    local = version_of(config)
    if data_dir is not None:
        save_version(data_dir, local)

    async def resume() -> str:
        try:
            applied = await apply_version(client, config.golem.id, local, data_dir, "golem run")
        except RPCError as err:
            if "failed state" not in str(err):
                raise
            raise GolemStuck(
                f"{wid} is running but its workflow task fails on this build, so it cannot take the config (the "
                f"worker log says why, e.g. a nondeterminism error after an upgrade: {DataLayout(data_dir or Path('.')).logs}"
                f"/worker.log). Reset it to before the change (`golem ticks`, then `golem reset N`), or end it "
                f"(`temporal workflow terminate --workflow-id {wid}`) and `golem run` again: it restarts from its "
                "last state, its records and Grimoire kept. The stack stays up meanwhile.") from None
        except ConfigRefused as err:
            return f"resumed; the changed config was REFUSED and the golem keeps its running version:\n{err}"
        if applied.version == applied.previous:
            return f"resumed (config {short(applied.version)})"
        return (f"resumed; config {short(applied.version)} applied (was {short(applied.previous)}) from tick "
                f"{applied.effective_from_tick}: " + ("; ".join(applied.changed) or "no value changed"))

    state = previous = desc_seen = None
    try:
        desc = await handle.describe()
        if desc.status == WorkflowExecutionStatus.RUNNING:
            return await resume()
        desc_seen = desc.status.name.lower() if desc.status else "closed"
        state = await handle.query(GolemWorkflow.state)
        previous = await handle.query(GolemWorkflow.config_version)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND and desc_seen is None:  # a busy server is not a golem never born
            raise
        if desc_seen is not None:  # closed, and its last state cannot be read back (its history fails to replay)
            say(f"{wid} is closed ({desc_seen}) and its last state could not be read ({err.message}); starting it "
                "fresh — its records and Grimoire are kept")
        state = inherited_state(config, data_dir) if data_dir else None  # a newborn, maybe with inherited gating
        state = after_recorded_ticks(config, data_dir, state)
    info = start_info(local, state.tick if state else 0, "golem run", previous)
    try:
        await client.start_workflow(
            GolemWorkflow.run,
            GolemWorkflowInput(config=config, state=state, config_info=info),
            id=wid,
            task_queue=task_queue(config.golem.id),
        )
    except WorkflowAlreadyStartedError:  # it was (re)started between our look and our start: resume it
        return await resume()
    return ("restarted" if state and state.tick else "started") + f" (config {short(local.version)})"


def _spawn(cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as out:  # the child keeps its own copy: a restart must not leak one per start
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


class TickLines:
    """`golem run`'s console after start-up: one line per recorded tick (tick, tier, regime, action, cost) and
    per failed tick, read from the cycle index; `--quiet` turns them off."""

    def __init__(self, data_dir: Path) -> None:
        from golem.life.cycle_store import CycleStore

        self.store = CycleStore(data_dir)
        latest = self.store.latest_tick()
        self.after = latest if latest is not None else -1  # earlier ticks were printed by an earlier run
        self.failed_seen = {f["tick"] for f in self.store.failures(1000)}

    def new_lines(self) -> list[str]:
        out: list[tuple[int, str]] = []
        for row in self.store.recent(50):
            if row["tick"] > self.after:
                out.append((row["tick"], self.line(row)))
        for f in self.store.failures(50):
            if f["tick"] not in self.failed_seen:
                self.failed_seen.add(f["tick"])
                out.append((f["tick"], f"tick {f['tick']:>6}  FAILED  {f['error'][:120]}"))
        self.after = max([self.after, *(t for t, line in out if "FAILED" not in line)])
        return [line for _, line in sorted(out)]

    def line(self, row: dict[str, Any]) -> str:
        try:
            rec = self.store.load(row["tick"])
        except (LookupError, ValueError):
            rec = None
        action = "hold"
        if rec is not None and rec.actions:
            action = ", ".join(f"{a.action_type} {a.status.value}"
                               + (f" ({a.block_reason[:40]})" if a.block_reason and a.status.value == "blocked" else "")
                               for a in rec.actions)
        elif rec is not None and rec.deliberation is not None and not rec.deliberation.recommends_action:
            action = "decided: hold"
        # the cost before the action: a fixed-width column, so the line needs no padding to align (it was padded to
        # ~130 characters and wrapped in a narrow terminal)
        return (f"tick {row['tick']:>6}  {row['tier']:3} {row['regime']:12} pe {row['prediction_error']:5.3f}  "
                f"${row['total_cost']:.4f}  {action[:100]}")


# GOLEM_TEMPORAL_PORT / GOLEM_TEMPORAL_UI_PORT move the dev server (another stack on this machine, a test).
TEMPORAL_PORT_ENV, TEMPORAL_UI_PORT_ENV = "GOLEM_TEMPORAL_PORT", "GOLEM_TEMPORAL_UI_PORT"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# After a stop signal the process is gone within this long whatever hangs: the ordered stop has STOP_BUDGET_SECONDS,
# the sweep LEFTOVER_GRACE_SECONDS; the net then kills every child left and exits.
STOP_NET_SECONDS = STOP_BUDGET_SECONDS + LEFTOVER_GRACE_SECONDS + 2.0


def _port_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{name}={raw!r} is not a TCP port (1-65535)")
    return int(raw)


def gateway_child(config: GolemConfig, home: Path, data_dir: Path) -> ProcessChild | None:
    """With `[inference] payment = "x402"`: the paid inference gateway the worker's calls pay, supervised like the rest
    (docs/how-to/x402.md). It holds the provider's API key (from this environment); the worker pays from the golem's
    wallet. None otherwise."""
    if config.inference.payment != "x402":
        return None
    log_path = DataLayout(data_dir).logs / "x402-gateway.log"
    cmd = [sys.executable, "-m", "infra.x402_gateway", "--home", str(home), "--data", str(data_dir)]
    return ProcessChild("x402-gateway", lambda: _spawn(cmd, log_path), log_path)


FLEET_KEY_OFFSET = 10  # `golem run --golems N`: golem i > 1 signs with dev account 10 + i (0-6 are the world's)


def fleet_members(config: GolemConfig, home: Path, data_dir: Path, n: int, rpc_url: str,
                  host: str | None = None, dep: Deployment | None = None) -> list[str]:
    """`golem run --golems N`: N golems placed on this host's data dir (<id>1 .. <id>N), each its own home (copied from
    --home) and wallet: the first the demo's funded golem account, the others dev accounts given the same wallet and
    Aave loan on `dep`'s world (without it, ETH for gas only). Their keys' env vars are GOLEM_FLEET_KEY_<i>; the keys themselves only in the worker's
    env (fleet_keys)."""
    from eth_account import Account

    from golem.chain.web3client import make_web3
    from golem.fleet import FleetRegistry, prepare_home
    from golem.world.deploy import open_member_position
    from golem.world.devchain import dev_key

    registry = FleetRegistry(data_dir)
    w3 = make_web3(rpc_url)
    ids = []
    for i in range(1, n + 1):
        gid = f"{config.golem.id.replace('-', '_')}{i}"
        if not (registry.home(gid) / "golem.toml").exists():
            prepare_home(registry, gid, home, key_env=f"GOLEM_FLEET_KEY_{i}")
        if i > 1 and dep is not None:  # its own wallet and loan, as the first's (the world's golem account, at deploy)
            address = Account.from_key(fleet_key(i)).address
            if w3.eth.get_transaction_count(address) == 0:  # a fresh account: a restart finds its position open
                open_member_position(w3, dep, dev_key(0), fleet_key(i))
        elif i > 1:  # no world given: gas money for its own wallet
            address = Account.from_key(fleet_key(i)).address
            if w3.eth.get_balance(address) < 10**18:
                w3.provider.make_request("anvil_setBalance", [address, hex(100 * 10**18)])  # type: ignore[arg-type]
        placed = registry.get(gid)
        if placed is None or placed.status != "placed":
            registry.place(gid, host or default_host())
        ids.append(gid)
    return ids


def fleet_key(i: int) -> str:
    from golem.world.devchain import dev_key

    return dev_key(GOLEM_KEY_INDEX if i == 1 else FLEET_KEY_OFFSET + i)


async def ensure_fleet_running(address: str, data_dir: Path, ids: list[str]) -> str:
    """Start each placed golem not running yet (a stopped one from where it stopped), and its host's heartbeat-monitor."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    from golem.fleet import FleetRegistry
    from workers.client import connect
    from workers.fleet import start_placed
    from workers.host_monitor import ensure_host_monitor

    client = await connect(address)
    registry = FleetRegistry(data_dir)
    started = 0
    for gid in ids:
        try:
            running = (await client.get_workflow_handle(golem_workflow_id(gid)).describe()).status \
                == WorkflowExecutionStatus.RUNNING
        except RPCError:
            running = False
        if not running:
            await start_placed(client, registry, gid, source="golem run --golems")
            started += 1
    hosts = sorted({p.host for p in registry.all() if p.golem_id in ids})
    # one per host, over its golems (and the per-golem monitors an earlier `golem run --golems` started are ended)
    monitors = [await ensure_host_monitor(client, host, [g for g in ids if (p := registry.get(g)) and p.host == host])
                for host in hosts]
    return f"{started} started, {len(ids) - started} already running; {'; '.join(monitors)}"


def load_golem_config(home: Path) -> GolemConfig:
    from golem.models.config import load_config

    return load_config(home / "golem.toml")


def run_stack(home: Path, data_dir: Path, scenario: str = "calm", sim_interval: float | None = None,
              quiet: bool = False, address: str | None = None, golems: int = 0) -> int:
    """The embedded stack in the foreground until a stop signal (docs/operations/supervision.md). Every console line also goes
    to logs/golem-run.log, and a console that went away (`| tee` killed by the same Ctrl-C) costs nothing: the
    stop is the same ordered, bounded stop of every child, restarted ones included, then a sweep of what is left.
    With a Temporal frontend configured (address, GOLEM_TEMPORAL_ADDRESS or [temporal] address) no dev server is
    started: the golem runs on that frontend (docs/how-to/fleet.md)."""
    from golem.models.config import load_config
    from workers.client import connect, frontend

    config = load_config(home / "golem.toml")
    target = frontend(config.temporal, address=address)  # a bad [temporal] key stops here, named
    if target.remote:  # fail before starting anything: every child would wait on it
        asyncio.run(connect(target=target))
    data_dir.mkdir(parents=True, exist_ok=True)
    logs = DataLayout(data_dir).logs
    logs.mkdir(exist_ok=True)
    ignore_sigpipe()
    mirror_to(logs / "golem-run.log")
    temporal = None if target.remote else TemporalDevServer(
        DataLayout(data_dir).temporal_db, log_path=logs / "temporal.log", port=_port_env(TEMPORAL_PORT_ENV, 7233),
        ui_port=_port_env(TEMPORAL_UI_PORT_ENV, 8233))
    temporal_address = temporal.address if temporal is not None else target.address
    ui_url = temporal.ui_url if temporal is not None else os.environ.get("GOLEM_TEMPORAL_UI")
    anvil_state = DataLayout(data_dir).anvil_state
    anvil = AnvilProcess(port=_rpc_port(config.chain.rpc_url), state_path=anvil_state,
                         log_path=logs / "anvil.log", new_session=True)
    stopping = False
    children: list[Child] = []

    def _names() -> dict[int, str]:  # every pid a child ran as, the live ones too
        return {**supervisor.seen, **{c.pid: c.name for c in children if c.pid is not None}}

    def _net() -> None:  # the clean-up hung: kill what is left (named) and go
        sweep_children(_names(), grace=0.0)
        say(f"stopped: the clean-up took over {STOP_NET_SECONDS:g}s")
        os._exit(130)

    def _interrupt(signum: int, frame: object) -> None:
        nonlocal stopping
        if not stopping:
            timer = threading.Timer(STOP_NET_SECONDS, _net)
            timer.daemon = True
            timer.start()
        stopping = True

    temporal_child = TemporalChild(temporal) if temporal is not None else None
    anvil_child = AnvilChild(anvil)  # checkpointed every few seconds: a crash loses at most that much chain
    interval = sim_interval or max(config.clock.theta_base_seconds / 2, 0.5)
    sim_cmd = [
        sys.executable, "-m", "golem.world.simulator", "--rpc", config.chain.rpc_url,
        "--deployment", str(DataLayout(data_dir).deployment), "--scenario", scenario, "--interval", str(interval),
        # the crash comes after ~20 ticks, once the golem knows what calm looks like
        "--crash-after", str(int(20 * config.clock.theta_base_seconds / interval)),
    ]
    sim = ProcessChild("simulator", lambda: _spawn(sim_cmd, logs / "simulator.log"), logs / "simulator.log")
    env = dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_address, GOLEM_DATA=str(data_dir), GOLEM_HOME=str(home))
    env[config.chain.key_env] = ANVIL_KEYS[GOLEM_KEY_INDEX]  # the key lives in the worker's env only
    worker_cmd = [sys.executable, "-m", "cli", "worker", "--home", str(home), "--data", str(data_dir),
                  "--wait-for-temporal", str(WORKER_WAITS_FOR_TEMPORAL_SECONDS)]
    if golems:  # one worker hosts them all (docs/how-to/fleet.md), each golem's key in its own env var
        worker_cmd += ["--host", default_host()]
        env.update({f"GOLEM_FLEET_KEY_{i}": fleet_key(i) for i in range(1, golems + 1)})
    worker = ProcessChild("worker", lambda: _spawn(worker_cmd, logs / "worker.log", env=env), logs / "worker.log",
                          stop_timeout=15)
    # The owner's window (docs/concepts/owners-window.md): the live dashboard on 127.0.0.1, reading the data dir's Event Fabric.
    dash_cmd = [sys.executable, "-m", "cli", "dashboard", "--home", str(home), "--data", str(data_dir),
                "--port", str(DASHBOARD_PORT), *(["--temporal-ui", ui_url] if ui_url else [])]  # --golems: the fleet page
    dash_env = dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_address)  # no key: it only signals and queries
    dashboard = ProcessChild("dashboard", lambda: _spawn(dash_cmd, logs / "dashboard.log", env=dash_env),
                             logs / "dashboard.log")
    gateway = gateway_child(config, home, data_dir)
    # Started in this order, stopped in reverse: the dashboard, the worker, the gateway, the simulator, Anvil (which
    # dumps its state), the dev server last. Every one is supervised, the dev server included.
    children[:] = [*([temporal_child] if temporal_child else []), anvil_child, sim, *([gateway] if gateway else []),
                   worker, dashboard]
    journal = SupervisionJournal(data_dir, config.golem.id)
    supervisor = Supervisor(children, notify=journal)
    # Explicit handlers: a shell may start us with SIGINT ignored, and Ctrl-C must still stop cleanly; SIGHUP: the
    # terminal closed.
    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)
    try:
        if temporal_child is not None:
            say("starting Temporal dev server ...")
            temporal_child.start()
        else:
            say(f"Temporal: the frontend at {target.describe()} (no embedded dev server)")
        if stopping:
            return 0
        say("starting Anvil ...")
        try:
            anvil_child.start()
        except AnvilError as err:
            say(f"golem run: {err}; last log lines:" + "".join(f"\n    | {ln}" for ln in log_tail(anvil.log_path))
                + f"\n(a damaged {anvil_state.name} with no checkpoint beside it: move it aside to start a "
                "fresh chain; the golem itself is kept in temporal.sqlite)")
            return 1
        if stopping:
            return 0
        dep, fresh = ensure_world(config.chain.rpc_url, data_dir)
        say(f"protocols {'deployed' if fresh else 'found'}: Uniswap V2 router {dep.addresses['UNI_ROUTER']}, "
            f"Aave V3 pool {dep.addresses['AAVE_POOL']} (address book in {data_dir / 'deployment.json'})")
        if stopping:
            return 0
        members = fleet_members(config, home, data_dir, golems, config.chain.rpc_url, dep=dep) if golems else []
        sim.start()
        if gateway is not None:
            gateway.start()
            say(f"x402 gateway at {config.inference.gateway_url}: each model call is paid from the golem's wallet")
        worker.start()
        dashboard.start()

        def start_golem() -> str:
            if members:
                return asyncio.run(ensure_fleet_running(temporal_address, data_dir, members))
            try:
                how = asyncio.run(ensure_golem_running(temporal_address, config, data_dir))
            except GolemStuck as err:  # the owner fixes it with the stack up (reset, terminate, the Web UI)
                how = f"is STUCK — {err}"
            return how + "; " + asyncio.run(ensure_monitor_running(temporal_address, config))

        try:
            how = supervised_wait(start_golem, supervisor, lambda: stopping, logs / "worker.log")
        except SupervisionGaveUp as err:
            say(str(err))
            return 1
        if how is None:  # Ctrl-C while the golem was starting
            return 0
        who = (f"{len(members)} golems ({', '.join(members)}) in one worker on host queue golem-host-"
               f"{default_host()}: {how}; `golem list`, `golem status --golem {members[0]}`" if members else
               f"golem '{config.golem.id}' {how}: workflow {golem_workflow_id(config.golem.id)}")
        say(
            f"\n{who}\n"
            + (f"  Temporal Web UI: {ui_url}/namespaces/{target.namespace}/workflows\n" if ui_url else
               f"  Temporal:        {target.describe()} (GOLEM_TEMPORAL_UI=<its Web UI> links it)\n") +
            f"  dashboard:       http://127.0.0.1:{DASHBOARD_PORT}/   ({'the fleet page: a row per golem; ' if members else ''}"
            f"events: golem events -f; {metrics_line()})\n"
            f"  Anvil RPC:       {config.chain.rpc_url}\n"
            f"  data dir:        {data_dir}   (logs in {logs}; this console in {logs / 'golem-run.log'})\n"
            f"  retention:       records and traces {config.retention.days:g} days as files, then daily archives; "
            f"closed histories {config.retention.temporal_days} days in Temporal\n"
            + (f"  try: golem list | golem status --golem {members[0]} | golem steer --golem {members[0]} \"reduce exposure\" "
               "--severity high\n" if members else
               "  try: golem status | golem ticks | golem steer \"reduce exposure\" --severity high\n") +
            f"A crashed Temporal dev server, Anvil, simulator, worker or dashboard is restarted with backoff (gives up "
            f"after {CRASH_LIMIT} crashes of one in {CRASH_WINDOW_SECONDS / 60:g} min).\n"
            "Ctrl-C stops everything; run again to resume the same golem."
        )
        from golem.fleet import FleetRegistry

        lines = [] if quiet else ([(f"{g} ", TickLines(FleetRegistry(data_dir).layout(g).root)) for g in members]
                                  if members else [("", TickLines(data_dir))])
        while not stopping:
            for prefix, ticks in lines:
                for line in ticks.new_lines():
                    say(prefix + line)
            try:
                supervisor.check()
            except SupervisionGaveUp as err:
                say(str(err))
                return 1
            time.sleep(0.5)
    finally:
        # Nothing here may depend on the console: say() survives a closed pipe, and each step runs whatever the
        # one before it raised.
        say("\nstopping ...")
        try:
            for problem in supervisor.stop():
                say(f"  could not stop {problem}")
        finally:
            sweep_children(_names())
            with contextlib.suppress(OSError):
                journal.stopped()
            say("stopped.")
    return 0
