"""The Vyper sources compile offline to the interface of contracts.md, and the committed
artifacts are what the sources compile to today."""

from __future__ import annotations

import json

import pytest
from eth_account import Account

from golem.chain.contracts import (
    Deployment,
    DeploymentError,
    contract,
    decimals_of,
    load_abi,
    load_bytecode,
)
from golem.world.compile import ARTIFACTS_DIR, CONTRACT_NAMES, compile_all, write_artifacts
from golem.world.deploy import create_address
from golem.world.simulator import SCENARIOS, amount_out, arbitrage_input, oracle_path
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS

ERC20 = {
    "name": [],
    "symbol": [],
    "decimals": [],
    "totalSupply": [],
    "balanceOf": ["address"],
    "allowance": ["address", "address"],
    "transfer": ["address", "uint256"],
    "approve": ["address", "uint256"],
    "transferFrom": ["address", "address", "uint256"],
    "mint": ["address", "uint256"],
}
INTERFACE: dict[str, dict[str, list[str]]] = {
    "Token": ERC20,
    "WETH": {**ERC20, "deposit": [], "withdraw": ["uint256"]},
    "Pool": {
        "token0": [],
        "token1": [],
        "reserve0": [],
        "reserve1": [],
        "get_amount_out": ["uint256", "address"],
        "swap": ["address", "uint256", "uint256", "address"],
        "add_liquidity": ["uint256", "uint256", "address"],
        "remove_liquidity": ["uint256", "address"],
        "total_shares": [],
        "shares": ["address"],
    },
    "Oracle": {"price": [], "updated_at": [], "set_price": ["uint256"]},
    "Lending": {
        "liquidation_threshold_bps": [],
        "supply": ["uint256"],
        "withdraw": ["uint256"],
        "borrow": ["uint256"],
        "repay": ["uint256"],
        "collateral_of": ["address"],
        "debt_of": ["address"],
        "health_factor": ["address"],
    },
}
EVENTS = {
    "Token": {"Transfer", "Approval"},
    "WETH": {"Transfer", "Approval"},
    "Pool": {"Swap"},
    "Oracle": {"PriceUpdated"},
    "Lending": {"Supply", "Withdraw", "Borrow", "Repay"},
}


@pytest.fixture(scope="module")
def compiled() -> dict:
    return compile_all()


def _functions(abi: list[dict]) -> dict[str, list[str]]:
    return {f["name"]: [i["type"] for i in f["inputs"]] for f in abi if f["type"] == "function"}


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_compiled_abi_has_interface(compiled: dict, name: str) -> None:
    fns = _functions(compiled[name]["abi"])
    for fn, inputs in INTERFACE[name].items():
        assert fn in fns, f"{name}.{fn} missing"
        assert fns[fn] == inputs, f"{name}.{fn} inputs {fns[fn]} != {inputs}"
    events = {e["name"] for e in compiled[name]["abi"] if e["type"] == "event"}
    assert EVENTS[name] <= events
    assert compiled[name]["bytecode"].startswith("0x") and len(compiled[name]["bytecode"]) > 100


def test_pool_and_lending_signatures(compiled: dict) -> None:
    pool = {f["name"]: f for f in compiled["Pool"]["abi"] if f["type"] == "function"}
    assert [o["type"] for o in pool["swap"]["outputs"]] == ["uint256"]
    assert [o["type"] for o in pool["remove_liquidity"]["outputs"]] == ["uint256", "uint256"]
    assert pool["get_amount_out"]["stateMutability"] == "view"
    weth = {f["name"]: f for f in compiled["WETH"]["abi"] if f["type"] == "function"}
    assert weth["deposit"]["stateMutability"] == "payable"
    lending = {f["name"]: f for f in compiled["Lending"]["abi"] if f["type"] == "function"}
    assert lending["health_factor"]["stateMutability"] == "view"


def test_committed_artifacts_are_current(compiled: dict) -> None:
    for name in CONTRACT_NAMES:
        committed = json.loads((ARTIFACTS_DIR / f"{name}.json").read_text())
        assert committed == compiled[name], f"{name}.json is stale: run python -m golem.world.compile"
        assert load_abi(name) == compiled[name]["abi"]
        assert load_bytecode(name) == compiled[name]["bytecode"]


def test_write_artifacts_roundtrip(compiled: dict, tmp_path) -> None:
    paths = write_artifacts({"Oracle": compiled["Oracle"]}, tmp_path)
    assert json.loads(paths[0].read_text()) == compiled["Oracle"]


def test_load_abi_rejects_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown contract"):
        load_abi("Vault")


