"""`golem backtest`: the live golem on a recorded market path (one code path for live and backtest).

GolemWorkflow and ThetaTickWorkflow on a throwaway Temporal dev server, the same activities, cage, deliberator and
Grimoire in an in-process worker, a fresh Anvil with the dev world deployed (`--timestamp`, so chain time is path
time). Only the world differs: golem/backtest/replay.py sets the chain to each row, then `advance_world` hands the
row's time to GolemWorkflow's replay clock. All data stays under the output directory. See docs/design/backtest.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import tempfile
import time
import tomllib
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import tomli_w

from golem.inference.strategies import STRATEGIES_DIR
from golem.backtest.marks import mark_row
from golem.backtest.models import PathRow, RunInfo, TickMark
from golem.models.config import load_config
from golem.safety.gas import gas_limits
from golem.ids import golem_workflow_id, task_queue
from golem.layout import DataLayout

if TYPE_CHECKING:  # annotations only: these load in the functions that use them (start-up stays short)
    from temporalio.client import Client

    from golem.backtest.replay import AppliedRow, ReplayDriver
    from golem.learning.trial import StartPosition
    from golem.models.config import GolemConfig
    from golem.world.deploy import GolemPosition
    from golem.models.observation import ChainSnapshot
    from workers.services import GolemServices

T = TypeVar("T")

GOLEM_KEY_INDEX = 2  # the dev world's golem account (infra/stack.py)
GENESIS_LEAD_S = 3600  # ours: the chain starts an hour before the path so the deployment's blocks precede row 0

# The throwaway server's SQLite skips fsync: a crash loses the run anyway, and a synced commit per history write
# made a 4-activity workflow ~4x slower here (docs/how-to/backtesting.md). The file is complete once the server stops.
SERVER_PRAGMAS = ("synchronous=OFF", "journal_mode=WAL")

STEPS = ("local", "activities")  # BacktestOptions.steps

# The --compare runs, in the order they are printed; "golem" is the golem as configured (the base of the deltas).
BASELINES: dict[str, dict[str, Any]] = {
    "hold": {},  # no golem: the position as deployed, marked every row
    "rules": {"gating": {"mode": "always"}},  # STRATEGY.md's rules every tick, no System 1 gating
    "memory-off": {"grimoire": {"memory": False}},  # retrieval returns nothing, nothing admitted
}


class BacktestError(RuntimeError):
    """A backtest that cannot start or finish; the message says what to fix."""


@dataclass
class BacktestOptions:
    path: Path
    home: Path
    out: Path
    memory: bool = True
    grimoire: Path | None = None
    compare: bool = False
    progress: bool = True
    # "local": the tick's T0 steps and the gamma read as local activities, workflows outside the sandbox (the
    # default, docs/how-to/backtesting.md); "activities": every step an activity task in the sandbox, as `golem run` runs
    # them. The same decisions and figures either way.
    steps: str = "local"
    # the golem's loan and wallet at row 0 (every variant's world opens it); None: the dev world's (golem.world.deploy)
    position: GolemPosition | None = None


def world_position(held: StartPosition) -> GolemPosition:
    """The world's opening position from what a golem held (a learned rule's trial: golem.learning.trial)."""
    from golem.world.deploy import GolemPosition

    b = {k.upper(): v for k, v in held.balances.items()}
    return GolemPosition(collateral=held.collateral, debt=held.debt, weth=b.get("WETH", 0.0), usdc=b.get("USDC", 0.0),
                         dai=b.get("DAI", 0.0))


@dataclass
class VariantRun:
    name: str
    info: RunInfo
    marks: list[TickMark] = field(default_factory=list)
    out_dir: Path | None = None
    # where the rows' wall time went, in seconds: chain setup, the golem's update round trip, marking (bench)
    phases: dict[str, float] = field(default_factory=dict)
    final_state: Any = None  # the GolemWorkflow's result (GolemState) once the last row is done; None for hold
    loop_cpu_seconds: float = 0.0  # this process's CPU (every thread) from the golem's start to the last row (bench)
    # the same span's CPU seconds of the run's Anvil and of the Temporal server (Linux: read from /proc; bench)
    loop_child_cpu_seconds: dict[str, float] = field(default_factory=dict)


def _log(opts: BacktestOptions, msg: str) -> None:
    if opts.progress:
        from infra.console import say  # a console gone mid-run (its piped reader killed first) costs nothing

        say(msg, err=True)


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()


def _write_home(src_home: Path, dst_home: Path, golem_id: str, rpc_url: str, run_dir: Path,
                overrides: dict[str, Any]) -> GolemConfig:
    """A copy of the owner's golem home pointed at this run's chain, with the variant's overrides."""
    raw = tomllib.loads((src_home / "golem.toml").read_text())
    raw.setdefault("golem", {})["id"] = golem_id
    raw["golem"]["home"] = "."
    raw.setdefault("chain", {})["rpc_url"] = rpc_url
    raw.setdefault("probes", {})["kill_switch_path"] = str(run_dir / "killswitch")
    for section, values in overrides.items():
        raw.setdefault(section, {}).update(values)
    # a backtest's golem runs alone: its marks would reach a live clade's field (docs/design/pheromones.md)
    raw.pop("clade", None)
    dst_home.mkdir(parents=True, exist_ok=True)
    (dst_home / "golem.toml").write_text(tomli_w.dumps(raw))
    for name in ("STRATEGY.md", "HEARTBEAT.md"):
        if (src_home / name).exists():
            shutil.copy(src_home / name, dst_home / name)
    if (src_home / STRATEGIES_DIR).is_dir():  # the strategies beside STRATEGY.md (golem.inference.strategies)
        shutil.copytree(src_home / STRATEGIES_DIR, dst_home / STRATEGIES_DIR, dirs_exist_ok=True)
    return load_config(dst_home / "golem.toml")


