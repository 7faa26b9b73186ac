"""The market simulator: moves the dev world's prices the way a real market does, so a golem sees calm,
trending, volatile and crashing markets on the real protocols.

Each `step()`:
  1. the ETH/USD feed posts a new round one step along the scenario's seeded path; the USDC/USD and
     DAI/USD feeds post a round near 1.0 when their answer deviates past Chainlink's threshold or half
     their heartbeat has passed (so they are never stale while the market runs);
  2. the trader arbitrages each Uniswap V2 pair (WETH/USDC, WETH/DAI) toward the feeds through Router02
     (`swapExactTokensForTokens`, capped per trade), then makes a small random noise trade on it;
  3. the liquidator reads Aave's `getUserAccountData` for every watched borrower (the golem's account and
     everyone seen in the Pool's Borrow events) and calls `liquidationCall` on each one under health
     factor 1.0: the protocol's close factor and liquidation bonus apply, and the LiquidationCall event
     is the record.
All transactions of a phase are pipelined and then awaited; reads go out as one JSON-RPC batch.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from eth_abi import decode as abi_decode
from eth_account import Account
from eth_utils import keccak, to_checksum_address
from hexbytes import HexBytes
from pydantic import BaseModel, Field
from web3 import Web3

from golem.chain.contracts import (
    FEED_DECIMALS,
    HEALTH_FACTOR_DECIMALS,
    MAIN_PAIR,
    PAIRS,
    STABLE_SYMBOLS,
    TOKEN_DECIMALS,
    TOKEN_SYMBOLS,
    Deployment,
    contract,
    decimals_of,
)
from golem.chain.reader import (
    LIQUIDATION_CALL_TOPIC,
    ChainReadError,
    _eth_call,
    _quantity,
    _Read,
    _result,
    _send,
    _uint256,
    _words,
    pair_token0,
)
from golem.world.deploy import GAS_CALL, TxFailed, TxSender, wait_all
from golem.world.devchain import ANVIL_CHAIN_ID, ANVIL_KEYS

SCENARIOS: tuple[str, ...] = ("calm", "trending", "volatile", "crash")

CALM_SIGMA = 0.0005  # ~0.05% per step
TRENDING_DRIFT = 0.004  # +0.4% per step
TRENDING_SIGMA = 0.001
VOLATILE_SIGMA = 0.03  # ~3% per step
CRASH_STEP = -0.06  # −6% per step ...
CRASH_STEPS = 6  # ... for 6 steps, then flat
DEFAULT_CRASH_AFTER = 5
MAX_TRADE_FRACTION = 0.10  # an arbitrage trade moves at most 10% of the input reserve
NOISE_FRACTION = 0.0002  # noise trades ~0.02% of the input reserve
FEE_BPS = 30  # Uniswap V2: 0.3% on input (getAmountOut's 997/1000)
MAX_UINT256 = 2**256 - 1
MIN_PRICE = 1e-6  # a feed rejects a non-positive answer
UNCAPPED_FRACTION = 1e6  # a replayed row sets the pair price exactly, however far it moved
# Chainlink's USDC/USD and DAI/USD deviation threshold (data.chain.link: 0.25 %); the stables' own market
# wobbles a couple of bps around the peg (ours), so in practice they post on the heartbeat rule.
STABLE_DEVIATION = 0.0025
STABLE_SIGMA = 0.0002
DEADLINE = 2**63  # Router02 checks deadline >= block.timestamp; the simulator's trades never expire
GAS_SWAP = 250_000
GAS_LIQUIDATION = 1_500_000  # Aave V3 liquidationCall takes ~300–450k; headroom for interest accrual paths
DEV_CHAIN_ID = 31337  # the only chain where the trader's ETH is topped up with anvil_setBalance
TRADER_ETH_FLOOR = 100 * 10**18  # keep this much ETH for gas after wrapping
BORROW_TOPIC = "0x" + keccak(text="Borrow(address,address,address,uint256,uint8,uint256,uint16)").hex()
WAD = 10**HEALTH_FACTOR_DECIMALS


class SimulatorError(RuntimeError):
    """The simulator cannot run as configured (bad scenario, keys, or chain)."""


class SimLiquidation(BaseModel):
    """One `liquidationCall` the simulator's liquidator made, as the Pool's LiquidationCall event records it."""

    user: str
    collateral_asset: str  # symbol (WETH, USDC, DAI)
    debt_asset: str
    debt_covered: float  # debt asset units repaid by the liquidator
    collateral_seized: float  # collateral units the liquidator received, the liquidation bonus included
    health_factor: float  # the user's health factor when the liquidator checked it
    tx_hash: str
    block_number: int


class SimStep(BaseModel):
    step: int
    oracle_price: float  # USD per WETH the ETH/USD feed answers after this step (the path's value)
    pool_price: float  # USDC per WETH from the WETH/USDC pair's reserves after this step's trades
    trade_side: Literal["buy", "sell", "none"]  # WETH/USDC arbitrage trade: buy/sell WETH against USDC
    trade_size: float  # WETH (human units) bought or sold by that arbitrage trade
    round_id: int = 0  # the ETH/USD feed's latest round id after the step
    pair_prices: dict[str, float] = Field(default_factory=dict)  # pair key → stable per WETH after the step
    stables_posted: dict[str, float] = Field(default_factory=dict)  # stable → answer posted this step
    # watched borrower → health factor at this step's prices, as the liquidator read it (None: no debt)
    health_factors: dict[str, float | None] = Field(default_factory=dict)
    liquidations: list[SimLiquidation] = Field(default_factory=list)
    liquidation_failures: list[str] = Field(default_factory=list)  # a liquidationCall that reverted, and why


def scenario_return(scenario: str, step: int, rng: random.Random, crash_after: int = DEFAULT_CRASH_AFTER) -> float:
    """The ETH/USD feed's relative move at `step` (0-based). Draws from `rng` in a fixed order."""
    if scenario == "calm":
        return rng.gauss(0.0, CALM_SIGMA)
    if scenario == "trending":
        return TRENDING_DRIFT + rng.gauss(0.0, TRENDING_SIGMA)
    if scenario == "volatile":
        return rng.gauss(0.0, VOLATILE_SIGMA)
    if scenario == "crash":
        if step < crash_after:
            return rng.gauss(0.0, CALM_SIGMA)
        if step < crash_after + CRASH_STEPS:
            return CRASH_STEP
        return 0.0
    raise SimulatorError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")


