"""Run one dream scenario on an Anvil fork, and ground a response on the live chain.

On the fork (started with --auto-impersonate by infra/forks.py, so no key is ever used there): inject the
crisis (the feed owner posts a shocked round; a whale moves or drains the pair; time passes with no feed round;
the base fee is multiplied), read the golem's account as observe would, let the golem decide (the caller's
`decide`, its own deliberator), simulate the actions (step 5's code), send them from the golem's account, and
read the account again. On the live chain: the same actions through `eth_simulateV1` only (nothing is sent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from web3 import Web3
from web3.types import RPCEndpoint, TxParams, TxReceipt

from golem.chain.contracts import MAIN_PAIR, Deployment, contract
from golem.chain.reader import read_snapshot
from golem.chain.simulate import simulate_actions
from golem.chain.tools.arguments import parse_arguments
from golem.chain.tools.build import build_calls
from golem.chain.tools.schemas import ToolArgumentError
from golem.grimoire.dreams.threats import Crisis, ResponseCheck, swap_impact_bps, swap_out
from golem.models.observation import Observation
from golem.models.tick import ProposedAction

Decide = Callable[[Observation, float, str | None], list[ProposedAction]]
WHALE = Web3.to_checksum_address("0x000000000000000000000000000000000000d7ea")  # a fork-only account the crisis trades from


class RehearsalError(RuntimeError):
    """The fork could not be put into the crisis (not: the golem's response failed)."""


def _send(w3: Web3, tx: dict[str, Any], what: str) -> TxReceipt:
    # The crisis's actors (the feed owner, the pair itself) pay their gas with fork-only ether.
    w3.provider.make_request(RPCEndpoint("anvil_setBalance"), [tx["from"], hex(10**30)])
    h = w3.eth.send_transaction(cast(TxParams, tx))
    r = w3.eth.wait_for_transaction_receipt(h, timeout=30)
    if r["status"] != 1:
        raise RehearsalError(f"crisis injection failed: {what} reverted (tx {h.hex()})")
    return r


def _call(w3: Web3, sender: str, fn: Any, what: str) -> TxReceipt:
    return _send(w3, {"from": sender, "to": fn.address, "data": fn._encode_transaction_data()}, what)


def inject(w3: Web3, dep: Deployment, crisis: Crisis) -> None:
    """Put the fork into the crisis. Order: drain, shock (feed, then the pair), lag, base fee."""
    pair = contract(w3, dep, MAIN_PAIR)
    weth, usdc = contract(w3, dep, "WETH"), contract(w3, dep, "USDC")
    if crisis.liquidity_removed > 0:
        # The pair's tokens leave it (a drained pool), then sync() makes the reserves say so.
        for tok in (weth, usdc):
            bal = tok.functions.balanceOf(pair.address).call()
            _call(w3, pair.address, tok.functions.transfer(WHALE, int(bal * crisis.liquidity_removed)), "drain pair")
        _call(w3, WHALE, pair.functions.sync(), "pair sync")
    if crisis.price_shock:
        feed = contract(w3, dep, "FEED_WETH")
        owner = feed.functions.owner().call()
        answer = feed.functions.latestAnswer().call()
        decimals = feed.functions.decimals().call()
        new_answer = int(answer * (1.0 + crisis.price_shock))
        _call(w3, owner, feed.functions.post_round(new_answer), "feed post_round")
        if crisis.move_pool:
            _move_pair_to(w3, dep, pair, weth, usdc, new_answer / 10**decimals)
    if crisis.oracle_lag_s:
        w3.provider.make_request(RPCEndpoint("evm_increaseTime"), [crisis.oracle_lag_s])
        w3.provider.make_request(RPCEndpoint("evm_mine"), [])
    if crisis.base_fee_multiple > 1:
        base = int(w3.eth.get_block("latest").get("baseFeePerGas") or w3.eth.gas_price)
        w3.provider.make_request(RPCEndpoint("anvil_setNextBlockBaseFeePerGas"), [hex(int(base * crisis.base_fee_multiple))])


def _move_pair_to(w3: Web3, dep: Deployment, pair: Any, weth: Any, usdc: Any, usd_per_weth: float) -> None:
    """A whale dumps WETH into the pair (or WETH leaves it) until its price is `usd_per_weth`, then sync()."""
    r0, r1, _ = pair.functions.getReserves().call()
    weth_is_0 = pair.functions.token0().call().lower() == weth.address.lower()
    r_weth, r_usdc = (r0, r1) if weth_is_0 else (r1, r0)
    unit = 10 ** (18 - 6)  # WETH has 18 decimals, USDC 6
    target_weth = int(r_usdc * unit / usd_per_weth)
    if target_weth > r_weth:
        add = target_weth - r_weth
        _send(w3, {"from": WHALE, "to": weth.address, "value": add,
                   "data": weth.functions.deposit()._encode_transaction_data()}, "whale wraps ETH")
        _call(w3, WHALE, weth.functions.transfer(pair.address, add), "whale dumps WETH")
    elif target_weth < r_weth:  # a price rise: WETH leaves the pair
        _call(w3, pair.address, weth.functions.transfer(WHALE, r_weth - target_weth), "WETH out of the pair")
    _call(w3, WHALE, pair.functions.sync(), "pair sync")


def observe(w3: Web3, dep: Deployment, account: str) -> Observation:
    return Observation(snapshot=read_snapshot(w3, dep, account))


def _describe(a: ProposedAction) -> str:
    args = a.arguments
    if a.tool == "swap":
        return f"swap {args.get('amount_in')} {args.get('token_in')} to {args.get('token_out')}"
    return f"{a.tool} {args.get('amount', args.get('fraction', ''))}".strip()


def _exit_impact(actions: list[ProposedAction], obs: Observation) -> float | None:
    """The worst price impact of the response's swaps on the pair, from the reserves in `obs`: each swap on the
    reserves the earlier swaps of the response leave (as simulate and execute quote it), against its own spot."""
    pool, worst = obs.snapshot.pool, None
    reserves = {pool.token0.upper(): pool.reserve0, pool.token1.upper(): pool.reserve1}
    for a in actions:
        if a.tool != "swap":
            continue
        try:
            args = parse_arguments("swap", a.arguments)
        except ToolArgumentError:
            continue
        tin, tout = args["token_in"], args["token_out"]
        if {tin, tout} != set(reserves):
            continue  # another pair: the check reads the WETH/USDC pair only
        amount = float(args["amount_in"])
        impact = swap_impact_bps(amount, reserves[tin], reserves[tout])
        worst = impact if worst is None else max(worst, impact)
        filled = swap_out(amount, reserves[tin], reserves[tout])
        reserves[tin], reserves[tout] = reserves[tin] + amount, reserves[tout] - filled
    return worst


def check(w3: Web3, dep: Deployment, account: str, actions: list[ProposedAction], obs: Observation, *,
          where: str, gas_allowance_usd: float, max_slippage_bps: float, fee_per_gas: int | None = None,
          health_after: float | None = None, gas_partition_usd: float = 0.0) -> ResponseCheck:
    """Simulate the actions at the head of `w3` (eth_simulateV1: nothing is sent) and size their gas and exit."""
    chk = ResponseCheck(where=where, block=obs.snapshot.block_number, actions=[_describe(a) for a in actions],
                        gas_allowance_usd=gas_allowance_usd, gas_partition_usd=gas_partition_usd,
                        max_slippage_bps=max_slippage_bps, health_before=obs.min_health_factor(),
                        health_after=health_after,
                        price=round(obs.snapshot.pool.price, 2))
    if not actions:
        return chk
    sim = simulate_actions(w3, dep, account, actions, obs)
    bad = next((s for s in sim.actions if not s.ok), None)
    chk.simulates = bad is None
    chk.revert_reason = bad.revert_reason if bad else None
    chk.gas_units = sum(s.gas_estimate or 0 for s in sim.actions)
    fee = fee_per_gas if fee_per_gas is not None else int(w3.eth.gas_price)
    chk.gas_usd = round(chk.gas_units * fee / 1e18 * obs.snapshot.oracle_price, 6)
    chk.exit_impact_bps = _exit_impact(actions, obs)
    return chk


def run_on_fork(w3: Web3, dep: Deployment, account: str, crisis: Crisis, decide: Decide, steer: str | None, *,
                gas_allowance_usd: float, max_slippage_bps: float,
                gas_partition_usd: float = 0.0) -> tuple[ResponseCheck, list[ProposedAction]]:
    """Crisis in, the golem's decision, its simulation and its sends on the fork; the fork's verdict figures."""
    before = observe(w3, dep, account)
    inject(w3, dep, crisis)
    crisis_obs = observe(w3, dep, account)
    actions = decide(crisis_obs, before.snapshot.pool.price, steer)
    fee = int(w3.eth.get_block("latest").get("baseFeePerGas") or 0)
    if crisis.base_fee_multiple > 1:
        fee = int(fee * crisis.base_fee_multiple)
    chk = check(w3, dep, account, actions, crisis_obs, where="fork", gas_allowance_usd=gas_allowance_usd,
                max_slippage_bps=max_slippage_bps, fee_per_gas=fee or None, gas_partition_usd=gas_partition_usd)
    chk.health_before = crisis_obs.min_health_factor()
    if actions and chk.simulates:
        chk.executed = True
        for a in actions:
            try:
                calls = build_calls(w3, dep, account, a, crisis_obs)
            except ToolArgumentError as e:
                chk.executed, chk.revert_reason = False, f"not sent: {e}"
                break
            for c in calls:
                if c.only_if_nonzero is not None:
                    continue  # a cleanup (revoking an approval the swap used up): no bearing on the outcome
                h = w3.eth.send_transaction(cast(TxParams, {"from": account, "to": c.to, "data": c.data, "value": c.value}))
                if w3.eth.wait_for_transaction_receipt(h, timeout=30)["status"] != 1:
                    chk.executed, chk.revert_reason = False, f"{c.label} reverted on the fork"
                    break
            if not chk.executed:
                break
    chk.health_after = observe(w3, dep, account).min_health_factor()
    return chk, actions
