"""Deploy and seed the embedded world: real Uniswap V2, Aave V3 and Circle's USDC from their published npm bytecode.

Transactions are signed locally with eth_account and pipelined with explicit nonces and
fixed gas limits, then all receipts are awaited — a whole world takes well under a second
on an automining Anvil and still works with interval mining.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rlp
from eth_abi import encode as abi_encode
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils import keccak, to_checksum_address
from hexbytes import HexBytes
from web3 import Web3
from web3._utils.method_formatters import receipt_formatter
from web3.datastructures import AttributeDict
from web3.exceptions import TimeExhausted
from web3.types import RPCEndpoint

from golem.chain.contracts import FEED_DECIMALS, PAIRS, TOKEN_DECIMALS, TOKEN_SYMBOLS, Deployment
from golem.world import protocols
from golem.world.compile import ARTIFACTS_DIR
from golem.world.devchain import ANVIL_ADDRESSES, ANVIL_CHAIN_ID, ANVIL_KEYS

USDC_PROXY_ADMIN = ANVIL_ADDRESSES[6]  # may upgrade USDC's proxy, so it can never call the token through it
# what Circle's own deploy initialises its FiatToken implementation with, so nobody else can
THROWAWAY_ADDRESS = "0x0000000000000000000000000000000000000001"

ORACLE_START_PRICE = 2000  # USD per WETH at genesis (the feed's first round)
POOL_SEED_WETH = 500  # each Uniswap V2 pair starts with 500 WETH against 1,000,000 of the stable
POOL_SEED_STABLE = 1_000_000
POOL_SEED_USDC = POOL_SEED_STABLE
AAVE_LIQUIDITY_STABLE = 1_000_000  # supplied to Aave by the deployer so there is something to borrow
AAVE_LIQUIDITY_WETH = 500
TRADER_WETH = 1_000
TRADER_USDC = 2_000_000
GOLEM_WETH = 20
GOLEM_USDC = 20_000
GOLEM_DAI = 1_000
GOLEM_SUPPLY_WETH = 10
GOLEM_BORROW_USDC = 8_000
DEPLOYER_ETH = 100_000  # anvil_setBalance on the dev chain: enough ETH to wrap every WETH the world needs
# The highest loan-to-value the golem's borrow is opened at when the feed must be raised for it (WETH's LTV is 80 %)
OPENING_LTV = 0.75

GAS_DEPLOY = 3_000_000
GAS_DEPLOY_LARGE = 8_000_000  # Aave's Pool, PoolConfigurator and logic libraries
GAS_CALL = 300_000
GAS_CONFIG = 1_500_000  # Aave configuration calls (initReserves deploys proxies)
PRIORITY_FEE_WEI = 1_000_000_000  # 1 gwei tip
MARKET_ID = "Golem Dev Market"

# Chainlink's heartbeats on mainnet: ETH/USD 3600 s, USDC/USD and DAI/USD 86400 s (data.chain.link).
FEED_HEARTBEATS: dict[str, int] = {"WETH": 3600, "USDC": 86400, "DAI": 86400}
RAY = 10**27
BPS = 10_000


class ReserveParams:
    """One reserve's risk parameters, as Aave's own deploy (aave-v3-deploy `markets/aave`) lists them:
    LTV, liquidation threshold, liquidation bonus and reserve factor in bps, caps in whole tokens (0 = none),
    and its DefaultReserveInterestRateStrategy (ray): optimal usage, base, slope 1, slope 2."""

    def __init__(self, ltv: int, lt: int, bonus: int, reserve_factor: int, supply_cap: int, borrow_cap: int,
                 rate: tuple[float, float, float, float]) -> None:
        self.ltv, self.lt, self.bonus, self.reserve_factor = ltv, lt, bonus, reserve_factor
        self.supply_cap, self.borrow_cap, self.rate = supply_cap, borrow_cap, rate


# aave-v3-deploy markets/aave reservesConfigs: strategyWETH 8000/8250/10500 rf 1000 with
# rateStrategyVolatileOne (0.45, 0, 0.04, 3.00); strategyUSDC 8000/8500/10500 and strategyDAI
# 7500/8000/10500 rf 1000 with rateStrategyStableTwo (0.80, 0, 0.04, 0.75).
RESERVES: dict[str, ReserveParams] = {
    "WETH": ReserveParams(8000, 8250, 10500, 1000, 2_000_000, 1_000_000, (0.45, 0.0, 0.04, 3.00)),
    "USDC": ReserveParams(8000, 8500, 10500, 1000, 2_000_000_000, 1_500_000_000, (0.80, 0.0, 0.04, 0.75)),
    "DAI": ReserveParams(7500, 8000, 10500, 1000, 2_000_000_000, 1_500_000_000, (0.80, 0.0, 0.04, 0.75)),
}
LIQUIDATION_THRESHOLD = RESERVES["WETH"].lt / BPS  # the golem's collateral (WETH) in this market

E18 = 10**18
E6 = 10**6
ZERO_ADDRESS = "0x" + "00" * 20
VARIABLE_RATE = 2  # Aave interestRateMode: 2 = variable


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
    # set (the replay driver's one-block rows): a send is signed and held here as (hash, raw), sent later by
    # `mine_held` in one JSON-RPC batch
    outbox: list[tuple[HexBytes, HexBytes]] | None = field(default=None, repr=False)

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
        self.nonce = nonce if nonce is not None else self.w3.eth.get_transaction_count(to_checksum_address(self.address), "pending")
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
        if self.outbox is not None:
            self.outbox.append((HexBytes(signed.hash), HexBytes(signed.raw_transaction)))
            self.nonce += 1
            return HexBytes(signed.hash)
        tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
        self.nonce += 1
        return HexBytes(tx_hash)

    def call_fn(self, contract: Any, fn: str, *args: Any, gas: int = GAS_CALL, value: int = 0) -> HexBytes:
        return self.send(contract.address, calldata(contract, fn, args), gas, value)


# (ABI list id, function name) -> (4-byte selector, argument types), for functions of plain argument types
_CALL_TYPES: dict[tuple[int, str], tuple[bytes, list[str]] | None] = {}


def calldata(contract: Any, fn: str, args: Sequence[Any]) -> str:
    """`contract.encode_abi(fn, args)`, the same bytes: web3 looks the function up and validates the arguments on every
    call (~1.5 ms of CPU, five times a replay row); a function with one overload and plain argument types is encoded
    from its cached selector and types. Overloads and tuples go through web3."""
    key = (id(contract.abi), fn)
    if key not in _CALL_TYPES:
        found = [e for e in contract.abi if e.get("type") == "function" and e.get("name") == fn]
        types = [i["type"] for i in found[0]["inputs"]] if len(found) == 1 else []
        plain = len(found) == 1 and not any(t.startswith("tuple") for t in types)
        _CALL_TYPES[key] = (keccak(text=f"{fn}({','.join(types)})")[:4], types) if plain else None
    known = _CALL_TYPES[key]
    if known is None or len(known[1]) != len(args):
        return str(contract.encode_abi(fn, args=list(args)))
    selector, types = known
    return "0x" + (selector + abi_encode(types, list(args))).hex()


def fee_fields(w3: Web3, base_fee: int | None = None) -> dict[str, int]:
    """EIP-1559 fee fields with headroom for two base-fee doublings; legacy gasPrice otherwise."""
    if base_fee is None:
        base_fee = w3.eth.get_block("latest").get("baseFeePerGas")
    if base_fee is None:
        return {"gasPrice": int(w3.eth.gas_price)}
    return {"maxFeePerGas": 2 * int(base_fee) + PRIORITY_FEE_WEI, "maxPriorityFeePerGas": PRIORITY_FEE_WEI}


NUDGE_AFTER_S = 2.0  # a pipelined send still unmined this long on a dev node gets a block of its own


def wait_all(w3: Web3, steps: Sequence[tuple[str, HexBytes]], timeout: float = 60.0) -> list[Any]:
    """Wait for every (step name, tx hash); raise TxFailed naming the first that reverted."""
    receipts = []
    for name, tx_hash in steps:
        try:
            receipt = _receipt(w3, tx_hash, timeout)
        except Exception as exc:  # TimeExhausted and transport errors: say which step
            raise TxFailed(f"{name}: no receipt for {tx_hash.hex()} ({exc})") from exc
        if receipt["status"] != 1:
            raise TxFailed(f"{name}: transaction {tx_hash.hex()} reverted (block {receipt['blockNumber']})")
        receipts.append(receipt)
    return receipts


def mine_held(w3: Web3, outbox: list[tuple[HexBytes, HexBytes]], with_first: Sequence[tuple[str, list[Any]]] = (),
              ) -> int:
    """Send the held transactions as one JSON-RPC batch (with `with_first`'s calls, which must not depend on their
    order), then mine them in one block (`evm_mine`: the node's automine is off). Returns the blocks mined (0 or 1)."""
    calls = [*with_first, *(("eth_sendRawTransaction", ["0x" + raw.hex().removeprefix("0x")]) for _, raw in outbox)]
    outbox.clear()
    if calls:
        _control(w3, calls)
    if len(calls) == len(with_first):
        return 0
    _control(w3, [("evm_mine", [])])
    return 1


def _control(w3: Web3, calls: Sequence[tuple[str, list[Any]]]) -> list[Any]:
    """One JSON-RPC batch of calls whose answers only say they were taken; raises TxFailed naming the first refused."""
    answers = w3.provider.make_batch_request([(RPCEndpoint(m), p) for m, p in calls])  # type: ignore[attr-defined]
    if not isinstance(answers, list) or len(answers) != len(calls):
        raise TxFailed(f"the node answered a batch of {len(calls)} calls with {answers!r}")
    for (method, _), answer in zip(calls, answers):
        if answer.get("error") is not None:
            raise TxFailed(f"{method}: {answer['error'].get('message', answer['error'])}")
    return [a.get("result") for a in answers]


def receipts_of(w3: Web3, steps: Sequence[tuple[str, HexBytes]]) -> list[Any]:
    """`wait_all` for transactions already mined (`mine_held`): their receipts in one JSON-RPC batch; one not there
    (the node left it out of the block) is waited for as `wait_all` waits."""
    if not steps:
        return []
    hashes = ["0x" + h.hex().removeprefix("0x") for _, h in steps]
    answers = _control(w3, [("eth_getTransactionReceipt", [h]) for h in hashes])
    return [wait_all(w3, [step])[0] if answer is None else checked_receipts([step], [answer])[0]
            for step, answer in zip(steps, answers)]


def checked_receipts(steps: Sequence[tuple[str, HexBytes]], answers: Sequence[Any]) -> list[Any]:
    """Receipts read raw (JSON-RPC), formatted as web3's get_transaction_receipt returns them; raises TxFailed naming
    the first step that reverted."""
    receipts = []
    for (name, tx_hash), answer in zip(steps, answers):
        receipt = AttributeDict.recursive(receipt_formatter(answer))
        if receipt["status"] != 1:
            raise TxFailed(f"{name}: transaction {tx_hash.hex()} reverted (block {receipt['blockNumber']})")
        receipts.append(receipt)
    return receipts


def _receipt(w3: Web3, tx_hash: HexBytes, timeout: float) -> Any:
    """The receipt, asking a dev node to mine once when a send sits in its pool: Anvil's automine now and then leaves
    the last of several sends arriving together unmined until another arrives (seen under load: a replay row's last
    swap waited out the whole timeout). A node without `evm_mine` just keeps being waited for."""
    try:
        return w3.eth.wait_for_transaction_receipt(tx_hash, timeout=min(NUDGE_AFTER_S, timeout), poll_latency=0.05)
    except TimeExhausted:
        if timeout <= NUDGE_AFTER_S:
            raise
    try:
        w3.provider.make_request(RPCEndpoint("evm_mine"), [])
    except Exception:  # not a dev node: nothing to nudge
        pass
    return w3.eth.wait_for_transaction_receipt(tx_hash, timeout=timeout - NUDGE_AFTER_S, poll_latency=0.05)


def world_artifact(name: str) -> dict[str, Any]:
    """{"abi", "bytecode"} of one of our Vyper contracts (Token, PriceFeed), compiled into golem/world/artifacts."""
    path = ARTIFACTS_DIR / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"contract artifact {path} is missing; run `python -m golem.world.compile`")
    art: dict[str, Any] = json.loads(path.read_text())
    return art


