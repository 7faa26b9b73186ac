"""Backtests on real parts: the replay driver on a real Anvil, and `golem backtest` end to end on a real Temporal
dev server + Anvil (40 rows), twice, for repeatability."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from golem.backtest.models import PathRow
from golem.chain.web3client import make_web3
from golem.world.deploy import deploy_world
from golem.backtest.replay import ReplayDriver
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS, AnvilProcess, free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z


@pytest.fixture
def world(tmp_path):
    anvil = AnvilProcess(port=free_port(), log_path=tmp_path / "anvil.log", extra_args=["--timestamp", str(T0 - 3600)])
    anvil.start()
    try:
        w3 = make_web3(anvil.rpc_url)
        dep = deploy_world(w3, ANVIL_KEYS[0], ANVIL_ADDRESSES[2], ANVIL_ADDRESSES[1], golem_key=ANVIL_KEYS[2],
                           rpc_url=anvil.rpc_url)
        yield w3, dep
    finally:
        anvil.stop()


def test_a_row_sets_oracle_pool_base_fee_and_time(world):
    w3, dep = world
    driver = ReplayDriver(w3, dep, ANVIL_KEYS[1], ANVIL_KEYS[0])
    # an oracle lagging the pool on a fast move: the pool is at 1,900 while the oracle still says 2,000
    applied = driver.apply(PathRow(tick=0, timestamp=T0, pool_price=1900.0, oracle_price=2000.0, gas_gwei=7.0,
                                   volume_usd=20_000.0))
    snap = driver.snapshot(ANVIL_ADDRESSES[2])
    assert snap.oracle_price == pytest.approx(2000.0)
    assert snap.pool.price == pytest.approx(1900.0, rel=1e-4)
    assert applied.block_timestamp == T0
    assert snap.block_timestamp >= T0
    # the next block's base fee is the row's gas; eth_gasPrice adds Anvil's 1 gwei tip
    pending_base = w3.eth.get_block("latest")["baseFeePerGas"] * 7 // 8
    assert pending_base == pytest.approx(7e9, rel=1e-6)
    assert snap.gas_price_gwei == pytest.approx(8.0, rel=1e-3)
    # a later row moves both and the clock; a gas spike row sets the base fee
    driver.apply(PathRow(tick=1, timestamp=T0 + 60, pool_price=2100.0, oracle_price=2100.0, gas_gwei=70.0,
                         volume_usd=0.0))
    snap = driver.snapshot(ANVIL_ADDRESSES[2])
    assert snap.pool.price == pytest.approx(2100.0, rel=1e-4) and snap.oracle_price == pytest.approx(2100.0)
    assert snap.gas_price_gwei == pytest.approx(71.0, rel=1e-3)
    assert snap.block_timestamp >= T0 + 60
    # the ETH/USD round carries the row's time: path time, not the wall clock
    weth_feed = next(f for f in snap.feeds if f.symbol == "WETH")
    assert weth_feed.updated_at == T0 + 60 and weth_feed.answer == 2100.0


def test_replay_moves_the_world_through_feed_rounds_and_router_and_liquidates(world):
    """A row's move is a new ETH/USD round and Router02 swaps on both pairs; a crash row under the golem's line is
    liquidated by the world's liquidator before the golem sees the row; stables post on half their heartbeat."""
    from golem.chain.contracts import contract
    from golem.chain.reader import read_liquidations

    w3, dep = world
    golem = ANVIL_ADDRESSES[2]
    driver = ReplayDriver(w3, dep, ANVIL_KEYS[1], ANVIL_KEYS[0])
    feed = contract(w3, dep, "FEED_WETH")
    rid0 = feed.functions.latestRound().call()
    start = w3.eth.block_number
    applied = driver.apply(PathRow(tick=0, timestamp=T0, pool_price=1950.0, oracle_price=1950.0, gas_gwei=1.0,
                                   volume_usd=0.0))
    assert feed.functions.latestRound().call() == rid0 + 1
    for key in ("PAIR_WETH_USDC", "PAIR_WETH_DAI"):
        swaps = contract(w3, dep, key).events.Swap().get_logs(from_block=start + 1)
        assert swaps and swaps[-1]["args"]["sender"] == dep.addresses["UNI_ROUTER"], key
    assert applied.health_factors[golem] == pytest.approx(10 * 1950 * 0.825 / 8000, rel=1e-3)
    assert applied.liquidations == ()
    # the same answer an hour later (past half the 3,600 s heartbeat): a fresh round all the same
    driver.apply(PathRow(tick=1, timestamp=T0 + 1900, pool_price=1950.0, oracle_price=1950.0, gas_gwei=1.0,
                         volume_usd=0.0))
    assert feed.functions.latestRound().call() == rid0 + 2
    # USDC/DAI rounds: half their day-long heartbeat later they post 1.0 again
    usdc = contract(w3, dep, "FEED_USDC")
    usdc_rid = usdc.functions.latestRound().call()
    row = PathRow(tick=2, timestamp=T0 + 43_300, pool_price=930.0, oracle_price=930.0, gas_gwei=1.0, volume_usd=0.0)
    before = w3.eth.block_number
    applied = driver.apply(row)
    assert usdc.functions.latestRound().call() == usdc_rid + 1 and usdc.functions.latestAnswer().call() == 10**8
    # $930: HF 0.96 at the row's prices; the liquidator took half the debt before anyone else acted
    assert applied.health_factors[golem] < 1.0
    [liq] = applied.liquidations
    [ev] = read_liquidations(w3, dep, golem, before + 1, w3.eth.block_number)
    assert ev.tx_hash == liq.tx_hash and ev.debt_asset == "USDC" and ev.collateral_asset == "WETH"
    assert ev.collateral_seized == pytest.approx(ev.debt_covered / 930.0 * 1.05, rel=1e-6)
    assert driver.snapshot(golem).positions[0].health_factor > 1.0


