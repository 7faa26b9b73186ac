"""Golems per worker: N golems in one fleet worker at theta = 30 s (calm path, offline deliberator), for N = 1, 10,
25, 50, 100: tick-start lag p50/p99, missed ticks, worker RSS per golem, CPU per tick; ratios against N = 1 measured
in the same run (the floor: one golem alone in the same worker code).

Each N runs in its own worker process (RSS and CPU are that process's), on one dev server and one Anvil.
Prints figures only, with where the ticks' time went (queue and run times from the histories) and how much CPU the
worker got; it never fails a build. Run: python bench/fleet.py [--sizes 1,10,25] [--ticks 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

THETA = 30.0
FIRST_KEY = 40  # dev accounts 40+: the bench's golems' wallets


def rss_mb() -> float:
    for row in Path("/proc/self/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    return 0.0


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


def write_template(root: Path, rpc_url: str) -> Path:
    import tomli_w

    home = root / "template"
    home.mkdir(parents=True)
    example = Path(__file__).resolve().parents[1] / "examples" / "golem-home"
    for name in ("STRATEGY.md", "HEARTBEAT.md"):
        shutil.copy(example / name, home / name)
    raw = {"golem": {"id": "template", "home": "."}, "chain": {"rpc_url": rpc_url},
           "clock": {"theta_base_seconds": THETA, "theta_min_seconds": THETA, "theta_max_seconds": THETA},
           "probes": {"kill_switch_path": str(root / "no-killswitch")}, "dream": {"forks": False},
           "learning": {"trial": False}}
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    return home


async def one(n: int, ticks: int, address: str, rpc_url: str, deployment: Path, root: Path) -> dict:
    """N golems in this process's fleet worker, each started at its own offset within the first theta."""
    from golem.fleet import FleetRegistry, prepare_home
    from golem.world.devchain import dev_key
    from workers.client import connect
    from workers.fleet import serving, start_placed

    client = await connect(address)
    registry = FleetRegistry(root / f"host-{n}")
    registry.root.mkdir(parents=True)
    shutil.copy(deployment, registry.root / "deployment.json")
    template = write_template(root / f"t-{n}", rpc_url)
    ids = [f"n{n}g{i}" for i in range(n)]  # unique on the one dev server across sizes
    for i, gid in enumerate(ids):
        os.environ[f"GOLEM_BENCH_KEY_{i}"] = dev_key(FIRST_KEY + i)
        prepare_home(registry, gid, template, key_env=f"GOLEM_BENCH_KEY_{i}")
        registry.place(gid, f"bench{n}")
    async with serving(client, registry.root, f"bench{n}", reap_every=3600) as fleet:
        base_rss, t0, c0 = rss_mb(), time.monotonic(), cpu_s()

        async def run(i: int, gid: str) -> None:
            await asyncio.sleep(THETA * i / n)  # spread over the first theta, as golems started at different times
            await (await start_placed(client, registry, gid, max_ticks=ticks)).result()

        await asyncio.gather(*(run(i, g) for i, g in enumerate(ids)))
        cpu, wall, end_rss = cpu_s() - c0, time.monotonic() - t0, rss_mb()
        opened = fleet.opened
    lags, durations, missed = [], [], 0
    for gid in ids:
        runs = {}
        async for wf in client.list_workflows(f"WorkflowId STARTS_WITH 'golem-{gid}-tick-'"):
            runs[int(wf.id.rsplit("-", 1)[1])] = wf
        for t in range(ticks):
            if t in runs and runs[t].close_time is not None:
                durations.append((runs[t].close_time - runs[t].start_time).total_seconds())
        for t in range(1, ticks):
            prev, cur = runs.get(t - 1), runs.get(t)
            if prev is None or cur is None or prev.close_time is None:
                missed += 1
                continue
            # theta counts from a tick's end; a tick that overran theta had the next trigger fall due while it ran
            took = (prev.close_time - prev.start_time).total_seconds()
            due = prev.close_time if took < THETA else prev.start_time
            lag = max((cur.start_time - due).total_seconds() - THETA, 0.0)
            lags.append(lag)
            missed += int(lag // THETA) + max(int(took // THETA) - 1, 0)  # slots that passed with no tick
    where = await breakdown(client, ids)
    return {"n": n, "ticks": n * ticks, "lag_p50": pct(lags, 0.5), "lag_p99": pct(lags, 0.99),
            "missed": missed, "tick_p50": pct(durations, 0.5), "tick_p99": pct(durations, 0.99), "rss_base_mb": base_rss, "rss_end_mb": end_rss,
            "rss_per_golem_mb": (end_rss - base_rss) / n, "cpu_per_tick_ms": cpu / (n * ticks) * 1000,
            "wall_s": wall, "cores": cpu / wall, "opened": opened, "where": where}


async def breakdown(client: Any, ids: list[str]) -> dict[str, Any]:
    """Where the ticks' time went, from their histories: p99 seconds a workflow task or an activity waited on the
    queue (schedule to start: the worker had no slot or no poller free) and ran (start to complete)."""
    from temporalio.api.enums.v1 import EventType as E

    waits: dict[str, list[float]] = {"wft_queue": [], "wft_run": [], "act_queue": [], "act_run": []}
    pairs = {E.EVENT_TYPE_WORKFLOW_TASK_STARTED: ("wft_queue", E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
             E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED: ("wft_run", E.EVENT_TYPE_WORKFLOW_TASK_STARTED),
             E.EVENT_TYPE_ACTIVITY_TASK_STARTED: ("act_queue", E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
             E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: ("act_run", E.EVENT_TYPE_ACTIVITY_TASK_STARTED)}
    by_kind: dict[str, list[float]] = {}
    for gid in ids:
        async for wf in client.list_workflows(f"WorkflowId STARTS_WITH 'golem-{gid}'"):
            at: dict[int, Any] = {}
            kinds: dict[int, str] = {}
            async for ev in client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history_events():
                at[ev.event_id] = ev.event_time.ToDatetime()
                if ev.event_type in pairs:
                    key, before = pairs[ev.event_type]
                    attrs = (ev.workflow_task_started_event_attributes if key == "wft_queue" else
                             ev.workflow_task_completed_event_attributes if key == "wft_run" else
                             ev.activity_task_started_event_attributes if key == "act_queue" else
                             ev.activity_task_completed_event_attributes)
                    ref = attrs.scheduled_event_id if key.endswith("queue") else attrs.started_event_id
                    if ref in at:
                        waits[key].append((at[ev.event_id] - at[ref]).total_seconds())
                        if key == "act_run" and ref in kinds:
                            by_kind.setdefault(kinds[ref], []).append(waits[key][-1])
                if ev.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    kinds[ev.event_id] = ev.activity_task_scheduled_event_attributes.activity_type.name
                elif ev.event_type == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                    kinds[ev.event_id] = kinds.get(ev.activity_task_started_event_attributes.scheduled_event_id, "?")
    out: dict[str, Any] = {f"{k}_{q}": round(pct(v, p), 3) for k, v in waits.items()
                           for q, p in (("p50", 0.5), ("p99", 0.99))}
    out["act_run_p99_by_kind"] = {k: round(pct(v, 0.99), 2) for k, v in
                                  sorted(by_kind.items(), key=lambda kv: -pct(kv[1], 0.99))[:5]}
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1,10,25,50,100")
    p.add_argument("--ticks", type=int, default=3, help="ticks per golem (the first has no lag to measure)")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)
    p.add_argument("--address", help=argparse.SUPPRESS)
    p.add_argument("--rpc", help=argparse.SUPPRESS)
    p.add_argument("--deployment", help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        out = asyncio.run(one(args.one, args.ticks, args.address, args.rpc, Path(args.deployment), Path(args.root)))
        print("RESULT " + json.dumps(out), flush=True)
        os._exit(0)
    asyncio.run(driver([int(x) for x in args.sizes.split(",")], args.ticks))


async def driver(sizes: list[int], ticks: int) -> None:
    from temporalio.testing import WorkflowEnvironment

    from infra.anvil import AnvilProcess, free_port
    from infra.temporal import dev_server_args, search_attribute_keys, temporal_cli
    from infra.world_cache import deploy_or_load
    from golem.chain.web3client import make_web3
    from workers.converter import data_converter

    root = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()), search_attributes=search_attribute_keys(),
        dev_server_extra_args=dev_server_args(), data_converter=data_converter, dev_server_log_level="error")
    anvil = AnvilProcess(port=free_port(), log_path=root / "anvil.log")
    anvil.start()
    rows = []
    try:
        dep, _ = deploy_or_load(make_web3(anvil.rpc_url), anvil.rpc_url)
        dep.save(root / "deployment.json")
        address = env.client.service_client.config.target_host
        child_env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}  # the offline deliberator
        child_env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
        for n in sizes:
            print(f"N = {n}: {n} golems x {ticks} ticks at theta {THETA:g} s ...", flush=True)
            proc = subprocess.run([sys.executable, __file__, "--one", str(n), "--ticks", str(ticks), "--address",
                                   address, "--rpc", anvil.rpc_url, "--deployment", str(root / "deployment.json"),
                                   "--root", str(root)], capture_output=True, text=True, env=child_env)
            found = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if not found:
                print(f"  N = {n} failed:\n{proc.stderr[-2000:]}", flush=True)
                break
            rows.append(json.loads(found[0][len("RESULT "):]))
            print("  " + json.dumps(rows[-1]), flush=True)
    finally:
        anvil.stop()
        await env.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    if not rows:
        return
    floor = rows[0]
    print(f"\nGolems per worker at theta {THETA:g} s (calm path, offline deliberator), one worker process on "
          f"{os.cpu_count()} cores; floor = N = {floor['n']} in the same run")
    print(f"{'N':>4} {'lag p50 s':>10} {'lag p99 s':>10} {'missed':>7} {'tick p99 s':>10} {'RSS/golem MB':>13} "
          f"{'CPU/tick ms':>12}"
          f" {'p99 x floor':>12} {'CPU x floor':>12} {'worker RSS MB':>14} {'cores got':>10}")
    for r in rows:
        print(f"{r['n']:>4} {r['lag_p50']:>10.3f} {r['lag_p99']:>10.3f} {r['missed']:>7} {r['tick_p99']:>10.1f} "
              f"{r['rss_per_golem_mb']:>13.1f} {r['cpu_per_tick_ms']:>12.0f} "
              f"{r['lag_p99'] / max(floor['lag_p99'], 1e-3):>12.1f} "
              f"{r['cpu_per_tick_ms'] / max(floor['cpu_per_tick_ms'], 1e-3):>12.2f} {r['rss_end_mb']:>14.0f}"
              f" {r.get('cores', float('nan')):>10.2f}")
    print("cores got: the worker's CPU seconds over the wall time, on average. A worker needs about N / theta x CPU per "
          "tick of one core; where it got less (a shared machine: the kernel shares CPU between sessions, whatever "
          "their nice), its ticks queued.")


if __name__ == "__main__":
    main()