def _creation(name: str, *args: Any, libraries: dict[str, str] | None = None) -> str:
    """Creation data (bytecode + encoded constructor args) of a published artifact or one of ours."""
    if name in ("Token", "PriceFeed"):
        art = world_artifact(name)
        bytecode = art["bytecode"]
    else:
        art = protocols.artifact(name)
        bytecode = protocols.link_libraries(name, libraries or {}) if art["linkReferences"] else art["bytecode"]
    factory = Web3().eth.contract(abi=art["abi"], bytecode=bytecode)
    return str(factory.constructor(*args).data_in_transaction)


class _Batch:
    """Pipelined sends of one account, awaited together (each name says which step failed)."""

    def __init__(self, w3: Web3, sender: TxSender) -> None:
        self.w3, self.sender = w3, sender
        self.steps: list[tuple[str, HexBytes]] = []

    def deploy(self, label: str, name: str, *args: Any, gas: int = GAS_DEPLOY,
               libraries: dict[str, str] | None = None) -> str:
        address = create_address(self.sender.address, self.sender.nonce)
        self.steps.append((f"deploy {label}", self.sender.send(None, _creation(name, *args, libraries=libraries), gas)))
        return address

    def call(self, label: str, c: Any, fn: str, *args: Any, gas: int = GAS_CALL, value: int = 0) -> None:
        self.steps.append((label, self.sender.call_fn(c, fn, *args, gas=gas, value=value)))

    def wait(self) -> list[Any]:
        receipts = wait_all(self.w3, self.steps)
        self.steps = []
        return receipts


