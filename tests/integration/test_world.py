"""The dev world on a real Anvil: Uniswap V2, Aave V3 and Circle's USDC deployed from their published bytecode, our
feeds, reads, the market simulator's scenarios (feed rounds + Router02 arbitrage), persistence, reverts, the CLI."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from eth_account import Account
from web3 import Web3
from web3.exceptions import ContractLogicError

from golem.chain.contracts import MAIN_PAIR, Deployment, at, contract
from golem.chain.reader import ChainReadError, pair_token0, read_snapshot
from golem.chain.web3client import make_web3
from golem.world import protocols
from golem.world.deploy import GAS_CALL, USDC_PROXY_ADMIN, TxFailed, TxSender, deploy_world, wait_all
from golem.world.simulator.market import MarketSimulator
from golem.world.simulator.paths import SimulatorError, oracle_path
from golem.world.simulator.trader import DEADLINE
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS, AnvilProcess, free_port

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
GOLEM, TRADER, DEPLOYER = ANVIL_ADDRESSES[2], ANVIL_ADDRESSES[1], ANVIL_ADDRESSES[0]


def _sim(w3: Web3, world: Deployment, scenario: str, seed: int = 0) -> MarketSimulator:
    return MarketSimulator(w3, world, trader_key=ANVIL_KEYS[1], oracle_key=ANVIL_KEYS[0], scenario=scenario, seed=seed)


def _round(w3: Web3, world: Deployment, sym: str = "WETH") -> tuple[int, float, int]:
    rid, answer, _started, updated_at, _ans = contract(w3, world, f"FEED_{sym}").functions.latestRoundData().call()
    return rid, answer / 1e8, updated_at


def _pair_price(w3: Web3, world: Deployment, key: str) -> float:
    r0, r1, _ = contract(w3, world, key).functions.getReserves().call()
    weth, stable = (r0, r1) if pair_token0(world, key) == "WETH" else (r1, r0)
    unit = 10**6 if key == MAIN_PAIR else 10**18
    return (stable / unit) / (weth / 1e18)


def test_world_deploys_and_snapshot_reads_seeded_numbers(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    snap = read_snapshot(w3, world, GOLEM)
    assert snap.chain_id == 31337
    assert snap.block_number >= world.deployed_block
    assert snap.gas_price_gwei > 0
    assert snap.pool.reserve0 == pytest.approx(500.0)
    assert snap.pool.reserve1 == pytest.approx(1_000_000.0)
    assert snap.pool.price == pytest.approx(2000.0)
    assert (snap.pool.token0, snap.pool.token1) == ("WETH", "USDC")
    assert snap.oracle_price == pytest.approx(2000.0)
    assert {f.symbol: f.answer for f in snap.feeds} == {"WETH": 2000.0, "USDC": 1.0, "DAI": 1.0}
    assert snap.balances == pytest.approx({"WETH": 20.0, "USDC": 20_000.0, "DAI": 1_000.0})
    [pos] = snap.positions
    assert pos.id == f"lending:{world.addresses['AAVE_POOL']}"
    assert (pos.kind, pos.collateral, pos.debt) == ("lending", 10.0, pytest.approx(8000.0))
    # Aave's own figure: 10 WETH × $2,000 × LT 82.5 % / $8,000
    assert pos.health_factor == pytest.approx(2.0625, rel=1e-4)
    assert _pair_price(w3, world, "PAIR_WETH_DAI") == pytest.approx(2000.0)

    trader = read_snapshot(w3, world, TRADER)
    assert trader.balances["WETH"] >= 1_000.0 and trader.balances["USDC"] >= 2_000_000.0
    assert trader.positions[0].health_factor is None  # no debt
    assert contract(w3, world, "FEED_WETH").functions.owner().call() == DEPLOYER

    timings = []
    for _ in range(5):
        t0 = time.perf_counter()
        read_snapshot(w3, world, GOLEM)
        timings.append(time.perf_counter() - t0)
    # one batched round trip; the target is < 30 ms, the bound leaves room for a busy CI box
    assert statistics.median(timings) < 0.1, timings


def test_usdc_is_circles_published_fiat_token_behind_its_proxy(w3: Web3, world_snapshot: Deployment) -> None:
    """The world's USDC is Circle's FiatTokenV2_2 as published (byte for byte outside its library link) behind
    Circle's FiatTokenProxy, initialised as USD Coin / USDC / 6 decimals / EIP-712 version 2, the deployer its only
    minter; the proxy's admin is an account nobody else uses, since it cannot call the token through the proxy."""
    usdc = at(w3, world_snapshot.address("USDC"), "FiatToken")
    root = protocols.NODE_MODULES / protocols.STABLECOIN / "artifacts" / "hardhat" / "contracts"
    proxy_art = json.loads((root / "v1/FiatTokenProxy.sol/FiatTokenProxy.json").read_text())
    impl_art = json.loads((root / "v2/FiatTokenV2_2.sol/FiatTokenV2_2.json").read_text())
    assert w3.eth.get_code(usdc.address).hex().removeprefix("0x") == proxy_art["deployedBytecode"][2:]

    def slot(name: str) -> str:  # the zeppelinos slots FiatTokenProxy keeps its implementation and admin in
        word = w3.eth.get_storage_at(usdc.address, Web3.keccak(text=f"org.zeppelinos.proxy.{name}"))
        return Web3.to_checksum_address(word[-20:])

    assert slot("admin") == USDC_PROXY_ADMIN
    code = w3.eth.get_code(slot("implementation")).hex().removeprefix("0x")
    published = impl_art["deployedBytecode"][2:]
    holes = sorted(ref["start"] * 2 for per_source in impl_art["deployedLinkReferences"].values()
                   for places in per_source.values() for ref in places)
    assert len(code) == len(published) and holes
    pos = 0
    for start in holes:  # outside the 20-byte library placeholders, the published bytecode
        assert code[pos:start] == published[pos:start]
        pos = start + 40
    assert code[pos:] == published[pos:]
    f = usdc.functions
    assert (f.name().call(), f.symbol().call(), f.decimals().call(), f.version().call(), f.currency().call()) == (
        "USD Coin", "USDC", 6, "2", "USD")
    assert f.masterMinter().call() == f.owner().call() == DEPLOYER and f.isMinter(DEPLOYER).call() is True
    assert f.isMinter(TRADER).call() is False and f.paused().call() is False
    with pytest.raises(ContractLogicError, match="Cannot call fallback function from the proxy admin"):
        f.balanceOf(GOLEM).call({"from": USDC_PROXY_ADMIN})
    with pytest.raises(ContractLogicError, match="already initialized"):  # nobody can take over the implementation
        at(w3, slot("implementation"), "FiatToken").functions.initialize(
            "x", "x", "x", 6, TRADER, TRADER, TRADER, TRADER).call({"from": TRADER})


