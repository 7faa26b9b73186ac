"""A backtest reads only the path's clock: the same CSV gives the same ticks, tiers, actions, blocks and end state on
a slow machine as on a fast one, and a run never starts on an earlier run's data (docs/how-to/backtesting.md)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tomllib
from pathlib import Path

import pytest
import tomli_w
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from golem.backtest.models import PathRow
from golem.chain.web3client import make_web3
from golem.world.deploy import deploy_world
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS, AnvilProcess, free_port

from tests.integration.test_backtest import REPO, T0, _path_csv

pytestmark = pytest.mark.integration

SLOW_S = 0.25  # added before every activity (local ones too): a machine many times slower than this one idle


class _Slow(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput):
        await asyncio.sleep(SLOW_S)
        return await self.next.execute_activity(input)


class SlowMachine(Interceptor):
    """Every step of the golem takes SLOW_S longer, as on a loaded machine; nothing else changes."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Slow(next)


def _home(tmp_path: Path) -> Path:
    """Theta 90 s on 60-s rows (gamma pulses between ticks), a delta cycle every 8 ticks and a dream every 12 with a
    1 s budget (the slow run's phases alone take longer)."""
    home = tmp_path / "home"
    shutil.copytree(REPO / "examples" / "golem-home", home)
    raw = tomllib.loads((home / "golem.toml").read_text())
    raw["clock"].update(theta_base_seconds=90.0, theta_min_seconds=90.0, theta_max_seconds=90.0,
                        gamma_min_seconds=20.0, gamma_max_seconds=30.0, delta_theta_ticks=8, dream_every_ticks=12)
    raw.setdefault("dream", {}).update(min_gap_ticks=12, budget_seconds=1.0, forks=False)
    raw.setdefault("learning", {})["trial"] = False  # a trial's child backtests would only slow this test
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    return home


def test_a_slow_machine_gives_the_same_ticks_actions_blocks_and_state(tmp_path, monkeypatch):
    """The same 30-row crash path twice: as fast as this machine goes, and with every activity 0.25 s slower. Every
    mark (tick, tier, regime, prediction error, actions with amounts and blocks, equity, HF, gas) and the whole end
    state (clock, gamma, affect, vitality, learned gating, dream and delta results) must be equal."""
    from golem.backtest.path import load_path
    from infra.backtest import BacktestOptions, _backtest
    import workers.worker

    real_build = workers.worker.build_worker
    slow = {"on": False}

    def build_worker(client, services, interceptors=(), **kw):
        extra = [SlowMachine()] if slow["on"] else []
        return real_build(client, services, interceptors=[*interceptors, *extra], **kw)

    monkeypatch.setattr(workers.worker, "build_worker", build_worker)
    home = _home(tmp_path)
    csv = _path_csv(tmp_path / "crash.csv", rows=30)
    runs = {}
    for name in ("fast", "slow"):
        slow["on"] = name == "slow"
        opts = BacktestOptions(path=csv, home=home, out=tmp_path / name, progress=False)
        [runs[name]] = asyncio.run(_backtest(opts, load_path(csv)))
    fast, slowed = runs["fast"], runs["slow"]
    ticks = [m for m in fast.marks if m.tick is not None]
    assert slowed.info.wall_seconds > fast.info.wall_seconds + SLOW_S * 2 * len(ticks), "the slow run was slower"
    assert any(a.block is not None for m in ticks for a in m.actions), "the golem acted on chain"
    for a, b in zip(fast.marks, slowed.marks, strict=True):
        assert a.model_dump(exclude={"wall_ms"}) == b.model_dump(exclude={"wall_ms"}), f"row {a.row}"
    assert fast.info.confirmation_blocks == slowed.info.confirmation_blocks > 0
    end = [r.final_state for r in (fast, slowed)]
    assert end[0].last_delta_tick > 0 and end[0].gamma.resolved > 0
    assert end[0].last_dream and "complete" in end[0].last_dream, end[0].last_dream
    assert end[0].model_dump(mode="json") == end[1].model_dump(mode="json")