def _deploy_usdc(w3: Web3, b: _Batch, owner: str) -> str:
    """Circle's USDC as Circle deploys it: FiatTokenV2_2 (its SignatureChecker library linked), the implementation
    initialised with throwaway values, behind a FiatTokenProxy handed to USDC_PROXY_ADMIN, then initialised through
    the proxy as "USD Coin" / USDC / 6 decimals with `owner` as master minter, pauser, blacklister, owner and its one
    minter (no cap). Returns the proxy's address: the token everyone uses. Why: docs/design/chain.md#usdc."""
    checker = b.deploy("SignatureChecker", "SignatureChecker")
    impl = b.deploy("FiatTokenV2_2 impl", "FiatTokenV2_2", gas=GAS_DEPLOY_LARGE,
                    libraries={"SignatureChecker": checker})
    impl_c = _at(w3, impl, "FiatTokenV2_2")
    b.call("USDC impl initialize", impl_c, "initialize", "", "", "", 0, *[THROWAWAY_ADDRESS] * 4, gas=GAS_CONFIG)
    b.call("USDC impl initializeV2", impl_c, "initializeV2", "")
    b.call("USDC impl initializeV2_1", impl_c, "initializeV2_1", THROWAWAY_ADDRESS)
    b.call("USDC impl initializeV2_2", impl_c, "initializeV2_2", [], "")
    proxy = b.deploy("FiatTokenProxy", "FiatTokenProxy", impl)
    b.call("USDC proxy changeAdmin", _at(w3, proxy, "FiatTokenProxy"), "changeAdmin", USDC_PROXY_ADMIN)
    usdc = _at(w3, proxy, "FiatTokenV2_2")
    b.call("USDC initialize", usdc, "initialize", "USD Coin", "USDC", "USD", TOKEN_DECIMALS["USDC"], owner, owner,
           owner, owner, gas=GAS_CONFIG)
    b.call("USDC initializeV2", usdc, "initializeV2", "USD Coin")
    b.call("USDC initializeV2_1", usdc, "initializeV2_1", owner)
    b.call("USDC initializeV2_2", usdc, "initializeV2_2", [], "USDC")
    b.call("USDC configureMinter", usdc, "configureMinter", owner, 2**256 - 1)
    return proxy