def _inherit_grimoire(services: GolemServices, source: Path, scratch: Path) -> dict[str, int]:
    """Start from another run's Grimoire: its distilled entries and causal edges, imported as inherited
    (confidence 0.3, as a successor inherits: docs/design/life.md#death-and-legacy); its episodes are that run's
    own experience and stay there."""
    from golem.grimoire.episodes.store import EpisodeStore
    from golem.grimoire.semantic.store import SemanticStore
    from golem.grimoire.transfer import export_lines, import_file

    grim = source / "grimoire"
    if not (grim / "semantic.sqlite").exists():
        raise BacktestError(f"--grimoire {source}: no grimoire/semantic.sqlite there; give a backtest run's data dir")
    embedder = services.episodes.embedder
    episodes = EpisodeStore(grim / "episodes.lance", embedder)
    semantic = SemanticStore(grim / "semantic.sqlite", grim / "semantic.lance", embedder)
    scratch.parent.mkdir(parents=True, exist_ok=True)
    with scratch.open("w") as f:
        for line in export_lines(episodes, semantic, golem_id="inherited", tick=0):
            if json.loads(line).get("kind") != "episode":
                f.write(line + "\n")
    counts = import_file(scratch, services.episodes, services.semantic)
    if (source / "PLAYBOOK.md").exists():
        shutil.copy(source / "PLAYBOOK.md", services.playbook_path)
    # PLAYBOOK.md is compiled from heuristics.sqlite at every delta cycle: without its rows (the learned rules,
    # their confidence and importance) the first cycle of this run would compile the copied file away
    if (grim / "heuristics.sqlite").exists():
        with closing(sqlite3.connect(grim / "heuristics.sqlite")) as src, \
                closing(sqlite3.connect(services.heuristics.path)) as dst:
            src.backup(dst)
        counts["heuristics"] = services.heuristics.count()
        # a PLAYBOOK rule's semantic entry is its row's view (votes keep them equal): imported at the inherited 0.3
        # it read as decayed and the first cycle compiled a rule the first pass had measured and kept out of the file
        from golem.grimoire.playbook.view import PlaybookLinks, follow_votes
        counts["playbook_entries"] = follow_votes(services.heuristics, services.semantic,
                                                  list(PlaybookLinks(services.heuristics).all()), 0)
    return counts


