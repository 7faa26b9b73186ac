"""The world's own contracts (Token, PriceFeed) compile offline to the interface the golem and Aave use; the
committed artifacts and the vendored ABIs (ours and the published protocols') are what the sources and the pinned
npm packages give today; Aave's logic libraries link into the bytecode where linkReferences say; the resolved
address book (Deployment) validates what it holds; the simulator's pure math is Uniswap V2's."""

from __future__ import annotations

import json

import pytest
from eth_account import Account
from hypothesis import given
from hypothesis import strategies as st
from web3 import Web3

from golem.chain.contracts import (
    ABI_NAMES,
    ABIS_DIR,
    REQUIRED_KEYS,
    Deployment,
    DeploymentError,
    at,
    contract,
    decimals_of,
    key_abi,
    load_abi,
)
from golem.world import protocols
from golem.world.compile import (
    ABI_SOURCES,
    ARTIFACTS_DIR,
    CONTRACT_NAMES,
    compile_all,
    vendored_abis,
    write_abis,
    write_artifacts,
)
from golem.world.deploy import create_address, world_artifact
from golem.world.simulator.paths import SCENARIOS, feed_answer, oracle_path
from golem.world.simulator.trader import amount_out, arbitrage_input, exact_arbitrage_input
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
}
INTERFACE: dict[str, dict[str, list[str]]] = {
    "Token": {**ERC20, "mint": ["address", "uint256"], "minter": [], "isMinter": ["address"]},
    # Chainlink AggregatorV2V3Interface (what AaveOracle and the golem's probes call) + the owner's post_round
    "PriceFeed": {
        "decimals": [],
        "description": [],
        "version": [],
        "latestRoundData": [],
        "getRoundData": ["uint80"],
        "latestAnswer": [],
        "latestTimestamp": [],
        "latestRound": [],
        "getAnswer": ["uint256"],
        "getTimestamp": ["uint256"],
        "owner": [],
        "post_round": ["int256"],
    },
}
EVENTS = {"Token": {"Transfer", "Approval"}, "PriceFeed": {"AnswerUpdated", "NewRound"}}


@pytest.fixture(scope="module")
def compiled() -> dict:
    return compile_all()


def _functions(abi: list[dict]) -> dict[str, dict]:
    return {f["name"]: f for f in abi if f["type"] == "function"}


@pytest.mark.parametrize("name", CONTRACT_NAMES)
def test_compiled_abi_has_interface(compiled: dict, name: str) -> None:
    fns = _functions(compiled[name]["abi"])
    for fn, inputs in INTERFACE[name].items():
        assert fn in fns, f"{name}.{fn} missing"
        assert [i["type"] for i in fns[fn]["inputs"]] == inputs, f"{name}.{fn} inputs"
    events = {e["name"] for e in compiled[name]["abi"] if e["type"] == "event"}
    assert EVENTS[name] <= events
    assert compiled[name]["bytecode"].startswith("0x") and len(compiled[name]["bytecode"]) > 100


def test_price_feed_speaks_aggregator_v3(compiled: dict) -> None:
    fns = _functions(compiled["PriceFeed"]["abi"])
    shape = ["uint80", "int256", "uint256", "uint256", "uint80"]  # roundId, answer, startedAt, updatedAt, answeredInRound
    assert [o["type"] for o in fns["latestRoundData"]["outputs"]] == shape
    assert [o["type"] for o in fns["getRoundData"]["outputs"]] == shape
    assert [o["type"] for o in fns["latestAnswer"]["outputs"]] == ["int256"]  # AaveOracle's call
    assert [o["type"] for o in fns["decimals"]["outputs"]] == ["uint8"]
    assert all(fns[f]["stateMutability"] == "view" for f in ("latestRoundData", "latestAnswer", "decimals"))
    assert fns["post_round"]["stateMutability"] == "nonpayable"