@dataclass(frozen=True)
class GolemPosition:
    """What the golem holds when the world is deployed: WETH supplied to Aave (`collateral`), USDC borrowed at a
    variable rate (`debt`), and its wallet (the borrowed USDC included). The default is the dev world's loan; a
    learned rule's trial opens the live golem's own (docs/design/learning.md#the-trial-starts-where-the-golem-was)."""

    collateral: float = GOLEM_SUPPLY_WETH
    debt: float = GOLEM_BORROW_USDC
    weth: float = GOLEM_WETH
    usdc: float = GOLEM_USDC
    dai: float = GOLEM_DAI

    def check(self) -> None:
        """A clear error for a position the world cannot open."""
        named = {"collateral": self.collateral, "debt": self.debt, "weth": self.weth, "usdc": self.usdc, "dai": self.dai}
        bad = [f"{k} = {v!r}" for k, v in named.items() if not (v >= 0 and v < 1e12)]
        if bad:
            raise ValueError(f"golem position: {', '.join(bad)}: every amount must be a finite number ≥ 0")
        if self.debt > 0 and self.collateral <= 0:
            raise ValueError(f"golem position: debt {self.debt:g} USDC with no WETH collateral cannot be borrowed")

    def opening_price(self) -> float:
        """The ETH/USD answer the borrow is opened at: the genesis price, or higher when the debt needs it (the
        replay posts the first row's price before the golem reads anything)."""
        if self.debt <= 0:
            return float(ORACLE_START_PRICE)
        return max(float(ORACLE_START_PRICE), self.debt / (self.collateral * OPENING_LTV))