def test_the_world_cache_keeps_a_world_per_chain_id(tmp_path, monkeypatch) -> None:
    """A world cached from an Anvil with another chain id (the tests' "external RPC") is not loaded into a 31337 one:
    its address book would name the other chain, and the simulator refuses a book for another chain."""
    from infra.world_cache import deploy_or_load

    monkeypatch.setenv("GOLEM_WORLD_CACHE", str(tmp_path / "cache"))
    for chain_id, fresh in ((8453, True), (31337, True), (31337, False)):
        with AnvilProcess(port=free_port(), chain_id=chain_id) as anvil:
            dep, deployed_now = deploy_or_load(make_web3(anvil.rpc_url), anvil.rpc_url)
            assert (dep.chain_id, deployed_now) == (chain_id, fresh)


def test_deploy_world_twice_gives_independent_worlds(w3: Web3, world_snapshot: Deployment) -> None:
    second = deploy_world(w3, ANVIL_KEYS[0], ANVIL_ADDRESSES[3], TRADER)  # no golem key: no position
    assert set(second.addresses.values()).isdisjoint(world_snapshot.addresses.values())
    snap = read_snapshot(w3, second, ANVIL_ADDRESSES[3])
    assert snap.balances == pytest.approx({"WETH": 20.0, "USDC": 20_000.0, "DAI": 1_000.0})
    assert snap.positions[0].debt == 0 and snap.positions[0].health_factor is None


def test_deploy_world_rejects_mismatched_golem_key(w3: Web3) -> None:
    with pytest.raises(ValueError, match="golem_key does not belong"):
        deploy_world(w3, ANVIL_KEYS[0], GOLEM, TRADER, golem_key=ANVIL_KEYS[3])


