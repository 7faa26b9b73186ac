"""The soak run (`make soak`): a live golem ticking as fast as its clock allows for thousands of ticks.

The chaos run's stack with no faults; it samples the worker's RSS and the data dir's size, then reads the
histories and measures every activity and child-workflow input. Bounds (0 disables one): RSS and data growth per
1,000 ticks, history events per GolemWorkflow run, input KB. `python -m infra.soak [--ticks 2000] ...`; exits 1 when
a bound is exceeded. See docs/operations/chaos-and-soak.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sqlite3
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from golem.ids import golem_workflow_id, task_queue, tick_workflow_id
from golem.layout import DataLayout
from infra.chaos import ChaosPlan, ChaosRun, _say, started
from infra.console import say
from infra.supervisor import stop_on_signals, sweep_children
from workers.memory import rss_bytes

if TYPE_CHECKING:
    from temporalio.api.common.v1 import Payloads
    from temporalio.client import Client, WorkflowHistory


@dataclass
class SoakOptions:
    ticks: int = 2000
    theta: float = 0.1  # theta_min is half of it: 0.05 s, the least the config accepts
    scenario: str = "volatile"
    continue_as_new_ticks: int = 100  # the example golem's
    sample_every: int = 100
    warmup_ticks: int = 200  # RSS growth is measured from here (imports, caches and the embedder settle first)
    inspect_ticks: int = 50  # the last N tick workflows whose histories are measured
    max_rss_growth_mb: float = 100.0  # per 1,000 ticks
    max_data_growth_mb: float = 50.0  # per 1,000 ticks, the golem's own files (not temporal.sqlite, not the chain)
    max_history_events: int = 10_000
    max_input_kb: float = 64.0
    seed: int = 21
    timeout_seconds: float = 6 * 3600.0
    golems: int = 0  # 0: one golem on its own worker; N: N golems in one host worker, ticks counted per golem
    max_rss_per_golem_mb: float = 10.0  # per 1,000 ticks of each golem, with golems > 0


@dataclass
class Sample:
    tick: int
    seconds: float
    rss_mb: float
    data_mb: dict[str, float]
    memory_mb: dict[str, float] = field(default_factory=dict)  # the worker's own split (workers/memory.py), if scraped
    all_ticks: int = 0  # with golems: the ticks of all golems together (0: one golem, `tick` is its)

    @property
    def data_total_mb(self) -> float:
        return sum(self.data_mb.values())

    @property
    def golem_data_mb(self) -> float:
        """What the golem itself writes: everything but the dev server's and the dev chain's files (the SQLite, the
        state dumps, their logs and the market simulator's)."""
        return sum(v for k, v in self.data_mb.items() if k not in ("temporal", "chain"))


@dataclass
class SoakReport:
    ticks: int = 0
    wall_seconds: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    tiers: dict[str, int] = field(default_factory=dict)
    failed_ticks: int = 0
    worker_restarts: int = 0
    rss_growth_mb_per_1k: float | None = None
    data_growth_mb_per_1k: float | None = None  # the golem's own files
    data_total_growth_mb_per_1k: float | None = None
    data_growth_by_part_per_1k: dict[str, float] = field(default_factory=dict)
    golem_runs: int = 0
    history_events_max: int = 0
    history_events_by_run: list[int] = field(default_factory=list)
    tick_history_events_max: int = 0
    activity_inputs_inspected: int = 0
    activity_input_max_bytes: dict[str, int] = field(default_factory=dict)  # activity type -> largest input
    child_input_max_bytes: int = 0
    golems: int = 0
    ticks_by_golem: dict[str, int] = field(default_factory=dict)
    rss_growth_mb_per_1k_per_golem: float | None = None  # worker RSS growth per 1,000 ticks of each golem, / golems
    # = the least-squares slope of RSS over all golems' ticks together (golems that tick at different paces count
    # as they ran), per 1,000 ticks, from the samples after warm-up
    rss_late_mb_per_1k_per_golem: float | None = None  # the same over the later half of those ticks: growth that
    # levels off (caches and indexes filling to their caps) shows here as a smaller figure than the whole span's
    lost_ticks: dict[str, list[int]] = field(default_factory=dict)  # golem -> ticks with no record and no failure
    doubled_ticks: dict[str, list[int]] = field(default_factory=dict)  # golem -> ticks run more than once
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        rate = self.ticks / self.wall_seconds if self.wall_seconds else 0.0
        lines = [f"soak: {self.ticks} ticks in {self.wall_seconds:.0f} s ({rate:.2f} ticks/s; tiers {self.tiers}; "
                 f"{self.failed_ticks} failed; worker restarts {self.worker_restarts})",
                 "  tick   wall s   worker RSS MB (" + ", ".join(MEMORY_PARTS) + ")   data dir MB ("
                 + ", ".join(self.samples[0].data_mb) + ")" if self.samples else "  no samples"]
        for s in self.samples:
            parts = " ".join(f"{v:.1f}" for v in s.data_mb.values())
            mem = " ".join("-" if s.memory_mb.get(k) is None else f"{s.memory_mb[k]:.0f}" for k in MEMORY_PARTS)
            lines.append(f"  {s.tick:>5} {s.seconds:>8.0f} {s.rss_mb:>9.1f} ({mem})   {s.data_total_mb:.1f} ({parts})")

        def fmt(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.1f}"

        lines.append(f"  per 1,000 ticks after warm-up: worker RSS {fmt(self.rss_growth_mb_per_1k)} MB, the golem's "
                     f"data {fmt(self.data_growth_mb_per_1k)} MB, whole data dir {fmt(self.data_total_growth_mb_per_1k)} MB ("
                     + ", ".join(f"{k} {v:.1f}" for k, v in self.data_growth_by_part_per_1k.items()) + ")")
        if self.golems:
            lines.append(f"  {self.golems} golems in one worker: ticks each {sorted(set(self.ticks_by_golem.values()))}; "
                         f"worker RSS per golem per 1,000 ticks {fmt(self.rss_growth_mb_per_1k_per_golem)} MB "
                         f"(later half {fmt(self.rss_late_mb_per_1k_per_golem)}); "
                         f"ticks lost {sum(map(len, self.lost_ticks.values()))}, "
                         f"doubled {sum(map(len, self.doubled_ticks.values()))}")
        lines.append(f"  GolemWorkflow: {self.golem_runs} runs (continue-as-new), largest history "
                     f"{self.history_events_max} events; tick workflows: largest history {self.tick_history_events_max}")
        biggest = sorted(self.activity_input_max_bytes.items(), key=lambda kv: -kv[1])
        lines.append(f"  activity inputs: {self.activity_inputs_inspected} inspected; largest per activity: "
                     + ", ".join(f"{k} {v / 1024:.1f} KB" for k, v in biggest)
                     + f"; largest child-workflow input {self.child_input_max_bytes / 1024:.1f} KB")
        lines.append("PASS" if not self.problems else "FAIL:\n" + "\n".join(f"  - {p}" for p in self.problems))
        return "\n".join(lines)


MEMORY_PARTS = ("lance_cache", "malloc_in_use", "malloc_free", "malloc_released")  # workers/memory.py's, besides rss


def worker_memory_mb(port: int | None) -> dict[str, float]:
    """The worker's memory split as its /metrics reports it (golem_worker_memory_bytes), in MB; {} if unreadable."""
    if not port:
        return {}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("golem_worker_memory_bytes{"):
            m = re.search(r'part="([^"]+)"', line)
            if m:
                found[m.group(1)] = float(line.rsplit(" ", 1)[1]) / 2**20
    return found


def rss_mb(pid: int) -> float:
    return rss_bytes(pid) / 2**20


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file():
                total += p.stat().st_size
        except FileNotFoundError:  # a temp file renamed meanwhile
            pass
    return total


# Logs the dev stack writes beside the golem's: Anvil's RPC log (~8.5 MB per 1,000 soak ticks, measured) and the
# market simulator's are the dev chain's, the dev server's is Temporal's; none exists beside a production golem.
DEV_STACK_LOGS = {"anvil.log": "chain", "simulator.log": "chain", "temporal.log": "temporal"}


def data_sizes(data: Path) -> dict[str, float]:
    """MB per part of the data dir; the dev server's SQLite (with its WAL) apart from the golem's own files. A fleet's
    golems (<data>/golems/<id>/) add theirs to the same parts."""
    parts = {"temporal": 0, "chain": 0, "grimoire": 0, "cycles": 0, "logs": 0, "other": 0}
    golems = data / "golems"
    for p in [*data.iterdir(), *(g for d in (golems.iterdir() if golems.is_dir() else ()) for g in d.iterdir())]:
        if p == golems:
            continue
        if p.name.startswith("temporal.sqlite"):
            key = "temporal"  # the dev server's (a cluster's, in production)
        elif p.name.startswith("anvil-state"):
            key = "chain"  # the dev chain's state dumps (every block since genesis)
        elif p.name in ("grimoire", "cycles"):
            key = p.name
        elif p.name == "logs":
            for log in p.iterdir():  # the dev stack's logs belong to its parts, not to the golem
                parts[DEV_STACK_LOGS.get(log.name, "logs")] += _size(log)
            continue
        elif p.name == "traces.jsonl":
            key = "logs"
        else:
            key = "other"  # tx journal, permits, audit, liquidation log, config versions ...
        parts[key] += _size(p)
    return {k: v / 1e6 for k, v in parts.items()}


def _payload_bytes(payloads: Payloads | None) -> int:
    return sum(len(p.data) + sum(len(v) for v in p.metadata.values()) for p in payloads.payloads) if payloads else 0


async def inspect_histories(client: Client, golem_id: str, last_tick: int, opts: SoakOptions,
                            report: SoakReport) -> None:
    wid = golem_workflow_id(golem_id)
    async for wf in client.list_workflows(f"WorkflowId = '{wid}'"):
        hist = await client.get_workflow_handle(wid, run_id=wf.run_id).fetch_history()
        report.history_events_by_run.append(len(hist.events))
        _scan(hist, report)
    report.golem_runs = len(report.history_events_by_run)
    report.history_events_max = max(report.history_events_by_run, default=0)
    for n in range(max(0, last_tick - opts.inspect_ticks + 1), last_tick + 1):
        try:
            hist = await client.get_workflow_handle(tick_workflow_id(golem_id, n)).fetch_history()
        except Exception:  # noqa: BLE001 — a tick that never started a workflow (none expected)
            report.problems.append(f"tick {n}: no workflow history")
            continue
        report.tick_history_events_max = max(report.tick_history_events_max, len(hist.events))
        _scan(hist, report)


def _scan(hist: WorkflowHistory, report: SoakReport) -> None:
    for ev in hist.events:
        if ev.HasField("activity_task_scheduled_event_attributes"):
            a = ev.activity_task_scheduled_event_attributes
            size = _payload_bytes(a.input)
            name = a.activity_type.name
            report.activity_inputs_inspected += 1
            report.activity_input_max_bytes[name] = max(report.activity_input_max_bytes.get(name, 0), size)
        elif ev.HasField("start_child_workflow_execution_initiated_event_attributes"):
            size = _payload_bytes(ev.start_child_workflow_execution_initiated_event_attributes.input)
            report.child_input_max_bytes = max(report.child_input_max_bytes, size)


def _per_1k(a: Sample, b: Sample, value: Callable[[Sample], float]) -> float | None:
    if b.tick <= a.tick:
        return None
    return (value(b) - value(a)) * 1000.0 / (b.tick - a.tick)


def ticks_done(index: Path) -> int:
    """Ticks a golem has done so far: recorded or recorded as failed (0 before its cycle index exists)."""
    if not index.exists():
        return 0
    try:
        with closing(sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=5)) as db:
            done: int = db.execute(
                "SELECT COUNT(*) FROM (SELECT tick FROM cycle_index UNION SELECT tick FROM cycle_failures)").fetchone()[0]
            return done
    except sqlite3.OperationalError:  # the worker is creating it
        return 0