def _world(tmp_path: Path, name: str):
    anvil = AnvilProcess(port=free_port(), log_path=tmp_path / f"{name}.log",
                         extra_args=["--timestamp", str(T0 - 3600)])
    anvil.start()
    w3 = make_web3(anvil.rpc_url)
    w3.provider.make_request("anvil_setBlockTimestampInterval", [0])
    dep = deploy_world(w3, ANVIL_KEYS[0], ANVIL_ADDRESSES[2], ANVIL_ADDRESSES[1], golem_key=ANVIL_KEYS[2],
                       rpc_url=anvil.rpc_url)
    return anvil, w3, dep


def test_rows_start_at_the_same_blocks_however_the_sends_shared_blocks(tmp_path, monkeypatch):
    """A row's setup takes as many blocks as its sends were mined in: the driver mines them in one (a stable's top-up
    and the liquidator's round in their own), an automining node in as many as their arrival allowed. Two worlds at
    the two extremes (every send of a row in one block; each send mined alone), the second's deployment three blocks
    longer: every row must end at the same block, time and base fee in both, so the golem's transactions land in the
    same blocks."""
    from golem.backtest.replay import ReplayDriver
    from golem.world import deploy
    from golem.world.rpc import lean_web3
    from golem.world.simulator import trader

    rows = [PathRow(tick=i, timestamp=T0 + 60 * i, pool_price=p, oracle_price=o, gas_gwei=2.0, volume_usd=5000.0)
            for i, (p, o) in enumerate([(2000.0, 2000.0), (1900.0, 1950.0), (1700.0, 1700.0), (1750.0, 1720.0)])]

    def one_per_tx(w3, outbox, with_first=()):  # each held send in a block of its own
        sends, mined = list(outbox), 0
        outbox.clear()
        if with_first:
            deploy._control(w3, list(with_first))
        for held in sends:
            mined += deploy.mine_held(w3, [held])
        return mined

    heads = {}
    for name in ("one-block", "one-per-tx"):
        monkeypatch.setattr(trader, "mine_held", one_per_tx if name == "one-per-tx" else deploy.mine_held)
        anvil, w3, dep = _world(tmp_path, name)
        try:
            if name == "one-per-tx":  # the deployment's sends took three blocks more
                w3.provider.make_request("anvil_mine", [hex(3)])
            driver = ReplayDriver(lean_web3(anvil.rpc_url), dep, ANVIL_KEYS[1], ANVIL_KEYS[0])  # as infra/backtest's
            heads[name], sent, calls = [], driver.sim.sent, []

            def counted(data, _real=driver.w3.provider._post):  # every HTTP post the rows make
                calls.append(data)
                return _real(data)
            monkeypatch.setattr(driver.w3.provider, "_post", counted)
            row_calls = []
            for row in rows:
                before = len(calls)
                driver.apply(row)
                row_calls.append(len(calls) - before)
                block = w3.eth.get_block("latest")
                heads[name].append((block["number"], block["timestamp"], block["baseFeePerGas"]))
                assert not block["transactions"], "the row ends on an empty block (it sets the next base fee)"
            assert driver.overflows == 0
            assert driver.sim.sent - sent >= 3 * len(rows), "each row sent a feed round and its trades"
            if name == "one-block":  # the state read, the sends, the block, the receipts, the pad, base fee, block
                assert row_calls == [7] * len(rows), calls
        finally:
            anvil.stop()
    assert heads["one-block"] == heads["one-per-tx"]


def test_a_run_never_starts_on_an_earlier_runs_data(tmp_path):
    """An earlier run's --out (its transaction journal, records, Grimoire, Temporal history) is refused before
    anything starts: a golem started on it would take earlier actions as already sent."""
    from infra.backtest import BacktestError, BacktestOptions, run_backtest

    csv = _path_csv(tmp_path / "crash.csv", rows=4)
    for left in ("temporal.sqlite", "data", "golem/data"):
        out = tmp_path / f"out-{left.replace('/', '-')}"
        (out / left).parent.mkdir(parents=True, exist_ok=True)
        (out / left).mkdir() if left.endswith("data") else (out / left).write_text("")
        with pytest.raises(BacktestError, match="holds an earlier run"):
            run_backtest(BacktestOptions(path=csv, home=REPO / "examples" / "golem-home", out=out, progress=False))
        assert not (out / "logs" / "anvil.log").exists() and not (out / "logs" / "temporal.log").exists()