def _path_csv(path: Path, rows: int = 40, step_s: int = 60) -> Path:
    """Calm, then a crash with the oracle lagging the pool, a gas spike, and recovery; labelled; rows `step_s` apart."""
    lines = ["tick,timestamp,pool_price,oracle_price,gas_gwei,volume_usd,regime"]
    pool = oracle = 2000.0
    for i in range(rows):
        label = "calm"
        if 14 <= i < 20:
            pool *= 0.94
            label = "crash"
        oracle = pool if not (14 <= i < 17) else oracle  # the oracle lags the first three crash rows
        gas = 12.0 if 28 <= i < 31 else 1.2
        lines.append(f"{i},{T0 + step_s * i},{pool:.4f},{oracle:.4f},{gas},{5000 + 100 * i},{label}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _backtest(csv: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli", "backtest", str(csv), "--out", str(out), "--json", *extra],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )


def _decisions(report: dict) -> dict:
    """Everything but timings: the same path must give the same actions and figures."""
    marks = json.loads((Path(report["_dir"]) / "report.json").read_text())["marks"]
    return [{k: v for k, v in m.items() if k != "wall_ms"} for m in marks]


def test_backtest_end_to_end_repeatable(tmp_path):
    csv = _path_csv(tmp_path / "crash40.csv")
    runs = []
    for k in (1, 2):  # the second pass is --compare: its golem run must decide as the first did
        out = tmp_path / f"run{k}"
        proc = _backtest(csv, out, *(("--compare",) if k == 2 else ()))
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = json.loads(proc.stdout)
        if k == 2:
            compared = {r["info"]["name"]: r for r in report}
            report = compared["golem"]
            out = out / "golem"
        report["_dir"] = str(out)
        runs.append(report)
    report = runs[0]
    # --compare's four runs, side by side on one Temporal server, and the table over them
    assert sorted(compared) == ["golem", "hold", "memory-off", "rules"], sorted(compared)
    table = json.loads((tmp_path / "run2" / "compare.json").read_text())
    assert table["base"] == "golem" and "hold" in (tmp_path / "run2" / "compare.md").read_text()
    hold, golem = compared["hold"], compared["golem"]
    assert hold["figures"]["transactions"] == 0 and hold["figures"]["ticks"] == 0, hold["figures"]
    # holding is all market by construction; the golem's market part is the same start, held
    assert hold["attribution"]["market_beta"] == pytest.approx(hold["attribution"]["total"], abs=1e-3)
    assert golem["attribution"]["market_beta"] == pytest.approx(hold["attribution"]["market_beta"], rel=1e-6)
    assert golem["attribution"]["strategy_alpha"] != 0, golem["attribution"]  # it acted
    for f in ("report.json", "report.md", "report.png"):
        assert (tmp_path / "run1" / f).stat().st_size > 0
    marks = json.loads((tmp_path / "run1" / "report.json").read_text())["marks"]
    assert len(marks) == 40
    # the oracle-lag rows: chain shows pool != oracle (read back after the row)
    assert any(abs(m["pool_price"] - m["oracle_price"]) / m["oracle_price"] > 0.03 for m in marks[14:17])
    assert [m["gas_gwei"] for m in marks[28:31]] == [12.0, 12.0, 12.0]
    ticks = [m for m in marks if m["tick"] is not None]
    assert ticks, "the golem ticked"
    assert any(m["tier"] in ("T1", "T2") for m in marks[14:22]), "the crash escalates"
    assert any(a["status"] == "executed" for m in marks for a in m["actions"]), "the golem acted on chain"
    assert all(m["timestamp"] == T0 + 60 * m["row"] for m in marks)
    # the second pass over the same CSV decides the same, figure for figure, its transactions in the same blocks
    assert _decisions(runs[0]) == _decisions(runs[1])
    infos = [json.loads((Path(r["_dir"]) / "report.json").read_text())["report"]["info"] for r in runs]
    assert infos[0]["confirmation_blocks"] == infos[1]["confirmation_blocks"] > 0
    assert all(m["verified"] for m in marks if any(a["block"] is not None for a in m["actions"]))
    # the run's Temporal data stays under --out: the replay-clock GolemWorkflow history replays with Replayer
    asyncio.run(_replays(tmp_path / "run1" / "temporal.sqlite"))


