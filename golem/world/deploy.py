"""Deploy and seed the dev world (contracts.md: "After deploy_world, the world is ...").

Transactions are signed locally with eth_account and pipelined with explicit nonces and
fixed gas limits, then all receipts are awaited — a whole world takes well under a second
on an automining Anvil and still works with interval mining.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rlp
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address
from hexbytes import HexBytes
from web3 import Web3

from golem.chain.contracts import Deployment, load_abi, load_bytecode

ORACLE_START_PRICE = 2000  # USDC per WETH (contracts.md)
POOL_SEED_WETH = 500
POOL_SEED_USDC = 1_000_000
LENDING_LIQUIDITY_USDC = 1_000_000
TRADER_WETH = 1_000
TRADER_USDC = 2_000_000
GOLEM_WETH = 20
GOLEM_USDC = 20_000
GOLEM_DAI = 1_000
GOLEM_SUPPLY_WETH = 10
GOLEM_BORROW_USDC = 8_000

GAS_DEPLOY = 3_000_000
GAS_CALL = 300_000
PRIORITY_FEE_WEI = 1_000_000_000  # 1 gwei tip

E18 = 10**18
E6 = 10**6


class TxFailed(RuntimeError):
    """A transaction reverted or never got mined; the message names the step."""


def create_address(sender: str, nonce: int) -> str:
    """Address of the contract `sender` creates with `nonce` (CREATE: keccak(rlp([sender, nonce])))."""
    raw = keccak(rlp.encode([HexBytes(sender), nonce]))[12:]
    return to_checksum_address(raw)


@dataclass
class TxSender:
    """Signs and sends transactions for one account with locally tracked nonces.

    Holds the signing account in memory only; its repr never shows the key.
    """

    w3: Web3
    account: LocalAccount = field(repr=False)
    chain_id: int
    nonce: int
    _fees: dict[str, int] = field(default_factory=dict, repr=False)

    @classmethod
    def for_key(cls, w3: Web3, private_key: str, chain_id: int | None = None) -> "TxSender":
        account = Account.from_key(private_key)
        chain_id = chain_id if chain_id is not None else w3.eth.chain_id
        nonce = w3.eth.get_transaction_count(account.address, "pending")
        return cls(w3=w3, account=account, chain_id=chain_id, nonce=nonce)

    @property
    def address(self) -> str:
        return self.account.address

    def refresh(self, base_fee: int | None = None, nonce: int | None = None) -> None:
        """Re-read the pending nonce and fee market (call once per batch of sends)."""
        self.nonce = nonce if nonce is not None else self.w3.eth.get_transaction_count(self.address, "pending")
        self._fees = fee_fields(self.w3, base_fee)

    def send(self, to: str | None, data: str | bytes, gas: int, value: int = 0) -> HexBytes:
        if not self._fees:
            self._fees = fee_fields(self.w3)
        tx: dict[str, Any] = {
            "chainId": self.chain_id,
            "nonce": self.nonce,
            "gas": gas,
            "value": value,
            "data": data,
            **self._fees,
        }
        if to is not None:
            tx["to"] = to
        signed = self.account.sign_transaction(tx)
        tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
        self.nonce += 1
        return HexBytes(tx_hash)

    def call_fn(self, contract: Any, fn: str, *args: Any, gas: int = GAS_CALL, value: int = 0) -> HexBytes:
        return self.send(contract.address, contract.encode_abi(fn, args=list(args)), gas, value)


def fee_fields(w3: Web3, base_fee: int | None = None) -> dict[str, int]:
    """EIP-1559 fee fields with headroom for two base-fee doublings; legacy gasPrice otherwise."""
    if base_fee is None:
        base_fee = w3.eth.get_block("latest").get("baseFeePerGas")
    if base_fee is None:
        return {"gasPrice": int(w3.eth.gas_price)}
    return {"maxFeePerGas": 2 * int(base_fee) + PRIORITY_FEE_WEI, "maxPriorityFeePerGas": PRIORITY_FEE_WEI}


def wait_all(w3: Web3, steps: Sequence[tuple[str, HexBytes]], timeout: float = 60.0) -> list[Any]:
    """Wait for every (step name, tx hash); raise TxFailed naming the first that reverted."""
    receipts = []
    for name, tx_hash in steps:
        try:
            receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=timeout, poll_latency=0.05)
        except Exception as exc:  # TimeExhausted and transport errors: say which step
            raise TxFailed(f"{name}: no receipt for {tx_hash.hex()} ({exc})") from exc
        if receipt["status"] != 1:
            raise TxFailed(f"{name}: transaction {tx_hash.hex()} reverted (block {receipt['blockNumber']})")
        receipts.append(receipt)
    return receipts


def _deploy_data(name: str, *args: Any) -> str:
    factory = Web3().eth.contract(abi=load_abi(name), bytecode=load_bytecode(name))
    return factory.constructor(*args).data_in_transaction


def deploy_world(
    w3: Web3,
    deployer_key: str,
    golem_address: str,
    trader_address: str,
    golem_key: str | None = None,
    rpc_url: str | None = None,
) -> Deployment:
    """Deploy WETH, USDC, DAI, Oracle, Pool, Lending and seed them (contracts.md).

    With `golem_key` (which must belong to `golem_address`) the golem's lending position is
    opened by the golem's own account: 10 WETH supplied, 8,000 USDC borrowed (HF ≈ 2.0).
    The golem's wallet is topped up so that *after* opening the position it holds
    20 WETH, 20,000 USDC and 1,000 DAI, as the world description says.
    """
    if not Web3.is_address(golem_address) or not Web3.is_address(trader_address):
        raise ValueError(f"golem_address/trader_address must be addresses, got {golem_address!r}, {trader_address!r}")
    golem_address = to_checksum_address(golem_address)
    trader_address = to_checksum_address(trader_address)
    golem_account = None
    if golem_key is not None:
        golem_account = Account.from_key(golem_key)
        if golem_account.address != golem_address:
            raise ValueError("golem_key does not belong to golem_address; pass the golem account's own key")

    chain_id = w3.eth.chain_id
    dep = TxSender.for_key(w3, deployer_key, chain_id)
    steps: list[tuple[str, HexBytes]] = []

    # 1. contracts; addresses are known before mining from the deployer's nonces
    addr: dict[str, str] = {}
    plan: list[tuple[str, str, tuple[Any, ...]]] = [
        ("WETH", "WETH", ()),
        ("USDC", "Token", ("USD Coin", "USDC", 6)),
        ("DAI", "Token", ("Dai Stablecoin", "DAI", 18)),
        ("ORACLE", "Oracle", (ORACLE_START_PRICE * E18,)),
    ]
    for key, name, args in plan:
        addr[key] = create_address(dep.address, dep.nonce)
        steps.append((f"deploy {key}", dep.send(None, _deploy_data(name, *args), GAS_DEPLOY)))
    addr["POOL"] = create_address(dep.address, dep.nonce)
    steps.append(("deploy POOL", dep.send(None, _deploy_data("Pool", addr["WETH"], addr["USDC"]), GAS_DEPLOY)))
    addr["LENDING"] = create_address(dep.address, dep.nonce)
    steps.append(
        (
            "deploy LENDING",
            dep.send(None, _deploy_data("Lending", addr["WETH"], addr["USDC"], addr["ORACLE"]), GAS_DEPLOY),
        )
    )

    weth = w3.eth.contract(address=addr["WETH"], abi=load_abi("WETH"))
    usdc = w3.eth.contract(address=addr["USDC"], abi=load_abi("Token"))
    dai = w3.eth.contract(address=addr["DAI"], abi=load_abi("Token"))
    pool = w3.eth.contract(address=addr["POOL"], abi=load_abi("Pool"))
    lending = w3.eth.contract(address=addr["LENDING"], abi=load_abi("Lending"))

    # 2. pool liquidity from the deployer
    steps.append(("mint pool WETH", dep.call_fn(weth, "mint", dep.address, POOL_SEED_WETH * E18)))
    steps.append(("mint pool USDC", dep.call_fn(usdc, "mint", dep.address, POOL_SEED_USDC * E6)))
    steps.append(("approve pool WETH", dep.call_fn(weth, "approve", addr["POOL"], POOL_SEED_WETH * E18)))
    steps.append(("approve pool USDC", dep.call_fn(usdc, "approve", addr["POOL"], POOL_SEED_USDC * E6)))
    steps.append(
        (
            "seed pool",
            dep.call_fn(pool, "add_liquidity", POOL_SEED_WETH * E18, POOL_SEED_USDC * E6, dep.address),
        )
    )
    # 3. lending liquidity, trader and golem funding
    steps.append(("fund lending USDC", dep.call_fn(usdc, "mint", addr["LENDING"], LENDING_LIQUIDITY_USDC * E6)))
    steps.append(("fund trader WETH", dep.call_fn(weth, "mint", trader_address, TRADER_WETH * E18)))
    steps.append(("fund trader USDC", dep.call_fn(usdc, "mint", trader_address, TRADER_USDC * E6)))
    golem_weth = GOLEM_WETH + (GOLEM_SUPPLY_WETH if golem_account else 0)
    golem_usdc = GOLEM_USDC - (GOLEM_BORROW_USDC if golem_account else 0)
    steps.append(("fund golem WETH", dep.call_fn(weth, "mint", golem_address, golem_weth * E18)))
    steps.append(("fund golem USDC", dep.call_fn(usdc, "mint", golem_address, golem_usdc * E6)))
    steps.append(("fund golem DAI", dep.call_fn(dai, "mint", golem_address, GOLEM_DAI * E18)))
    receipts = wait_all(w3, steps)

    # 4. the golem opens its own position (only after its funding is mined: other sender)
    if golem_account is not None:
        g = TxSender.for_key(w3, golem_key, chain_id)  # type: ignore[arg-type]
        gsteps = [
            ("golem approve WETH", g.call_fn(weth, "approve", addr["LENDING"], GOLEM_SUPPLY_WETH * E18)),
            ("golem supply", g.call_fn(lending, "supply", GOLEM_SUPPLY_WETH * E18)),
            ("golem borrow", g.call_fn(lending, "borrow", GOLEM_BORROW_USDC * E6)),
        ]
        receipts = wait_all(w3, gsteps)

    if rpc_url is None:
        rpc_url = getattr(w3.provider, "endpoint_uri", None) or ""
    return Deployment(
        chain_id=chain_id,
        rpc_url=str(rpc_url),
        addresses=addr,
        deployer=dep.address,
        trader=trader_address,
        golem_account=golem_address,
        deployed_block=int(receipts[-1]["blockNumber"]),
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m golem.world.deploy --rpc URL --out deployment.json` (dev keys only on chain 31337)."""
    from golem.chain.web3client import make_web3
    from infra.anvil import ANVIL_ADDRESSES, ANVIL_CHAIN_ID, ANVIL_KEYS

    parser = argparse.ArgumentParser(description="Deploy and seed the Golem dev world.")
    parser.add_argument("--rpc", required=True, help="JSON-RPC URL, e.g. http://127.0.0.1:8545")
    parser.add_argument("--out", type=Path, required=True, help="where to write the deployment JSON")
    args = parser.parse_args(argv)
    w3 = make_web3(args.rpc)
    chain_id = w3.eth.chain_id
    deployer_key = os.environ.get("GOLEM_DEPLOYER_KEY")
    golem_key = os.environ.get("GOLEM_KEY")
    trader = os.environ.get("GOLEM_SIM_TRADER_ADDRESS")
    if deployer_key is None or golem_key is None:
        if chain_id != ANVIL_CHAIN_ID:
            print(
                f"chain id {chain_id} is not the local dev chain ({ANVIL_CHAIN_ID}); "
                "set GOLEM_DEPLOYER_KEY and GOLEM_KEY — dev keys are only used on Anvil",
                file=sys.stderr,
            )
            return 2
        deployer_key = deployer_key or ANVIL_KEYS[0]
        golem_key = golem_key or ANVIL_KEYS[2]
    trader = trader or ANVIL_ADDRESSES[1]
    golem_address = Account.from_key(golem_key).address
    deployment = deploy_world(w3, deployer_key, golem_address, trader, golem_key=golem_key, rpc_url=args.rpc)
    deployment.save(args.out)
    print(f"deployed world on chain {chain_id} at block {deployment.deployed_block}: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