def count_ticks(index: Path, report: SoakReport) -> None:
    """Add one golem's tiers and failed ticks to the report."""
    with closing(sqlite3.connect(index)) as db:
        for tier, n in db.execute("SELECT tier, COUNT(*) FROM cycle_index WHERE run = '' GROUP BY tier"):
            report.tiers[tier] = report.tiers.get(tier, 0) + n
        report.failed_ticks += db.execute("SELECT COUNT(*) FROM cycle_failures").fetchone()[0]


async def check_ticks(client: Client, golem_id: str, index: Path, report: SoakReport) -> None:
    """Every tick of the golem up to its last ran once: a record or a recorded failure (else lost), one tick workflow
    execution and one record per tick (else doubled)."""
    with closing(sqlite3.connect(index)) as db:
        recorded = {t for (t,) in db.execute("SELECT tick FROM cycle_index UNION SELECT tick FROM cycle_failures")}
        twice = {t for (t,) in db.execute("SELECT tick FROM cycle_index GROUP BY tick HAVING COUNT(*) > 1")}
    runs: dict[int, int] = {}
    async for wf in client.list_workflows(f"WorkflowId STARTS_WITH '{golem_workflow_id(golem_id)}-tick-'"):
        tail = wf.id.rsplit("-", 1)[1]
        if tail.isdigit():
            runs[int(tail)] = runs.get(int(tail), 0) + 1
    twice |= {t for t, n in runs.items() if n > 1}
    # up to its last recorded tick: the tick after it may still be running when a soak stops on its timeout
    lost = sorted(set(range(max(recorded, default=-1) + 1)) - recorded)
    if lost:
        report.lost_ticks[golem_id] = lost
        report.problems.append(f"golem {golem_id}: {len(lost)} tick(s) lost (no record, no failure): {lost[:10]}")
    if twice:
        report.doubled_ticks[golem_id] = sorted(twice)
        report.problems.append(f"golem {golem_id}: {len(twice)} tick(s) ran twice: {sorted(twice)[:10]}")


