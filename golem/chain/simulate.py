"""Step 5 SIMULATE: run the proposed writes against the live node before anything is signed.

All calls of all actions go into one `eth_simulateV1` block, so state carries across calls (the approve before a
swap, a borrow before a repay). A node without eth_simulateV1 can still simulate a single call with plain
`eth_call`. Revert data is decoded into a reason. See docs/design/chain.md#several-actions-in-one-decision.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, cast

from eth_abi import decode as abi_decode
from eth_abi import encode as abi_encode
from pydantic import BaseModel
from web3 import Web3
from web3.exceptions import ContractLogicError
from web3.providers.base import BaseProvider
from web3.types import BlockIdentifier, RPCEndpoint, TxParams

from golem.chain.contracts import HEALTH_FACTOR_DECIMALS, Deployment
from golem.chain.reader import MAX_UINT256
from golem.chain.tools.arguments import from_base_units, lp_shares_from_base, parse_arguments, to_base_units
from golem.chain.tools.build import build_calls
from golem.chain.tools.calls import PlannedCall, aave_reason
from golem.chain.tools.schemas import (
    COLLATERAL_TOKEN,
    DEBT_TOKEN,
    LP_SHARES_KEY,
    POOL_TOKEN0,
    POOL_TOKEN1,
    ToolArgumentError,
)
from golem.chain.tools.uniswap_pool import burned_shares
from golem.models.observation import Observation
from golem.models.tick import ProposedAction, SimulatedAction, SimulationResult

ERROR_STRING_SELECTOR = "08c379a0"  # Error(string)
PANIC_SELECTOR = "4e487b71"  # Panic(uint256)


class SimulationError(RuntimeError):
    """The node could not simulate at all (not: the simulated call reverted)."""


class CallOutcome(BaseModel):
    ok: bool
    return_data: str = "0x"
    gas_used: int = 0
    revert_reason: str | None = None


def _hex(data: Any) -> str:
    if data is None:
        return ""
    if isinstance(data, (bytes, bytearray)):
        return data.hex()
    s = str(data)
    return s[2:] if s.startswith("0x") else s


def decode_revert(data: Any) -> str | None:
    """Error(string) → the string (Aave's numeric codes named), Panic(uint256) → "panic 0x..", other data →
    its selector."""
    raw = _hex(data)
    if not raw:
        return None
    selector, body = raw[:8], bytes.fromhex(raw[8:]) if len(raw) > 8 else b""
    try:
        if selector == ERROR_STRING_SELECTOR:
            return aave_reason(abi_decode(["string"], body)[0])
        if selector == PANIC_SELECTOR:
            return f"panic 0x{abi_decode(['uint256'], body)[0]:02x}"
    except Exception:  # malformed revert data: report it raw rather than hide it
        pass
    return f"custom error 0x{selector}"


def _tx_params(account: str, call: PlannedCall) -> dict[str, Any]:
    return {"from": account, "to": call.to, "data": call.data, "value": hex(call.value)}


def simulate_calls(
    w3: Web3, account: str, calls: list[PlannedCall], block: int | str = "latest", *, use_simulate_v1: bool = True
) -> list[CallOutcome]:
    """Simulate calls in order with state carried across them; one outcome per call.

    Uses eth_simulateV1; a single call falls back to eth_call (+ eth_estimateGas) when the node
    lacks it or `use_simulate_v1` is False.
    """
    if not calls:
        return []
    account = Web3.to_checksum_address(account)
    tag = hex(block) if isinstance(block, int) else block
    if not use_simulate_v1:
        if len(calls) != 1:
            raise SimulationError(f"{len(calls)} dependent calls need eth_simulateV1; eth_call simulates one call")
        return [_eth_call(w3, account, calls[0], tag)]
    # The simulated block comes a second after its parent, as the real next block does: Anvil would
    # otherwise reuse the parent's timestamp, and e.g. a Uniswap V2 pair skips its price-accumulator
    # writes within one timestamp, so the gas estimate would miss ~45k of a swap's real cost.
    parent_time = int(w3.eth.get_block(block if isinstance(block, int) else cast(BlockIdentifier, tag))["timestamp"])
    payload = {
        "blockStateCalls": [
            {"blockOverrides": {"time": hex(parent_time + 1)}, "calls": [_tx_params(account, c) for c in calls]}
        ],
        "validation": False,
    }
    resp = w3.provider.make_request(RPCEndpoint("eth_simulateV1"), [payload, tag])
    if "error" in resp or not resp.get("result"):
        if len(calls) == 1:
            return [_eth_call(w3, account, calls[0], tag)]
        raise SimulationError(
            f"eth_simulateV1 failed ({resp.get('error')}); {len(calls)} dependent calls cannot be simulated with "
            "eth_call. Point rpc_url at a node that supports eth_simulateV1."
        )
    results = resp["result"][0]["calls"]
    if len(results) != len(calls):
        raise SimulationError(f"eth_simulateV1 returned {len(results)} results for {len(calls)} calls")
    out = []
    for r in results:
        ok = int(r.get("status", "0x0"), 16) == 1
        data = r.get("returnData") or "0x"
        reason = None
        if not ok:
            reason = decode_revert(data) or (r.get("error") or {}).get("message") or "reverted without reason"
        out.append(CallOutcome(ok=ok, return_data=data, gas_used=int(r.get("gasUsed", "0x0"), 16), revert_reason=reason))
    return out


def _eth_call(w3: Web3, account: str, call: PlannedCall, tag: str) -> CallOutcome:
    params = _tx_params(account, call)
    try:
        data = w3.eth.call(cast(TxParams, params), cast(BlockIdentifier, tag))
        gas = w3.eth.estimate_gas(cast(TxParams, params), cast(BlockIdentifier, tag))
    except ContractLogicError as e:
        return CallOutcome(ok=False, revert_reason=decode_revert(e.data) or e.message or "reverted")
    return CallOutcome(ok=True, return_data="0x" + _hex(data), gas_used=gas)


def _decode_return(call: PlannedCall, outcome: CallOutcome) -> Any:
    if not call.returns or not outcome.ok or _hex(outcome.return_data) == "":
        return None
    return abi_decode([call.returns], bytes.fromhex(_hex(outcome.return_data)))[0]


def _with_checks(calls: list[PlannedCall]) -> tuple[list[PlannedCall], list[int | None]]:
    """The calls to simulate: each conditional call preceded by its check (a read, run in the same block
    so it sees the state the earlier calls left). Returns them and, per planned call, its check's index."""
    flat: list[PlannedCall] = []
    checks: list[int | None] = []
    for c in calls:
        if c.only_if_nonzero is not None:
            checks.append(len(flat))
            flat.append(PlannedCall(to=c.only_if_nonzero.to, data=c.only_if_nonzero.data, label=f"check_{c.label}",
                                    returns="uint256"))
        else:
            checks.append(None)
        flat.append(c)
    return flat, checks


def simulate_planned(w3: Web3, account: str, calls: list[PlannedCall], block: int | str = "latest") -> list[CallOutcome]:
    """One outcome per planned call; a conditional call whose check reads zero is not sent by the
    executor, so here it is ok with no gas (what the executor will do, not what the node could do)."""
    flat, checks = _with_checks(calls)
    outcomes = simulate_calls(w3, account, flat, block) if flat else []
    out: list[CallOutcome] = []
    pos = 0
    for call, check in zip(calls, checks):
        if check is not None:
            needed = outcomes[pos]
            pos += 1
            if needed.ok and not int(_decode_return(flat[check], needed) or 0):
                out.append(CallOutcome(ok=True))
                pos += 1
                continue
        out.append(outcomes[pos])
        pos += 1
    return out


class _AfterCalls(BaseProvider):
    """A read-only view of a node in which every eth_call runs after `prior` calls, in one eth_simulateV1
    block at `block`; everything else goes to the node. build_calls reads through it, so an action's
    quote, allowance, debt and reserves are the ones the earlier actions of the same decision leave."""

    def __init__(self, w3: Web3) -> None:
        super().__init__()
        # weak: the view lives in _VIEWS keyed by this client and must not keep it alive
        self._ref, self._account, self._block = weakref.ref(w3), "", 0
        self.prior: list[PlannedCall] = []
        self.lock = threading.Lock()  # one plan at a time per view: prior/account/block are the plan's

    @property
    def _w3(self) -> Web3:
        w3 = self._ref()
        if w3 is None:
            raise SimulationError("the node client this view reads through is gone")
        return w3

    def make_request(self, method: Any, params: Any) -> Any:
        if method != "eth_call" or not self.prior:
            return self._w3.provider.make_request(method, params)
        tx = params[0]
        read = PlannedCall(to=tx["to"], data=tx.get("data") or tx.get("input") or "0x", label="read")
        outcome = simulate_planned(self._w3, self._account, [*self.prior, read], self._block)[-1]
        if outcome.ok:
            return {"jsonrpc": "2.0", "id": 0, "result": outcome.return_data}
        return {"jsonrpc": "2.0", "id": 0, "error": {
            "code": 3, "message": f"execution reverted: {outcome.revert_reason}", "data": outcome.return_data}}

    def is_connected(self, show_traceback: bool = False) -> bool:
        return bool(self._w3.provider.is_connected(show_traceback))


def plan_actions(
    w3: Web3, deployment: Deployment, account: str, actions: list[ProposedAction], observation: Observation, block: int
) -> list[tuple[ProposedAction, list[PlannedCall] | ToolArgumentError]]:
    """Each action's calls, built on the state the decision's earlier actions leave (their calls simulated first),
    as the executor builds them after those actions were mined. A second swap in one decision is quoted on the
    reserves the first left, so its amountOutMin keeps its own max_slippage_bps from the price it will meet
    (quoted on the pre-trade reserves, it reverted with INSUFFICIENT_OUTPUT_AMOUNT)."""
    view, after = _view_of(w3)
    out: list[tuple[ProposedAction, list[PlannedCall] | ToolArgumentError]] = []
    with view.lock:
        view._account, view._block, view.prior = account, block, []
        try:
            for action in actions:
                try:
                    calls = build_calls(after if view.prior else w3, deployment, account, action, observation)
                except ToolArgumentError as e:
                    out.append((action, e))
                    continue
                view.prior = view.prior + calls
                out.append((action, calls))
        finally:
            view.prior = []
    return out


_VIEWS: weakref.WeakKeyDictionary[Web3, tuple[_AfterCalls, Web3]] = weakref.WeakKeyDictionary()
_VIEWS_LOCK = threading.Lock()


def _view_of(w3: Web3) -> tuple[_AfterCalls, Web3]:
    """One after-calls view per node client, so the contracts build_calls caches per client are built once
    (golem.chain.tools.calls.cached_contract), not per decision."""
    with _VIEWS_LOCK:
        if w3 not in _VIEWS:
            view = _AfterCalls(w3)
            _VIEWS[w3] = (view, Web3(view))
        return _VIEWS[w3]


def simulate_actions(
    w3: Web3,
    deployment: Deployment,
    account: str,
    actions: list[ProposedAction],
    observation: Observation,
) -> SimulationResult:
    """Build every action's calls and simulate them all in one block, in action order.

    `expected` holds what the chain should show afterwards, as signed deltas in human units:
    `delta:<SYMBOL>` for wallet balances, `delta:collateral` / `delta:debt` for the Aave position (aWETH
    and variable-debt USDC), `delta:lp_shares` for the golem's LP shares of the pair (LP_SHARE_DECIMALS
    units), `amount_in` / `amount_out` for swaps (amount_out decoded from Router02's returned amounts),
    and `shares` minted or burned by add/remove_liquidity (with the amounts the router returned). A
    repay or withdraw expects what Aave's call returned (a full repay: the debt as of the simulated block).
    """
    account = Web3.to_checksum_address(account)
    block = w3.eth.block_number
    planned: list[tuple[ProposedAction, list[PlannedCall]]] = []
    results: dict[int, SimulatedAction] = {}
    for action, calls in plan_actions(w3, deployment, account, actions, observation, block):
        if isinstance(calls, ToolArgumentError):
            results[action.action_index] = SimulatedAction(
                action_index=action.action_index, ok=False, revert_reason=f"invalid arguments: {calls}"
            )
            continue
        planned.append((action, calls))

    flat = [c for _, calls in planned for c in calls]
    outcomes = simulate_planned(w3, account, flat, block) if flat else []

    pos = 0
    for action, calls in planned:
        mine = outcomes[pos : pos + len(calls)]
        pos += len(calls)
        failed = next(((c, o) for c, o in zip(calls, mine) if not o.ok), None)
        gas = sum(o.gas_used for o in mine)
        if failed is not None:
            call, outcome = failed
            reason = outcome.revert_reason or "reverted"
            results[action.action_index] = SimulatedAction(
                action_index=action.action_index,
                ok=False,
                revert_reason=reason if call.main else f"{call.label} reverted: {reason}",
                gas_estimate=gas,
            )
            continue
        args = parse_arguments(action.tool, action.arguments)
        main = next(i for i, c in enumerate(calls) if c.main)
        ret = _decode_return(calls[main], mine[main])
        if calls[main].returns and ret is None:
            raise SimulationError(f"{action.tool} simulation of action {action.action_index} returned nothing")
        expected: dict[str, float] = {}
        if action.tool == "swap":
            amount_in = from_base_units(to_base_units(args["amount_in"], args["token_in"]), args["token_in"])
            amount_out = from_base_units(int(ret[-1]), args["token_out"])
            expected = {
                "amount_in": amount_in,
                "amount_out": amount_out,
                f"delta:{args['token_in']}": -amount_in,
                f"delta:{args['token_out']}": amount_out,
            }
        elif action.tool == "add_liquidity":
            used0, used1, minted_raw = (int(x) for x in ret)
            amount0, amount1 = from_base_units(used0, POOL_TOKEN0), from_base_units(used1, POOL_TOKEN1)
            minted = lp_shares_from_base(minted_raw)
            expected = {
                "amount_weth": amount0,
                "amount_usdc": amount1,
                "shares": minted,
                f"delta:{POOL_TOKEN0}": -amount0,
                f"delta:{POOL_TOKEN1}": -amount1,
                f"delta:{LP_SHARES_KEY}": minted,
            }
        elif action.tool == "remove_liquidity":
            out0, out1 = (int(x) for x in ret)
            burned = lp_shares_from_base(burned_shares(calls[main]))
            expected = {
                "shares": burned,
                f"delta:{POOL_TOKEN0}": from_base_units(out0, POOL_TOKEN0),
                f"delta:{POOL_TOKEN1}": from_base_units(out1, POOL_TOKEN1),
                f"delta:{LP_SHARES_KEY}": -burned,
            }
        else:
            symbol = COLLATERAL_TOKEN if action.tool in ("supply", "withdraw") else DEBT_TOKEN
            # repay and withdraw return what Aave actually moved (a full repay: the debt at the block)
            moved = int(ret) if ret is not None else to_base_units(args["amount"], symbol)
            amount = from_base_units(moved, symbol)
            expected = {
                "supply": {f"delta:{symbol}": -amount, "delta:collateral": amount},
                "withdraw": {f"delta:{symbol}": amount, "delta:collateral": -amount},
                "borrow": {f"delta:{symbol}": amount, "delta:debt": amount},
                "repay": {f"delta:{symbol}": -amount, "delta:debt": -amount},
            }[action.tool]
        results[action.action_index] = SimulatedAction(
            action_index=action.action_index, ok=True, gas_estimate=gas, expected=expected
        )

    return SimulationResult(actions=[results[a.action_index] for a in actions], block_number=block)


def simulate_health_factor(w3: Web3, deployment: Deployment, account: str, actions: list[ProposedAction],
                           observation: Observation, block: int) -> float | None:
    """The Aave health factor after `actions`, simulated with eth_simulateV1 at `block` (a counterfactual on the
    pre-tick block): the actions' calls, then getUserAccountData in the same simulated block.
    None when the account has no debt afterwards; SimulationError when a call reverts."""
    account = Web3.to_checksum_address(account)
    calls = []
    for _, planned in plan_actions(w3, deployment, account, actions, observation, block):
        if isinstance(planned, ToolArgumentError):
            raise planned
        calls += planned
    data = Web3.keccak(text="getUserAccountData(address)")[:4] + abi_encode(["address"], [account])
    read = PlannedCall(to=deployment.addresses["AAVE_POOL"], data="0x" + data.hex(), label="getUserAccountData")
    outcomes = simulate_planned(w3, account, [*calls, read], block)
    failed = next((o for o in outcomes if not o.ok), None)
    if failed is not None:
        raise SimulationError(f"counterfactual reverted: {failed.revert_reason}")
    words = abi_decode(["uint256"] * 6, bytes.fromhex(_hex(outcomes[-1].return_data)))
    debt_base, hf_raw = words[1], words[5]
    return None if debt_base == 0 or hf_raw == MAX_UINT256 else hf_raw / 10**HEALTH_FACTOR_DECIMALS
