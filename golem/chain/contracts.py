"""Contract ABIs and the resolved address book of the protocols a golem speaks.

The ABIs (ERC-20, Circle's USDC, Uniswap V2, Aave V3, Chainlink-style feeds) are vendored in `golem/chain/abis/`.
`Deployment` is the address book resolved against a chain: every address a tool, probe or verifier needs, found from the few that
`golem.toml` names (golem.chain.addressbook.resolve_book). See docs/design/chain.md#the-address-book.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eth_utils import is_address, to_checksum_address
from pydantic import BaseModel, Field, ValidationError, field_validator

if TYPE_CHECKING:  # web3 itself loads only where a contract is made: `golem status` reads constants from here
    from web3 import Web3
    from web3.contract import Contract

ABIS_DIR = Path(__file__).resolve().parent / "abis"
ABI_NAMES: tuple[str, ...] = (
    "ERC20",
    "FiatToken",
    "WETH9",
    "UniswapV2Factory",
    "UniswapV2Router02",
    "UniswapV2Pair",
    "PoolAddressesProvider",
    "AavePool",
    "AaveOracle",
    "AaveProtocolDataProvider",
    "AToken",
    "VariableDebtToken",
    "PriceFeed",
)

TOKEN_SYMBOLS: tuple[str, ...] = ("WETH", "USDC", "DAI")
TOKEN_DECIMALS: dict[str, int] = {"WETH": 18, "USDC": 6, "DAI": 18}
STABLE_SYMBOLS: tuple[str, ...] = ("USDC", "DAI")

# The pair the golem trades and provides liquidity to, and the other WETH pair the market arbitrages.
MAIN_PAIR = "PAIR_WETH_USDC"
PAIRS: dict[str, tuple[str, str]] = {"PAIR_WETH_USDC": ("WETH", "USDC"), "PAIR_WETH_DAI": ("WETH", "DAI")}

# Resolved keys every book must have, and those a market may lack (a fork without a DAI reserve, say).
REQUIRED_KEYS: tuple[str, ...] = (
    "WETH", "USDC", "DAI",
    "UNI_FACTORY", "UNI_ROUTER", MAIN_PAIR,
    "AAVE_PROVIDER", "AAVE_POOL", "AAVE_ORACLE",
    "A_WETH", "VDEBT_USDC",
    "FEED_WETH",
)  # fmt: skip


def key_abi(key: str) -> str:
    """The ABI name of a resolved address-book key."""
    fixed = {
        "WETH": "WETH9",
        "USDC": "ERC20",
        "DAI": "ERC20",
        "UNI_FACTORY": "UniswapV2Factory",
        "UNI_ROUTER": "UniswapV2Router02",
        "AAVE_PROVIDER": "PoolAddressesProvider",
        "AAVE_POOL": "AavePool",
        "AAVE_ORACLE": "AaveOracle",
        "AAVE_DATA": "AaveProtocolDataProvider",
    }
    if key in fixed:
        return fixed[key]
    prefix = key.split("_", 1)[0] + "_" if "_" in key else key
    by_prefix = {"PAIR_": "UniswapV2Pair", "A_": "AToken", "VDEBT_": "VariableDebtToken", "FEED_": "PriceFeed"}
    if prefix in by_prefix:
        return by_prefix[prefix]
    raise ValueError(f"unknown address-book key {key!r}")


# Feeds answer in USD with 8 decimals, as Chainlink's USD feeds and Aave V3's base currency do.
FEED_DECIMALS = 8
HEALTH_FACTOR_DECIMALS = 18  # Pool.getUserAccountData healthFactor is a wad
AAVE_BASE_DECIMALS = 8  # Aave V3 base currency (USD) unit: collateral/debt in getUserAccountData


class DeploymentError(ValueError):
    """A deployment file is missing or invalid."""


class Deployment(BaseModel):
    """A resolved address book: where every protocol contract lives on one chain. Addresses only — never keys.

    `deployer` and `trader` exist only for the embedded world (who deployed it, who trades in the
    simulator); a book resolved against a fork or a real chain leaves them None.
    """

    chain_id: int
    rpc_url: str
    name: str = "embedded"
    addresses: dict[str, str]
    # seconds without a new round after which a feed is stale (Chainlink's per-feed heartbeat)
    feed_heartbeats: dict[str, int] = Field(default_factory=dict)
    deployer: str | None = None
    trader: str | None = None
    golem_account: str | None = None
    deployed_block: int = 0
    # package → version of the published artifacts the embedded world was deployed from
    protocol_versions: dict[str, str] = Field(default_factory=dict)

    @field_validator("addresses")
    @classmethod
    def _check_addresses(cls, v: dict[str, str]) -> dict[str, str]:
        missing = [k for k in REQUIRED_KEYS if k not in v]
        if missing:
            raise ValueError(f"addresses is missing keys {missing}; expected at least {list(REQUIRED_KEYS)}")
        out: dict[str, str] = {}
        for k, addr in v.items():
            if not is_address(addr):
                raise ValueError(f"addresses[{k!r}] = {addr!r} is not an address")
            out[k] = to_checksum_address(addr)
        return out

    @field_validator("deployer", "trader", "golem_account")
    @classmethod
    def _check_account(cls, v: str | None) -> str | None:
        if v is None:
            return None
        if not is_address(v):
            raise ValueError(f"{v!r} is not an address")
        return to_checksum_address(v)

    def address(self, key: str) -> str:
        try:
            return self.addresses[key]
        except KeyError:
            raise KeyError(f"unknown deployment key {key!r}; known: {sorted(self.addresses)}") from None

    def has(self, key: str) -> bool:
        return key in self.addresses

    def heartbeat_s(self, symbol: str) -> int | None:
        return self.feed_heartbeats.get(symbol)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(self.model_dump_json(indent=2) + "\n")
        tmp.replace(path)  # atomic: a reader never sees half a file
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Deployment":
        path = Path(path)
        if not path.is_file():
            raise DeploymentError(
                f"deployment file {path} does not exist; start the embedded world (`golem run`) or name an "
                "address book in golem.toml ([protocols] address_book) so the worker can resolve one"
            )
        try:
            return cls.model_validate_json(path.read_text())
        except ValidationError as exc:
            raise DeploymentError(
                f"deployment file {path} is invalid (an older world? `make clean-data` redeploys): {exc}"
            ) from exc


@lru_cache(maxsize=None)
def load_abi(name: str) -> list[dict[str, Any]]:
    """A vendored ABI by name (see ABI_NAMES)."""
    if name not in ABI_NAMES:
        raise ValueError(f"unknown contract {name!r}; expected one of {list(ABI_NAMES)}")
    path = ABIS_DIR / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"ABI {path} is missing; run `python -m golem.world.compile` to extract it")
    data = json.loads(path.read_text())
    if not isinstance(data, list):
        raise ValueError(f"ABI file {path} must hold a JSON list; re-extract it")
    return data


def contract(w3: Web3, deployment: Deployment, key: str) -> Contract:
    """The web3 Contract at a resolved address-book key (e.g. `UNI_ROUTER`, `AAVE_POOL`, `FEED_WETH`)."""
    abi = key_abi(key)  # an unknown key's error first, before the deployment is asked
    return at(w3, deployment.address(key), abi)


# Built once per (node client, address, ABI). web3's `eth.contract()` makes a new class for every function and event
# of the ABI (~125 for Aave's Pool, 27 for ERC-20; ~6 ms of CPU for ERC-20), so a tick that built its contracts afresh
# left thousands of classes of garbage for the cyclic collector each tick, and the worker's heap grew with them
# under a soak. The cache hangs on the client itself: it lives and dies with it (a dream fork's client and its
# contracts go together).
_CACHE_ATTR = "_golem_contracts"


def at(w3: Web3, address: str, abi: str) -> Contract:
    """The web3 Contract at `address` with a vendored ABI (one per client, address and ABI)."""
    key = (to_checksum_address(address), abi)
    cache: dict[tuple[str, str], Contract] | None = w3.__dict__.get(_CACHE_ATTR)
    if cache is None:
        cache = w3.__dict__.setdefault(_CACHE_ATTR, {})
    found = cache.get(key)
    if found is None:
        found = cache.setdefault(key, w3.eth.contract(address=key[0], abi=load_abi(abi)))
    return found


def decimals_of(symbol: str) -> int:
    try:
        return TOKEN_DECIMALS[symbol]
    except KeyError:
        raise ValueError(f"unknown token {symbol!r}; known: {sorted(TOKEN_DECIMALS)}") from None
