"""The chaos run (`make chaos`): a live golem on real parts, under volatile prices, while its processes are killed.

`golem run`'s stack in a throwaway directory with a fast theta; it SIGKILLs the worker (some inside the execute
step's exactly-once windows, via golem/chain/faults.py), the Temporal dev server and Anvil, then checks no tick was
lost or doubled, every record parses, no execution doubled, the nonce matches the journal and the audit chain
verifies. `python -m infra.chaos [--ticks 300] [--worker-kills 15] ... [--keep]`; exits 1 when a check fails.
What each check means: docs/operations/chaos-and-soak.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import tomli_w

from golem.chain import faults
from golem.ids import golem_workflow_id, task_queue
from golem.layout import DataLayout
from golem.world.devchain import ANVIL_ADDRESSES, ANVIL_KEYS
from infra.anvil import AnvilProcess, free_port
from infra.console import say
from infra.supervisor import AnvilChild, ProcessChild, Supervisor, TemporalChild, stop_on_signals, sweep_children
from infra.temporal import TemporalDevServer
from infra.world_cache import GOLEM_KEY_INDEX

if TYPE_CHECKING:
    from eth_typing import ChecksumAddress
    from temporalio.client import Client, WorkflowHandle
    from web3 import Web3
    from web3.types import TxReceipt

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_HOME = REPO / "examples" / "golem-home"


@dataclass
class ChaosPlan:
    ticks: int = 300
    worker_kills: int = 15  # all worker SIGKILLs, the execute ones included
    execute_kills: int = 5  # of those, inside execute (alternating: after sign, after broadcast)
    temporal_restarts: int = 2
    anvil_restarts: int = 1
    theta: float = 0.25  # theta_base_seconds; min is half, max three times
    step_timeout: float = 4.0  # a step that was running in a killed worker is retried after this
    continue_as_new_ticks: int = 50
    scenario: str = "volatile"
    seed: int = 14
    anvil_checkpoint_seconds: float = 1.0
    steer_after_seconds: float = 5.0  # an armed fault no trade reached in this long: steer the golem to trade
    execute_wait_seconds: float = 90.0  # an armed fault that no trade reaches in this long is disarmed
    timeout_seconds: float = 3600.0

    def check(self) -> None:
        if self.ticks < 10:
            raise ValueError(f"ticks must be >= 10 (got {self.ticks})")
        if not 0 <= self.execute_kills <= self.worker_kills:
            raise ValueError(f"execute_kills must be between 0 and worker_kills (got {self.execute_kills})")


@dataclass
class ChaosReport:
    ticks_target: int = 0
    ticks_recorded: int = 0
    ticks_failed: int = 0
    ticks_missing: list[int] = field(default_factory=list)
    ticks_doubled: list[int] = field(default_factory=list)
    records_valid: int = 0
    records_invalid: list[str] = field(default_factory=list)
    tiers: dict[str, int] = field(default_factory=dict)
    actions_executed: int = 0
    actions_sent: int = 0  # executed or failed with a transaction (a revert still spends its nonce)
    intents_journaled: int = 0
    intents_on_chain: int = 0
    intents_rolled_back: int = 0  # mined in blocks that Anvil's crash lost (restored from a checkpoint)
    intents_unsent: list[str] = field(default_factory=list)
    nonce_start: int = 0
    nonce_end: int = 0
    duplicate_nonces: list[int] = field(default_factory=list)
    executed_without_intent: list[str] = field(default_factory=list)
    audit_entries: int = 0
    audit_ok: bool = False
    audit_problems: list[str] = field(default_factory=list)
    worker_kills: int = 0
    worker_kills_after_sign: int = 0
    worker_kills_after_broadcast: int = 0
    execute_arms_unreached: int = 0
    steers: int = 0
    temporal_restarts: int = 0
    anvil_restarts: int = 0
    anvil_blocks_rolled_back: int = 0
    worker_restarts: int = 0
    workflow_status: str = ""
    continued_as_new: int = 0
    recovery_seconds: dict[str, list[float]] = field(default_factory=dict)  # fault kind -> s until the next tick
    wall_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def nonce_delta(self) -> int:
        return self.nonce_end - self.nonce_start

    def summary(self) -> str:
        lines = [
            f"chaos run: {self.ticks_recorded + self.ticks_failed}/{self.ticks_target} ticks in {self.wall_seconds:.0f} s "
            f"({self.ticks_recorded} recorded, {self.ticks_failed} failed and recorded as failed; tiers {self.tiers})",
            f"  faults: worker SIGKILLed {self.worker_kills}x ({self.worker_kills_after_sign} between sign and broadcast, "
            f"{self.worker_kills_after_broadcast} after broadcast; restarted {self.worker_restarts}x), Temporal dev "
            f"server killed+restarted {self.temporal_restarts}x, Anvil killed+restarted {self.anvil_restarts}x "
            f"({self.anvil_blocks_rolled_back} blocks rolled back to its checkpoint); {self.steers} steers",
            f"  ticks lost: {len(self.ticks_missing)}  doubled: {len(self.ticks_doubled)}  records valid: "
            f"{self.records_valid} (invalid {len(self.records_invalid)})  GolemWorkflow {self.workflow_status}, "
            f"continued-as-new {self.continued_as_new}x",
            f"  executions: {self.actions_sent} actions sent ({self.actions_executed} executed, the rest reverted), "
            f"{self.intents_journaled} intents journaled, "
            f"{self.intents_on_chain} on chain, {self.intents_rolled_back} rolled back with Anvil, "
            f"{len(self.intents_unsent)} never sent; nonce delta {self.nonce_delta} "
            f"({self.nonce_start} -> {self.nonce_end}); duplicate nonces {len(self.duplicate_nonces)}",
            f"  audit chain: {'verifies' if self.audit_ok else 'BROKEN'} ({self.audit_entries} entries)",
        ]
        for kind, secs in sorted(self.recovery_seconds.items()):
            if secs:
                srt = sorted(secs)
                lines.append(f"  recovery after {kind}: median {srt[len(srt) // 2]:.1f} s, max {srt[-1]:.1f} s "
                             f"(kill to the next recorded tick, n={len(srt)})")
        if self.execute_arms_unreached:
            lines.append(f"  ({self.execute_arms_unreached} execute fault(s) armed but no trade reached them in time)")
        lines.append("PASS" if not self.problems else "FAIL:\n" + "\n".join(f"  - {p}" for p in self.problems))
        return "\n".join(lines)


FLEET_HOST = "soak"  # the host name of a run with golems > 0


def _say(msg: str) -> None:
    say(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", err=True)


def write_home(home: Path, golem_id: str, rpc_url: str, plan: ChaosPlan, kill_switch: Path) -> Path:
    """The example golem home with a fast clock, pointed at this run's chain."""
    home.mkdir(parents=True, exist_ok=True)
    for name in ("STRATEGY.md", "HEARTBEAT.md"):
        shutil.copy(EXAMPLE_HOME / name, home / name)
    raw = tomllib.loads((EXAMPLE_HOME / "golem.toml").read_text())
    raw["golem"].update(id=golem_id, home=".")
    raw["chain"]["rpc_url"] = rpc_url
    raw["clock"].update(theta_base_seconds=plan.theta, theta_min_seconds=plan.theta / 2,
                        theta_max_seconds=plan.theta * 3, continue_as_new_ticks=plan.continue_as_new_ticks)
    raw["heartbeat"]["step_timeout_seconds"] = plan.step_timeout
    raw["probes"]["kill_switch_path"] = str(kill_switch)
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    return home / "golem.toml"