async def _replays(db: Path) -> None:
    from infra.temporal import TemporalDevServer
    from workers.client import connect
    from workers.replay import replay_history

    server = TemporalDevServer(db, port=free_port(), ui_port=free_port(), headless=True, log_path=db.with_suffix(".log2"))
    server.start()
    try:
        client = await connect(server.address)
        handle = client.get_workflow_handle("golem-bt-golem")
        desc = await handle.describe()
        assert desc.status.name == "COMPLETED"
        ok, detail = await replay_history(await handle.fetch_history())
        assert ok, detail
        ticks = [w async for w in client.list_workflows('WorkflowType = "ThetaTickWorkflow"')]
        assert len(ticks) == 40
    finally:
        server.stop()


SLOW_EXECUTE_S = 1.5  # a loaded machine: longer than the 1.0 s idle window of the producer that was replaced


class _IdleBlockProducer:
    """The replaced design, kept here to show its race: mine an empty block once a head holding transactions has
    been idle for `idle_s` of wall clock."""

    def __init__(self, w3, idle_s: float = 1.0, poll_s: float = 0.05) -> None:
        self.w3, self.idle_s, self.poll_s = w3, idle_s, poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        seen, since = None, time.monotonic()
        while not self._stop.wait(self.poll_s):
            head = self.w3.eth.get_block("latest")
            if head["hash"] != seen:
                seen, since = head["hash"], time.monotonic()
            elif head["transactions"] and time.monotonic() - since >= self.idle_s:
                self.w3.provider.make_request("evm_mine", [])

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def test_the_idle_window_producer_splits_a_slow_ticks_transactions(world):
    """The race, made deterministic: two transactions of one account 1.5 s apart (a loaded machine between a repay
    and the swap after it). The wall-clock producer mines an empty block between them; which block the second lands
    in depends on the gap, not on what was sent."""
    w3, _ = world
    golem = w3.eth.account.from_key(ANVIL_KEYS[2])

    def send(nonce: int) -> int:
        tx = {"to": ANVIL_ADDRESSES[3], "value": 1, "gas": 21_000, "nonce": nonce, "chainId": w3.eth.chain_id,
              "maxFeePerGas": 10**11, "maxPriorityFeePerGas": 10**9}
        h = w3.eth.send_raw_transaction(golem.sign_transaction(tx).raw_transaction)
        return w3.eth.wait_for_transaction_receipt(h)["blockNumber"]

    nonce = w3.eth.get_transaction_count(golem.address)
    with _IdleBlockProducer(w3):
        first = send(nonce)
        time.sleep(SLOW_EXECUTE_S)
        second = send(nonce + 1)
    assert second == first + 2, "an empty block came between the two"
    assert w3.eth.get_block(first + 1)["transactions"] == []


