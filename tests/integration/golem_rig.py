"""A whole golem on real parts for integration tests: its own Anvil + deployed world, a golem home and
data dir, the market simulator, and a worker (in-process or as a killable subprocess)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w
from temporalio.client import Client

from golem.chain.contracts import Deployment
from golem.chain.web3client import make_web3
from golem.life.cycle_store import CycleStore
from golem.models.config import GolemConfig, load_config
from golem.models.golem import GolemWorkflowInput
from infra.world_cache import deploy_or_load
from golem.world.simulator.market import MarketSimulator
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS, AnvilProcess, free_port
from workers.config_versions import save_version, start_info, version_of
from workers.services import GolemServices
from workers.worker import build_worker
from workflows.golem import GolemWorkflow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_HOME = REPO / "examples" / "golem-home"
GOLEM_KEY = ANVIL_KEYS[2]


@dataclass
class GolemRig:
    golem_id: str
    anvil: AnvilProcess
    deployment: Deployment
    home: Path
    data_dir: Path
    config: GolemConfig
    scenario: str
    _sim_stop: threading.Event = field(default_factory=threading.Event)
    _sim_thread: threading.Thread | None = None
    sim_steps: int = 0

    @property
    def w3(self):
        return make_web3(self.anvil.rpc_url)

    def services(self) -> GolemServices:
        return GolemServices(self.config, self.data_dir, private_key=GOLEM_KEY)

    def claude_services(self, handler) -> tuple[GolemServices, str]:
        """The rig's services deciding with the real anthropic SDK, its HTTP answered by `handler` (a fake Messages
        API at the transport); returns them and why that deliberator was chosen."""
        import httpx2

        from golem.deliberators import select_deliberator

        services = self.services()
        deliberator, why = select_deliberator(
            self.config, {"ANTHROPIC_API_KEY": "sk-test-not-a-key"}, home=self.home, data_dir=self.data_dir,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
        services.use_deliberator(deliberator, why)
        return services, why

    def simulator(self, **kw) -> MarketSimulator:
        return MarketSimulator(self.w3, self.deployment, ANVIL_KEYS[1], ANVIL_KEYS[0], self.scenario, seed=7, **kw)

    def start_market(self, interval: float, max_steps: int | None = None, per_tick: bool = False, **kw) -> None:
        """Step the market simulator on a thread, like the `golem run` stack's simulator process.

        per_tick: one market step per recorded tick, so a scenario unfolds at the golem's pace
        whatever the machine's speed (the first ticks are slower while the embedder loads)."""
        sim = self.simulator(**kw)
        store = CycleStore(self.data_dir)

        def loop():
            while not self._sim_stop.is_set() and (max_steps is None or self.sim_steps < max_steps):
                if per_tick and store.count() + len(store.failures(1000)) <= self.sim_steps:
                    self._sim_stop.wait(0.05)
                    continue
                sim.step()
                self.sim_steps += 1
                if not per_tick:
                    self._sim_stop.wait(interval)

        self._sim_thread = threading.Thread(target=loop, daemon=True)
        self._sim_thread.start()

    def stop(self) -> None:
        self._sim_stop.set()
        if self._sim_thread:
            self._sim_thread.join(timeout=10)
        self.anvil.stop()

    def workflow_input(self, max_ticks: int | None, versioned: bool = True) -> GolemWorkflowInput:
        # As `golem run` starts a golem: on a config version (golem.toml + STRATEGY.md) kept on the data dir.
        # versioned=False: as a golem started before versions existed (its ticks read STRATEGY.md from the home).
        if not versioned:
            return GolemWorkflowInput(config=self.config, max_ticks=max_ticks)
        local = version_of(self.config)
        save_version(self.data_dir, local)
        return GolemWorkflowInput(config=self.config, max_ticks=max_ticks,
                                  config_info=start_info(local, 0, "test rig", None))

    async def start_golem(self, client: Client, max_ticks: int | None, versioned: bool = True):
        return await client.start_workflow(
            GolemWorkflow.run, self.workflow_input(max_ticks, versioned), id=f"golem-{self.golem_id}",
            task_queue=f"golem-{self.golem_id}",
        )

    def worker_subprocess(self, temporal_address: str) -> subprocess.Popen:
        env = dict(os.environ, GOLEM_PRIVATE_KEY=GOLEM_KEY, GOLEM_TEMPORAL_ADDRESS=temporal_address)
        log = (self.data_dir / "worker.log").open("ab")
        return subprocess.Popen(
            [sys.executable, "-m", "cli", "--home", str(self.home), "--data", str(self.data_dir), "worker"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
        )


def write_golem_home(tmp: Path, golem_id: str, rpc_url: str, dep: Deployment, *, theta: float = 0.3,
                     **config_overrides) -> tuple[Path, Path]:
    """tmp/home (golem.toml at a fast theta + the example STRATEGY.md, HEARTBEAT.md) and tmp/data (the address
    book) for a golem on this chain."""
    home = tmp / "home"
    data = tmp / "data"
    home.mkdir()
    data.mkdir()
    dep.save(data / "deployment.json")
    for name in ("STRATEGY.md", "HEARTBEAT.md"):
        shutil.copy(EXAMPLE_HOME / name, home / name)
    raw = {
        "golem": {"id": golem_id, "home": "."},
        "chain": {"rpc_url": rpc_url},
        "clock": {"theta_base_seconds": theta, "theta_min_seconds": theta / 2, "theta_max_seconds": theta * 3,
                  "delta_theta_ticks": 10, "continue_as_new_ticks": 12, "dream_every_ticks": 15},
        "heartbeat": {"step_timeout_seconds": 10.0},
        "probes": {"kill_switch_path": str(tmp / "killswitch")},
        # Dream phases run their live-chain checks but start no Anvil forks unless a test asks: a fork
        # per scenario would add seconds to every rig test that reaches a dream.
        "dream": {"forks": False},
        # A learned rule's trial runs two backtests (minutes): only the tests of it switch it on
        # (tests/integration/test_learning_trial.py).
        "learning": {"trial": False},
    }
    for section, values in config_overrides.items():
        raw.setdefault(section, {}).update(values)
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    return home, data


def make_rig(
    tmp: Path, golem_id: str, scenario: str = "calm", *, theta: float = 0.3, anvil_state: bool = False,
    **config_overrides,
) -> GolemRig:
    anvil = AnvilProcess(port=free_port(), log_path=tmp / "anvil.log",
                         state_path=tmp / "anvil-state.json" if anvil_state else None)
    anvil.start()
    w3 = make_web3(anvil.rpc_url)
    dep, _ = deploy_or_load(w3, anvil.rpc_url)
    home, data = write_golem_home(tmp, golem_id, anvil.rpc_url, dep, theta=theta, **config_overrides)
    return GolemRig(golem_id, anvil, dep, home, data, load_config(home / "golem.toml"), scenario)


@contextlib.asynccontextmanager
async def in_process_worker(client: Client, rig: GolemRig, services: GolemServices | None = None, **kw):
    worker = build_worker(client, services or rig.services(), **kw)
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        await worker.shutdown()
        with contextlib.suppress(Exception):
            await task


def golem_observation(w3, world: Deployment):
    """An Observation of the golem account's chain state (what the observe step would read, without probes)."""
    from golem.chain.reader import read_snapshot
    from golem.models.observation import Observation

    return Observation(snapshot=read_snapshot(w3, world, ANVIL_ADDRESSES[2]))


def record_where(store: CycleStore, predicate, n: int = 20):
    """The newest of the last n DecisionCycleRecords that satisfies predicate, or None (for wait_for)."""
    for row in store.recent(n):
        rec = store.load(row["tick"])
        if predicate(rec):
            return rec
    return None


async def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    """Poll predicate (sync or async) until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


async def wait_for_record(store: CycleStore, predicate, what: str, *, timeout: float = 60, n: int = 20):
    """Wait until one of the last n DecisionCycleRecords satisfies predicate; return the newest such."""
    return await wait_for(lambda: record_where(store, predicate, n), timeout, what)


def tool_results(body: dict) -> list[dict]:
    """The tool_result blocks of a Messages API request's last message (what the golem sent back to the model)."""
    last = body["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