def open_member_position(w3: Web3, dep: Deployment, deployer_key: str, member_key: str,
                         position: GolemPosition | None = None) -> None:
    """A fleet member's wallet and loan, as the dev world gives its first golem (`golem run --golems N`): the chain
    gives the member the ETH it wraps into its WETH (and gas), the deployer mints its stables, and the member opens
    its own Aave position. On the local dev chain only (anvil_setBalance)."""
    held = position if position is not None else GolemPosition()
    held.check()
    a, chain_id = dep.addresses, w3.eth.chain_id
    member = Account.from_key(member_key).address
    weth_total = held.weth + held.collateral
    w3.provider.make_request(RPCEndpoint("anvil_setBalance"), [member, hex(_units(weth_total + 100, E18))])
    b = _Batch(w3, TxSender.for_key(w3, deployer_key, chain_id))
    usdc, dai = _at(w3, a["USDC"], "FiatTokenV2_2"), _at(w3, a["DAI"], "Token")
    if held.usdc - held.debt > 0:  # the borrow adds the debt to the wallet
        b.call("fund member USDC", usdc, "mint", member, _units(held.usdc - held.debt, E6))
    if held.dai > 0:
        b.call("fund member DAI", dai, "mint", member, _units(held.dai, E18))
    if b.steps:
        b.wait()
    g = _Batch(w3, TxSender.for_key(w3, member_key, chain_id))
    weth, pool = _at(w3, a["WETH"], "WETH9"), _at(w3, a["AAVE_POOL"], "Pool")
    g.call("member wraps WETH", weth, "deposit", value=_units(weth_total, E18))
    _open_loan(g, "member", member, held, weth, pool, a)
    g.wait()


def _open_loan(g: _Batch, who: str, owner: str, held: GolemPosition, weth: Any, pool: Any, a: dict[str, str]) -> None:
    """The owner's own Aave position, queued on its batch: WETH supplied as collateral, USDC borrowed."""
    if held.collateral > 0:
        supplied = _units(held.collateral, E18)
        g.call(f"{who} approve WETH", weth, "approve", a["AAVE_POOL"], supplied)
        g.call(f"{who} supply", pool, "supply", a["WETH"], supplied, owner, 0, gas=GAS_CONFIG)
    if held.debt > 0:
        g.call(f"{who} borrow", pool, "borrow", a["USDC"], _units(held.debt, E6), VARIABLE_RATE, 0, owner,
               gas=GAS_CONFIG)


def _units(amount: float, unit: int) -> int:
    """Human units to base units, rounded down (a wallet never gets more than the record said it held)."""
    return int(amount * unit)


def _at(w3: Web3, address: str, abi_name: str) -> Any:
    art = world_artifact(abi_name) if abi_name in ("Token", "PriceFeed") else protocols.artifact(abi_name)
    return w3.eth.contract(address=to_checksum_address(address), abi=art["abi"])


