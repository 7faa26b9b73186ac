"""The address book: a TOML book naming only the roots resolves, on chain, to every address the golem needs."""

from __future__ import annotations

import pytest
import tomli_w

from golem.chain.addressbook import AddressBook, AddressBookError, resolve_book
from golem.chain.contracts import REQUIRED_KEYS, Deployment
from golem.models.config import load_config
from infra.anvil import ANVIL_ADDRESSES
from workers.services import load_deployment

pytestmark = pytest.mark.integration

REPO_BOOK = "examples/address-books/base-mainnet.toml"


def _book(world: Deployment, **over) -> dict:
    raw = {
        "name": "dev-fork", "chain_id": world.chain_id,
        "tokens": {s: world.address(s) for s in ("WETH", "USDC", "DAI")},
        "uniswap_v2": {"router": world.address("UNI_ROUTER")},
        "aave_v3": {"pool_addresses_provider": world.address("AAVE_PROVIDER")},
        "feeds": {"WETH": {"heartbeat_s": 1200}},
    }  # fmt: skip
    raw.update(over)
    return raw


def test_a_book_of_roots_resolves_to_the_deployed_world(w3, world):
    dep = resolve_book(w3, AddressBook.model_validate(_book(world)), world.rpc_url, golem_account=ANVIL_ADDRESSES[2])
    for key in (*REQUIRED_KEYS, "PAIR_WETH_DAI", "A_DAI", "VDEBT_DAI", "FEED_USDC", "FEED_DAI", "AAVE_DATA"):
        assert dep.address(key) == world.address(key), key
    assert dep.feed_heartbeats["WETH"] == 1200 and dep.feed_heartbeats["USDC"] == 3600  # book value, else default
    assert dep.deployer is None and dep.trader is None and dep.name == "dev-fork"


def test_the_worker_resolves_the_book_golem_toml_names_and_writes_deployment_json(w3, world, tmp_path):
    (tmp_path / "book.toml").write_text(tomli_w.dumps(_book(world)))
    (tmp_path / "golem.toml").write_text(tomli_w.dumps({"chain": {"rpc_url": world.rpc_url, "address_book": "book.toml"}}))
    cfg = load_config(tmp_path / "golem.toml")
    assert cfg.chain.address_book == str(tmp_path / "book.toml")  # relative to golem.toml
    data = tmp_path / "data"
    dep = load_deployment(cfg, w3, data, ANVIL_ADDRESSES[2])
    assert Deployment.load(data / "deployment.json") == dep and dep.address("AAVE_POOL") == world.address("AAVE_POOL")


def test_a_wrong_book_is_refused_naming_what_failed(w3, world):
    with pytest.raises(AddressBookError, match="is for chain 8453"):
        resolve_book(w3, AddressBook.model_validate(_book(world, chain_id=8453)), world.rpc_url)
    wrong_router = _book(world, uniswap_v2={"router": world.address("USDC")})  # an ERC-20, not a router
    with pytest.raises(AddressBookError, match=r"UniswapV2Router02\.factory\(\) failed"):
        resolve_book(w3, AddressBook.model_validate(wrong_router), world.rpc_url)
    other_weth = _book(world, tokens={"WETH": world.address("DAI"), "USDC": world.address("USDC")})
    with pytest.raises(AddressBookError, match="the router's WETH is"):
        resolve_book(w3, AddressBook.model_validate(other_weth), world.rpc_url)


def test_book_files_are_validated_with_the_key_named(tmp_path):
    book = AddressBook.load(REPO_BOOK)  # the shipped Base example parses
    assert book.chain_id == 8453 and book.feeds["WETH"].heartbeat_s == 1200
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nchain_id = 1\n[tokens]\nWETH = "0x12"\nUSDC = "0x12"\n[uniswap_v2]\nrouter = "0x0"\n'
                   '[aave_v3]\npool_addresses_provider = "0x0"\n')
    with pytest.raises(AddressBookError, match=r"bad.toml: tokens: .*not an address"):
        AddressBook.load(bad)
    bad.write_text('name = "x"\nchain_id = 1\n[tokens]\nWBTC = "0x4200000000000000000000000000000000000006"\n')
    with pytest.raises(AddressBookError, match="unknown token"):
        AddressBook.load(bad)
    with pytest.raises(AddressBookError, match="does not exist"):
        AddressBook.load(tmp_path / "missing.toml")
