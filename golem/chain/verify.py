"""Step 8 VERIFY: ground truth from the chain: receipts, a re-read of the touched balances, and
predicted-vs-actual deviations.

The prediction is the simulation's `expected` deltas; the truth is the receipt plus the balances
re-read after execution, compared with the observation taken before it. See docs/design/chain.md#verifying-outcomes.
"""

from __future__ import annotations

import time
from typing import cast

from eth_typing import HexStr
from web3 import Web3
from web3.exceptions import TransactionNotFound
from web3.types import BlockIdentifier, TxReceipt

from golem.chain.contracts import Deployment
from golem.chain.reader import read_snapshot
from golem.chain.tools.aave import RAY
from golem.chain.tools.arguments import from_base_units, lp_shares_from_base
from golem.chain.tools.calls import cached_contract
from golem.chain.tools.schemas import (
    COLLATERAL_TOKEN,
    DEBT_TOKEN,
    DEFAULT_MAX_SLIPPAGE_BPS,
    LP_PAIR,
    LP_SHARES_KEY,
    LP_TOOLS,
    POOL_TOKEN0,
    POOL_TOKEN1,
    STABLE_TOKENS,
    ToolArgumentError,
)
from golem.chain.tools.valuation import slippage_bps_of
from golem.models.enums import ActionStatus
from golem.models.observation import ChainSnapshot, Observation
from golem.models.record import ActionRecord, OutcomeRecord
from golem.models.tick import ProposedAction, SimulationResult

GROUND_TRUTH_SOURCE = "receipt+balance_check"
# Deltas smaller than this (human units) are float noise, not movement.
_DUST = 1e-9
# A tracked quantity that moved although nothing predicted it counts as a full-size (100%) miss.
UNEXPECTED_MOVE_BPS = 10_000.0


def _position_amounts(snap: ChainSnapshot) -> tuple[float, float]:
    lending = [p for p in snap.positions if p.kind == "lending"]
    return (sum(p.collateral for p in lending), sum(p.debt for p in lending))


def tracked_quantities(
    snap: ChainSnapshot, lp_shares: float | None = None, lending: tuple[float, float] | None = None
) -> dict[str, float]:
    """Everything an action can move, keyed like the simulation's expected deltas. The LP shares are not
    in the snapshot (it carries the claim, which swaps move); pass them from `read_lp_shares`. `lending`
    (collateral, debt) overrides the snapshot's Aave balances (see `aave_amounts_at`)."""
    out = {f"delta:{sym}": amount for sym, amount in snap.balances.items()}
    out["delta:collateral"], out["delta:debt"] = lending if lending is not None else _position_amounts(snap)
    if lp_shares is not None:
        out[f"delta:{LP_SHARES_KEY}"] = lp_shares
    return out


def read_lp_shares(w3: Web3, deployment: Deployment, account: str, block: int | str = "latest") -> float:
    """The pair's LP token `balanceOf(account)` at `block`, in LP_SHARE_DECIMALS units (the ground truth
    for delta:lp_shares).

    Verification reads it at the pre-observation's block, so the node must still hold that block's
    state (any node does for the last 128 blocks; Anvil keeps all)."""
    pair = cached_contract(w3, deployment, LP_PAIR)
    return lp_shares_from_base(pair.functions.balanceOf(Web3.to_checksum_address(account)).call(block_identifier=cast(BlockIdentifier, block)))