def test_confirmation_blocks_follow_the_ticks_verify_not_the_wall_clock(tmp_path, monkeypatch):
    """The backtest's BlockProducer on a loaded machine (each execute activity 1.5 s slower than the old idle
    window): no empty block comes between a tick's actions, one empty confirmation block follows each acting
    tick, and every acting tick is verified (2 confirmations within verify's 5 s)."""
    from golem.backtest.path import load_path
    from infra.backtest import BacktestOptions, _backtest
    from workers.services import GolemServices

    real_execute = GolemServices.execute
    heads: dict[tuple[int, int], bool] = {}  # (tick, action index) -> the head held transactions when it was sent

    def slow_execute(self, ctx, action, *args, **kwargs):
        time.sleep(SLOW_EXECUTE_S)
        heads[(ctx.tick, action.action_index)] = bool(self.w3.eth.get_block("latest")["transactions"])
        return real_execute(self, ctx, action, *args, **kwargs)

    monkeypatch.setattr(GolemServices, "execute", slow_execute)
    csv = _path_csv(tmp_path / "crash40.csv", rows=24)
    opts = BacktestOptions(path=csv, home=REPO / "examples" / "golem-home", out=tmp_path / "out", progress=False)
    [run] = asyncio.run(_backtest(opts, load_path(csv)))
    acting = [m for m in run.marks if any(a.block is not None for a in m.actions)]
    assert any(len([a for a in m.actions if a.block is not None]) >= 2 for m in acting), "a tick sent two txs"
    # after the first action of a tick the head is the previous action's last transaction, never an empty block
    # mined while the golem was slow (the row's own last block is empty: it sets the base fee)
    later = {key: held for key, held in heads.items() if key[1] > 0}
    assert later and all(later.values()), later
    for m in acting:
        blocks = [a.block for a in m.actions if a.block is not None]
        assert blocks == sorted(blocks), f"row {m.row}: {blocks}"
        assert m.verified is True, f"row {m.row}: not verified"
    assert run.info.confirmation_blocks == len(acting)


async def _step_events(db: Path, tick_workflow_id: str) -> dict[str, int]:
    """How a workflow's steps ran, from its history in a finished run's temporal.sqlite: activity tasks scheduled by
    type, local-activity markers ("local") and other markers (patches)."""
    from temporalio.api.enums.v1 import EventType

    from infra.temporal import TemporalDevServer
    from workers.client import connect

    server = TemporalDevServer(db, port=free_port(), ui_port=free_port(), headless=True, log_path=db.with_suffix(".log2"))
    server.start()
    try:
        client = await connect(server.address)
        counts: dict[str, int] = {}
        async for ev in client.get_workflow_handle(tick_workflow_id).fetch_history_events():
            if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                name = ev.activity_task_scheduled_event_attributes.activity_type.name
                counts[name] = counts.get(name, 0) + 1
            elif ev.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
                kind = "local" if ev.marker_recorded_event_attributes.marker_name == "core_local_activity" else "marker"
                counts[kind] = counts.get(kind, 0) + 1
        return counts
    finally:
        server.stop()