def test_decimals() -> None:
    assert (decimals_of("WETH"), decimals_of("USDC"), decimals_of("DAI")) == (18, 6, 18)
    with pytest.raises(ValueError, match="unknown token"):
        decimals_of("BTC")


def test_dev_keys_match_addresses() -> None:
    assert [Account.from_key(k).address for k in ANVIL_KEYS] == ANVIL_ADDRESSES


def test_create_address_matches_known_anvil_deploy() -> None:
    # first contract deployed by Anvil account #0 is famously at 0x5FbDB...0aa3
    assert create_address(ANVIL_ADDRESSES[0], 0) == "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def _deployment(**over) -> Deployment:
    fields = dict(
        chain_id=31337,
        rpc_url="http://127.0.0.1:8545",
        addresses={k: ANVIL_ADDRESSES[3] for k in ("WETH", "USDC", "DAI", "POOL", "ORACLE", "LENDING")},
        deployer=ANVIL_ADDRESSES[0],
        trader=ANVIL_ADDRESSES[1],
        golem_account=ANVIL_ADDRESSES[2].lower(),
        deployed_block=7,
    )
    fields.update(over)
    return Deployment(**fields)


def test_deployment_save_load_roundtrip(tmp_path) -> None:
    d = _deployment()
    assert d.golem_account == ANVIL_ADDRESSES[2]  # checksummed
    path = d.save(tmp_path / "sub" / "deployment.json")
    assert Deployment.load(path) == d


def test_deployment_load_errors_name_the_file(tmp_path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(DeploymentError, match="nope.json"):
        Deployment.load(missing)
    bad = tmp_path / "bad.json"
    bad.write_text('{"chain_id": 1}')
    with pytest.raises(DeploymentError, match="bad.json"):
        Deployment.load(bad)


def test_deployment_rejects_missing_keys_and_bad_addresses() -> None:
    with pytest.raises(ValueError, match="missing keys"):
        _deployment(addresses={"WETH": ANVIL_ADDRESSES[3]})
    with pytest.raises(ValueError, match="not an address"):
        _deployment(trader="0x1234")


def test_contract_uses_token_abi_for_stablecoins() -> None:
    from web3 import Web3

    d = _deployment()
    c = contract(Web3(), d, "USDC")
    assert c.abi == load_abi("Token")
    with pytest.raises(ValueError, match="unknown deployment key"):
        contract(Web3(), d, "WBTC")


# -- simulator math (pure) --


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_oracle_path_is_deterministic_per_seed(scenario: str) -> None:
    assert oracle_path(scenario, 2000.0, 20, seed=3) == oracle_path(scenario, 2000.0, 20, seed=3)
    if scenario != "crash":
        assert oracle_path(scenario, 2000.0, 20, seed=3) != oracle_path(scenario, 2000.0, 20, seed=4)


def test_crash_path_shape() -> None:
    path = oracle_path("crash", 2000.0, 15, seed=0, crash_after=5)
    assert all(abs(p / 2000.0 - 1) < 0.01 for p in path[:5])
    for a, b in zip(path[4:10], path[5:11]):
        assert b / a == pytest.approx(0.94)
    assert path[11:] == [path[10]] * 4  # flat after six −6% steps


def test_trending_path_drifts_up() -> None:
    path = oracle_path("trending", 2000.0, 50, seed=0)
    assert 1.15 < path[-1] / 2000.0 < 1.30  # ≈ 1.004^50 ≈ 1.22


def test_arbitrage_input_moves_price_to_target() -> None:
    r0, r1 = 500 * 10**18, 1_000_000 * 10**6
    for target in (1900.0, 2100.0):
        target_raw = target * 10**6 / 10**18
        side, amt = arbitrage_input(r0, r1, target_raw, max_fraction=0.5)
        if side == "buy":
            out = amount_out(amt, r1, r0)
            n0, n1 = r0 - out, r1 + amt
        else:
            out = amount_out(amt, r0, r1)
            n0, n1 = r0 + amt, r1 - out
        assert side == ("buy" if target > 2000 else "sell")
        assert (n1 / 10**6) / (n0 / 10**18) == pytest.approx(target, rel=1e-3)


def test_arbitrage_input_is_capped() -> None:
    r0, r1 = 500 * 10**18, 1_000_000 * 10**6
    side, amt = arbitrage_input(r0, r1, 4000.0 * 10**6 / 10**18, max_fraction=0.1)
    assert side == "buy" and amt == r1 // 10
    assert arbitrage_input(r0, r1, 2000.0 * 10**6 / 10**18, 0.1) == ("none", 0)
