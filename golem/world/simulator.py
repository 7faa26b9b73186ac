"""The market simulator: moves the dev world's oracle along a regime path and trades the
pool toward it, so a golem sees calm, trending, volatile and crashing markets.

Each `step()`: (1) the oracle moves one step along the scenario's seeded path, (2) the trader
arbitrages the pool toward the new oracle price (capped per trade), (3) the trader makes a
small random noise trade. All transactions of a step are pipelined and then awaited.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Literal

from eth_account import Account
from hexbytes import HexBytes
from pydantic import BaseModel
from web3 import Web3

from golem.chain.contracts import Deployment, contract, decimals_of
from golem.chain.reader import ChainReadError, _eth_call, _quantity, _Read, _result, _send, _uint256
from golem.world.deploy import GAS_CALL, TxSender, wait_all

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
FEE_BPS = 30  # Pool.vy fee on input
MAX_UINT256 = 2**256 - 1
MIN_PRICE = 1e-6  # the oracle rejects a zero price
UNCAPPED_FRACTION = 1e6  # a replayed row sets the pool price exactly, however far it moved


class SimulatorError(RuntimeError):
    """The simulator cannot run as configured (bad scenario, keys, or chain)."""


class SimStep(BaseModel):
    step: int
    oracle_price: float  # USDC per WETH after the oracle update
    pool_price: float  # USDC per WETH from the pool reserves after this step's trades
    trade_side: Literal["buy", "sell", "none"]  # arbitrage trade: buy/sell WETH against USDC
    trade_size: float  # WETH (human units) bought or sold by the arbitrage trade


def scenario_return(scenario: str, step: int, rng: random.Random, crash_after: int = DEFAULT_CRASH_AFTER) -> float:
    """The oracle's relative move at `step` (0-based). Draws from `rng` in a fixed order."""
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
    """The oracle prices of `steps` simulator steps from `start_price` (what MarketSimulator posts)."""
    rng = random.Random(seed)
    prices, p = [], start_price
    for i in range(steps):
        p = max(MIN_PRICE, p * (1.0 + scenario_return(scenario, i, rng, crash_after)))
        prices.append(p)
    return prices


def amount_out(amount_in: int, reserve_in: int, reserve_out: int) -> int:
    """Pool.vy's get_amount_out, in integers (30 bps fee on input)."""
    with_fee = amount_in * (10_000 - FEE_BPS)
    return with_fee * reserve_out // (reserve_in * 10_000 + with_fee)


def arbitrage_input(r0: int, r1: int, target_raw: float, max_fraction: float) -> tuple[str, int]:
    """Which side and how much input moves the x*y=k pool price r1/r0 to `target_raw`.

    Returns ("buy", usdc_in) or ("sell", weth_in) or ("none", 0); input grossed up for the fee
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
    """The integer input (bisection on `amount_out`) that puts the pool price r1/r0 closest to `target_raw`:
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


