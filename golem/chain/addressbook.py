"""The address book: which protocol deployments a golem speaks to, named in TOML, resolved on chain.

A book names only the roots (tokens, Uniswap V2's Router02, Aave V3's PoolAddressesProvider, optional feeds) and
`resolve_book` asks the protocols for the rest; the result is written to `<data>/deployment.json`.
Book format: examples/address-books/base-mainnet.toml. Why: docs/design/chain.md#the-address-book.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, ValidationError, field_validator
from web3 import Web3

from golem.chain.contracts import PAIRS, REQUIRED_KEYS, TOKEN_SYMBOLS, Deployment, at

ZERO = "0x" + "00" * 20


class AddressBookError(ValueError):
    """An address book is missing, malformed, or does not match what the chain answers."""


def _addr(v: str) -> str:
    if not isinstance(v, str) or not Web3.is_address(v):
        raise ValueError(f"{v!r} is not an address")
    return Web3.to_checksum_address(v)


Address = Annotated[str, AfterValidator(_addr)]


class FeedEntry(BaseModel):
    model_config = {"extra": "forbid"}
    address: Address | None = None  # default: AaveOracle.getSourceOfAsset(asset)
    heartbeat_s: int = Field(default=3600, ge=1)


class UniswapV2Entry(BaseModel):
    model_config = {"extra": "forbid"}
    router: Address


class AaveV3Entry(BaseModel):
    model_config = {"extra": "forbid"}
    pool_addresses_provider: Address


class AddressBook(BaseModel):
    model_config = {"extra": "forbid"}
    name: str
    chain_id: int
    tokens: dict[str, str]
    uniswap_v2: UniswapV2Entry
    aave_v3: AaveV3Entry
    feeds: dict[str, FeedEntry] = Field(default_factory=dict)

    @field_validator("tokens")
    @classmethod
    def _tokens(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(v) - set(TOKEN_SYMBOLS))
        if unknown:
            raise ValueError(f"unknown token(s) {unknown}; the golem's tools speak {list(TOKEN_SYMBOLS)}")
        if "WETH" not in v or "USDC" not in v:
            raise ValueError("tokens needs at least WETH and USDC (the golem's collateral and debt)")
        return {k: _addr(a) for k, a in v.items()}

    @classmethod
    def load(cls, path: str | Path) -> "AddressBook":
        path = Path(path)
        if not path.is_file():
            raise AddressBookError(f"address book {path} does not exist; fix [protocols] address_book in golem.toml")
        try:
            return cls.model_validate(tomllib.loads(path.read_text()))
        except tomllib.TOMLDecodeError as exc:
            raise AddressBookError(f"address book {path} is not valid TOML: {exc}") from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise AddressBookError(f"address book {path}: {where}: {first['msg']}") from exc


def resolve_book(w3: Web3, book: AddressBook, rpc_url: str, golem_account: str | None = None) -> Deployment:
    """Every address the golem needs, asked of the protocols the book names. Raises AddressBookError
    naming the contract that did not answer (a wrong address, or an RPC for another chain)."""
    chain_id = w3.eth.chain_id
    if chain_id != book.chain_id:
        raise AddressBookError(f"address book {book.name!r} is for chain {book.chain_id}, but {rpc_url} is chain {chain_id}")
    a: dict[str, str] = dict(book.tokens)
    step = "UniswapV2Router02.factory()"
    try:
        router = at(w3, book.uniswap_v2.router, "UniswapV2Router02")
        a["UNI_ROUTER"] = router.address
        a["UNI_FACTORY"] = router.functions.factory().call()
        step = "UniswapV2Router02.WETH()"
        if router.functions.WETH().call() != a["WETH"]:
            raise AddressBookError(f"the router's WETH is {router.functions.WETH().call()}, the book says {a['WETH']}")
        factory = at(w3, a["UNI_FACTORY"], "UniswapV2Factory")
        for key, (t0, t1) in PAIRS.items():
            if t0 in a and t1 in a:
                step = f"UniswapV2Factory.getPair({t0}, {t1})"
                pair = factory.functions.getPair(a[t0], a[t1]).call()
                if pair != ZERO:
                    a[key] = pair
        step = "PoolAddressesProvider.getPool()"
        provider = at(w3, book.aave_v3.pool_addresses_provider, "PoolAddressesProvider")
        a["AAVE_PROVIDER"] = provider.address
        a["AAVE_POOL"] = provider.functions.getPool().call()
        a["AAVE_ORACLE"] = provider.functions.getPriceOracle().call()
        data = provider.functions.getPoolDataProvider().call()
        if data != ZERO:
            a["AAVE_DATA"] = data
        pool = at(w3, a["AAVE_POOL"], "AavePool")
        oracle = at(w3, a["AAVE_ORACLE"], "AaveOracle")
        heartbeats: dict[str, int] = {}
        for sym in TOKEN_SYMBOLS:
            if sym not in a:
                continue
            step = f"Pool.getReserveData({sym})"
            reserve = pool.functions.getReserveData(a[sym]).call()
            if reserve[8] != ZERO:  # a listed reserve: aTokenAddress, variableDebtTokenAddress
                a[f"A_{sym}"], a[f"VDEBT_{sym}"] = reserve[8], reserve[10]
            entry = book.feeds.get(sym, FeedEntry())
            step = f"AaveOracle.getSourceOfAsset({sym})"
            feed = entry.address or oracle.functions.getSourceOfAsset(a[sym]).call()
            if feed != ZERO:
                a[f"FEED_{sym}"] = feed
                heartbeats[sym] = entry.heartbeat_s
    except AddressBookError:
        raise
    except Exception as exc:  # a revert, no code at the address, a transport error: name the call
        raise AddressBookError(f"address book {book.name!r}: {step} failed against {rpc_url}: {exc}") from exc
    missing = [k for k in REQUIRED_KEYS if k not in a]
    if missing:
        raise AddressBookError(f"address book {book.name!r} resolved without {missing} on chain {chain_id}")
    return Deployment(chain_id=chain_id, rpc_url=rpc_url, name=book.name, addresses=a, feed_heartbeats=heartbeats,
                      golem_account=golem_account, deployed_block=0)