def oracle_path(
    scenario: str, start_price: float, steps: int, seed: int = 0, crash_after: int = DEFAULT_CRASH_AFTER
) -> list[float]:
    """The ETH/USD prices of `steps` simulator steps from `start_price` (what MarketSimulator posts)."""
    rng = random.Random(seed)
    prices, p = [], start_price
    for i in range(steps):
        p = max(MIN_PRICE, p * (1.0 + scenario_return(scenario, i, rng, crash_after)))
        prices.append(p)
    return prices


def amount_out(amount_in: int, reserve_in: int, reserve_out: int) -> int:
    """UniswapV2Library.getAmountOut in integers: 0.3% fee on input (amountIn × 997 / 1000, scaled by 10)."""
    with_fee = amount_in * (10_000 - FEE_BPS)
    return with_fee * reserve_out // (reserve_in * 10_000 + with_fee)


def arbitrage_input(r0: int, r1: int, target_raw: float, max_fraction: float) -> tuple[str, int]:
    """Which side and how much input moves the x*y=k pair price r1/r0 (r0 = WETH, r1 = the stable) to `target_raw`.

    Returns ("buy", stable_in) or ("sell", weth_in) or ("none", 0); input grossed up for the fee
    and capped at `max_fraction` of the input reserve.
    """
    if r0 <= 0 or r1 <= 0 or target_raw <= 0:
        return "none", 0
    k = r0 * r1
    gross = 10_000 / (10_000 - FEE_BPS)
    if r1 / r0 < target_raw:
        want = int((math.isqrt(int(k * target_raw)) - r1) * gross)  # new r1 = sqrt(k * T)
        return ("buy", min(want, int(r1 * max_fraction))) if want > 0 else ("none", 0)
    want = int((math.isqrt(int(k / target_raw)) - r0) * gross)  # new r0 = sqrt(k / T)
    return ("sell", min(want, int(r0 * max_fraction))) if want > 0 else ("none", 0)


def exact_arbitrage_input(r0: int, r1: int, target_raw: float, side: str, approx: int) -> int:
    """The integer input (bisection on `amount_out`) that puts the pair price r1/r0 closest to `target_raw`:
    the fee stays in the pool, so the square-root estimate of arbitrage_input is off by a few bps."""
    if side not in ("buy", "sell") or approx <= 0:
        return 0

    def price_after(amt: int) -> float:
        if side == "buy":
            return (r1 + amt) / (r0 - amount_out(amt, r1, r0))
        return (r1 - amount_out(amt, r0, r1)) / (r0 + amt)

    lo, hi = 0, 2 * approx
    for _ in range(80):
        if hi - lo <= 1:
            break
        mid = (lo + hi) // 2
        below = price_after(mid) < target_raw
        if (side == "buy") == below:
            lo = mid
        else:
            hi = mid
    return min((lo, hi), key=lambda a: abs(price_after(a) - target_raw))


def feed_answer(price: float) -> int:
    """A USD price as the feeds' 8-decimal fixed-point answer."""
    return int(round(max(MIN_PRICE, price) * 10**FEED_DECIMALS))


class _Pair:
    """One WETH/stable pair: where it lives and which reserve is WETH."""

    def __init__(self, deployment: Deployment, key: str) -> None:
        self.key = key
        self.stable = PAIRS[key][1]
        self.address = deployment.addresses[key]
        self.weth_is_token0 = pair_token0(deployment, key) == "WETH"
        self.stable_unit = 10 ** decimals_of(self.stable)

    def reserves(self, words: list[int]) -> tuple[int, int]:
        """(WETH reserve, stable reserve) from getReserves()."""
        return (words[0], words[1]) if self.weth_is_token0 else (words[1], words[0])

    def price(self, r_weth: int, r_stable: int) -> float:
        return (r_stable / self.stable_unit) / (r_weth / 10**18) if r_weth else 0.0