def test_a_retried_trial_runs_each_arm_from_nothing(tmp_path):
    """The delta cycle's trial step retried (it timed out, the worker died) runs into the directory the first attempt
    left: each arm must start from nothing and give the first attempt's figures."""
    from golem.backtest.path import load_path
    from golem.models.config import load_config
    from workers.trial import BacktestTrialRunner

    home = REPO / "examples" / "golem-home"
    cfg = load_config(home / "golem.toml")
    rows = load_path(_path_csv(tmp_path / "crash.csv", rows=10))
    from golem.learning.trial import playbook_pair

    # a learned rule that acts every tick (the loan is nowhere near a line): the arms must differ
    playbooks = playbook_pair("", "h-every-tick", "- WHEN health_factor < 2.5 THEN repay 1% debt "
                                                  "_(confidence 0.90, 5 episodes, h-every-tick)_")
    runner = BacktestTrialRunner()
    out = tmp_path / "trial"
    figures = [asyncio.run(runner.run(rows, cfg, (home / "STRATEGY.md").read_text(), playbooks, out))
               for _ in range(2)]
    assert figures[0] == figures[1]
    assert figures[0][0].transactions > figures[0][1].transactions, "the rule acted: the arms differ"
    assert json.loads((out / "with.json").read_text()) == figures[1][0].model_dump(mode="json")


def test_a_send_the_node_left_in_its_pool_is_mined(tmp_path):
    """Anvil's automine now and then leaves the last of several sends arriving together in its pool until another
    arrives: a replay row then waited out the whole receipt timeout and the backtest failed. Automine off here
    leaves every send there: the wait asks the node for a block and gets the receipt."""
    from golem.world.deploy import TxSender, wait_all

    anvil = AnvilProcess(port=free_port(), log_path=tmp_path / "anvil.log")
    anvil.start()
    try:
        w3 = make_web3(anvil.rpc_url)
        w3.provider.make_request("evm_setAutomine", [False])
        sender = TxSender.for_key(w3, ANVIL_KEYS[1])
        sender.refresh()
        sent = [("transfer", sender.send(ANVIL_ADDRESSES[2], b"", 21_000, value=1))]
        [receipt] = wait_all(w3, sent, timeout=8.0)
        assert receipt["status"] == 1
    finally:
        anvil.stop()


def test_the_server_starts_once_on_a_copy_of_the_empty_database(tmp_path, monkeypatch):
    """Start-up (docs/how-to/backtesting.md): a new server file costs a launch, a stop and a second launch; a backtest
    copies the machine's empty database (made once, here in a fresh cache) and launches its server once."""
    from golem.backtest.path import load_path
    from infra.backtest import BacktestOptions, _backtest, _template_db
    from infra.temporal import TemporalDevServer

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    launches: list[str] = []
    real_launch = TemporalDevServer._launch

    def launch(self, timeout):
        launches.append(self.db_path.name)
        return real_launch(self, timeout)

    monkeypatch.setattr(TemporalDevServer, "_launch", launch)
    csv = _path_csv(tmp_path / "crash.csv", rows=3)
    for k in (1, 2):
        opts = BacktestOptions(path=csv, home=REPO / "examples" / "golem-home", out=tmp_path / f"run{k}", progress=False)
        [run] = asyncio.run(_backtest(opts, load_path(csv)))
        assert len(run.marks) == 3 and any(m.tick is not None for m in run.marks)
    assert _template_db().exists()
    # the template's making (launch, stop, launch), then one launch per backtest
    assert launches == ["empty.sqlite", "empty.sqlite", "temporal.sqlite", "temporal.sqlite"], launches