async def _run_variant(opts: BacktestOptions, rows: list[PathRow], name: str, overrides: dict[str, Any] | None,
                       client: asyncio.Future[Client], run_dir: Path,
                       server_pid: Callable[[], int | None] = lambda: None) -> VariantRun:
    from golem.world.deploy import deploy_world
    from golem.world.rpc import lean_web3
    from golem.backtest.replay import BLOCK_INTERVAL_S, ReplayDriver
    from web3.types import RPCEndpoint

    from golem.world.devchain import ANVIL_ADDRESSES, ANVIL_KEYS
    from infra.anvil import AnvilProcess, free_port

    started = time.perf_counter()
    run_dir.mkdir(parents=True, exist_ok=True)
    golem_id = f"bt-{name}"
    anvil = AnvilProcess(port=free_port(), log_path=run_dir / "logs" / "anvil.log",
                         extra_args=["--timestamp", str(rows[0].timestamp - GENESIS_LEAD_S)])
    stack = ExitStack()
    try:
        await _to_the_end(anvil.start)
        w3 = lean_web3(anvil.rpc_url)  # the driver's: a dozen calls a row (golem/world/rpc.py)
        # chain time is path time from the genesis on: a block carries its row's time, not the wall clock's, so the
        # interest Aave accrues from the golem's borrow on is the same every run (golem/backtest/replay.py)
        w3.provider.make_request(RPCEndpoint("anvil_setBlockTimestampInterval"), [BLOCK_INTERVAL_S])
        golem_account = ANVIL_ADDRESSES[GOLEM_KEY_INDEX]
        dep = await asyncio.to_thread(deploy_world, w3, ANVIL_KEYS[0], golem_account, ANVIL_ADDRESSES[1],
                                      golem_key=ANVIL_KEYS[GOLEM_KEY_INDEX], rpc_url=anvil.rpc_url,
                                      position=opts.position)
        data = run_dir / "data"
        stack.enter_context(_in_memory(data))
        dep.save(DataLayout(data).deployment)
        driver = ReplayDriver(w3, dep, ANVIL_KEYS[1], ANVIL_KEYS[0])
        info = RunInfo(name=name, path=str(opts.path), rows=len(rows), started_at=datetime.now(timezone.utc).isoformat())
        run = VariantRun(name=name, info=info, out_dir=run_dir)
        cpu, kids = time.process_time(), {"anvil": _cpu_of(anvil.pid), "temporal": _cpu_of(server_pid())}
        if overrides is None or name == "hold":
            run.marks = await _replay_hold(opts, rows, driver, golem_account, run.phases)
        else:
            cfg = _write_home(opts.home, run_dir / "home", golem_id, anvil.rpc_url, run_dir, overrides)
            info.golem_id, info.memory, info.steps = golem_id, cfg.grimoire.memory, opts.steps
            info.gas_limits = gas_limits(cfg)  # the partition and the urgency ceilings, shown in the report
            run.marks, run.final_state = await _replay_golem(opts, rows, driver, cfg, data, client, info, run.phases)
        run.loop_cpu_seconds = time.process_time() - cpu
        for kid, pid in (("anvil", anvil.pid), ("temporal", server_pid())):
            now, then = _cpu_of(pid), kids[kid]
            if now is not None and then is not None:
                run.loop_child_cpu_seconds[kid] = now - then
        if driver.overflows:
            _log(opts, f"  {name}: the deployment ran past golem/backtest/replay.py's ORIGIN_BLOCK; block numbers may "
                       "differ from another run's")
        info.wall_seconds = round(time.perf_counter() - started, 3)
        return run
    finally:
        await asyncio.to_thread(anvil.stop)
        await asyncio.to_thread(stack.close)  # the golem's data moves from memory to --out