async def soak(opts: SoakOptions, out: Path) -> SoakReport:
    from workers.client import connect
    from golem.fleet import FleetRegistry
    from golem.models.config import load_config
    from golem.models.golem import GolemWorkflowInput
    from workers.fleet import start_placed
    from workflows.golem import GolemWorkflow

    plan = ChaosPlan(ticks=opts.ticks, worker_kills=0, execute_kills=0, temporal_restarts=0, anvil_restarts=0,
                     theta=opts.theta, step_timeout=30.0, continue_as_new_ticks=opts.continue_as_new_ticks,
                     scenario=opts.scenario, seed=opts.seed)
    run = ChaosRun(plan, out, golem_id=f"soak{opts.seed}", golems=opts.golems)
    report = SoakReport(golems=opts.golems)
    t0 = time.monotonic()
    try:
        run.start()
        config = load_config(run.config_path)
        supervisor, worker = started(run.supervisor, "supervisor"), started(run.worker, "worker")
        client = await connect(started(run.temporal, "Temporal dev server").address)
        registry = FleetRegistry(run.data)
        ids = run.members or [run.golem_id]
        indexes = {g: registry.layout(g).cycle_index for g in run.members} or {run.golem_id: run._index}
        if run.members:  # each on the host's queue, from its own home under the data dir
            for gid in run.members:
                await start_placed(client, registry, gid, max_ticks=opts.ticks, source="soak")
            _say(f"soak: {len(ids)} golems ({ids[0]} .. {ids[-1]}) started in one worker for {opts.ticks} ticks each "
                 f"at theta {opts.theta:g} s")
        else:
            await client.start_workflow(GolemWorkflow.run, GolemWorkflowInput(config=config, max_ticks=opts.ticks),
                                        id=golem_workflow_id(run.golem_id), task_queue=task_queue(run.golem_id))
            _say(f"soak: golem {golem_workflow_id(run.golem_id)} started for {opts.ticks} ticks at theta {opts.theta:g} s")
        next_sample = 0
        while True:
            supervisor.check()
            counts = [ticks_done(ix) for ix in indexes.values()]
            done = min(counts)  # the slowest golem's: the x axis is ticks of each golem
            if done >= max(next_sample, 1) and worker.pid is not None:
                s = Sample(done, time.monotonic() - t0, rss_mb(worker.pid), data_sizes(run.data),
                           worker_memory_mb(run.metrics_port), all_ticks=sum(counts) if run.members else 0)
                report.samples.append(s)
                _say(f"tick {done}{' (each golem: ' + str(min(counts)) + '..' + str(max(counts)) + ')' if run.members else ''}"
                     f": worker RSS {s.rss_mb:.1f} MB, data dir {s.data_total_mb:.1f} MB")
                next_sample = (done // opts.sample_every + 1) * opts.sample_every
            if done >= opts.ticks:
                break
            if time.monotonic() - t0 > opts.timeout_seconds:
                report.problems.append(f"stopped at tick {done}: the soak's {opts.timeout_seconds:g} s ran out")
                break
            await asyncio.sleep(0.5)
        report.ticks = min(ticks_done(ix) for ix in indexes.values())
        report.ticks_by_golem = {g: ticks_done(ix) for g, ix in indexes.items()} if run.members else {}
        report.wall_seconds = time.monotonic() - t0
        report.worker_restarts = supervisor.restarts("worker")
        for gid in ids:  # each golem completes after its last tick
            for _ in range(300 if report.ticks >= opts.ticks else 0):
                desc = await client.get_workflow_handle(golem_workflow_id(gid)).describe()
                if desc.status is not None and desc.status.name != "RUNNING":
                    break
                await asyncio.sleep(0.2)
        for gid, ix in indexes.items():
            count_ticks(ix, report)
            if run.members:
                await check_ticks(client, gid, ix, report)
        await inspect_histories(client, ids[0], report.ticks - 1, opts, report)
    finally:
        run.stop()
    judge(report, opts)
    return report


def slope_per_1k(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of ys over xs, per 1,000 of x (None with fewer than two distinct xs)."""
    n = len(xs)
    mx, my = sum(xs) / max(n, 1), sum(ys) / max(n, 1)
    sxx = sum((x - mx) ** 2 for x in xs)
    if n < 2 or sxx == 0:
        return None
    return 1000.0 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def judge(report: SoakReport, opts: SoakOptions) -> None:
    after = [s for s in report.samples if s.tick >= opts.warmup_ticks]
    if len(after) >= 2:
        report.rss_growth_mb_per_1k = _per_1k(after[0], after[-1], lambda s: s.rss_mb)
        if report.golems:  # each golem's 1,000 ticks: the slope over all golems' ticks (N golems x 1,000 / N)
            report.rss_growth_mb_per_1k_per_golem = slope_per_1k([float(s.all_ticks) for s in after],
                                                                 [s.rss_mb for s in after])
            mid = (after[0].all_ticks + after[-1].all_ticks) / 2
            late = [s for s in after if s.all_ticks >= mid]
            report.rss_late_mb_per_1k_per_golem = slope_per_1k([float(s.all_ticks) for s in late],
                                                               [s.rss_mb for s in late])
    if opts.golems and opts.max_rss_per_golem_mb and report.rss_growth_mb_per_1k_per_golem is not None \
            and report.rss_growth_mb_per_1k_per_golem > opts.max_rss_per_golem_mb:
        report.problems.append(f"worker RSS grew {report.rss_growth_mb_per_1k_per_golem:.1f} MB per golem per 1,000 "
                               f"ticks (bound {opts.max_rss_per_golem_mb:g})")
    if len(after) >= 2:
        first, last = after[0], after[-1]
        report.data_growth_mb_per_1k = _per_1k(first, last, lambda s: s.golem_data_mb)
        report.data_total_growth_mb_per_1k = _per_1k(first, last, lambda s: s.data_total_mb)
        for part in first.data_mb:
            report.data_growth_by_part_per_1k[part] = _per_1k(first, last, lambda s: s.data_mb[part]) or 0.0
    if not opts.golems and opts.max_rss_growth_mb and report.rss_growth_mb_per_1k is not None \
            and report.rss_growth_mb_per_1k > opts.max_rss_growth_mb:
        report.problems.append(f"worker RSS grew {report.rss_growth_mb_per_1k:.1f} MB per 1,000 ticks "
                               f"(bound {opts.max_rss_growth_mb:g})")
    per_golem = report.data_growth_mb_per_1k / max(report.golems, 1) if report.data_growth_mb_per_1k is not None \
        else None  # with golems: each golem's files, on each golem's ticks
    if opts.max_data_growth_mb and per_golem is not None and per_golem > opts.max_data_growth_mb:
        report.problems.append(f"the golem's data grew {per_golem:.1f} MB per 1,000 ticks "
                               f"({'per golem, ' if report.golems else ''}bound {opts.max_data_growth_mb:g})")
    if opts.max_history_events and report.history_events_max >= opts.max_history_events:
        report.problems.append(f"a GolemWorkflow run has {report.history_events_max} history events "
                               f"(bound {opts.max_history_events})")
    if opts.max_input_kb:
        limit = opts.max_input_kb * 1024
        big = {k: v for k, v in report.activity_input_max_bytes.items() if v >= limit}
        if big:
            report.problems.append("activity inputs of " + ", ".join(f"{k} {v / 1024:.1f} KB" for k, v in big.items())
                                   + f" (bound {opts.max_input_kb:g} KB)")
    if report.ticks < opts.ticks:
        report.problems.append(f"only {report.ticks} of {opts.ticks} ticks ran")


def main(argv: list[str] | None = None) -> int:
    d = SoakOptions()
    p = argparse.ArgumentParser(prog="python -m infra.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--ticks", type=int, default=d.ticks)
    p.add_argument("--theta", type=float, default=d.theta)
    p.add_argument("--scenario", default=d.scenario)
    p.add_argument("--sample-every", type=int, default=d.sample_every)
    p.add_argument("--warmup-ticks", type=int, default=d.warmup_ticks)
    p.add_argument("--inspect-ticks", type=int, default=d.inspect_ticks)
    p.add_argument("--max-rss-growth-mb", type=float, default=d.max_rss_growth_mb, help="per 1,000 ticks; 0: no bound")
    p.add_argument("--max-data-growth-mb", type=float, default=d.max_data_growth_mb, help="per 1,000 ticks; 0: no bound")
    p.add_argument("--max-history-events", type=int, default=d.max_history_events, help="0: no bound")
    p.add_argument("--max-input-kb", type=float, default=d.max_input_kb, help="0: no bound")
    p.add_argument("--golems", type=int, default=d.golems, metavar="N",
                   help="N golems in one fleet worker (golem worker --host), --ticks each; 0: one golem alone")
    p.add_argument("--max-rss-per-golem-mb", type=float, default=d.max_rss_per_golem_mb,
                   help="with --golems: worker RSS growth per golem per 1,000 ticks; 0: no bound")
    p.add_argument("--timeout", type=float, default=d.timeout_seconds, help="seconds; stop and report then")
    p.add_argument("--out", type=Path, help="keep everything here (default: a temporary directory, removed at the end)")
    p.add_argument("--json", type=Path, help="also write the report as JSON here")
    args = p.parse_args(argv)
    if args.ticks < 10 or args.sample_every < 1 or args.golems < 0:
        print("soak: --ticks must be >= 10, --sample-every >= 1 and --golems >= 0", file=sys.stderr)
        return 2
    opts = SoakOptions(ticks=args.ticks, theta=args.theta, scenario=args.scenario, sample_every=args.sample_every,
                       warmup_ticks=args.warmup_ticks, inspect_ticks=args.inspect_ticks,
                       max_rss_growth_mb=args.max_rss_growth_mb, max_data_growth_mb=args.max_data_growth_mb,
                       max_history_events=args.max_history_events, max_input_kb=args.max_input_kb,
                       timeout_seconds=args.timeout, golems=args.golems,
                       max_rss_per_golem_mb=args.max_rss_per_golem_mb)
    out = args.out or Path(tempfile.mkdtemp(prefix="golem-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    stop_on_signals()
    try:
        report = asyncio.run(soak(opts, out))
    except KeyboardInterrupt as stop:
        sweep_children()  # soak()'s finally stopped its stack in order; this kills what that left, naming it
        say(f"soak: stopped ({stop or 'interrupted'}); its stack is stopped, its files are in {out}", err=True)
        return 130
    sweep_children()
    say(report.summary())
    if args.json:
        args.json.write_text(json.dumps({**report.__dict__, "samples": [s.__dict__ for s in report.samples]},
                                        indent=2, default=str))
    if args.out is None:
        shutil.rmtree(out, ignore_errors=True)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