class MarketSimulator:
    """Drives one deployed world. Keys stay inside; nothing here logs or returns them."""

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
        self.scenario = scenario
        self.seed = seed
        self.crash_after = crash_after
        self.max_trade_fraction = max_trade_fraction
        self.noise_fraction = noise_fraction
        self.step_index = 0
        # separate streams: the oracle path depends on the seed alone (== oracle_path(...)),
        # not on how many random draws the trades took
        self._price_rng = random.Random(seed)
        self._trade_rng = random.Random(f"{seed}:trades")
        self._trader = TxSender.for_key(w3, trader_key, chain_id)
        oracle_account = Account.from_key(oracle_key)
        self._oracle = (
            self._trader if oracle_account.address == self._trader.address else TxSender.for_key(w3, oracle_key, chain_id)
        )
        self._weth = contract(w3, deployment, "WETH")
        self._usdc = contract(w3, deployment, "USDC")
        self._pool = contract(w3, deployment, "POOL")
        self._oracle_c = contract(w3, deployment, "ORACLE")
        owner = self._oracle_c.functions.owner().call()
        if owner != self._oracle.address:
            raise SimulatorError(f"oracle_key is for {self._oracle.address}, but the oracle owner is {owner}")
        # the oracle owner is the deployer = minter in the dev world; then it can top the trader up
        self._can_mint = (
            self._weth.functions.minter().call() == self._oracle.address
            and self._usdc.functions.minter().call() == self._oracle.address
        )
        self._weth_unit = 10 ** decimals_of("WETH")
        self._usdc_unit = 10 ** decimals_of("USDC")
        self.oracle_price = self._oracle_c.functions.price().call() / 1e18
        self._ensure_allowances()

    @property
    def trader_address(self) -> str:
        return self._trader.address

    def _ensure_allowances(self) -> None:
        pool = self.deployment.addresses["POOL"]
        steps = []
        for sym, token in (("WETH", self._weth), ("USDC", self._usdc)):
            if token.functions.allowance(self._trader.address, pool).call() < MAX_UINT256 // 2:
                self._trader.refresh()
                steps.append((f"trader approve {sym}", self._trader.call_fn(token, "approve", pool, MAX_UINT256)))
        wait_all(self.w3, steps)

    def _read_state(self) -> dict[str, int]:
        a, t = self.deployment.addresses, self._trader.address
        reads = [
            _eth_call("POOL.reserve0()", a["POOL"], "reserve0()"),
            _eth_call("POOL.reserve1()", a["POOL"], "reserve1()"),
            _eth_call(f"WETH.balanceOf({t})", a["WETH"], "balanceOf(address)", t),
            _eth_call(f"USDC.balanceOf({t})", a["USDC"], "balanceOf(address)", t),
            _Read("trader nonce", "eth_getTransactionCount", [t, "pending"]),
            _Read("oracle nonce", "eth_getTransactionCount", [self._oracle.address, "pending"]),
            _Read("eth_getBlockByNumber(latest)", "eth_getBlockByNumber", ["latest", False]),
        ]
        res = [_result(r, ans) for r, ans in zip(reads, _send(self.w3, reads))]
        block = res[6]
        if not isinstance(block, dict):
            raise ChainReadError(f"eth_getBlockByNumber(latest): malformed block {block!r}")
        base_fee = block.get("baseFeePerGas")
        return {
            "r0": _uint256(reads[0], res[0]),
            "r1": _uint256(reads[1], res[1]),
            "weth": _uint256(reads[2], res[2]),
            "usdc": _uint256(reads[3], res[3]),
            "trader_nonce": _quantity(reads[4], res[4]),
            "oracle_nonce": _quantity(reads[5], res[5]),
            "base_fee": _quantity(reads[6], base_fee) if base_fee is not None else -1,
        }

    def _swap(self, token: Any, amount_in: int, balance: int, label: str, steps: list[tuple[str, HexBytes]]) -> int:
        """Queue a swap of `amount_in` of `token`; mint the shortfall first when allowed."""
        if amount_in > balance:
            if self._can_mint:
                top_up = 2 * amount_in - balance
                # mined before the swap is sent: another sender's tx may be ordered after it
                wait_all(self.w3, [(f"top up trader for {label}", self._oracle.call_fn(token, "mint", self._trader.address, top_up))])
            else:
                amount_in = balance
        if amount_in <= 0:
            return 0
        steps.append((label, self._trader.call_fn(self._pool, "swap", token.address, amount_in, 0, self._trader.address, gas=GAS_CALL)))
        return amount_in

    def _begin_batch(self) -> dict[str, int]:
        """Read pool, balances, nonces and the fee market once; the senders' nonces and fees follow from it."""
        state = self._read_state()
        base_fee = state["base_fee"] if state["base_fee"] >= 0 else None
        self._trader.refresh(base_fee, state["trader_nonce"])
        if self._oracle is not self._trader:
            self._oracle.refresh(base_fee, state["oracle_nonce"])
        return state

    def step(self) -> SimStep:
        i = self.step_index
        state = self._begin_batch()

        move = scenario_return(self.scenario, i, self._price_rng, self.crash_after)
        new_price = max(MIN_PRICE, self.oracle_price * (1.0 + move))
        noise_side_buy = self._trade_rng.random() < 0.5
        noise_scale = abs(self._trade_rng.gauss(0.0, self.noise_fraction))

        steps: list[tuple[str, HexBytes]] = []
        steps.append(("oracle set_price", self._oracle.call_fn(self._oracle_c, "set_price", int(new_price * 1e18))))

        r0, r1 = state["r0"], state["r1"]
        weth_bal, usdc_bal = state["weth"], state["usdc"]
        target_raw = new_price * self._usdc_unit / self._weth_unit  # USDC base units per wei
        side, amt = arbitrage_input(r0, r1, target_raw, self.max_trade_fraction)
        trade_size = 0.0
        if side == "buy":
            amt = self._swap(self._usdc, amt, usdc_bal, "arbitrage buy WETH", steps)
            out = amount_out(amt, r1, r0) if amt else 0
            r1, r0, usdc_bal, weth_bal = r1 + amt, r0 - out, usdc_bal - amt, weth_bal + out
            trade_size = out / self._weth_unit
        elif side == "sell":
            amt = self._swap(self._weth, amt, weth_bal, "arbitrage sell WETH", steps)
            out = amount_out(amt, r0, r1) if amt else 0
            r0, r1, weth_bal, usdc_bal = r0 + amt, r1 - out, weth_bal - amt, usdc_bal + out
            trade_size = amt / self._weth_unit
        if side != "none" and trade_size == 0.0:
            side = "none"

        # a small noise trade so the pool never sits exactly on the oracle
        if noise_side_buy:
            noise_in = int(r1 * noise_scale)
            if noise_in > 0 and amount_out(noise_in, r1, r0) > 0:
                self._swap(self._usdc, noise_in, max(usdc_bal, 0), "noise buy WETH", steps)
        else:
            noise_in = int(r0 * noise_scale)
            if noise_in > 0 and amount_out(noise_in, r0, r1) > 0:
                self._swap(self._weth, noise_in, max(weth_bal, 0), "noise sell WETH", steps)

        wait_all(self.w3, steps)
        self.oracle_price = new_price
        self.step_index += 1
        after = self._read_pool()
        return SimStep(
            step=i,
            oracle_price=new_price,
            pool_price=after,
            trade_side=side,  # type: ignore[arg-type]
            trade_size=trade_size,
        )

    def move_to(self, oracle_price: float, pool_price: float, noise_volume_usd: float = 0.0) -> SimStep:
        """Set the world to a recorded row (the backtest's replay driver): the oracle answers
        `oracle_price`, `noise_volume_usd` trades round-trip through the pool (half bought, half sold back),
        then one uncapped arbitrage trade takes the pool to `pool_price`. Pool and oracle may diverge."""
        i = self.step_index
        state = self._begin_batch()
        oracle_price = max(MIN_PRICE, oracle_price)
        steps: list[tuple[str, HexBytes]] = []
        if int(oracle_price * 1e18) != int(self.oracle_price * 1e18):
            steps.append(("oracle set_price", self._oracle.call_fn(self._oracle_c, "set_price", int(oracle_price * 1e18))))
        r0, r1 = state["r0"], state["r1"]
        weth_bal, usdc_bal = state["weth"], state["usdc"]
        half_usdc = int(noise_volume_usd / 2 * self._usdc_unit)
        if half_usdc > 0 and r0 > 0:
            amt = self._swap(self._usdc, half_usdc, usdc_bal, "volume buy WETH", steps)
            out = amount_out(amt, r1, r0) if amt else 0
            r1, r0, usdc_bal, weth_bal = r1 + amt, r0 - out, usdc_bal - amt, weth_bal + out
            if out > 0:
                amt = self._swap(self._weth, out, max(weth_bal, 0), "volume sell WETH", steps)
                back = amount_out(amt, r0, r1) if amt else 0
                r0, r1, weth_bal, usdc_bal = r0 + amt, r1 - back, weth_bal - amt, usdc_bal + back
        target_raw = pool_price * self._usdc_unit / self._weth_unit
        side, amt = arbitrage_input(r0, r1, target_raw, UNCAPPED_FRACTION)
        amt = exact_arbitrage_input(r0, r1, target_raw, side, amt)
        trade_size = 0.0
        if side == "buy":
            amt = self._swap(self._usdc, amt, usdc_bal, "replay buy WETH", steps)
            trade_size = (amount_out(amt, r1, r0) if amt else 0) / self._weth_unit
        elif side == "sell":
            amt = self._swap(self._weth, amt, weth_bal, "replay sell WETH", steps)
            trade_size = amt / self._weth_unit
        wait_all(self.w3, steps)
        self.oracle_price = oracle_price
        self.step_index += 1
        return SimStep(step=i, oracle_price=oracle_price, pool_price=self._read_pool(),
                       trade_side=side if trade_size else "none", trade_size=trade_size)  # type: ignore[arg-type]

    def _read_pool(self) -> float:
        a = self.deployment.addresses
        reads = [_eth_call("POOL.reserve0()", a["POOL"], "reserve0()"), _eth_call("POOL.reserve1()", a["POOL"], "reserve1()")]
        r0, r1 = (_uint256(r, _result(r, ans)) for r, ans in zip(reads, _send(self.w3, reads)))
        return (r1 / self._usdc_unit) / (r0 / self._weth_unit) if r0 else 0.0

    def run(self, steps: int) -> list[SimStep]:
        return [self.step() for _ in range(steps)]