def test_committed_artifacts_are_current(compiled: dict) -> None:
    for name in CONTRACT_NAMES:
        committed = json.loads((ARTIFACTS_DIR / f"{name}.json").read_text())
        assert committed == compiled[name], f"{name}.json is stale: run python -m golem.world.compile"
        assert world_artifact(name) == compiled[name]


def test_vendored_abis_are_current(compiled: dict) -> None:
    """golem/chain/abis/ is what our build and the pinned npm artifacts give; every ABI the golem loads is there."""
    assert set(ABI_SOURCES) == set(ABI_NAMES)
    fresh = vendored_abis(compiled)
    for name in ABI_NAMES:
        committed = json.loads((ABIS_DIR / f"{name}.json").read_text())
        assert committed == fresh[name], f"{name}.json is stale: run python -m golem.world.compile"
        assert load_abi(name) == committed
    assert load_abi("ERC20") == compiled["Token"]["abi"]
    assert load_abi("AavePool") == protocols.artifact("Pool")["abi"]
    pool = _functions(load_abi("AavePool"))
    assert [i["type"] for i in pool["liquidationCall"]["inputs"]] == ["address", "address", "address", "uint256", "bool"]
    # Circle's USDC: EIP-3009 with both signature forms (v, r, s and a bytes signature), as the x402 SDK calls it
    auth = [[i["type"] for i in f["inputs"]] for f in load_abi("FiatToken")
            if f.get("name") == "transferWithAuthorization"]
    base = ["address", "address", "uint256", "uint256", "uint256", "bytes32"]
    assert sorted(auth) == sorted([base + ["uint8", "bytes32", "bytes32"], base + ["bytes"]])
    router = _functions(load_abi("UniswapV2Router02"))
    assert [i["type"] for i in router["swapExactTokensForTokens"]["inputs"]] == [
        "uint256", "uint256", "address[]", "address", "uint256"]  # fmt: skip


def test_write_artifacts_and_abis_roundtrip(compiled: dict, tmp_path) -> None:
    [path] = write_artifacts({"PriceFeed": compiled["PriceFeed"]}, tmp_path)
    assert json.loads(path.read_text()) == compiled["PriceFeed"]
    [path] = write_abis({"PriceFeed": compiled["PriceFeed"]["abi"]}, tmp_path / "abis")
    assert json.loads(path.read_text()) == compiled["PriceFeed"]["abi"]


def test_protocol_versions_are_the_pinned_ones() -> None:
    lock = json.loads((protocols.REPO_ROOT / "package-lock.json").read_text())["packages"]
    for package in protocols.PACKAGES:
        assert protocols.package_version(package) == lock[f"node_modules/{package}"]["version"], package


def _libs() -> dict[str, str]:
    names = ("SupplyLogic", "BorrowLogic", "LiquidationLogic", "EModeLogic", "BridgeLogic", "PoolLogic",
             "FlashLoanLogic", "ConfiguratorLogic")
    return {n: Web3.to_checksum_address(f"0x{i + 1:040x}") for i, n in enumerate(names)}


def test_link_libraries_writes_each_address_where_link_references_say() -> None:
    libs = _libs()
    art = protocols.artifact("Pool")
    refs = {lib: r for per_source in art["linkReferences"].values() for lib, r in per_source.items()}
    assert set(refs) == {"SupplyLogic", "BorrowLogic", "LiquidationLogic", "EModeLogic", "BridgeLogic", "PoolLogic",
                         "FlashLoanLogic"}  # Aave V3 Pool's seven logic libraries
    linked = bytes.fromhex(protocols.link_libraries("Pool", libs)[2:])
    assert len(linked) * 2 == len(art["bytecode"]) - 2  # only the placeholders changed
    for lib, places in refs.items():
        for ref in places:
            assert ref["length"] == 20
            assert linked[ref["start"]: ref["start"] + 20] == bytes.fromhex(libs[lib][2:]), lib
    # everything outside the placeholders is the published bytecode, byte for byte
    original = art["bytecode"][2:]
    holes = sorted((r["start"] * 2, (r["start"] + r["length"]) * 2) for p in refs.values() for r in p)
    pos, kept = 0, []
    for a, b in holes:
        kept.append((original[pos:a], linked.hex()[pos:a]))
        pos = b
    assert all(x == y for x, y in kept)
    # a library missing from the map is refused by name; bytecode without link references passes through
    partial = {k: v for k, v in libs.items() if k != "LiquidationLogic"}
    with pytest.raises(protocols.ArtifactError, match="LiquidationLogic"):
        protocols.link_libraries("Pool", partial)
    assert protocols.link_libraries("UniswapV2Router02", {}) == protocols.artifact("UniswapV2Router02")["bytecode"]