def _spawn(cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    out = log_path.open("ab")
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)


def _golem_address() -> ChecksumAddress:
    from web3 import Web3

    return Web3.to_checksum_address(ANVIL_ADDRESSES[GOLEM_KEY_INDEX])


def started(part: T | None, what: str) -> T:
    """A part of the stack ChaosRun.start() brings up; None means it was used before the start."""
    if part is None:
        raise RuntimeError(f"chaos run: the {what} is used before start() brought it up")
    return part


class ChaosRun:
    def __init__(self, plan: ChaosPlan, out: Path, golem_id: str | None = None, golems: int = 0) -> None:
        plan.check()
        self.golems = golems  # 0: one golem on its own worker; N: N golems placed on one host worker (the soak's)
        self.members: list[str] = []
        self.plan = plan
        self.out = out
        self.data = out / "data"
        self.logs = DataLayout(self.data).logs
        self.fault_dir = out / "faults"
        self.golem_id = golem_id or f"chaos{plan.seed}"
        self.rng = random.Random(plan.seed)
        self.report = ChaosReport(ticks_target=plan.ticks)
        self.temporal: TemporalDevServer | None = None
        self.temporal_child: TemporalChild | None = None
        self.anvil_child: AnvilChild | None = None
        self.worker: ProcessChild | None = None
        self.metrics_port: int | None = None
        self.supervisor: Supervisor | None = None
        self._index = DataLayout(self.data).cycle_index

    # ── progress ────────────────────────────────────────────────────────────────────────────
    def planned_vs_done(self) -> None:
        """A chaos run that did not inject what it planned has not shown what it claims."""
        r, p = self.report, self.plan
        if r.worker_kills < p.worker_kills:
            r.problems.append(f"only {r.worker_kills} of {p.worker_kills} planned worker kills happened")
        if r.worker_kills_after_sign + r.worker_kills_after_broadcast < p.execute_kills:
            r.problems.append(f"only {r.worker_kills_after_sign + r.worker_kills_after_broadcast} of {p.execute_kills} "
                              "planned kills inside execute happened")
        if r.temporal_restarts < p.temporal_restarts:
            r.problems.append(f"only {r.temporal_restarts} of {p.temporal_restarts} Temporal restarts happened")
        if r.anvil_restarts < p.anvil_restarts:
            r.problems.append(f"only {r.anvil_restarts} of {p.anvil_restarts} Anvil restarts happened")

    def progress(self) -> int:
        """Ticks done so far: recorded or recorded as failed."""
        if not self._index.exists():
            return 0
        try:
            with closing(sqlite3.connect(f"file:{self._index}?mode=ro", uri=True, timeout=5)) as db:
                done: int = db.execute(
                    "SELECT COUNT(*) FROM (SELECT tick FROM cycle_index UNION SELECT tick FROM cycle_failures)"
                ).fetchone()[0]
                return done
        except sqlite3.OperationalError:  # the worker is creating it
            return 0

    # ── the stack ──────────────────────────────────────────────────────────────────────────
    def start(self) -> None:
        from infra.stack import ensure_world

        self.logs.mkdir(parents=True, exist_ok=True)
        self.fault_dir.mkdir(parents=True, exist_ok=True)
        self.temporal = TemporalDevServer(DataLayout(self.data).temporal_db, port=free_port(), ui_port=free_port(),
                                          log_path=self.logs / "temporal.log", headless=True)
        self.temporal_child = TemporalChild(self.temporal)
        self.temporal_child.start()
        anvil = AnvilProcess(port=free_port(), state_path=DataLayout(self.data).anvil_state,
                             log_path=self.logs / "anvil.log")
        self.anvil_child = AnvilChild(anvil, checkpoint_seconds=self.plan.anvil_checkpoint_seconds)
        self.anvil_child.start()
        self.config_path = write_home(self.out / "home", self.golem_id, anvil.rpc_url, self.plan,
                                      self.out / "killswitch")
        ensure_world(anvil.rpc_url, self.data)
        from golem.chain.web3client import make_web3

        self.w3 = make_web3(anvil.rpc_url)
        self.report.nonce_start = self.w3.eth.get_transaction_count(_golem_address())
        sim_cmd = [sys.executable, "-m", "golem.world.simulator", "--rpc", anvil.rpc_url,
                   "--deployment", str(DataLayout(self.data).deployment), "--scenario", self.plan.scenario,
                   "--interval", str(max(self.plan.theta / 2, 0.1)), "--seed", str(self.plan.seed)]
        sim = ProcessChild("simulator", lambda: _spawn(sim_cmd, self.logs / "simulator.log"),
                           self.logs / "simulator.log")
        env = dict(os.environ, GOLEM_TEMPORAL_ADDRESS=self.temporal.address, GOLEM_DATA=str(self.data),
                   GOLEM_HOME=str(self.out / "home"), **{faults.ENV: str(self.fault_dir)})
        env["GOLEM_PRIVATE_KEY"] = ANVIL_KEYS[GOLEM_KEY_INDEX]  # the worker's env only
        # its own metrics port: the default (9464) belongs to the owner's `golem run` on this machine
        env.setdefault("GOLEM_METRICS_PORT", str(free_port()))
        self.metrics_port = int(env["GOLEM_METRICS_PORT"]) or None  # the soak reads the worker's memory split there
        worker_cmd = [sys.executable, "-m", "cli", "worker", "--home", str(self.out / "home"),
                      "--data", str(self.data)]
        if self.golems:  # N golems with their own homes, data dirs and wallets, served by one host worker
            from golem.models.config import load_config
            from infra.stack import fleet_key, fleet_members

            self.members = fleet_members(load_config(self.config_path), self.out / "home", self.data, self.golems,
                                         anvil.rpc_url, host=FLEET_HOST)
            worker_cmd += ["--host", FLEET_HOST]
            env.update({f"GOLEM_FLEET_KEY_{i}": fleet_key(i) for i in range(1, self.golems + 1)})
        self.worker = ProcessChild("worker", lambda: _spawn(worker_cmd, self.logs / "worker.log", env=env),
                                   self.logs / "worker.log", stop_timeout=15)
        sim.start()
        self.worker.start()
        # Many crashes are the point here: never give up, restart quickly.
        self.supervisor = Supervisor([self.temporal_child, self.anvil_child, sim, self.worker], crash_limit=10_000,
                                     window_seconds=60, backoff_initial=0.2, backoff_max=1.0, say=_say)

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop()
        elif self.anvil_child is not None:
            self.anvil_child.stop()
        if self.temporal is not None:
            self.temporal.stop()

    # ── faults ──────────────────────────────────────────────────────────────────────────────
    def schedule(self) -> list[tuple[int, str]]:
        """(tick to fire at, fault) sorted by tick: spread over 5 %..90 % of the run."""
        n, p = self.plan.ticks, self.plan
        lo, hi = max(2, n // 20), max(3, n * 17 // 20)
        events: list[tuple[int, str]] = []
        for i in range(p.temporal_restarts):
            events.append((lo + (hi - lo) * (i + 1) // (p.temporal_restarts + 1) + self.rng.randint(0, 3), "temporal"))
        for i in range(p.anvil_restarts):
            events.append((lo + (hi - lo) * (2 * i + 1) // (2 * p.anvil_restarts) + self.rng.randint(0, 3), "anvil"))
        # Kills inside execute wait for a trade (or a steer) to reach the armed point: they go in the first half,
        # so a fast run cannot end before one arrives.
        mid = lo + (hi - lo) // 2
        for i in range(p.execute_kills):
            events.append((self.rng.randint(lo, mid), "signed" if i % 2 == 0 else "broadcast"))
        for _ in range(p.worker_kills - p.execute_kills):
            events.append((self.rng.randint(lo, hi), "worker"))
        return sorted(events)

    async def _steer(self, handle: WorkflowHandle[Any, Any], message: str) -> None:
        payload = {"id": f"chaos-steer-{self.report.steers + 1}", "message": message, "severity": "medium",
                   "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            await handle.signal("steer", payload)
            self.report.steers += 1
            _say(f"steered: {message!r} (to bring a trade to the armed fault point)")
        except Exception as err:  # the dev server may be restarting: the next arm tries again
            _say(f"steer failed: {err}")

    def _kill_worker(self, why: str) -> None:
        worker = started(self.worker, "worker")
        pid = worker.pid
        if pid is None or worker.exit_code() is not None or worker.proc is None:
            return
        os.kill(pid, signal.SIGKILL)
        worker.proc.wait()
        self.report.worker_kills += 1
        self._last_fault_at = self.progress()  # the next fault waits for a tick by the restarted worker
        self._pending_recovery.append(("worker kill", time.monotonic(), self._last_fault_at))
        _say(f"SIGKILL worker pid {pid} ({why})")

    def _kill_temporal(self) -> None:
        """SIGKILL the dev server and let supervision bring it back (on the same SQLite file and ports)."""
        temporal, supervisor = started(self.temporal, "Temporal dev server"), started(self.supervisor, "supervisor")
        proc = started(temporal.proc, "Temporal dev server's process")
        restarts = supervisor.restarts("temporal")
        os.killpg(proc.pid, signal.SIGKILL)
        self._pending_recovery.append(("Temporal restart", time.monotonic(), self.progress()))
        _say(f"SIGKILL Temporal dev server pid {proc.pid}")
        deadline = time.monotonic() + 90
        while supervisor.restarts("temporal") == restarts:
            supervisor.check()
            if time.monotonic() > deadline:
                raise RuntimeError("the supervisor did not restart the Temporal dev server within 90 s; see "
                                   + str(self.logs / "temporal.log"))
            time.sleep(0.1)
        self.report.temporal_restarts += 1
        restarted = started(temporal.proc, "Temporal dev server's process")
        _say(f"Temporal dev server restarted by supervision on the same SQLite (pid {restarted.pid})")

    def _kill_anvil(self) -> None:
        anvil, supervisor = started(self.anvil_child, "Anvil"), started(self.supervisor, "supervisor")
        before = self.w3.eth.block_number
        restores = anvil.restored_from_checkpoint
        pid = started(anvil.pid, "Anvil's pid")
        os.kill(pid, signal.SIGKILL)
        self._pending_recovery.append(("Anvil restart", time.monotonic(), self.progress()))
        _say(f"SIGKILL Anvil pid {pid} at block {before}")
        deadline = time.monotonic() + 60
        while anvil.restored_from_checkpoint == restores or not anvil.anvil.running:
            supervisor.check()
            if time.monotonic() > deadline:
                raise RuntimeError("Anvil did not come back within 60 s; see " + str(self.logs / "anvil.log"))
            time.sleep(0.1)
        after = self.w3.eth.block_number
        self.report.anvil_restarts += 1
        self.report.anvil_blocks_rolled_back += max(0, before - after)
        self._rollbacks.append(after)
        _say(f"Anvil restored from its checkpoint at block {after} ({before - after} blocks rolled back)")

    # ── the run ─────────────────────────────────────────────────────────────────────────────
    async def run(self) -> ChaosReport:
        from golem.models.config import load_config
        from golem.models.golem import GolemWorkflowInput
        from workers.client import connect
        from workflows.golem import GolemWorkflow

        t0 = time.monotonic()
        self._rollbacks: list[int] = []
        self._pending_recovery: list[tuple[str, float, int]] = []
        self._last_fault_at = 0
        self.start()
        temporal, supervisor = started(self.temporal, "Temporal dev server"), started(self.supervisor, "supervisor")
        worker = started(self.worker, "worker")
        config = load_config(self.config_path)
        client = await connect(temporal.address)
        wid = golem_workflow_id(self.golem_id)
        handle = await client.start_workflow(GolemWorkflow.run, GolemWorkflowInput(config=config, max_ticks=self.plan.ticks),
                                             id=wid, task_queue=task_queue(self.golem_id))
        events = self.schedule()
        _say(f"golem {wid} started for {self.plan.ticks} ticks; {len(events)} faults planned at ticks "
             f"{[t for t, _ in events]}")
        armed: tuple[str, float, int] | None = None  # (event, armed at, steers sent for it)
        last_progress, last_change = -1, time.monotonic()
        while True:
            supervisor.check()
            done = self.progress()
            now = time.monotonic()
            for item in list(self._pending_recovery):
                kind, at, before = item
                if done > before:
                    self.report.recovery_seconds.setdefault(kind, []).append(round(now - at, 2))
                    self._pending_recovery.remove(item)
            if done != last_progress:
                if done // 25 != last_progress // 25:
                    _say(f"{done}/{self.plan.ticks} ticks")
                last_progress, last_change = done, now
            if done >= self.plan.ticks:
                break
            if now - t0 > self.plan.timeout_seconds:
                raise RuntimeError(f"the chaos run did not finish {self.plan.ticks} ticks in "
                                   f"{self.plan.timeout_seconds:g} s (at {done}); see {self.logs}")
            if now - last_change > 300:
                raise RuntimeError(f"no tick for 300 s (at {done}); see {self.logs}")
            if armed is not None:
                event, at, steered = armed
                if now - at > self.plan.steer_after_seconds * (steered + 1) and steered < 3:
                    # No trade came along on its own: ask for one, as an owner would. The example STRATEGY.md
                    # repays 25 % of the debt on "repay" (approve + repay: two signed transactions); a repay is
                    # protective, so the gas gate that defers routine swaps in a volatile market never holds
                    # it back. Medium severity: a high one would cancel the write. Again if it did not come.
                    await self._steer(handle, "repay")
                    armed = (event, at, steered + 1)
                info = faults.paused(self.fault_dir, event)
                if info is not None:
                    if info["pid"] == worker.pid:
                        self._kill_worker(f"paused in execute after {event}: tick {info['tick']} action "
                                          f"{info['action_index']} tx {info['tx_hash'][:12]} nonce {info['nonce']}")
                        if event == "signed":
                            self.report.worker_kills_after_sign += 1
                        else:
                            self.report.worker_kills_after_broadcast += 1
                    armed = None
                elif now - at > self.plan.execute_wait_seconds:
                    (self.fault_dir / f"arm-{event}").unlink(missing_ok=True)
                    self.report.execute_arms_unreached += 1
                    _say(f"no trade reached the armed '{event}' fault in {self.plan.execute_wait_seconds:g} s; disarmed")
                    armed = None
            elif events and done >= events[0][0] and done > self._last_fault_at and worker.exit_code() is None:
                # (a tick since the last fault: the restarted worker is serving again, not still importing)
                self._last_fault_at = done
                _, kind = events.pop(0)
                if kind == "worker":
                    await asyncio.sleep(self.rng.uniform(0, self.plan.theta))  # anywhere within a tick
                    self._kill_worker(f"random, at tick ~{self.progress()}")
                elif kind in faults.EVENTS:
                    faults.arm(self.fault_dir, kind)
                    armed = (kind, now, 0)
                    _say(f"armed the execute fault point '{kind}' at tick ~{done}")
                elif kind == "temporal":
                    self._kill_temporal()
                elif kind == "anvil":
                    self._kill_anvil()
            await asyncio.sleep(0.05)

        # The last tick is recorded inside its workflow; the golem then completes.
        for _ in range(600):
            supervisor.check()
            try:
                desc = await handle.describe()
                if desc.status is not None and desc.status.name != "RUNNING":
                    break
            except Exception:  # the client reconnecting after a restart
                pass
            await asyncio.sleep(0.1)
        desc = await client.get_workflow_handle(wid).describe()
        self.report.workflow_status = desc.status.name if desc.status else "?"
        self.report.continued_as_new = await _count_runs(client, wid)
        self.report.worker_restarts = supervisor.restarts("worker")
        self.report.wall_seconds = time.monotonic() - t0
        self.stop_workers_only()
        self.planned_vs_done()
        self.verify()
        self.stop()
        return self.report

    def stop_workers_only(self) -> None:
        """Stop the worker and the simulator (the chain stays up for the checks)."""
        for name in ("worker", "simulator"):
            w = started(self.supervisor, "supervisor")._watches[name]
            w.child.stop()

    # ── the checks ─────────────────────────────────────────────────────────────────────────
    def verify(self) -> None:
        from golem.chain.journal import TxJournal
        from golem.models.record import DecisionCycleRecord
        from golem.safety.audit import AuditLog

        r = self.report
        n = self.plan.ticks
        with closing(sqlite3.connect(self._index)) as db:
            rows = db.execute("SELECT tick, run, tier FROM cycle_index").fetchall()
            failed = {t for (t,) in db.execute(
                "SELECT tick FROM cycle_failures WHERE tick NOT IN (SELECT tick FROM cycle_index)")}
        firsts = [t for t, run, _ in rows if run == ""]
        recorded = set(firsts)
        r.ticks_recorded = len(recorded)
        r.ticks_failed = len(failed)
        r.tiers = {}
        for _, run, tier in rows:
            if run == "":
                r.tiers[tier] = r.tiers.get(tier, 0) + 1
        r.ticks_missing = sorted(set(range(n)) - recorded - failed)
        r.ticks_doubled = sorted({t for t, run, _ in rows if run != ""} | {t for t in firsts if firsts.count(t) > 1})
        extra = sorted((recorded | failed) - set(range(n)))
        if r.ticks_missing:
            r.problems.append(f"ticks lost (neither recorded nor recorded as failed): {r.ticks_missing}")
        if r.ticks_doubled:
            r.problems.append(f"ticks run twice: {r.ticks_doubled}")
        if extra:
            r.problems.append(f"ticks beyond the {n} asked for: {extra}")
        if r.workflow_status != "COMPLETED":
            r.problems.append(f"GolemWorkflow ended {r.workflow_status}, not COMPLETED")

        records: list[DecisionCycleRecord] = []
        for path in sorted(DataLayout(self.data).cycles.glob("cycle-*.json")):
            try:
                records.append(DecisionCycleRecord.model_validate_json(path.read_text()))
                r.records_valid += 1
            except ValueError as e:
                r.records_invalid.append(f"{path.name}: {str(e).splitlines()[0]}")
        if r.records_invalid:
            r.problems.append(f"records that do not parse: {r.records_invalid[:5]}")
        if r.records_valid != len(rows):
            r.problems.append(f"{len(rows)} index rows but {r.records_valid} valid record files")

        journal = TxJournal(DataLayout(self.data).tx_journal)
        intents = _all_intents(journal.path)
        r.intents_journaled = len(intents)
        nonces = [i["nonce"] for i in intents]
        r.duplicate_nonces = sorted({x for x in nonces if nonces.count(x) > 1})
        if r.duplicate_nonces:
            r.problems.append(f"two journaled intents share a nonce: {r.duplicate_nonces}")
        hashes = {i["tx_hash"] for i in intents}
        rollback_floor = min(self._rollbacks) if self._rollbacks else None
        for i in intents:
            receipt = _receipt(self.w3, i["tx_hash"])
            if receipt is not None:
                r.intents_on_chain += 1
            elif rollback_floor is not None and i["block_number"] is not None and i["block_number"] > rollback_floor:
                r.intents_rolled_back += 1
            else:
                r.intents_unsent.append(f"tick {i['tick']} action {i['action_index']} call {i['call_index']} "
                                        f"{i['status']} {i['tx_hash'][:12]}")
        if r.intents_unsent:
            r.problems.append(f"journaled intents the chain never saw: {r.intents_unsent[:5]}")
        r.nonce_end = self.w3.eth.get_transaction_count(_golem_address())
        if r.nonce_delta != r.intents_on_chain:
            r.problems.append(f"account nonce rose by {r.nonce_delta} but {r.intents_on_chain} journaled intents are "
                              "on chain")
        for rec in records:
            for a in rec.actions or []:
                if a.status.value == "executed":
                    r.actions_executed += 1
                if a.tx_hash:
                    r.actions_sent += 1
                    if a.tx_hash not in hashes:
                        r.executed_without_intent.append(f"tick {rec.tick} action {a.action_index} {a.tx_hash}")
        if r.executed_without_intent:
            r.problems.append(f"actions with a transaction the journal does not hold: {r.executed_without_intent[:5]}")

        audit = AuditLog(DataLayout(self.data).audit).verify()
        r.audit_ok = audit.ok
        r.audit_entries = audit.entries
        r.audit_problems = list(audit.problems)
        if not audit.ok:
            r.problems.append(f"audit chain broken: {audit.problems[:3]}")


def _all_intents(path: Path) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(path)) as db:
        db.row_factory = sqlite3.Row
        return [dict(x) for x in db.execute("SELECT * FROM tx_intents ORDER BY nonce")]


def _receipt(w3: Web3, tx_hash: str) -> TxReceipt | None:
    from eth_typing import HexStr
    from web3.exceptions import TransactionNotFound

    try:
        return w3.eth.get_transaction_receipt(HexStr(tx_hash))
    except TransactionNotFound:
        return None


async def _count_runs(client: Client, wid: str) -> int:
    """How many times GolemWorkflow continued as new (its closed runs with that status)."""
    n = 0
    async for wf in client.list_workflows(f"WorkflowId = '{wid}'"):
        if wf.status is not None and wf.status.name == "CONTINUED_AS_NEW":
            n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m infra.chaos", description=__doc__.split("\n\n")[0])
    d = ChaosPlan()
    p.add_argument("--ticks", type=int, default=d.ticks)
    p.add_argument("--worker-kills", type=int, default=d.worker_kills)
    p.add_argument("--execute-kills", type=int, default=d.execute_kills)
    p.add_argument("--temporal-restarts", type=int, default=d.temporal_restarts)
    p.add_argument("--anvil-restarts", type=int, default=d.anvil_restarts)
    p.add_argument("--theta", type=float, default=d.theta)
    p.add_argument("--scenario", default=d.scenario)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out", type=Path, help="keep everything here (default: a temporary directory, removed on a pass)")
    p.add_argument("--json", action="store_true", help="print the report as JSON too")
    args = p.parse_args(argv)
    plan = ChaosPlan(ticks=args.ticks, worker_kills=args.worker_kills, execute_kills=args.execute_kills,
                     temporal_restarts=args.temporal_restarts, anvil_restarts=args.anvil_restarts, theta=args.theta,
                     scenario=args.scenario, seed=args.seed)
    try:
        plan.check()
    except ValueError as e:
        print(f"chaos: {e}", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="golem-chaos-"))
    out.mkdir(parents=True, exist_ok=True)
    run = ChaosRun(plan, out)
    stop_on_signals()
    try:
        report = asyncio.run(run.run())
    except KeyboardInterrupt as stop:
        run.stop()
        sweep_children()
        say(f"chaos: stopped ({stop or 'interrupted'}); its stack is stopped, its files are in {out}", err=True)
        return 130
    finally:
        run.stop()
        sweep_children()
    print(report.summary(), flush=True)
    if args.json:
        print(json.dumps(report.__dict__, indent=2, default=str))
    if report.problems:
        print(f"everything is kept in {out}", flush=True)
        return 1
    if args.out is None:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