def _ray_mul(a: int, b: int) -> int:
    return (a * b + RAY // 2) // RAY  # Aave WadRayMath.rayMul: half up


def aave_amounts_at(
    w3: Web3, deployment: Deployment, account: str, blocks: tuple[int, ...], index_block: int
) -> list[tuple[float, float]]:
    """(collateral, debt) of the account's Aave position at each of `blocks`, both valued at the reserve
    indexes of `index_block`.

    aWETH and variable-debt balances grow every second (balance = scaled balance × the reserve's
    normalized income / variable debt index). Valuing the before and after scaled balances at the same
    (after) index leaves only what the actions moved, so accrued interest is not mistaken for an
    unexpected move; the after value equals the token's balanceOf at `index_block` exactly."""
    account = Web3.to_checksum_address(account)
    pool = cached_contract(w3, deployment, "AAVE_POOL").functions
    income = pool.getReserveNormalizedIncome(deployment.address(COLLATERAL_TOKEN)).call(block_identifier=index_block)
    debt_index = pool.getReserveNormalizedVariableDebt(deployment.address(DEBT_TOKEN)).call(block_identifier=index_block)
    a_token = cached_contract(w3, deployment, f"A_{COLLATERAL_TOKEN}").functions
    v_token = cached_contract(w3, deployment, f"VDEBT_{DEBT_TOKEN}").functions
    out = []
    for b in blocks:
        coll = _ray_mul(a_token.scaledBalanceOf(account).call(block_identifier=b), income)
        debt = _ray_mul(v_token.scaledBalanceOf(account).call(block_identifier=b), debt_index)
        out.append((from_base_units(coll, COLLATERAL_TOKEN), from_base_units(debt, DEBT_TOKEN)))
    return out


def touches_pool_shares(actions: list[ProposedAction], records: list[ActionRecord]) -> bool:
    """Did any of these executed/failed records run an add/remove_liquidity action?"""
    tools = {a.action_index: a.tool for a in actions}
    return any(tools.get(r.action_index) in LP_TOOLS for r in records)


def tracked_pair(
    w3: Web3, deployment: Deployment, account: str, pre: ChainSnapshot, post: ChainSnapshot, with_lp: bool
) -> tuple[dict[str, float], dict[str, float]]:
    """Tracked quantities before and after: the Aave position at each snapshot's block valued at the
    post block's indexes (interest is not an action's move); with `with_lp`, the LP shares at each block."""
    lend_pre, lend_post = aave_amounts_at(w3, deployment, account, (pre.block_number, post.block_number),
                                          post.block_number)
    lp_pre = read_lp_shares(w3, deployment, account, pre.block_number) if with_lp else None
    lp_post = read_lp_shares(w3, deployment, account, post.block_number) if with_lp else None
    return tracked_quantities(pre, lp_pre, lend_pre), tracked_quantities(post, lp_post, lend_post)


def lp_share_usd(w3: Web3, deployment: Deployment, eth_usd: float, block: int | str = "latest") -> float:
    """USD per LP share unit: the pair's reserves at `eth_usd` per WETH, divided by its LP supply."""
    pair = cached_contract(w3, deployment, LP_PAIR)
    total = pair.functions.totalSupply().call(block_identifier=cast(BlockIdentifier, block))
    if total == 0:
        return 0.0
    raw0, raw1, _ts = pair.functions.getReserves().call(block_identifier=cast(BlockIdentifier, block))
    if Web3.to_checksum_address(pair.functions.token0().call()) != deployment.address(POOL_TOKEN0):
        raw0, raw1 = raw1, raw0
    r0, r1 = from_base_units(raw0, POOL_TOKEN0), from_base_units(raw1, POOL_TOKEN1)
    return (r0 * eth_usd + r1) / lp_shares_from_base(total)


def _usd(key: str, eth_usd: float, share_usd: float = 0.0) -> float:
    """USD per unit of a tracked quantity (debt counts against the golem)."""
    name = key.split(":", 1)[1]
    if name == LP_SHARES_KEY:
        return share_usd
    if name == "debt":
        return -1.0
    if name == "collateral" or name not in STABLE_TOKENS:
        return eth_usd
    return 1.0


def _fmt(deltas: dict[str, float]) -> str:
    parts = [f"{k.split(':', 1)[1]} {v:+,.6g}" for k, v in sorted(deltas.items()) if abs(v) > _DUST]
    return ", ".join(parts) if parts else "no balance change"


def _confirmed_receipt(w3: Web3, tx_hash: str, confirmations: int, deadline: float,
                       poll_s: float) -> tuple[TxReceipt | None, str | None]:
    """(receipt, problem) — waits until the tx has `confirmations` blocks (its own included)."""
    while True:
        try:
            receipt = w3.eth.get_transaction_receipt(HexStr(tx_hash))
        except TransactionNotFound:
            receipt = None
        if receipt is None:
            problem = f"{tx_hash}: no receipt (dropped or reorged out)"
        else:
            if receipt["status"] != 1:
                return receipt, f"{tx_hash}: receipt status 0 (reverted)"
            block = w3.eth.get_block(receipt["blockNumber"])
            if block["hash"] != receipt["blockHash"]:
                problem = f"{tx_hash}: block {receipt['blockNumber']} was reorged"
            else:
                depth = w3.eth.block_number - receipt["blockNumber"] + 1
                if depth >= confirmations:
                    return receipt, None
                problem = f"{tx_hash}: {depth} of {confirmations} confirmations"
        if time.monotonic() >= deadline:
            return receipt, problem
        time.sleep(poll_s)


def verify_actions(
    w3: Web3,
    deployment: Deployment,
    account: str,
    actions: list[ProposedAction],
    simulation: SimulationResult,
    records: list[ActionRecord],
    pre: Observation,
    confirmations: int,
    *,
    max_deviation_bps: float | None = None,
    timeout_s: float = 30.0,
    poll_s: float = 0.2,
) -> OutcomeRecord:
    """Compare what the simulation predicted with what the chain shows after execution.

    `verified` is true only when every executed tx has a successful receipt with `confirmations`
    blocks (2-block confirmation by default), no action failed, and every deviation
    is within `max_deviation_bps` (default: the largest slippage bound of the executed swaps).
    `pnl_impact` is the change in the account's net value (wallet + collateral − debt + LP shares)
    valued at the oracle price after execution, minus the gas paid; the Aave position's before and
    after are valued at the same reserve indexes, so interest accrued meanwhile is neither a deviation
    nor profit or loss of the action.
    """
    if confirmations < 0:
        raise ValueError(f"confirmations must be >= 0, got {confirmations}")
    by_index = {a.action_index: a for a in actions}
    sims = {s.action_index: s for s in simulation.actions}
    executed = [r for r in records if r.status is ActionStatus.EXECUTED]
    failed = [r for r in records if r.status is ActionStatus.FAILED]
    if not executed and not failed:
        return OutcomeRecord(
            verified=False,
            expected="no action executed",
            actual="no transaction sent",
            ground_truth_source=GROUND_TRUTH_SOURCE,
        )

    problems = [f"action {r.action_index} ({r.tool_name}) failed: {r.block_reason}" for r in failed]
    deadline = time.monotonic() + timeout_s
    for r in executed:
        if not r.tx_hash:
            problems.append(f"action {r.action_index} ({r.tool_name}) has no tx hash")
            continue
        _, problem = _confirmed_receipt(w3, r.tx_hash, confirmations, deadline, poll_s)
        if problem:
            problems.append(problem)

    post = read_snapshot(w3, deployment, account)
    lp_touched = touches_pool_shares(actions, executed + failed)
    before, after = tracked_pair(w3, deployment, account, pre.snapshot, post, lp_touched)
    actual = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(before) | set(after)}

    expected: dict[str, float] = {}
    for r in executed:
        sim = sims.get(r.action_index)
        if sim is None:
            problems.append(f"action {r.action_index} was executed without a simulation to compare against")
            continue
        for k, v in sim.expected.items():
            if k.startswith("delta:"):
                expected[k] = expected.get(k, 0.0) + v

    deviations: dict[str, float] = {}
    for k in sorted(set(expected) | {k for k, v in actual.items() if abs(v) > _DUST}):
        exp, act = expected.get(k, 0.0), actual.get(k, 0.0)
        if abs(exp) > _DUST:
            deviations[k] = (act - exp) / abs(exp) * 10_000.0
        else:
            deviations[k] = UNEXPECTED_MOVE_BPS

    limit = max_deviation_bps
    if limit is None:
        bounds = []
        for r in executed:
            action = by_index.get(r.action_index)
            try:
                slip = slippage_bps_of(action) if action is not None else None
            except ToolArgumentError:
                slip = None
            bounds.append(slip if slip is not None else DEFAULT_MAX_SLIPPAGE_BPS)
        limit = max(bounds) if bounds else DEFAULT_MAX_SLIPPAGE_BPS
    for k, d in deviations.items():
        if abs(d) > limit:
            problems.append(f"{k.split(':', 1)[1]} deviated {d:+.1f} bps from simulation (limit {limit:g} bps)")

    eth_usd = post.oracle_price if post.oracle_price > 0 else post.pool.price
    share_usd = lp_share_usd(w3, deployment, eth_usd, post.block_number) if lp_touched else 0.0
    gas_usd = sum(r.gas_cost for r in records)
    pnl = sum(v * _usd(k, eth_usd, share_usd) for k, v in actual.items()) - gas_usd

    first = by_index.get((executed or failed)[0].action_index)
    cause = None
    if first is not None:
        a = first.arguments
        if first.tool == "swap":
            cause = f"swap:{a.get('token_in')}->{a.get('token_out')}"
        else:
            cause = f"{'pool' if first.tool in LP_TOOLS else 'lending'}:{first.tool}"
    effect = max(expected, key=lambda k: abs(expected[k]) * abs(_usd(k, eth_usd, share_usd)), default=None)

    status = "all receipts ok" if not problems else "; ".join(problems)
    return OutcomeRecord(
        verified=not problems,
        expected=_fmt(expected),
        actual=f"{_fmt(actual)} ({status}; {len(executed)} executed, {len(failed)} failed)",
        pnl_impact=pnl,
        ground_truth_source=GROUND_TRUTH_SOURCE,
        cause_variable=cause,
        effect_variable=effect.replace("delta:", "balance:") if effect else None,
        deviations_bps=deviations,
    )