def test_unknown_artifact_is_named() -> None:
    with pytest.raises(protocols.ArtifactError, match="Vault"):
        protocols.artifact("Vault")


def test_load_abi_rejects_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown contract"):
        load_abi("Vault")


def test_decimals() -> None:
    assert (decimals_of("WETH"), decimals_of("USDC"), decimals_of("DAI")) == (18, 6, 18)
    with pytest.raises(ValueError, match="unknown token"):
        decimals_of("BTC")


def test_dev_keys_match_addresses() -> None:
    assert [Account.from_key(k).address for k in ANVIL_KEYS] == ANVIL_ADDRESSES[: len(ANVIL_KEYS)]


def test_create_address_matches_known_anvil_deploy() -> None:
    # the first contract deployed by Anvil account #0 is famously at 0x5FbDB...0aa3
    assert create_address(ANVIL_ADDRESSES[0], 0) == "0x5FbDB2315678afecb367f032d93F642f64180aa3"


def _deployment(**over) -> Deployment:
    keys = [*REQUIRED_KEYS, "PAIR_WETH_DAI", "A_USDC", "VDEBT_DAI", "FEED_USDC", "FEED_DAI", "AAVE_DATA"]
    fields = dict(
        chain_id=31337,
        rpc_url="http://127.0.0.1:8545",
        addresses={k: Web3.to_checksum_address(f"0x{i + 16:040x}").lower() for i, k in enumerate(keys)},
        feed_heartbeats={"WETH": 3600, "USDC": 86400},
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
    assert all(a == Web3.to_checksum_address(a) for a in d.addresses.values())
    assert d.heartbeat_s("WETH") == 3600 and d.heartbeat_s("DAI") is None
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
    # a book of the retired Vyper world (POOL/LENDING/ORACLE) is refused, naming what is missing
    old = {k: ANVIL_ADDRESSES[3] for k in ("WETH", "USDC", "DAI", "POOL", "ORACLE", "LENDING")}
    stale = tmp_path / "old.json"
    stale.write_text(json.dumps({"chain_id": 31337, "rpc_url": "x", "addresses": old}))
    with pytest.raises(DeploymentError, match="UNI_ROUTER"):
        Deployment.load(stale)


def test_deployment_rejects_missing_keys_and_bad_addresses() -> None:
    with pytest.raises(ValueError, match="missing keys"):
        _deployment(addresses={"WETH": ANVIL_ADDRESSES[3]})
    good = _deployment().addresses
    with pytest.raises(ValueError, match="AAVE_POOL"):
        _deployment(addresses={**good, "AAVE_POOL": "0x1234"})
    with pytest.raises(ValueError, match="not an address"):
        _deployment(trader="0x1234")


def test_a_contract_is_built_once_per_client_address_and_abi() -> None:
    """web3 builds a class per ABI function and event for each Contract: built every tick, that garbage grew the
    worker's heap. The same client, address and ABI give the same Contract; another client its own."""
    import gc

    d = _deployment()
    w3, other = Web3(), Web3()
    usdc = contract(w3, d, "USDC")
    assert contract(w3, d, "USDC") is usdc
    assert at(w3, d.addresses["USDC"].lower(), "ERC20") is usdc  # any spelling of the address
    assert at(w3, d.addresses["USDC"], "WETH9") is not usdc  # another ABI at the same address
    assert contract(other, d, "USDC") is not usdc and contract(other, d, "USDC").w3 is other

    def classes() -> int:
        return sum(1 for o in gc.get_objects() if isinstance(o, type))

    contract(w3, d, "AAVE_POOL")
    before = classes()
    for _ in range(20):
        contract(w3, d, "AAVE_POOL")
    assert classes() - before < 10  # a fresh Pool contract is ~125 classes


def test_contract_picks_each_keys_abi() -> None:
    d = _deployment()
    w3 = Web3()
    assert contract(w3, d, "USDC").abi == load_abi("ERC20")
    assert contract(w3, d, "WETH").abi == load_abi("WETH9")
    assert contract(w3, d, "PAIR_WETH_DAI").abi == load_abi("UniswapV2Pair")
    assert contract(w3, d, "VDEBT_DAI").abi == load_abi("VariableDebtToken")
    assert contract(w3, d, "FEED_USDC").abi == load_abi("PriceFeed")
    assert contract(w3, d, "AAVE_POOL").address == d.addresses["AAVE_POOL"]
    assert {key_abi(k) for k in d.addresses} <= set(ABI_NAMES)
    with pytest.raises(KeyError, match="unknown deployment key"):
        contract(w3, d, "FEED_WBTC")  # a key shape the book knows, missing from this book
    with pytest.raises(ValueError, match="unknown address-book key"):
        contract(w3, d, "LENDING")  # the retired Vyper world's key


# -- simulator math (pure) --


@given(st.integers(1, 10**30), st.integers(1, 10**30), st.integers(1, 10**30))
def test_amount_out_is_uniswap_v2_get_amount_out(amount_in: int, reserve_in: int, reserve_out: int) -> None:
    # UniswapV2Library.getAmountOut: amountInWithFee = amountIn * 997; out = with_fee * rOut / (rIn * 1000 + with_fee)
    with_fee = amount_in * 997
    assert amount_out(amount_in, reserve_in, reserve_out) == with_fee * reserve_out // (reserve_in * 1000 + with_fee)


def test_feed_answer_is_eight_decimals() -> None:
    assert feed_answer(2000.0) == 2000 * 10**8
    assert feed_answer(1965.123456789) == 196512345679
    assert feed_answer(0.0) > 0  # a feed refuses a non-positive answer


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


def _after(r0: int, r1: int, side: str, amt: int) -> float:
    if side == "buy":
        return ((r1 + amt) / 10**6) / ((r0 - amount_out(amt, r1, r0)) / 10**18)
    return ((r1 - amount_out(amt, r0, r1)) / 10**6) / ((r0 + amt) / 10**18)


def test_arbitrage_input_moves_price_to_target() -> None:
    r0, r1 = 500 * 10**18, 1_000_000 * 10**6
    for target in (1900.0, 2100.0):
        target_raw = target * 10**6 / 10**18
        side, amt = arbitrage_input(r0, r1, target_raw, max_fraction=0.5)
        assert side == ("buy" if target > 2000 else "sell")
        assert _after(r0, r1, side, amt) == pytest.approx(target, rel=1e-3)
        # the bisection on the fee-exact formula lands on the row price (what the replay driver needs)
        exact = exact_arbitrage_input(r0, r1, target_raw, side, amt)
        assert _after(r0, r1, side, exact) == pytest.approx(target, rel=1e-9)


def test_arbitrage_input_is_capped() -> None:
    r0, r1 = 500 * 10**18, 1_000_000 * 10**6
    side, amt = arbitrage_input(r0, r1, 4000.0 * 10**6 / 10**18, max_fraction=0.1)
    assert side == "buy" and amt == r1 // 10
    assert arbitrage_input(r0, r1, 2000.0 * 10**6 / 10**18, 0.1) == ("none", 0)
