"""Contract artifacts and the address book of a deployed dev world (contracts.md)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, field_validator
from web3 import Web3
from web3.contract import Contract

ARTIFACTS_DIR = Path(__file__).resolve().parent.parent / "world" / "artifacts"
ABI_NAMES: tuple[str, ...] = ("Token", "WETH", "Pool", "Oracle", "Lending")
DEPLOYMENT_KEYS: tuple[str, ...] = ("WETH", "USDC", "DAI", "POOL", "ORACLE", "LENDING")

# deployment key → artifact (ABI) name; USDC and DAI are both Token.vy
KEY_TO_ABI: dict[str, str] = {
    "WETH": "WETH",
    "USDC": "Token",
    "DAI": "Token",
    "POOL": "Pool",
    "ORACLE": "Oracle",
    "LENDING": "Lending",
}
TOKEN_DECIMALS: dict[str, int] = {"WETH": 18, "USDC": 6, "DAI": 18}
ORACLE_PRICE_DECIMALS = 18  # Oracle.price() is USDC per WETH scaled 1e18
HEALTH_FACTOR_DECIMALS = 18


class DeploymentError(ValueError):
    """A deployment file is missing or invalid."""


class Deployment(BaseModel):
    """Where the dev world lives. Holds addresses only — never keys."""

    chain_id: int
    rpc_url: str
    addresses: dict[str, str]
    deployer: str
    trader: str
    golem_account: str
    deployed_block: int

    @field_validator("addresses")
    @classmethod
    def _check_addresses(cls, v: dict[str, str]) -> dict[str, str]:
        missing = [k for k in DEPLOYMENT_KEYS if k not in v]
        if missing:
            raise ValueError(f"addresses is missing keys {missing}; expected {list(DEPLOYMENT_KEYS)}")
        out = {}
        for k, addr in v.items():
            if not Web3.is_address(addr):
                raise ValueError(f"addresses[{k!r}] = {addr!r} is not an address")
            out[k] = Web3.to_checksum_address(addr)
        return out

    @field_validator("deployer", "trader", "golem_account")
    @classmethod
    def _check_account(cls, v: str) -> str:
        if not Web3.is_address(v):
            raise ValueError(f"{v!r} is not an address")
        return Web3.to_checksum_address(v)

    def address(self, key: str) -> str:
        try:
            return self.addresses[key]
        except KeyError:
            raise KeyError(f"unknown deployment key {key!r}; known: {sorted(self.addresses)}") from None

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
                f"deployment file {path} does not exist; deploy the world first "
                "(golem.world.deploy.deploy_world) or pass the right path"
            )
        try:
            return cls.model_validate_json(path.read_text())
        except ValidationError as exc:
            raise DeploymentError(f"deployment file {path} is invalid: {exc}") from exc


@lru_cache(maxsize=None)
def _artifact(name: str) -> dict[str, Any]:
    if name not in ABI_NAMES:
        raise ValueError(f"unknown contract {name!r}; expected one of {list(ABI_NAMES)}")
    path = ARTIFACTS_DIR / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"contract artifact {path} is missing; run `python -m golem.world.compile` to build it"
        )
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or "abi" not in data or "bytecode" not in data:
        raise ValueError(f"contract artifact {path} must hold 'abi' and 'bytecode'; rebuild it")
    return data


def load_abi(name: str) -> list[dict[str, Any]]:
    """The ABI of `Token|WETH|Pool|Oracle|Lending`."""
    return _artifact(name)["abi"]


def load_bytecode(name: str) -> str:
    """The deploy bytecode (0x-hex) of `Token|WETH|Pool|Oracle|Lending`."""
    return _artifact(name)["bytecode"]


def contract(w3: Web3, deployment: Deployment, key: str) -> Contract:
    """The web3 Contract at deployment key `WETH|USDC|DAI|POOL|ORACLE|LENDING`."""
    if key not in KEY_TO_ABI:
        raise ValueError(f"unknown deployment key {key!r}; expected one of {list(KEY_TO_ABI)}")
    return w3.eth.contract(address=deployment.address(key), abi=load_abi(KEY_TO_ABI[key]))


def decimals_of(symbol: str) -> int:
    try:
        return TOKEN_DECIMALS[symbol]
    except KeyError:
        raise ValueError(f"unknown token {symbol!r}; known: {sorted(TOKEN_DECIMALS)}") from None