def _cpu_of(pid: int | None) -> float | None:
    """CPU seconds (user + system) a process has used so far; None where /proc does not say."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def _in_memory(data: Path) -> Iterator[Path]:
    """The run's golem data dir in RAM (/dev/shm) while it runs, reached through a symlink at `data`, then moved to
    `data` itself (also on a failure or a kill). Its stores commit with fsync (records, events, the tx journal,
    LanceDB versions): on a busy disk that was a row's largest wait, and a backtest's data is rebuilt by running it
    again. Without /dev/shm the directory is made in place."""
    shm = Path("/dev/shm")
    if data.exists() or not (shm.is_dir() and os.access(shm, os.W_OK)):
        data.mkdir(parents=True, exist_ok=True)
        yield data
        return
    scratch = Path(tempfile.mkdtemp(prefix="golem-backtest-", dir=shm))
    scratch.chmod(0o755)  # as a plain mkdir would make it
    data.symlink_to(scratch, target_is_directory=True)
    try:
        yield data
    finally:
        data.unlink()
        shutil.copytree(scratch, data, symlinks=True)
        shutil.rmtree(scratch, ignore_errors=True)


async def _to_the_end(start: Callable[[], object]) -> None:
    """`start()` (a process's) in a thread, awaited to its end even when the run is cancelled meanwhile (`kill`
    during start-up), then the cancel goes on: the caller's `finally` stops the process once it exists. A plain
    `await asyncio.to_thread(start)` returns at the cancel while the thread still spawns the process, and the
    `finally` found nothing to stop: the Temporal dev server was left running, orphaned."""
    started = asyncio.ensure_future(asyncio.to_thread(start))
    try:
        await asyncio.shield(started)
    except asyncio.CancelledError:
        await asyncio.wait([started])
        raise


def _apply(opts: BacktestOptions, driver: ReplayDriver, row: PathRow) -> tuple[AppliedRow, int]:
    """Apply a row; returns it with the block the chain was at before (the row's events come after it)."""
    applied = driver.apply(row)
    for msg in applied.liquidation_failures:
        _log(opts, f"  row {row.tick}: the liquidator's call failed: {msg}")
    return applied, applied.start_block


def _row_liquidation_kwargs(driver: ReplayDriver, account: str, applied: AppliedRow, before: int,
                            snap: ChainSnapshot) -> dict[str, Any]:
    """The row's LiquidationCall events against `account`, read from the Aave Pool's logs, and whether its health
    factor was under 1.0 at the row's prices (as the liquidator read it, before anyone acted)."""
    from golem.chain.reader import read_liquidations

    return {"liquidations": read_liquidations(driver.w3, driver.deployment, account, before + 1, snap.block_number),
            "row_health_factor": applied.health_factors.get(account)}


def _mark_reads(driver: ReplayDriver, store: Any, tick: int | None, account: str, applied: AppliedRow,
                before: int) -> tuple[Any, ChainSnapshot, dict[str, Any]]:
    """What a golem row's mark reads, in one thread hop: the tick's record, the chain after it, the row's liquidations."""
    record = store.load(tick) if tick is not None else None
    snap = driver.snapshot(account)
    return record, snap, _row_liquidation_kwargs(driver, account, applied, before, snap)


def _timed(phases: dict[str, float], name: str, since: float) -> float:
    now = time.perf_counter()
    phases[name] = phases.get(name, 0.0) + now - since
    return now


async def _replay_hold(opts: BacktestOptions, rows: list[PathRow], driver: ReplayDriver, account: str,
                       phases: dict[str, float]) -> list[TickMark]:
    marks = []
    for i, row in enumerate(rows):
        t = time.perf_counter()
        applied, before = await asyncio.to_thread(_apply, opts, driver, row)
        t = _timed(phases, "apply", t)
        _, snap, liq = await asyncio.to_thread(_mark_reads, driver, None, None, account, applied, before)
        marks.append(mark_row(i, row, snap, None, gas_paid_before=0.0, **liq))
        _timed(phases, "mark", t)
    return marks


async def _replay_golem(opts: BacktestOptions, rows: list[PathRow], driver: ReplayDriver, cfg: GolemConfig,
                        data: Path, connecting: asyncio.Future[Client], info: RunInfo,
                        phases: dict[str, float]) -> tuple[list[TickMark], Any]:
    from golem.life.cycle_store import CycleStore
    from golem.models.golem import GolemWorkflowInput, WorldTime
    from infra.block_producer import BlockProducer
    from golem.world.devchain import ANVIL_KEYS
    from workers.services import GolemServices
    from workers.worker import build_worker
    from workflows.golem import GolemWorkflow

    layout = DataLayout(data)  # the backtest golem's one layout, handed to its services and stores
    services = await asyncio.to_thread(GolemServices, cfg, layout, private_key=ANVIL_KEYS[GOLEM_KEY_INDEX])
    client = await connecting  # the Temporal server started while the chain was set up (_backtest)
    info.deliberator = services.deliberator_reason
    router = getattr(services.deliberator, "router", None)
    prices = getattr(getattr(router, "config", None), "prices", None)
    if prices:
        info.prices = {m: p.model_dump() if hasattr(p, "model_dump") else dict(p) for m, p in prices.items()}
    if opts.grimoire is not None:
        counts = await asyncio.to_thread(_inherit_grimoire, services, opts.grimoire, layout.inherited)
        info.grimoire_from = str(opts.grimoire)
        _log(opts, f"  inherited from {opts.grimoire}: {counts}")
    store = CycleStore(layout)
    wid = golem_workflow_id(cfg.golem.id)
    # a tick's confirmation blocks are mined as its verify step starts on this worker, not after a wall-clock pause
    # (golem/backtest/replay.py): the same path gives the same blocks however loaded the machine is
    producer = BlockProducer(driver.w3, blocks=cfg.chain.confirmations - 1)
    # no deadlock detection: a loaded machine must not fail a tick's workflow task (workers/worker.py: worker_options)
    worker = build_worker(client, services, interceptors=[producer], sandboxed=opts.steps == "activities",
                          deadlock_detection=False)
    marks: list[TickMark] = []
    gas_paid = 0.0
    async with worker:
        await client.start_workflow(GolemWorkflow.run,
                                    GolemWorkflowInput(config=cfg, clock="replay", local_steps=opts.steps == "local"),
                                    id=wid, task_queue=task_queue(cfg.golem.id))
        handle = client.get_workflow_handle_for(GolemWorkflow.run, wid)  # no run id: follows continue-as-new
        for i, row in enumerate(rows):
            t = time.perf_counter()
            applied, before = await asyncio.to_thread(_apply, opts, driver, row)
            t0 = _timed(phases, "apply", t)
            done = await handle.execute_update(
                GolemWorkflow.advance_world,
                WorldTime(row=i, at=_iso(applied.block_timestamp), last=i == len(rows) - 1),
            )
            t = _timed(phases, "golem", t0)
            wall_ms = (t - t0) * 1000.0 if done.tick is not None else None
            producer.check()
            ticked = done.tick if done.tick is not None and not done.failed else None
            record, snap, liq = await asyncio.to_thread(_mark_reads, driver, store, ticked, services.account, applied,
                                                        before)
            mark = mark_row(i, row, snap, record, gas_paid_before=gas_paid, wall_ms=wall_ms, **liq)
            gas_paid += mark.gas_usd
            marks.append(mark)
            _timed(phases, "mark", t)
            if opts.progress and (i + 1) % 50 == 0:
                _log(opts, f"  {info.name}: row {i + 1}/{len(rows)}")
        final = await handle.result()
        info.confirmation_blocks = producer.mined
    return marks, final


async def _all_or_none(coros: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Run side by side and return the results in order; the first failure (or a cancel of the caller) cancels the
    others and waits for their clean-up (each stops its own Anvil and worker) before it is raised."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _earlier_run(out: Path) -> list[str]:
    """What an earlier run left in `out`: its Temporal history and golem data dirs."""
    found = [out / "temporal.sqlite", out / "data", *(out / name / "data" for name in (*BASELINES, "golem"))]
    return [str(p.relative_to(out)) for p in found if p.exists() or p.is_symlink()]


async def _backtest(opts: BacktestOptions, rows: list[PathRow]) -> list[VariantRun]:
    from infra.anvil import free_port
    from infra.temporal import TemporalDevServer
    from workers.client import connect

    left = _earlier_run(opts.out)
    if left:
        # a golem started on an earlier run's data inherits its transaction journal (actions it thinks already
        # sent are not sent again), records, decision cache and Grimoire: the same path would act differently
        raise BacktestError(f"--out {opts.out} holds an earlier run ({', '.join(left)}); give a new directory or "
                            "remove it (a run never starts on another's data)")

    db = opts.out / "temporal.sqlite"
    (opts.out / "logs").mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(_empty_server_db, db)
    server = TemporalDevServer(db, port=free_port(), ui_port=free_port(), headless=True,
                               log_path=opts.out / "logs" / "temporal.log", sqlite_pragmas=SERVER_PRAGMAS)
    # the server starts while each variant starts its Anvil, deploys and opens its stores; a golem variant awaits
    # the client only to build its worker
    started = asyncio.ensure_future(_to_the_end(server.start))

    async def connected() -> Client:
        await started
        return await connect(server.address, wait_seconds=30.0)  # its frontend may answer "not healthy yet" at first

    client = asyncio.ensure_future(connected())
    try:
        plan: list[tuple[str, dict[str, Any] | None]] = []
        if opts.compare:
            plan += list(BASELINES.items())
        plan.append(("golem", {} if opts.memory else {"grimoire": {"memory": False}}))
        _log(opts, f"backtest {opts.path.name}: {', '.join(name for name, _ in plan)} ...")
        # --compare's variants share nothing but the Temporal server (each its own Anvil, golem id, task queue and
        # data dir), so they run side by side: one's Python runs while another waits on its chain or Temporal
        return await _all_or_none([
            _run_variant(opts, rows, name, overrides, client, opts.out / name if opts.compare else opts.out,
                         server_pid=lambda: server.proc.pid if server.proc is not None else None)
            for name, overrides in plan
        ])
    finally:
        client.cancel()
        await asyncio.wait([started, client])  # a start under way ends first, so stop() finds the process it spawned
        for task in (started, client):  # a failure there was raised to the golem's variant, or no one needed it
            if not task.cancelled():
                task.exception()
        await asyncio.to_thread(server.stop)


def _template_db() -> Path:
    """Where this machine keeps an empty backtest server database: keyed by the temporal binary and everything
    that shapes the schema (search attributes, kept indexes, pragmas)."""
    from infra.temporal import KEEP_VISIBILITY_INDEXES, SEARCH_ATTRIBUTES, temporal_cli

    cli = temporal_cli()
    stat = cli.stat()
    key = json.dumps([str(cli), stat.st_size, stat.st_mtime_ns, SEARCH_ATTRIBUTES, sorted(KEEP_VISIBILITY_INDEXES),
                      SERVER_PRAGMAS])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "golem"
    return cache / f"backtest-temporal-{hashlib.sha256(key.encode()).hexdigest()[:16]}.sqlite"


def _empty_server_db(db: Path) -> None:
    """Start the run's server on a copy of an empty database (schema written, unused indexes dropped). A new file
    costs the server a start, a stop and a second start (TemporalDevServer.start), ~3 s of every backtest's start-up
    here; the copy is made once per machine."""
    from infra.anvil import free_port
    from infra.temporal import TemporalDevServer

    template = _template_db()
    if not template.exists():
        template.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=template.parent) as tmp:
            made = Path(tmp) / "empty.sqlite"
            server = TemporalDevServer(made, port=free_port(), ui_port=free_port(), headless=True,
                                       log_path=Path(tmp) / "temporal.log", sqlite_pragmas=SERVER_PRAGMAS)
            try:
                server.start()
            finally:
                server.stop()
            with closing(sqlite3.connect(made)) as con:  # the file alone holds everything: no WAL beside it
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            os.replace(made, template)  # atomic: another run making it at the same time loses nothing
    shutil.copyfile(template, db)


def run_backtest(opts: BacktestOptions) -> list[VariantRun]:
    """Validate everything first (path, home, --grimoire), then run; returns the runs in print order."""
    from golem.backtest.path import load_path
    from infra.supervisor import run_stoppable

    if opts.steps not in STEPS:
        raise BacktestError(f"--steps {opts.steps!r}: say one of {', '.join(STEPS)}")
    rows = load_path(opts.path)  # PathError names the line and column
    load_config(opts.home / "golem.toml")  # ConfigError names the key
    if opts.grimoire is not None and not opts.memory:
        raise BacktestError("--grimoire with --memory off: an inherited Grimoire would never be read; drop one")
    opts.out.mkdir(parents=True, exist_ok=True)
    with _worker_log(opts.out / "logs" / "worker.log"):
        # `kill` cancels the run alone, which stops its worker, Anvil and Temporal in order (run_stoppable says why
        # a KeyboardInterrupt inside the loop would hang the worker's shutdown); KeyboardInterrupt comes out after
        return run_stoppable(_backtest(opts, rows))


@contextmanager
def _worker_log(path: Path) -> Iterator[None]:
    """The in-process worker logs to a file under --out, as `golem run`'s worker does; the console stays the report's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.handlers = saved[1]
        root.setLevel(saved[0])
        handler.close()