class MarketSimulator:
    """Drives one deployed world. Keys stay inside; nothing here logs or returns them.

    `trader_key` trades the pairs and liquidates; `oracle_key` is the feeds' owner (in the dev world the
    deployer, who is also the stables' minter and so can top the trader up).
    """

    def __init__(
        self,
        w3: Web3,
        deployment: Deployment,
        trader_key: str,
        oracle_key: str,
        scenario: str,
        seed: int = 0,
        crash_after: int = DEFAULT_CRASH_AFTER,
        max_trade_fraction: float = MAX_TRADE_FRACTION,
        noise_fraction: float = NOISE_FRACTION,
        watch: Iterable[str] = (),
        liquidate: bool = True,
    ) -> None:
        if scenario not in SCENARIOS:
            raise SimulatorError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
        if crash_after < 0:
            raise SimulatorError(f"crash_after must be >= 0, got {crash_after}")
        if not 0 < max_trade_fraction <= 0.5:
            raise SimulatorError(f"max_trade_fraction must be in (0, 0.5], got {max_trade_fraction}")
        chain_id = w3.eth.chain_id
        if chain_id != deployment.chain_id:
            raise SimulatorError(
                f"the RPC answers chain id {chain_id} but the deployment is for chain {deployment.chain_id}"
            )
        self.w3 = w3
        self.deployment = deployment
        self.chain_id = chain_id
        self.scenario = scenario
        self.seed = seed
        self.crash_after = crash_after
        self.max_trade_fraction = max_trade_fraction
        self.noise_fraction = noise_fraction
        self.liquidate = liquidate
        self.step_index = 0
        # separate streams: the feed path depends on the seed alone (== oracle_path(...)),
        # not on how many random draws the trades or the stables took
        self._price_rng = random.Random(seed)
        self._trade_rng = random.Random(f"{seed}:trades")
        self._stable_rng = random.Random(f"{seed}:stables")
        self._trader = TxSender.for_key(w3, trader_key, chain_id)
        oracle_account = Account.from_key(oracle_key)
        self._oracle = (
            self._trader if oracle_account.address == self._trader.address else TxSender.for_key(w3, oracle_key, chain_id)
        )
        a = deployment.addresses
        self.symbols = [s for s in TOKEN_SYMBOLS if s in a]
        self.stables = [s for s in STABLE_SYMBOLS if s in a and f"FEED_{s}" in a]
        self.pairs = [_Pair(deployment, k) for k in PAIRS if k in a]
        self._tokens = {s: contract(w3, deployment, s) for s in self.symbols}
        self._feeds = {s: contract(w3, deployment, f"FEED_{s}") for s in ["WETH", *self.stables]}
        self._router = contract(w3, deployment, "UNI_ROUTER")
        self._aave = contract(w3, deployment, "AAVE_POOL")
        for sym, feed in self._feeds.items():
            owner = feed.functions.owner().call()
            if owner != self._oracle.address:
                raise SimulatorError(
                    f"oracle_key is for {self._oracle.address}, but the FEED_{sym} owner is {owner}: "
                    "give the key of the account that deployed the feeds (GOLEM_SIM_ORACLE_KEY)"
                )
        # the feed owner is the deployer = minter in the dev world; then it can top the trader up
        self._can_mint = {
            s: self._tokens[s].functions.minter().call() == self._oracle.address for s in self.symbols if s != "WETH"
        }
        self.oracle_price = self._feeds["WETH"].functions.latestAnswer().call() / 10**FEED_DECIMALS
        self._stable_value = {s: 1.0 for s in self.stables}  # the stables' own market price (~1.0)
        self.watched: list[str] = []
        for acct in [deployment.golem_account, *watch]:
            self.watch(acct)
        # Borrow events are scanned from the deployment on (a resolved book of a real chain: from now)
        self._scan_from = deployment.deployed_block if deployment.deployed_block > 0 else w3.eth.block_number
        self._ensure_allowances()

    @property
    def trader_address(self) -> str:
        return self._trader.address

    def watch(self, account: str | None) -> None:
        """Add a borrower the liquidator checks every step."""
        if account and Web3.is_address(account):
            acct = to_checksum_address(account)
            if acct not in self.watched and acct != self._trader.address:
                self.watched.append(acct)

    def _ensure_allowances(self) -> None:
        a, steps = self.deployment.addresses, []
        for sym, token in self._tokens.items():
            for spender, name in ((a["UNI_ROUTER"], "router"), (a["AAVE_POOL"], "aave pool")):
                if token.functions.allowance(self._trader.address, spender).call() < MAX_UINT256 // 2:
                    if not steps:
                        self._trader.refresh()
                    steps.append((f"trader approve {sym} to {name}", self._trader.call_fn(token, "approve", spender, MAX_UINT256)))
        wait_all(self.w3, steps)

    # ---- reads --------------------------------------------------------------------------------------
    def _batch(self, reads: list[_Read]) -> list[Any]:
        return [_result(r, ans) for r, ans in zip(reads, _send(self.w3, reads))]

    def _read_state(self) -> dict[str, Any]:
        """Pairs, the trader's balances and nonce, the feed owner's nonce, every feed's latest round, the head."""
        a, t = self.deployment.addresses, self._trader.address
        reads = [
            _Read("trader nonce", "eth_getTransactionCount", [t, "pending"]),
            _Read("oracle nonce", "eth_getTransactionCount", [self._oracle.address, "pending"]),
            _Read("eth_getBlockByNumber(latest)", "eth_getBlockByNumber", ["latest", False]),
            _Read(f"eth_getBalance({t})", "eth_getBalance", [t, "latest"]),
        ]
        reads += [_eth_call(f"{p.key}.getReserves()", p.address, "getReserves()") for p in self.pairs]
        reads += [_eth_call(f"{s}.balanceOf({t})", a[s], "balanceOf(address)", t) for s in self.symbols]
        reads += [_eth_call(f"FEED_{s}.latestRoundData()", f.address, "latestRoundData()") for s, f in self._feeds.items()]
        res = self._batch(reads)
        block = res[2]
        if not isinstance(block, dict):
            raise ChainReadError(f"eth_getBlockByNumber(latest): malformed block {block!r}")
        base_fee = block.get("baseFeePerGas")
        i = 4
        reserves = {}
        for p in self.pairs:
            reserves[p.key] = p.reserves(_words(reads[i], res[i], 3))
            i += 1
        balances = {}
        for s in self.symbols:
            balances[s] = _uint256(reads[i], res[i])
            i += 1
        rounds = {}
        for s in self._feeds:
            rid, answer, _started, updated_at, _ans = _words(reads[i], res[i], 5)
            rounds[s] = (rid, answer, updated_at)
            i += 1
        return {
            "trader_nonce": _quantity(reads[0], res[0]),
            "oracle_nonce": _quantity(reads[1], res[1]),
            "base_fee": _quantity(reads[2], base_fee) if base_fee is not None else -1,
            "block_number": _quantity(reads[2], block["number"]),
            "timestamp": _quantity(reads[2], block["timestamp"]),
            "eth": _quantity(reads[3], res[3]),
            "reserves": reserves,
            "balances": balances,
            "rounds": rounds,
        }

    def _begin_batch(self) -> dict[str, Any]:
        """Read pairs, balances, nonces, rounds and the fee market once; the senders' nonces and fees follow."""
        state = self._read_state()
        base_fee = state["base_fee"] if state["base_fee"] >= 0 else None
        self._trader.refresh(base_fee, state["trader_nonce"])
        if self._oracle is not self._trader:
            self._oracle.refresh(base_fee, state["oracle_nonce"])
        return state

    def _read_after(self, scan_to: int) -> dict[str, Any]:
        """After the step's trades: pair prices, the ETH/USD round, watched borrowers' health, new borrowers."""
        a = self.deployment.addresses
        reads = [_eth_call(f"{p.key}.getReserves()", p.address, "getReserves()") for p in self.pairs]
        reads.append(_eth_call("FEED_WETH.latestRoundData()", a["FEED_WETH"], "latestRoundData()"))
        reads += [
            _eth_call(f"AAVE_POOL.getUserAccountData({u})", a["AAVE_POOL"], "getUserAccountData(address)", u)
            for u in self.watched
        ]
        scan = scan_to >= self._scan_from
        if scan:
            reads.append(_Read(f"eth_getLogs(AAVE_POOL Borrow, {self._scan_from}..{scan_to})", "eth_getLogs", [{
                "address": a["AAVE_POOL"], "fromBlock": hex(self._scan_from), "toBlock": hex(scan_to),
                "topics": [BORROW_TOPIC],
            }]))  # fmt: skip
        res = self._batch(reads)
        prices = {}
        for k, p in enumerate(self.pairs):
            prices[p.key] = p.price(*p.reserves(_words(reads[k], res[k], 3)))
        k = len(self.pairs)
        round_id = _words(reads[k], res[k], 5)[0]
        health: dict[str, int] = {}
        for j, u in enumerate(self.watched):
            words = _words(reads[k + 1 + j], res[k + 1 + j], 6)
            health[u] = words[5] if words[1] > 0 else MAX_UINT256  # no debt: infinite health
        if scan:
            logs = res[-1]
            if not isinstance(logs, list):
                raise ChainReadError(f"{reads[-1].name}: expected a list of logs, got {logs!r}")
            for lg in logs:
                topics = lg.get("topics") or []
                if len(topics) >= 3:
                    self.watch("0x" + topics[2][-40:])  # onBehalfOf: whose debt it is
            self._scan_from = scan_to + 1
        return {"prices": prices, "round_id": round_id, "health": health}

    # ---- writes -------------------------------------------------------------------------------------
    def _fund(self, sym: str, need: int, balance: int, state: dict[str, Any], label: str,
              steps: list[tuple[str, HexBytes]]) -> int:
        """Make sure the trader holds `need` of `sym`; returns how much it can spend. Stables are minted by the
        feed owner (the minter) and mined first (another sender); WETH is wrapped from the trader's own ETH,
        which on the dev chain is topped up with anvil_setBalance."""
        if need <= balance:
            return need
        if sym == "WETH":
            wrap, eth = 2 * need - balance, state["eth"]
            if eth < wrap + TRADER_ETH_FLOOR:
                if self.chain_id == DEV_CHAIN_ID:
                    answer = self.w3.provider.make_request(
                        "anvil_setBalance", [self._trader.address, hex(eth + wrap + TRADER_ETH_FLOOR)])
                    if "error" in answer:
                        raise SimulatorError(f"anvil_setBalance for the trader failed: {answer['error']}")
                    eth += wrap + TRADER_ETH_FLOOR
                else:
                    wrap = max(0, eth - TRADER_ETH_FLOOR)
            if wrap > 0:  # the trader's own transaction: its nonce orders it before the swap
                steps.append((f"trader wraps ETH for {label}",
                              self._trader.call_fn(self._tokens["WETH"], "deposit", value=wrap, gas=GAS_CALL)))
            state["eth"] = eth - wrap
            return min(need, balance + wrap)
        if self._can_mint.get(sym):
            top_up = 2 * need - balance
            # mined before the swap is sent: another sender's tx may be ordered after it
            wait_all(self.w3, [(f"top up trader {sym} for {label}",
                                self._oracle.call_fn(self._tokens[sym], "mint", self._trader.address, top_up))])
            return need
        return balance

    def _swap(self, sym_in: str, sym_out: str, amount_in: int, state: dict[str, Any], label: str,
              steps: list[tuple[str, HexBytes]]) -> int:
        """Queue a Router02 swap of `amount_in` of `sym_in` for `sym_out`; fund the shortfall first."""
        bal = state["balances"]
        amount_in = self._fund(sym_in, amount_in, max(bal[sym_in], 0), state, label, steps)
        if amount_in <= 0:
            return 0
        a = self.deployment.addresses
        path = [a[sym_in], a[sym_out]]
        steps.append((label, self._trader.call_fn(
            self._router, "swapExactTokensForTokens", amount_in, 0, path, self._trader.address, DEADLINE, gas=GAS_SWAP)))
        if bal[sym_in] < amount_in:  # what was minted or wrapped (and more) is now there
            bal[sym_in] = 2 * amount_in
        bal[sym_in] -= amount_in
        return amount_in

    def _trade_pair(self, pair: _Pair, state: dict[str, Any], target_usd_per_weth: float, max_fraction: float,
                    exact: bool, label: str, steps: list[tuple[str, HexBytes]]) -> tuple[str, float]:
        """One arbitrage trade taking `pair` toward a price; updates the reserves in `state`. Returns (side, WETH)."""
        r0, r1 = state["reserves"][pair.key]
        target_raw = target_usd_per_weth * pair.stable_unit / 10**18
        side, amt = arbitrage_input(r0, r1, target_raw, max_fraction)
        if exact:
            amt = exact_arbitrage_input(r0, r1, target_raw, side, amt)
        if amt > 0 and amount_out(amt, *((r1, r0) if side == "buy" else (r0, r1))) == 0:
            amt = 0  # a dust trade the pair would refuse (UniswapV2: INSUFFICIENT_OUTPUT_AMOUNT): already there
        size = 0.0
        if side == "buy" and amt > 0:
            amt = self._swap(pair.stable, "WETH", amt, state, f"{label} buy WETH ({pair.key})", steps)
            out = amount_out(amt, r1, r0) if amt else 0
            state["reserves"][pair.key] = (r0 - out, r1 + amt)
            state["balances"]["WETH"] += out
            size = out / 10**18
        elif side == "sell" and amt > 0:
            amt = self._swap("WETH", pair.stable, amt, state, f"{label} sell WETH ({pair.key})", steps)
            out = amount_out(amt, r0, r1) if amt else 0
            state["reserves"][pair.key] = (r0 + amt, r1 - out)
            state["balances"][pair.stable] += out
            size = amt / 10**18
        return (side if size > 0 else "none"), size

    def _round_trip(self, pair: _Pair, state: dict[str, Any], stable_in: int, label: str,
                    steps: list[tuple[str, HexBytes]]) -> None:
        """Buy WETH with `stable_in` and sell what came back: volume through the pair that leaves it near where it was."""
        r0, r1 = state["reserves"][pair.key]
        amt = self._swap(pair.stable, "WETH", stable_in, state, f"{label} buy WETH ({pair.key})", steps)
        out = amount_out(amt, r1, r0) if amt else 0
        r0, r1 = r0 - out, r1 + amt
        state["balances"]["WETH"] += out
        if out > 0:
            amt = self._swap("WETH", pair.stable, out, state, f"{label} sell WETH ({pair.key})", steps)
            back = amount_out(amt, r0, r1) if amt else 0
            r0, r1 = r0 + amt, r1 - back
            state["balances"][pair.stable] += back
        state["reserves"][pair.key] = (r0, r1)

    def _noise(self, pair: _Pair, state: dict[str, Any], buy: bool, scale: float, steps: list[tuple[str, HexBytes]]) -> None:
        r0, r1 = state["reserves"][pair.key]
        if buy:
            n = int(r1 * scale)
            if n > 0 and amount_out(n, r1, r0) > 0:
                self._swap(pair.stable, "WETH", n, state, f"noise buy WETH ({pair.key})", steps)
                state["reserves"][pair.key] = (r0 - amount_out(n, r1, r0), r1 + n)
        else:
            n = int(r0 * scale)
            if n > 0 and amount_out(n, r0, r1) > 0:
                self._swap("WETH", pair.stable, n, state, f"noise sell WETH ({pair.key})", steps)
                state["reserves"][pair.key] = (r0 + n, r1 - amount_out(n, r0, r1))

    def _post_feeds(self, state: dict[str, Any], weth_price: float, stable_prices: dict[str, float], now: int,
                    force_weth: bool, steps: list[tuple[str, HexBytes]]) -> dict[str, float]:
        """Post the ETH/USD round (always when forced, else on a changed answer or half a heartbeat), and each
        stable's round on deviation or half a heartbeat (Chainlink's two triggers). Returns the stables posted."""
        rounds = state["rounds"]

        def due(sym: str, answer: int) -> bool:
            _rid, last, updated_at = rounds[sym]
            heartbeat = self.deployment.heartbeat_s(sym)
            stale_soon = heartbeat is not None and now - updated_at >= heartbeat / 2
            if sym == "WETH":
                return force_weth or answer != last or stale_soon
            return stale_soon or abs(answer / last - 1.0) > STABLE_DEVIATION if last > 0 else True

        weth_answer = feed_answer(weth_price)
        if due("WETH", weth_answer):
            steps.append(("ETH/USD post_round", self._oracle.call_fn(self._feeds["WETH"], "post_round", weth_answer)))
        posted = {}
        for sym, price in stable_prices.items():
            answer = feed_answer(price)
            if due(sym, answer):
                steps.append((f"{sym}/USD post_round", self._oracle.call_fn(self._feeds[sym], "post_round", answer)))
                posted[sym] = answer / 10**FEED_DECIMALS
        return posted

    def _liquidate(self, health: dict[str, int]) -> tuple[list[SimLiquidation], list[str]]:
        """liquidationCall on every watched borrower under HF 1: the largest debt against the largest collateral,
        debtToCover = type(uint256).max (the Pool applies its close factor), receiveAToken false."""
        unhealthy = [u for u, hf in health.items() if hf < WAD]
        if not unhealthy or not self.liquidate:
            return [], []
        a, t = self.deployment.addresses, self._trader.address
        reserve_syms = [s for s in self.symbols if f"A_{s}" in a and f"VDEBT_{s}" in a and f"FEED_{s}" in a]
        reads = [
            _Read("trader nonce", "eth_getTransactionCount", [t, "pending"]),
            _Read("oracle nonce", "eth_getTransactionCount", [self._oracle.address, "pending"]),
            _Read(f"eth_getBalance({t})", "eth_getBalance", [t, "latest"]),
        ]
        reads += [_eth_call(f"{s}.balanceOf({t})", a[s], "balanceOf(address)", t) for s in reserve_syms]
        reads += [_eth_call(f"FEED_{s}.latestAnswer()", a[f"FEED_{s}"], "latestAnswer()") for s in reserve_syms]
        for u in unhealthy:
            reads += [_eth_call(f"A_{s}.balanceOf({u})", a[f"A_{s}"], "balanceOf(address)", u) for s in reserve_syms]
            reads += [_eth_call(f"VDEBT_{s}.balanceOf({u})", a[f"VDEBT_{s}"], "balanceOf(address)", u) for s in reserve_syms]
        res = self._batch(reads)
        self._trader.refresh(None, _quantity(reads[0], res[0]))
        if self._oracle is not self._trader:
            self._oracle.refresh(None, _quantity(reads[1], res[1]))
        n = len(reserve_syms)
        state = {"eth": _quantity(reads[2], res[2]),
                 "balances": {s: _uint256(reads[3 + i], res[3 + i]) for i, s in enumerate(reserve_syms)}}
        usd = {s: _uint256(reads[3 + n + i], res[3 + n + i]) / 10**FEED_DECIMALS for i, s in enumerate(reserve_syms)}
        sent: list[tuple[str, HexBytes, float]] = []
        funding: list[tuple[str, HexBytes]] = []
        for j, u in enumerate(unhealthy):
            base = 3 + 2 * n + 2 * n * j
            coll = {s: _uint256(reads[base + i], res[base + i]) for i, s in enumerate(reserve_syms)}
            debt = {s: _uint256(reads[base + n + i], res[base + n + i]) for i, s in enumerate(reserve_syms)}

            def value(s: str, amounts: dict[str, int]) -> float:
                return amounts[s] / 10 ** TOKEN_DECIMALS[s] * usd[s]

            debt_sym = max(reserve_syms, key=lambda s: value(s, debt))
            coll_sym = max(reserve_syms, key=lambda s: value(s, coll))
            if debt[debt_sym] == 0 or coll[coll_sym] == 0:
                continue
            # the close factor caps the cover at the whole debt; a little more for interest accrued by the block
            need = debt[debt_sym] + debt[debt_sym] // 100 + 1
            have = self._fund(debt_sym, need, state["balances"][debt_sym], state, f"liquidate {u}", funding)
            state["balances"][debt_sym] = max(0, state["balances"][debt_sym] - have)
            tx = self._trader.call_fn(self._aave, "liquidationCall", a[coll_sym], a[debt_sym], u, MAX_UINT256, False,
                                      gas=GAS_LIQUIDATION)
            sent.append((u, tx, health[u] / WAD))
        done, failures = [], []
        wait_all(self.w3, funding)
        symbols = {a[s].lower(): s for s in self.symbols}
        for u, tx, hf in sent:
            try:
                [receipt] = wait_all(self.w3, [(f"liquidationCall({u})", tx)])
            except TxFailed as err:
                failures.append(str(err))
                continue
            for lg in receipt["logs"]:
                topics = [HexBytes(x) for x in lg["topics"]]
                if len(topics) == 4 and "0x" + topics[0].hex().removeprefix("0x") == LIQUIDATION_CALL_TOPIC:
                    covered, seized, _liq, _recv = abi_decode(["uint256", "uint256", "address", "bool"], bytes(lg["data"]))
                    coll_sym = symbols.get("0x" + topics[1][-20:].hex().removeprefix("0x"), "?")
                    debt_sym = symbols.get("0x" + topics[2][-20:].hex().removeprefix("0x"), "?")
                    done.append(SimLiquidation(
                        user=to_checksum_address(topics[3][-20:]), collateral_asset=coll_sym, debt_asset=debt_sym,
                        debt_covered=covered / 10 ** TOKEN_DECIMALS.get(debt_sym, 18),
                        collateral_seized=seized / 10 ** TOKEN_DECIMALS.get(coll_sym, 18), health_factor=hf,
                        tx_hash="0x" + HexBytes(receipt["transactionHash"]).hex().removeprefix("0x"),
                        block_number=int(receipt["blockNumber"]),
                    ))  # fmt: skip
        return done, failures

    def _finish(self, i: int, price: float, steps: list[tuple[str, HexBytes]], state: dict[str, Any],
                side: str, size: float, stables_posted: dict[str, float]) -> SimStep:
        receipts = wait_all(self.w3, steps)
        scan_to = max([int(r["blockNumber"]) for r in receipts], default=state["block_number"])
        after = self._read_after(scan_to)
        liquidations, failures = self._liquidate(after["health"])
        self.oracle_price = price
        self.step_index += 1
        prices = after["prices"]
        return SimStep(
            step=i, oracle_price=price, pool_price=prices.get(MAIN_PAIR, 0.0),
            trade_side=side if size > 0 else "none", trade_size=size,  # type: ignore[arg-type]
            round_id=after["round_id"], pair_prices=prices, stables_posted=stables_posted,
            health_factors={u: None if hf == MAX_UINT256 else hf / WAD for u, hf in after["health"].items()},
            liquidations=liquidations, liquidation_failures=failures,
        )  # fmt: skip

    def step(self) -> SimStep:
        """One market step along the scenario: feed rounds, arbitrage and noise on every pair, the liquidator."""
        i = self.step_index
        state = self._begin_batch()

        move = scenario_return(self.scenario, i, self._price_rng, self.crash_after)
        new_price = max(MIN_PRICE, self.oracle_price * (1.0 + move))
        for s in self.stables:
            self._stable_value[s] = 1.0 + self._stable_rng.gauss(0.0, STABLE_SIGMA)
        noise = [(self._trade_rng.random() < 0.5, abs(self._trade_rng.gauss(0.0, self.noise_fraction))) for _ in self.pairs]

        steps: list[tuple[str, HexBytes]] = []
        posted = self._post_feeds(state, new_price, dict(self._stable_value), state["timestamp"], True, steps)
        stable_usd = {s: state["rounds"][s][1] / 10**FEED_DECIMALS for s in self.stables}
        stable_usd.update(posted)
        side, size = "none", 0.0
        for pair, (buy, scale) in zip(self.pairs, noise):
            target = new_price / stable_usd.get(pair.stable, 1.0)
            s, z = self._trade_pair(pair, state, target, self.max_trade_fraction, False, "arbitrage", steps)
            if pair.key == MAIN_PAIR:
                side, size = s, z
            # a small noise trade so the pair never sits exactly on the feed
            self._noise(pair, state, buy, scale, steps)
        return self._finish(i, new_price, steps, state, side, size, posted)

    def move_to(self, oracle_price: float, pool_price: float, noise_volume_usd: float = 0.0,
                at: int | None = None) -> SimStep:
        """Set the world to a recorded row (the backtest's replay driver): the ETH/USD feed answers `oracle_price`
        (a round is posted when the answer changes, or when half its heartbeat has passed at time `at`; the
        stables post 1.0 on the same heartbeat rule), `noise_volume_usd` trades round-trip through the WETH/USDC
        pair (half bought, half sold back), then one uncapped arbitrage trade takes each pair exactly to
        `pool_price`. Feed and pairs may diverge. The liquidator then runs as in `step`."""
        i = self.step_index
        state = self._begin_batch()
        oracle_price = max(MIN_PRICE, oracle_price)
        now = at if at is not None else state["timestamp"]
        steps: list[tuple[str, HexBytes]] = []
        posted = self._post_feeds(state, oracle_price, {s: 1.0 for s in self.stables}, now, False, steps)
        side, size = "none", 0.0
        for pair in self.pairs:
            if pair.key == MAIN_PAIR:
                half = int(noise_volume_usd / 2 * pair.stable_unit)
                if half > 0:
                    self._round_trip(pair, state, half, "volume", steps)
            s, z = self._trade_pair(pair, state, pool_price, UNCAPPED_FRACTION, True, "replay", steps)
            if pair.key == MAIN_PAIR:
                side, size = s, z
        return self._finish(i, oracle_price, steps, state, side, size, posted)

    def run(self, steps: int) -> list[SimStep]:
        return [self.step() for _ in range(steps)]