def test_step_posts_a_feed_round_and_arbitrages_both_pairs_toward_it(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    rid0, _, _ = _round(w3, world)
    usdc_round0 = _round(w3, world, "USDC")
    sim = _sim(w3, world, "trending", seed=2)
    s = sim.step()
    rid, answer, updated_at = _round(w3, world)
    assert rid == rid0 + 1 == s.round_id
    assert answer == pytest.approx(s.oracle_price, abs=1e-8)
    assert s.oracle_price == oracle_path("trending", 2000.0, 1, seed=2)[0] > 2000.0
    # updatedAt is the time of the block that holds the round (AnswerUpdated's own block)
    [log] = contract(w3, world, "FEED_WETH").events.AnswerUpdated().get_logs(
        from_block=w3.eth.block_number - 10, argument_filters={"roundId": rid})
    assert updated_at == w3.eth.get_block(log["blockNumber"])["timestamp"]
    # the arbitrage went through Router02: the trader bought WETH on both pairs, each now nearer the feed
    assert s.trade_side == "buy" and s.trade_size > 0
    for key in ("PAIR_WETH_USDC", "PAIR_WETH_DAI"):
        assert abs(_pair_price(w3, world, key) - s.oracle_price) < abs(2000.0 - s.oracle_price) / 2, key
        swaps = contract(w3, world, key).events.Swap().get_logs(from_block=log["blockNumber"])
        assert swaps and all(sw["args"]["sender"] == world.addresses["UNI_ROUTER"] for sw in swaps), key
    assert s.pair_prices[MAIN_PAIR] == pytest.approx(_pair_price(w3, world, MAIN_PAIR))
    # the stables were fresh and on the peg: no round for them
    assert s.stables_posted == {} and _round(w3, world, "USDC") == usdc_round0
    # the liquidator checked the golem at the new round: Aave's HF = 10 WETH × price × 0.825 / 8,000
    assert s.health_factors == {GOLEM: pytest.approx(10 * s.oracle_price * 0.825 / 8000, rel=1e-4)}
    assert s.liquidations == []


def test_stable_feeds_post_when_half_their_heartbeat_has_passed(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    sim = _sim(w3, world, "calm", seed=3)
    before = {s: _round(w3, world, s)[0] for s in ("USDC", "DAI")}
    w3.provider.make_request("evm_increaseTime", [world.feed_heartbeats["USDC"] // 2 + 60])
    w3.provider.make_request("evm_mine", [])
    s = sim.step()
    assert set(s.stables_posted) == {"USDC", "DAI"}
    for sym in ("USDC", "DAI"):
        rid, answer, _ = _round(w3, world, sym)
        assert rid == before[sym] + 1
        assert answer == pytest.approx(1.0, abs=0.002) and answer == pytest.approx(s.stables_posted[sym])
    # fresh again: the next step leaves them alone
    assert sim.step().stables_posted == {}


def test_crash_scenario_drops_prices_and_health(w3: Web3, world_snapshot: Deployment) -> None:
    sim = _sim(w3, world_snapshot, "crash", seed=7)
    steps = sim.run(11)
    assert [s.step for s in steps] == list(range(11))
    assert [s.oracle_price for s in steps] == oracle_path("crash", 2000.0, 11, seed=7)
    assert [s.round_id for s in steps] == list(range(steps[0].round_id, steps[0].round_id + 11))
    assert all(s.trade_side == "sell" and s.trade_size > 1.0 for s in steps[5:])
    snap = read_snapshot(w3, world_snapshot, GOLEM)
    assert snap.oracle_price < 2000.0 * 0.75
    assert snap.pool.price < 2000.0 * 0.75
    assert snap.pool.price == pytest.approx(snap.oracle_price, rel=0.01)  # arbitrage followed
    assert _pair_price(w3, world_snapshot, "PAIR_WETH_DAI") == pytest.approx(snap.oracle_price, rel=0.01)
    # Aave values the collateral at the feed: HF = 10 × price × 0.825 / debt
    hf = snap.positions[0].health_factor
    assert hf == pytest.approx(10 * snap.oracle_price * 0.825 / snap.positions[0].debt, rel=1e-3)
    assert 1.0 < hf < 1.5 and steps[-1].liquidations == []


def test_calm_scenario_stays_within_one_percent(w3: Web3, world_snapshot: Deployment) -> None:
    steps = _sim(w3, world_snapshot, "calm", seed=1).run(10)
    for s in steps:
        assert abs(s.oracle_price / 2000.0 - 1) < 0.01
        assert abs(s.pool_price / 2000.0 - 1) < 0.01
    snap = read_snapshot(w3, world_snapshot, GOLEM)
    assert snap.pool.price == pytest.approx(steps[-1].pool_price)
    assert snap.oracle_price == pytest.approx(steps[-1].oracle_price, abs=1e-8)
    assert snap.positions[0].health_factor == pytest.approx(2.0625, rel=0.01)


def test_trending_scenario_pulls_pool_up(w3: Web3, world_snapshot: Deployment) -> None:
    steps = _sim(w3, world_snapshot, "trending", seed=2).run(8)
    assert steps[-1].oracle_price > 2000.0 * 1.02
    assert steps[-1].pool_price == pytest.approx(steps[-1].oracle_price, rel=0.005)
    assert steps[-1].pair_prices["PAIR_WETH_DAI"] == pytest.approx(steps[-1].oracle_price, rel=0.005)
    assert all(s.trade_side == "buy" for s in steps)


def test_move_to_sets_the_pairs_exactly_and_posts_only_changed_answers(w3: Web3, world_snapshot: Deployment) -> None:
    sim = _sim(w3, world_snapshot, "calm")
    rid0 = _round(w3, world_snapshot)[0]
    s = sim.move_to(2000.0, 1900.0, noise_volume_usd=20_000.0)
    assert s.round_id == rid0  # the answer did not change and the round is fresh: no new round
    assert s.trade_side == "sell"
    assert _pair_price(w3, world_snapshot, MAIN_PAIR) == pytest.approx(1900.0, rel=1e-6)
    assert _pair_price(w3, world_snapshot, "PAIR_WETH_DAI") == pytest.approx(1900.0, rel=1e-6)
    s = sim.move_to(2100.5, 2150.0)
    assert s.round_id == rid0 + 1 and _round(w3, world_snapshot)[1] == 2100.5
    assert s.pool_price == pytest.approx(2150.0, rel=1e-6)


def test_router_swap_with_too_high_min_out_reverts(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    router, weth, usdc = (contract(w3, world, k) for k in ("UNI_ROUTER", "WETH", "USDC"))
    trader = TxSender.for_key(w3, ANVIL_KEYS[1])
    wait_all(w3, [("approve", trader.call_fn(weth, "approve", router.address, 10**18))])
    path = [weth.address, usdc.address]
    quote = router.functions.getAmountsOut(10**18, path).call()[-1]
    assert 1980 * 10**6 < quote < 2000 * 10**6  # 0.3 % fee and price impact

    with pytest.raises(ContractLogicError, match="INSUFFICIENT_OUTPUT_AMOUNT"):
        router.functions.swapExactTokensForTokens(10**18, quote + 1, path, TRADER, DEADLINE).call({"from": TRADER})
    # the real transaction reverts on chain too, and leaves the reserves alone
    pair = contract(w3, world, MAIN_PAIR)
    reserves = pair.functions.getReserves().call()[:2]
    trader.refresh()
    with pytest.raises(TxFailed, match="swap"):
        wait_all(w3, [("swap", trader.call_fn(router, "swapExactTokensForTokens", 10**18, quote + 1, path, TRADER,
                                              DEADLINE, gas=GAS_CALL))])
    assert pair.functions.getReserves().call()[:2] == reserves
    # with an honest minimum it goes through at exactly the quote
    trader.refresh()
    before = usdc.functions.balanceOf(TRADER).call()
    wait_all(w3, [("swap", trader.call_fn(router, "swapExactTokensForTokens", 10**18, quote, path, TRADER, DEADLINE))])
    assert usdc.functions.balanceOf(TRADER).call() - before == quote


def test_aave_refuses_a_borrow_the_collateral_cannot_cover(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    pool, usdc = contract(w3, world, "AAVE_POOL"), contract(w3, world, "USDC")
    # LTV 80 % of 10 WETH × $2,000 = $16,000 borrowable, $8,000 borrowed
    with pytest.raises(ContractLogicError):  # Aave error 36: COLLATERAL_CANNOT_COVER_NEW_BORROW
        pool.functions.borrow(usdc.address, 8_100 * 10**6, 2, 0, GOLEM).call({"from": GOLEM})
    pool.functions.borrow(usdc.address, 7_900 * 10**6, 2, 0, GOLEM).call({"from": GOLEM})  # fine


def test_reader_errors_name_the_failing_call(w3: Web3, world: Deployment) -> None:
    # the pair address points at an account without code: eth_call answers "0x"
    broken = world.model_copy(update={"addresses": {**world.addresses, MAIN_PAIR: ANVIL_ADDRESSES[3]}})
    with pytest.raises(ChainReadError, match=r"PAIR\.getReserves\(\)"):
        read_snapshot(w3, broken, GOLEM)
    dead = make_web3(f"http://127.0.0.1:{free_port()}", timeout=2)  # the first read, the head's number, names itself
    with pytest.raises(ChainReadError, match=r"chain read eth_blockNumber failed: .*Connection refused"):
        read_snapshot(dead, world, GOLEM)


def test_anvil_state_persists_across_restart(tmp_path: Path) -> None:
    state = tmp_path / "chain" / "state.json"
    port = free_port()
    with AnvilProcess(port, state_path=state, log_path=tmp_path / "anvil.log") as node:
        w3 = make_web3(node.rpc_url)
        world = deploy_world(w3, ANVIL_KEYS[0], GOLEM, TRADER, golem_key=ANVIL_KEYS[2])
        _sim(w3, world, "crash", seed=0).run(1)
        before = read_snapshot(w3, world, GOLEM)
    assert state.is_file() and state.stat().st_size > 1000

    with AnvilProcess(free_port(), state_path=state, log_path=tmp_path / "anvil.log") as node:
        w3 = make_web3(node.rpc_url)
        for key, addr in world.addresses.items():
            assert len(w3.eth.get_code(addr)) > 0, f"{key} has no code after restart"
        after = read_snapshot(w3, world, GOLEM)
        assert after.block_number == before.block_number
        assert after.pool == before.pool
        assert after.oracle_price == before.oracle_price
        assert after.balances == before.balances
        assert after.positions == before.positions
        # the chain keeps going from there
        _sim(w3, world, "calm", seed=0).step()
        assert read_snapshot(w3, world, GOLEM).block_number > before.block_number


def _sim_cli(rpc: str, deployment: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("GOLEM_SIM_")}
    run_env.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-m", "golem.world.simulator", "--rpc", rpc, "--deployment", str(deployment), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=run_env,
    )


def test_simulator_cli_runs_steps_and_stops_on_sigterm(
    anvil: AnvilProcess, w3: Web3, world_snapshot: Deployment, tmp_path: Path
) -> None:
    path = world_snapshot.save(tmp_path / "deployment.json")
    proc = _sim_cli(anvil.rpc_url, path, "--scenario", "trending", "--interval", "0", "--steps", "3", "--seed", "5")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = [ln for ln in out.splitlines() if ln.startswith("step=")]
    assert len(lines) == 3 and lines[0].startswith("step=0 ") and " arb=buy " in lines[0]
    assert " round=" in lines[0] and f"hf[{GOLEM[:8]}]=" in lines[0]
    assert ANVIL_KEYS[1][2:] not in out + err and ANVIL_KEYS[0][2:] not in out + err  # keys never printed

    proc = _sim_cli(anvil.rpc_url, path, "--scenario", "calm", "--interval", "0.2")
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("step="):
            break
    else:
        proc.kill()
        pytest.fail("simulator printed no step within 30s")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert "simulator: stopped" in out


def test_simulator_cli_refuses_dev_keys_off_anvil_chain(tmp_path: Path) -> None:
    with AnvilProcess(free_port(), chain_id=4242) as node:
        w3 = make_web3(node.rpc_url)
        world = deploy_world(w3, ANVIL_KEYS[0], GOLEM, TRADER)
        path = world.save(tmp_path / "deployment.json")
        proc = _sim_cli(node.rpc_url, path, "--steps", "1")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 2
        assert "GOLEM_SIM_TRADER_KEY" in err and "4242" in err
        # with explicit keys it runs
        proc = _sim_cli(
            node.rpc_url,
            path,
            "--steps",
            "1",
            "--interval",
            "0",
            env={"GOLEM_SIM_TRADER_KEY": ANVIL_KEYS[1], "GOLEM_SIM_ORACLE_KEY": ANVIL_KEYS[0]},
        )
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "step=0 " in out


def test_simulator_rejects_wrong_oracle_key(w3: Web3, world: Deployment) -> None:
    with pytest.raises(SimulatorError, match="FEED_WETH owner"):
        MarketSimulator(w3, world, ANVIL_KEYS[1], ANVIL_KEYS[3], "calm")
    with pytest.raises(SimulatorError, match="unknown scenario"):
        MarketSimulator(w3, world, ANVIL_KEYS[1], ANVIL_KEYS[0], "sideways")
    assert Account.from_key(ANVIL_KEYS[1]).address == TRADER


def test_trader_is_topped_up_by_minting_and_wrapping(w3: Web3, world_snapshot: Deployment) -> None:
    """A trader out of USDC gets it minted by the minter (the feeds' owner); out of WETH and low on ETH, it wraps
    ETH that the dev chain gives it (anvil_setBalance, chain 31337 only)."""
    world = world_snapshot
    weth, usdc = contract(w3, world, "WETH"), contract(w3, world, "USDC")
    trader = TxSender.for_key(w3, ANVIL_KEYS[1])
    sink = ANVIL_ADDRESSES[3]
    wait_all(w3, [
        ("drain WETH", trader.call_fn(weth, "transfer", sink, weth.functions.balanceOf(TRADER).call())),
        ("drain USDC", trader.call_fn(usdc, "transfer", sink, usdc.functions.balanceOf(TRADER).call())),
    ])  # fmt: skip
    w3.provider.make_request("anvil_setBalance", [TRADER, hex(10**18)])  # 1 ETH: under the floor kept for gas
    sim = _sim(w3, world, "calm")
    up = sim.move_to(2000.0, 2200.0)  # buy WETH with USDC the trader does not have
    assert up.trade_side == "buy" and up.pool_price == pytest.approx(2200.0, rel=1e-6)
    down = sim.move_to(2000.0, 1800.0)  # sell more WETH than the buy brought
    assert down.trade_side == "sell" and down.pool_price == pytest.approx(1800.0, rel=1e-6)
    assert down.pair_prices["PAIR_WETH_DAI"] == pytest.approx(1800.0, rel=1e-6)
    assert w3.eth.get_balance(TRADER) > 10**18  # the dev chain topped its ETH up to wrap


def test_anvil_keeps_recent_states_readable_and_writes_none_to_disk(tmp_path):
    """Historical states stay in memory for the newest `history_states` blocks (a past-block read works) and
    never go to disk: left to Anvil they filled the disk (2.3 GB per 100 soak ticks)."""
    from golem.chain.web3client import make_web3
    from infra.anvil import AnvilProcess, free_port

    anvil = AnvilProcess(port=free_port(), log_path=tmp_path / "anvil.log", history_states=32)
    anvil.start()
    try:
        w3 = make_web3(anvil.rpc_url)
        a, b = w3.eth.accounts[5], w3.eth.accounts[6]
        # Automine answers eth_sendTransaction once the tx is in the pool and mines it a moment later (~1 in 30
        # here, more under load): a head read straight after the last send could be one block short. Each
        # transfer's receipt is awaited, so every transfer has its own block, and both reads name their block.
        blocks = []
        for _ in range(300):
            tx = w3.eth.send_transaction({"from": a, "to": b, "value": 1})
            blocks.append(w3.eth.wait_for_transaction_receipt(tx, timeout=30, poll_latency=0.01).blockNumber)
        head = blocks[-1]
        assert blocks == list(range(head - 299, head + 1)), "one transfer per block"
        assert w3.eth.get_balance(b, head - 20) == w3.eth.get_balance(b, head) - 20
        with pytest.raises(Exception, match="BlockOutOfRange"):
            w3.eth.get_balance(b, head - 200)
        cached = [p for p in anvil.cache_path.rglob("*") if p.is_file()] if anvil.cache_path.exists() else []
        assert cached == [], f"Anvil wrote states to disk: {cached[:3]}"
    finally:
        anvil.stop()
