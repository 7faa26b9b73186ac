"""Being liquidated is a real event: a crash drives the golem's Aave position under health factor 1.0 when it does
nothing, and the simulator's liquidator calls the Pool's `liquidationCall` (close factor and 5 % bonus as Aave V3
applies them), read back from the Pool's LiquidationCall log. On a real Anvil with the real protocols."""

from __future__ import annotations

import pytest
from web3 import Web3
from web3.logs import DISCARD

from golem.chain.contracts import Deployment, contract
from golem.chain.reader import read_liquidations, read_snapshot
from golem.world.deploy import GAS_CONFIG, TxSender, wait_all
from golem.world.simulator.market import MarketSimulator
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS

pytestmark = pytest.mark.integration

GOLEM, TRADER = ANVIL_ADDRESSES[2], ANVIL_ADDRESSES[1]
BONUS = 1.05  # RESERVES["WETH"] liquidation bonus 10500 bps
LT = 0.825  # WETH liquidation threshold


def _sim(w3: Web3, world: Deployment, scenario: str = "calm", **kw) -> MarketSimulator:
    return MarketSimulator(w3, world, trader_key=ANVIL_KEYS[1], oracle_key=ANVIL_KEYS[0], scenario=scenario, **kw)


def _position(w3: Web3, world: Deployment, user: str = GOLEM):
    return read_snapshot(w3, world, user).positions[0]