def test_local_steps_give_the_same_ticks_actions_and_figures_as_activity_steps(tmp_path):
    """Parity of the two routes (docs/how-to/backtesting.md): the default runs a tick's observe/analyze/gate/reflect and the
    gamma read as local activities, `--steps activities` runs every step as an activity task as `golem run` does.
    Theta 90 s on 60-s rows, so every other row ticks and the rows between get a gamma pulse (a local activity on
    the fast route); the crash makes the golem act on chain. Every
    row's mark (tick, tier, regime read, prediction error, actions with amounts and blocks, equity, HF, gas) and the
    report's figures but timings must be equal, and each route must really have run its way."""
    from golem.backtest.path import load_path
    from golem.backtest.report import build_report
    from infra.backtest import BacktestOptions, _backtest

    import shutil
    import tomllib

    import tomli_w

    home = tmp_path / "home"
    shutil.copytree(REPO / "examples" / "golem-home", home)
    raw = tomllib.loads((home / "golem.toml").read_text())
    raw["clock"].update(theta_base_seconds=90.0, theta_min_seconds=90.0, theta_max_seconds=90.0,
                        gamma_min_seconds=20.0, gamma_max_seconds=30.0)
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    csv = _path_csv(tmp_path / "crash.csv", rows=30)
    runs = {}
    for steps in ("local", "activities"):
        opts = BacktestOptions(path=csv, home=home, out=tmp_path / steps, progress=False, steps=steps)
        [runs[steps]] = asyncio.run(_backtest(opts, load_path(csv)))
    local, remote = runs["local"], runs["activities"]
    ticks = [m for m in local.marks if m.tick is not None]
    assert 0 < len(ticks) < len(local.marks), "some rows only watched (a gamma pulse), others ticked"
    assert any(m.tier in ("T1", "T2") for m in ticks) and any(a.block is not None for m in ticks for a in m.actions)
    for a, b in zip(local.marks, remote.marks, strict=True):
        assert a.model_dump(exclude={"wall_ms"}) == b.model_dump(exclude={"wall_ms"}), f"row {a.row}"
    # the whole report but what says how and how long it ran (run info, wall per tick); as JSON, so a NaN is equal
    figures = [build_report(r.info, r.marks).model_dump_json(exclude={"info", "tick_wall_ms_p50", "tick_wall_ms_p90"})
               for r in (local, remote)]
    assert figures[0] == figures[1]
    assert local.info.confirmation_blocks == remote.info.confirmation_blocks > 0
    # and the golem ends in the same state: what gamma pulses resolved, the clock, affect, vitality
    state = [r.final_state.model_dump(mode="json", include={"tick", "regime", "phase", "theta_seconds", "gamma", "pad",
                                                            "vitality", "daily_spend_usd"}) for r in (local, remote)]
    assert state[0] == state[1]
    assert local.final_state.gamma.resolved > 0, "gamma pulses resolved predictions"
    # each route ran its way: a T0 tick's steps as local-activity markers, or as scheduled activity tasks
    t0 = next(m.tick for m in ticks if m.tier == "T0")
    fast = asyncio.run(_step_events(tmp_path / "local" / "temporal.sqlite", f"golem-bt-golem-tick-{t0}"))
    slow = asyncio.run(_step_events(tmp_path / "activities" / "temporal.sqlite", f"golem-bt-golem-tick-{t0}"))
    assert fast.get("local") == 4 and not fast.keys() & {"observe", "analyze", "gate", "reflect"}, fast
    assert {slow.get(s) for s in ("observe", "analyze", "gate", "reflect")} == {1}, slow
    gammas = asyncio.run(_step_events(tmp_path / "local" / "temporal.sqlite", "golem-bt-golem"))
    assert gammas.get("local", 0) >= 3 and "gamma" not in gammas, gammas  # gamma pulses ran, as local activities


