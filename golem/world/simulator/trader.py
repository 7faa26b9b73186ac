"""The trader: arbitrages each Uniswap V2 WETH/stable pair toward the feeds through Router02 (capped per
trade), makes a small noise trade, and tops itself up where the dev chain allows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hexbytes import HexBytes
from web3 import Web3
from web3.types import RPCEndpoint

from golem.chain.contracts import PAIRS, Deployment, decimals_of
from golem.chain.reader import _Read, _result, _send, pair_token0
from golem.world.deploy import GAS_CALL, TxSender, mine_held, receipts_of, wait_all
from golem.world.simulator.paths import SimulatorError


MAX_TRADE_FRACTION = 0.10  # an arbitrage trade moves at most 10% of the input reserve
NOISE_FRACTION = 0.0002  # noise trades ~0.02% of the input reserve
FEE_BPS = 30  # Uniswap V2: 0.3% on input (getAmountOut's 997/1000)
MAX_UINT256 = 2**256 - 1

UNCAPPED_FRACTION = 1e6  # a replayed row sets the pair price exactly, however far it moved

DEADLINE = 2**63  # Router02 checks deadline >= block.timestamp; the simulator's trades never expire
GAS_SWAP = 250_000

DEV_CHAIN_ID = 31337  # the only chain where the trader's ETH is topped up with anvil_setBalance
TRADER_ETH_FLOOR = 100 * 10**18  # keep this much ETH for gas after wrapping


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


class Pair:
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


class Trader:
    """The account that trades: funds itself, swaps through Router02 and arbitrages a pair toward a price.
    MarketSimulator sets these up; reads go out as one JSON-RPC batch."""

    w3: Web3
    deployment: Deployment
    chain_id: int
    _trader: TxSender
    _oracle: TxSender
    _tokens: dict[str, Any]
    _router: Any
    _can_mint: dict[str, bool]

    # one-block rows (MarketSimulator.one_block): the sends held until settled, the calls that go with the first
    # settle, and the blocks mined since the row began
    _outbox: list[tuple[HexBytes, HexBytes]] | None = None
    _with_first: list[tuple[str, list[Any]]] = []
    mined: int = 0

    def _batch(self, reads: list[_Read], control: Sequence[tuple[str, list[Any]]] = ()) -> list[Any]:
        """The reads' results, in one JSON-RPC batch with `control`'s calls (answers unread but for an error)."""
        answers = _send(self.w3, [*reads, *(_Read(m, m, p) for m, p in control)])
        for (method, _), answer in zip(control, answers[len(reads):]):
            if answer.get("error") is not None:
                raise SimulatorError(f"{method}: {answer['error'].get('message', answer['error'])}")
        return [_result(r, ans) for r, ans in zip(reads, answers)]

    def _settle(self, steps: list[tuple[str, HexBytes]]) -> list[Any]:
        """The receipts of `steps`: awaited as automine mines them, or (one-block rows) every held send sent in one
        batch and mined in one block first."""
        if self._outbox is None:
            return wait_all(self.w3, steps)
        self.mined += mine_held(self.w3, self._outbox, self._with_first)
        self._with_first = []
        return receipts_of(self.w3, steps)

    def _ensure_allowances(self) -> None:
        a, steps = self.deployment.addresses, list[tuple[str, HexBytes]]()
        for sym, token in self._tokens.items():
            for spender, name in ((a["UNI_ROUTER"], "router"), (a["AAVE_POOL"], "aave pool")):
                if token.functions.allowance(self._trader.address, spender).call() < MAX_UINT256 // 2:
                    if not steps:
                        self._trader.refresh()
                    steps.append((f"trader approve {sym} to {name}", self._trader.call_fn(token, "approve", spender, MAX_UINT256)))
        wait_all(self.w3, steps)

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
                        RPCEndpoint("anvil_setBalance"), [self._trader.address, hex(eth + wrap + TRADER_ETH_FLOOR)])
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
            self._settle([(f"top up trader {sym} for {label}",
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

    def _trade_pair(self, pair: Pair, state: dict[str, Any], target_usd_per_weth: float, max_fraction: float,
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

    def _round_trip(self, pair: Pair, state: dict[str, Any], stable_in: int, label: str,
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

    def _noise(self, pair: Pair, state: dict[str, Any], buy: bool, scale: float, steps: list[tuple[str, HexBytes]]) -> None:
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