def test_crash_to_900_liquidates_the_golem_with_the_bonus(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    start_block = w3.eth.block_number
    before = _position(w3, world)
    sim = _sim(w3, world)
    step = sim.move_to(900.0, 900.0)
    # under HF 0.95 at $900 (10 × 900 × 0.825 / 8,000 = 0.928): Aave's close factor is 100 %
    hf = step.health_factors[GOLEM]
    assert hf == pytest.approx(10 * 900 * LT / before.debt, rel=1e-4) and hf < 0.95
    [liq] = step.liquidations
    events = read_liquidations(w3, world, GOLEM, start_block + 1, w3.eth.block_number)
    assert len(events) == 1
    [ev] = events
    assert (ev.collateral_asset, ev.debt_asset, ev.liquidator) == ("WETH", "USDC", TRADER)
    assert ev.tx_hash == liq.tx_hash and ev.debt_covered == pytest.approx(liq.debt_covered)
    assert ev.debt_covered == pytest.approx(before.debt, rel=1e-4)  # the whole debt (plus its accrued interest)
    # collateral seized: the debt at the USDC feed ($1) in WETH at the ETH/USD feed ($900), plus the 5 % bonus
    assert ev.collateral_seized == pytest.approx(ev.debt_covered * 1.0 / 900.0 * BONUS, rel=1e-6)
    after = _position(w3, world)
    assert after.debt == pytest.approx(0.0, abs=1e-6)
    assert after.collateral == pytest.approx(before.collateral - ev.collateral_seized, rel=1e-9)
    # receiveAToken=false: the liquidator got WETH itself, out of the aWETH reserve, in the liquidation's own tx
    receipt = w3.eth.get_transaction_receipt(ev.tx_hash)
    weth = contract(w3, world, "WETH")
    [paid] = [t for t in weth.events.Transfer().process_receipt(receipt, errors=DISCARD) if t["args"]["dst"] == TRADER]
    assert paid["args"]["src"] == world.addresses["A_WETH"]
    assert paid["args"]["wad"] / 1e18 == pytest.approx(ev.collateral_seized, rel=1e-12)
    # healthy again (no debt): the next step leaves it alone
    assert sim.move_to(900.0, 900.0).liquidations == []


def test_close_factor_is_half_between_hf_095_and_1(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    before = _position(w3, world)
    step = _sim(w3, world).move_to(960.0, 960.0)  # HF 10 × 960 × 0.825 / 8,000 = 0.99
    assert 0.95 < step.health_factors[GOLEM] < 1.0
    [liq] = step.liquidations
    assert liq.user == GOLEM and liq.debt_covered == pytest.approx(before.debt / 2, rel=1e-4)
    assert liq.collateral_seized == pytest.approx(liq.debt_covered / 960.0 * BONUS, rel=1e-6)
    after = _position(w3, world)
    assert after.debt == pytest.approx(before.debt - liq.debt_covered, rel=1e-5)
    assert after.health_factor > 1.0  # half the debt gone for ~52.5 % of its value in collateral


def test_crash_scenario_below_970_is_liquidated_by_the_simulator(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    sim = _sim(w3, world, "crash", seed=3, crash_after=1)  # step 0 is the move to $1,400
    sim.move_to(1400.0, 1400.0)  # from $1,400 six −6 % steps end at $965, under the golem's ≈ $970 line
    assert _position(w3, world).health_factor > 1.4
    start = w3.eth.block_number
    steps = sim.run(7)
    assert steps[-1].oracle_price == pytest.approx(1400.0 * 0.94**6)
    liquidated = [s for s in steps if s.liquidations]
    assert len(liquidated) == 1 and liquidated[0].oracle_price < 970.0
    assert [liq.user for liq in liquidated[0].liquidations] == [GOLEM]
    assert all(hf >= 1.0 for s in steps if s is not liquidated[0] for hf in s.health_factors.values() if hf)
    [ev] = read_liquidations(w3, world, GOLEM, start + 1, w3.eth.block_number)
    assert ev.tx_hash == liquidated[0].liquidations[0].tx_hash


def test_liquidator_off_leaves_the_position_underwater(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    start = w3.eth.block_number
    step = _sim(w3, world, liquidate=False).move_to(900.0, 900.0)
    assert step.health_factors[GOLEM] < 1.0 and step.liquidations == []
    assert _position(w3, world).health_factor < 1.0
    assert read_liquidations(w3, world, GOLEM, start + 1, w3.eth.block_number) == []


def test_a_borrower_seen_in_borrow_events_is_watched_and_liquidated(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    other_key, other = ANVIL_KEYS[3], ANVIL_ADDRESSES[3]
    sim = _sim(w3, world)
    assert other not in sim.watched
    # another account opens its own position on the Aave Pool: 5 WETH supplied, 7,000 DAI borrowed (HF 1.18)
    weth, pool, dai = contract(w3, world, "WETH"), contract(w3, world, "AAVE_POOL"), contract(w3, world, "DAI")
    acct = TxSender.for_key(w3, other_key)
    wait_all(w3, [
        ("wrap", acct.call_fn(weth, "deposit", value=5 * 10**18)),
        ("approve", acct.call_fn(weth, "approve", pool.address, 5 * 10**18)),
        ("supply", acct.call_fn(pool, "supply", weth.address, 5 * 10**18, other, 0, gas=GAS_CONFIG)),
        ("borrow", acct.call_fn(pool, "borrow", dai.address, 7_000 * 10**18, 2, 0, other, gas=GAS_CONFIG)),
    ])  # fmt: skip
    first = sim.move_to(2000.0, 2000.0)  # the liquidator's scan finds the Borrow event
    assert other in sim.watched and first.liquidations == []
    step = sim.move_to(1650.0, 1650.0)  # 5 × 1,650 × 0.825 / 7,000 = 0.97; the golem is still at 1.70
    assert [liq.user for liq in step.liquidations] == [other]
    [liq] = step.liquidations
    assert (liq.collateral_asset, liq.debt_asset) == ("WETH", "DAI")
    assert liq.collateral_seized == pytest.approx(liq.debt_covered / 1650.0 * BONUS, rel=1e-6)
    assert read_snapshot(w3, world, other).positions[0].health_factor > 1.0
    assert _position(w3, world).debt == pytest.approx(8000.0, rel=1e-4)  # the golem was not touched


def test_simulator_cli_logs_the_liquidation(anvil, w3: Web3, world_snapshot: Deployment, tmp_path) -> None:
    """`python -m golem.world.simulator` against a saved deployment: the crash scenario from $1,400 ends under the
    golem's line on its sixth step, and the liquidation is a log line naming the user, amounts and transaction."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    world = world_snapshot
    _sim(w3, world).move_to(1400.0, 1400.0)
    path = world.save(tmp_path / "deployment.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOLEM_SIM_")}
    proc = subprocess.run(
        [sys.executable, "-m", "golem.world.simulator", "--rpc", anvil.rpc_url, "--deployment", str(path),
         "--scenario", "crash", "--crash-after", "0", "--steps", "6", "--interval", "0"],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    [liq_line] = [ln for ln in lines if ln.startswith("liquidated ")]
    assert f"user={GOLEM}" in liq_line and " USDC " in liq_line and " WETH " in liq_line
    assert lines[lines.index(liq_line) - 1].startswith("step=5 ")  # right after the step that crossed $970
    tx = liq_line.split("tx=")[1].split()[0]
    [ev] = read_liquidations(w3, world, GOLEM, world.deployed_block, w3.eth.block_number)
    assert ev.tx_hash == tx
    assert ANVIL_KEYS[1][2:] not in proc.stdout + proc.stderr