def test_bad_csv_is_refused_with_its_line_before_anything_starts(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("tick,pool_price,oracle_price,gas_gwei,volume_usd\n0,2000,2000,1,100\n1,2000,abc,1,100\n")
    out = tmp_path / "out"
    proc = _backtest(bad, out)
    assert proc.returncode != 0
    assert "line 3" in proc.stderr and "oracle_price" in proc.stderr
    assert not (out / "temporal.sqlite").exists(), "nothing was started"


def test_hold_baseline_report_counts_real_liquidations(tmp_path):
    """The report's liquidation figures come from the Aave Pool's LiquidationCall events: a position left alone
    through a crash to $900 is liquidated once (whole debt, under HF 0.95), and the bonus it paid is the 5 %."""
    from golem.backtest.path import load_path
    from golem.backtest.report import build_report, render_table, write_report
    from infra.backtest import BacktestOptions, _run_variant

    lines = ["tick,timestamp,pool_price,oracle_price,gas_gwei,volume_usd,regime"]
    prices = [2000, 1990, 2005, 1800, 1500, 1200, 900, 900, 950, 1000]
    lines += [f"{i},{T0 + 60 * i},{p},{p},1.0,1000,{'calm' if i < 3 else 'crash'}" for i, p in enumerate(prices)]
    csv = tmp_path / "crash900.csv"
    csv.write_text("\n".join(lines) + "\n")
    opts = BacktestOptions(path=csv, home=REPO / "examples" / "golem-home", out=tmp_path / "out", progress=False)
    run = asyncio.run(_run_variant(opts, load_path(csv), "hold", None, None, tmp_path / "out"))
    marks = run.marks
    assert [m.underwater for m in marks] == [False] * 6 + [True] + [False] * 3
    [liq] = marks[6].liquidations
    assert (liq.debt_asset, liq.collateral_asset) == ("USDC", "WETH")
    assert liq.debt_covered == pytest.approx(8000.0, rel=1e-3)
    assert liq.collateral_seized == pytest.approx(liq.debt_covered / 900 * 1.05, rel=1e-6)
    assert marks[6].health_factor is None and not marks[6].liquidatable  # no debt left
    assert marks[6].row_health_factor == pytest.approx(10 * 900 * 0.825 / 8000, rel=1e-3)
    f = build_report(run.info, marks).figures
    assert (f.liquidations, f.hf_crossings, f.rows_liquidatable) == (1, 1, 0)
    assert f.liquidated_debt_usd == pytest.approx(8000.0, rel=1e-3)
    assert f.liquidation_penalty_usd == pytest.approx(0.05 * f.liquidated_debt_usd, rel=1e-3)
    assert f.min_health_factor == pytest.approx(0.928, abs=1e-3)  # the liquidator's read, not the rows' ends
    report = build_report(run.info, marks)
    assert "| liquidations (LiquidationCall events) | 1 |" in render_table(report)
    paths = write_report(report, marks, tmp_path / "report")  # the PNG marks the liquidated row
    saved = json.loads(paths["json"].read_text())
    assert saved["report"]["figures"]["liquidations"] == 1 and saved["marks"][6]["liquidations"][0]["tx_hash"]
    assert paths["png"].stat().st_size > 0


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _using(directory: Path) -> list[str]:
    """Processes whose command line names `directory` or that hold a file under it open (an orphaned Temporal dev
    server or Anvil of a backtest writing there)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            files = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:
            continue
        if _alive(int(proc.name)) and (str(directory) in cmd or any(f.startswith(str(directory)) for f in files)):
            found.append(f"{proc.name}: {cmd[:160]}")
    return found


@contextlib.contextmanager
def _running_backtest(out: Path):
    """`golem backtest` on the 240-row calm path, in the background; killed at the end if it is still running."""
    proc = subprocess.Popen([sys.executable, "-m", "cli", "backtest", str(REPO / "examples" / "scenarios" / "calm.csv"),
                             "--out", str(out)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _wait_for(proc: subprocess.Popen, ready, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"the backtest {what} in {seconds:.0f} s"
        time.sleep(0.05)


def test_sigterm_during_start_up_leaves_no_temporal_behind(tmp_path):
    """`kill` while the Temporal dev server is still starting (its first launch writes the schema, then it is
    relaunched): the start is waited out and the server stopped; a cancelled `to_thread(server.start)` used to
    return at once while the thread went on to relaunch the server, which was left running."""
    from infra.supervisor import child_pids

    out = tmp_path / "out"
    with _running_backtest(out) as proc:
        _wait_for(proc, lambda: child_pids(proc.pid), "started no dev server", 60)  # its first launch
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=45)
    time.sleep(0.5)
    left = _using(out)
    for line in left:
        os.kill(int(line.split(":")[0]), signal.SIGKILL)
    assert not left, f"left running after the stop: {left}"
    assert proc.returncode == 130 and "golem backtest: stopped (SIGTERM)" in stderr, (proc.returncode, stderr[-3000:])


def test_sigterm_mid_run_stops_the_worker_temporal_and_anvil_in_order(tmp_path):
    """`kill` of a backtest a few rows in: the in-process worker is shut down by its owner (not cancelled along with
    every task by asyncio.run, which left the SDK core's finalize_shutdown waiting forever), then Anvil and Temporal
    stop, and the backtest exits 130 with its own message within seconds — not via stop_on_signals' 20-s net."""
    from infra.supervisor import child_pids

    out = tmp_path / "out"
    with _running_backtest(out) as proc:
        # a few ticks recorded: mid-run, the worker busy with the golem
        _wait_for(proc, lambda: len(list((out / "data" / "cycles").glob("cycle-*.json"))) >= 3, "recorded no 3 ticks",
                  180)
        children = child_pids(proc.pid)
        assert len(children) == 2, children  # its Temporal dev server and Anvil
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=45)  # long enough for the net (20 s + 5 s) to show itself
        took = time.monotonic() - t0
    left = [pid for pid in children if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert "clean-up took over" not in stdout, f"the 20-s net stopped it after {took:.1f}s, not its own clean-up"
    assert proc.returncode == 130, (proc.returncode, stderr[-3000:])
    assert "golem backtest: stopped (SIGTERM); its Temporal and Anvil are stopped" in stderr, stderr[-3000:]
    assert not left, f"children still running after the stop: {left}"
    assert took < 15, f"the stop took {took:.1f}s"
    # shut down by its owner (Worker.shutdown via `async with`), not cancelled with every task by asyncio.run
    log = (out / "logs" / "worker.log").read_text()
    assert "Beginning worker shutdown" in log and "Worker cancelled" not in log, log[-3000:]