def _keys_for(chain_id: int) -> tuple[str, str]:
    trader_key = os.environ.get("GOLEM_SIM_TRADER_KEY")
    oracle_key = os.environ.get("GOLEM_SIM_ORACLE_KEY")
    if trader_key and oracle_key:
        return trader_key, oracle_key
    if chain_id != ANVIL_CHAIN_ID:
        raise SimulatorError(
            f"chain id {chain_id} is not the local dev chain ({ANVIL_CHAIN_ID}); set GOLEM_SIM_TRADER_KEY "
            "and GOLEM_SIM_ORACLE_KEY — the public Anvil dev keys are only used on chain 31337"
        )
    return trader_key or ANVIL_KEYS[1], oracle_key or ANVIL_KEYS[0]


def format_step(s: SimStep) -> list[str]:
    """The simulator's log lines for one step: the market line, then one line per liquidation."""
    hf = " ".join(f"hf[{u[:8]}]={'inf' if v is None else f'{v:.3f}'}" for u, v in s.health_factors.items())
    lines = [
        f"step={s.step} oracle={s.oracle_price:.2f} round={s.round_id} pool={s.pool_price:.2f} "
        f"arb={s.trade_side} size={s.trade_size:.4f} WETH"
        + "".join(f" {k}={v:.2f}" for k, v in s.pair_prices.items() if k != MAIN_PAIR)
        + "".join(f" posted_{k}={v:.4f}" for k, v in s.stables_posted.items())
        + (f" {hf}" if hf else "")
    ]
    for liq in s.liquidations:
        lines.append(
            f"liquidated user={liq.user} hf={liq.health_factor:.4f} covered={liq.debt_covered:.2f} {liq.debt_asset} "
            f"seized={liq.collateral_seized:.6f} {liq.collateral_asset} tx={liq.tx_hash} block={liq.block_number}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    from golem.chain.web3client import make_web3

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description="Run the dev world's market simulator.")
    parser.add_argument("--rpc", required=True, help="JSON-RPC URL of the dev chain")
    parser.add_argument("--deployment", type=Path, required=True, help="deployment JSON written by deploy_world")
    parser.add_argument("--scenario", choices=SCENARIOS, default="calm")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between steps")
    parser.add_argument("--steps", type=int, default=None, help="stop after N steps (default: run forever)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--crash-after", type=int, default=DEFAULT_CRASH_AFTER)
    parser.add_argument("--watch", action="append", default=[], metavar="ADDRESS",
                        help="another borrower for the liquidator (Borrow events add them by themselves)")
    parser.add_argument("--no-liquidator", action="store_true", help="never call liquidationCall")
    args = parser.parse_args(argv)
    if args.interval < 0:
        parser.error("--interval must be >= 0")
    if args.steps is not None and args.steps < 0:
        parser.error("--steps must be >= 0")
    for addr in args.watch:
        if not Web3.is_address(addr):
            parser.error(f"--watch {addr!r} is not an address")

    stop = threading.Event()

    def _on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)

    try:
        deployment = Deployment.load(args.deployment)
        w3 = make_web3(args.rpc)
        trader_key, oracle_key = _keys_for(w3.eth.chain_id)
        sim = MarketSimulator(
            w3, deployment, trader_key, oracle_key, args.scenario, seed=args.seed, crash_after=args.crash_after,
            watch=args.watch, liquidate=not args.no_liquidator,
        )
    except Exception as exc:
        print(f"simulator: {exc}", file=sys.stderr)
        return 2

    print(f"simulator: scenario={args.scenario} seed={args.seed} trader={sim.trader_address} "
          f"liquidator={'off' if args.no_liquidator else 'on'} watching={','.join(sim.watched) or '-'}", flush=True)
    failures = 0
    done = 0
    while not stop.is_set() and (args.steps is None or done < args.steps):
        try:
            s = sim.step()
        except Exception as exc:  # a chain hiccup should not end the market; many in a row should
            failures += 1
            print(f"simulator: step {sim.step_index} failed: {exc}", file=sys.stderr, flush=True)
            if failures >= 5:
                print("simulator: 5 consecutive failures, exiting", file=sys.stderr)
                return 1
        else:
            failures = 0
            done += 1
            for line in format_step(s):
                print(line, flush=True)
            for msg in s.liquidation_failures:
                print(f"simulator: liquidation failed: {msg}", file=sys.stderr, flush=True)
        if args.steps is not None and done >= args.steps:
            break
        stop.wait(args.interval)
    print("simulator: stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