def _rate_args(rate: tuple[float, float, float, float]) -> list[int]:
    optimal, base, slope1, slope2 = (int(round(x * 1e4)) * RAY // BPS for x in rate)
    # Stable borrowing stays off in this market (Aave V3.0.1 deploys it disabled); its slopes mirror the variable ones.
    return [optimal, base, slope1, slope2, slope1, slope2, 2 * RAY // 100, 5 * RAY // 100, 20 * RAY // 100]


def deploy_world(
    w3: Web3,
    deployer_key: str,
    golem_address: str,
    trader_address: str,
    golem_key: str | None = None,
    rpc_url: str | None = None,
    position: GolemPosition | None = None,
) -> Deployment:
    """Deploy the embedded world from the protocols' published bytecode and seed it.

    Uniswap V2 (factory, Router02, WETH9; WETH/USDC and WETH/DAI pairs seeded through the router), an
    Aave V3 market (PoolAddressesProvider, ACLManager, Pool with its seven logic libraries linked,
    PoolConfigurator, AaveOracle over our AggregatorV3-style feeds, AToken/VariableDebtToken/StableDebtToken
    implementations, DefaultReserveInterestRateStrategy; WETH, USDC and DAI reserves configured through the
    PoolConfigurator), USDC as Circle's FiatTokenV2_2 behind its proxy (the deployer its minter), DAI as our
    mintable ERC-20. With `golem_key` the golem opens its own Aave
    position: 10 WETH supplied, 8,000 USDC borrowed at a variable rate (HF ≈ 2.06 at $2,000); its wallet
    then holds 20 WETH, 20,000 USDC and 1,000 DAI. `position` opens another one (GolemPosition).
    """
    if not Web3.is_address(golem_address) or not Web3.is_address(trader_address):
        raise ValueError(f"golem_address/trader_address must be addresses, got {golem_address!r}, {trader_address!r}")
    golem_address = to_checksum_address(golem_address)
    trader_address = to_checksum_address(trader_address)
    golem_account = None
    held = position if position is not None else GolemPosition()
    held.check()
    if golem_key is not None:
        golem_account = Account.from_key(golem_key)
        if golem_account.address != golem_address:
            raise ValueError("golem_key does not belong to golem_address; pass the golem account's own key")

    chain_id = w3.eth.chain_id
    dep = TxSender.for_key(w3, deployer_key, chain_id)
    # Wrapping the world's WETH takes ETH; on the dev chain the deployer is simply given enough.
    w3.provider.make_request(RPCEndpoint("anvil_setBalance"), [dep.address, hex(DEPLOYER_ETH * E18)])
    b = _Batch(w3, dep)
    a: dict[str, str] = {}

    # 1. tokens, feeds, Uniswap V2, and the Aave pieces that need nothing deployed by the provider
    a["WETH"] = b.deploy("WETH9", "WETH9")
    a["USDC"] = _deploy_usdc(w3, b, dep.address)
    a["DAI"] = b.deploy("DAI", "Token", "Dai Stablecoin", "DAI", 18)
    starts = {"WETH": ORACLE_START_PRICE, "USDC": 1, "DAI": 1}
    for sym in TOKEN_SYMBOLS:
        desc = f"{'ETH' if sym == 'WETH' else sym} / USD"
        a[f"FEED_{sym}"] = b.deploy(f"feed {desc}", "PriceFeed", FEED_DECIMALS, desc, starts[sym] * 10**FEED_DECIMALS)
    a["UNI_FACTORY"] = b.deploy("UniswapV2Factory", "UniswapV2Factory", dep.address, gas=GAS_DEPLOY_LARGE)
    a["UNI_ROUTER"] = b.deploy("UniswapV2Router02", "UniswapV2Router02", a["UNI_FACTORY"], a["WETH"], gas=GAS_DEPLOY_LARGE)
    a["AAVE_PROVIDER"] = b.deploy("PoolAddressesProvider", "PoolAddressesProvider", MARKET_ID, dep.address)
    libs: dict[str, str] = {}
    for lib in ("SupplyLogic", "BorrowLogic", "LiquidationLogic", "EModeLogic", "BridgeLogic", "PoolLogic",
                "ConfiguratorLogic"):
        libs[lib] = b.deploy(lib, lib, gas=GAS_DEPLOY_LARGE)
    libs["FlashLoanLogic"] = b.deploy("FlashLoanLogic", "FlashLoanLogic", gas=GAS_DEPLOY_LARGE, libraries=libs)
    provider = _at(w3, a["AAVE_PROVIDER"], "PoolAddressesProvider")
    b.call("provider.setACLAdmin", provider, "setACLAdmin", dep.address)
    acl = b.deploy("ACLManager", "ACLManager", a["AAVE_PROVIDER"])
    b.call("provider.setACLManager", provider, "setACLManager", acl)
    acl_c = _at(w3, acl, "ACLManager")
    b.call("acl.addPoolAdmin", acl_c, "addPoolAdmin", dep.address)
    b.call("acl.addEmergencyAdmin", acl_c, "addEmergencyAdmin", dep.address)
    pool_impl = b.deploy("Pool", "Pool", a["AAVE_PROVIDER"], gas=GAS_DEPLOY_LARGE, libraries=libs)
    # as Aave's deploy does: initialise the implementation itself so nobody else can
    b.call("pool impl initialize", _at(w3, pool_impl, "Pool"), "initialize", a["AAVE_PROVIDER"], gas=GAS_CONFIG)
    b.call("provider.setPoolImpl", provider, "setPoolImpl", pool_impl, gas=GAS_CONFIG)
    conf_impl = b.deploy("PoolConfigurator", "PoolConfigurator", gas=GAS_DEPLOY_LARGE, libraries=libs)
    b.call("configurator impl initialize", _at(w3, conf_impl, "PoolConfigurator"), "initialize", a["AAVE_PROVIDER"])
    b.call("provider.setPoolConfiguratorImpl", provider, "setPoolConfiguratorImpl", conf_impl, gas=GAS_CONFIG)
    a["AAVE_DATA"] = b.deploy("AaveProtocolDataProvider", "AaveProtocolDataProvider", a["AAVE_PROVIDER"])
    b.call("provider.setPoolDataProvider", provider, "setPoolDataProvider", a["AAVE_DATA"])
    a["AAVE_ORACLE"] = b.deploy(
        "AaveOracle", "AaveOracle", a["AAVE_PROVIDER"], [a[s] for s in TOKEN_SYMBOLS],
        [a[f"FEED_{s}"] for s in TOKEN_SYMBOLS], ZERO_ADDRESS, ZERO_ADDRESS, 10**FEED_DECIMALS,
    )  # fmt: skip
    b.call("provider.setPriceOracle", provider, "setPriceOracle", a["AAVE_ORACLE"])
    b.wait()
    a["AAVE_POOL"] = provider.functions.getPool().call()
    configurator = _at(w3, provider.functions.getPoolConfigurator().call(), "PoolConfigurator")

    # 2. reserves: token implementations, rate strategies, initReserves, risk parameters
    a_impl = b.deploy("AToken impl", "AToken", a["AAVE_POOL"], gas=GAS_DEPLOY_LARGE)
    s_impl = b.deploy("StableDebtToken impl", "StableDebtToken", a["AAVE_POOL"], gas=GAS_DEPLOY_LARGE)
    v_impl = b.deploy("VariableDebtToken impl", "VariableDebtToken", a["AAVE_POOL"], gas=GAS_DEPLOY_LARGE)
    inputs = []
    for sym in TOKEN_SYMBOLS:
        strategy = b.deploy(f"rate strategy {sym}", "DefaultReserveInterestRateStrategy", a["AAVE_PROVIDER"],
                            *_rate_args(RESERVES[sym].rate))
        inputs.append((a_impl, s_impl, v_impl, TOKEN_DECIMALS[sym], strategy, a[sym], dep.address, ZERO_ADDRESS,
                       f"Aave Dev {sym}", f"aDev{sym}", f"Aave Dev Variable Debt {sym}", f"variableDebtDev{sym}",
                       f"Aave Dev Stable Debt {sym}", f"stableDebtDev{sym}", b""))
    b.call("configurator.initReserves", configurator, "initReserves", inputs, gas=3 * 3_000_000)
    for sym in TOKEN_SYMBOLS:
        r = RESERVES[sym]
        b.call(f"{sym} collateral", configurator, "configureReserveAsCollateral", a[sym], r.ltv, r.lt, r.bonus)
        b.call(f"{sym} borrowing", configurator, "setReserveBorrowing", a[sym], True)
        b.call(f"{sym} reserve factor", configurator, "setReserveFactor", a[sym], r.reserve_factor)
        b.call(f"{sym} supply cap", configurator, "setSupplyCap", a[sym], r.supply_cap)
        b.call(f"{sym} borrow cap", configurator, "setBorrowCap", a[sym], r.borrow_cap)
        b.call(f"{sym} flash loans", configurator, "setReserveFlashLoaning", a[sym], True)
    b.wait()
    pool = _at(w3, a["AAVE_POOL"], "Pool")
    for sym in TOKEN_SYMBOLS:
        data = pool.functions.getReserveData(a[sym]).call()
        a[f"A_{sym}"], a[f"VDEBT_{sym}"] = data[8], data[10]  # aTokenAddress, variableDebtTokenAddress

    # 3. liquidity: the Uniswap pairs (created by the router's first addLiquidity) and Aave's reserves
    weth = _at(w3, a["WETH"], "WETH9")
    usdc, dai = _at(w3, a["USDC"], "FiatTokenV2_2"), _at(w3, a["DAI"], "Token")
    router = _at(w3, a["UNI_ROUTER"], "UniswapV2Router02")
    stables = {"USDC": (usdc, E6), "DAI": (dai, E18)}
    trader_weth = TRADER_WETH
    golem_weth = held.weth + (held.collateral if golem_account else 0)
    wrap = math.ceil(2 * POOL_SEED_WETH + AAVE_LIQUIDITY_WETH + trader_weth + golem_weth)
    b.call("wrap WETH", weth, "deposit", value=wrap * E18, gas=GAS_CALL)
    deadline = 2**63
    for sym, (tok, unit) in stables.items():
        b.call(f"mint {sym}", tok, "mint", dep.address, (POOL_SEED_STABLE + AAVE_LIQUIDITY_STABLE) * unit)
        b.call(f"approve router {sym}", tok, "approve", a["UNI_ROUTER"], POOL_SEED_STABLE * unit)
        b.call(f"approve aave {sym}", tok, "approve", a["AAVE_POOL"], AAVE_LIQUIDITY_STABLE * unit)
    b.call("approve router WETH", weth, "approve", a["UNI_ROUTER"], 2 * POOL_SEED_WETH * E18)
    b.call("approve aave WETH", weth, "approve", a["AAVE_POOL"], AAVE_LIQUIDITY_WETH * E18)
    for sym, (_tok, unit) in stables.items():
        b.call(f"seed pair WETH/{sym}", router, "addLiquidity", a["WETH"], a[sym], POOL_SEED_WETH * E18,
               POOL_SEED_STABLE * unit, 0, 0, dep.address, deadline, gas=GAS_DEPLOY)
        b.call(f"aave supply {sym}", pool, "supply", a[sym], AAVE_LIQUIDITY_STABLE * unit, dep.address, 0, gas=GAS_CONFIG)
    b.call("aave supply WETH", pool, "supply", a["WETH"], AAVE_LIQUIDITY_WETH * E18, dep.address, 0, gas=GAS_CONFIG)
    # 4. the trader and the golem
    b.call("fund trader WETH", weth, "transfer", trader_address, trader_weth * E18)
    b.call("fund trader USDC", usdc, "mint", trader_address, TRADER_USDC * E6)
    b.call("fund trader DAI", dai, "mint", trader_address, TRADER_USDC * E18)
    # the borrow adds the debt to the wallet: mint the rest, and hand back what the wallet held less than the debt
    golem_usdc = held.usdc - (held.debt if golem_account else 0)
    b.call("fund golem WETH", weth, "transfer", golem_address, _units(golem_weth, E18))
    if golem_usdc > 0:
        b.call("fund golem USDC", usdc, "mint", golem_address, _units(golem_usdc, E6))
    if held.dai > 0:
        b.call("fund golem DAI", dai, "mint", golem_address, _units(held.dai, E18))
    opening = held.opening_price() if golem_account else float(ORACLE_START_PRICE)
    if opening > ORACLE_START_PRICE:  # a loan opened on a higher price than genesis: the feed says so while it opens
        b.call("feed at the opening price", _at(w3, a["FEED_WETH"], "PriceFeed"), "post_round",
               int(round(opening * 10**FEED_DECIMALS)))
    receipts = b.wait()
    factory = _at(w3, a["UNI_FACTORY"], "UniswapV2Factory")
    for key, (t0, t1) in PAIRS.items():
        a[key] = factory.functions.getPair(a[t0], a[t1]).call()

    # 5. the golem opens its own position (only after its funding is mined: another sender)
    if golem_account is not None:
        g = _Batch(w3, TxSender.for_key(w3, golem_key, chain_id))  # type: ignore[arg-type]
        _open_loan(g, "golem", golem_address, held, weth, pool, a)
        if golem_usdc < 0:
            g.call("golem hands back USDC", usdc, "transfer", dep.address, _units(-golem_usdc, E6))
        if g.steps:
            receipts = g.wait()
        if opening > ORACLE_START_PRICE:
            b.call("feed back at genesis", _at(w3, a["FEED_WETH"], "PriceFeed"), "post_round",
                   ORACLE_START_PRICE * 10**FEED_DECIMALS)
            receipts = b.wait()

    if rpc_url is None:
        rpc_url = getattr(w3.provider, "endpoint_uri", None) or ""
    return Deployment(
        chain_id=chain_id,
        rpc_url=str(rpc_url),
        name="embedded",
        addresses=a,
        feed_heartbeats=dict(FEED_HEARTBEATS),
        deployer=dep.address,
        trader=trader_address,
        golem_account=golem_address,
        deployed_block=int(receipts[-1]["blockNumber"]),
        protocol_versions={p: protocols.package_version(p) for p in protocols.PACKAGES},
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m golem.world.deploy --rpc URL --out deployment.json` (dev keys only on chain 31337)."""
    from golem.chain.web3client import make_web3

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