def _keys_for(chain_id: int) -> tuple[str, str]:
    trader_key = os.environ.get("GOLEM_SIM_TRADER_KEY")
    oracle_key = os.environ.get("GOLEM_SIM_ORACLE_KEY")
    if trader_key and oracle_key:
        return trader_key, oracle_key
    from infra.anvil import ANVIL_CHAIN_ID, ANVIL_KEYS

    if chain_id != ANVIL_CHAIN_ID:
        raise SimulatorError(
            f"chain id {chain_id} is not the local dev chain ({ANVIL_CHAIN_ID}); set GOLEM_SIM_TRADER_KEY "
            "and GOLEM_SIM_ORACLE_KEY — the public Anvil dev keys are only used on chain 31337"
        )
    return trader_key or ANVIL_KEYS[1], oracle_key or ANVIL_KEYS[0]


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
    args = parser.parse_args(argv)
    if args.interval < 0:
        parser.error("--interval must be >= 0")
    if args.steps is not None and args.steps < 0:
        parser.error("--steps must be >= 0")

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
            w3, deployment, trader_key, oracle_key, args.scenario, seed=args.seed, crash_after=args.crash_after
        )
    except Exception as exc:
        print(f"simulator: {exc}", file=sys.stderr)
        return 2

    print(f"simulator: scenario={args.scenario} seed={args.seed} trader={sim.trader_address}", flush=True)
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
            print(
                f"step={s.step} oracle={s.oracle_price:.2f} pool={s.pool_price:.2f} "
                f"arb={s.trade_side} size={s.trade_size:.4f} WETH",
                flush=True,
            )
        if args.steps is not None and done >= args.steps:
            break
        stop.wait(args.interval)
    print("simulator: stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
