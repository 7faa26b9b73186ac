"""Step 5 SIMULATE: run the proposed writes against the live node before anything is signed.

All calls of all actions go into one `eth_simulateV1` block, so state carries across calls (the
approve before a swap, a borrow before a repay) — revisions-grounding "Multi-call simulation ...
State carries across calls". A node without eth_simulateV1 can still simulate a single call with
plain `eth_call` (revisions-grounding "Pre-tx simulation"). Revert data is decoded into a reason.
"""

from __future__ import annotations

from typing import Any

from eth_abi import decode as abi_decode
from pydantic import BaseModel
from web3 import Web3
from web3.exceptions import ContractLogicError

from golem.chain.contracts import Deployment, contract
from golem.chain.tools import (
    COLLATERAL_TOKEN,
    DEBT_TOKEN,
    LP_SHARES_KEY,
    POOL_TOKEN0,
    POOL_TOKEN1,
    PlannedCall,
    ToolArgumentError,
    build_calls,
    burned_shares,
    from_base_units,
    lp_shares_from_base,
    parse_arguments,
    to_base_units,
)
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
    """Error(string) → the string, Panic(uint256) → "panic 0x..", other data → its selector."""
    raw = _hex(data)
    if not raw:
        return None
    selector, body = raw[:8], bytes.fromhex(raw[8:]) if len(raw) > 8 else b""
    try:
        if selector == ERROR_STRING_SELECTOR:
            return abi_decode(["string"], body)[0]
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
    payload = {"blockStateCalls": [{"calls": [_tx_params(account, c) for c in calls]}], "validation": False}
    resp = w3.provider.make_request("eth_simulateV1", [payload, tag])
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
        data = w3.eth.call(params, tag)
        gas = w3.eth.estimate_gas(params, tag)
    except ContractLogicError as e:
        return CallOutcome(ok=False, revert_reason=decode_revert(e.data) or e.message or "reverted")
    return CallOutcome(ok=True, return_data="0x" + _hex(data), gas_used=gas)


def _decode_return(call: PlannedCall, outcome: CallOutcome) -> Any:
    if not call.returns or not outcome.ok or _hex(outcome.return_data) == "":
        return None
    return abi_decode([call.returns], bytes.fromhex(_hex(outcome.return_data)))[0]


def simulate_actions(
    w3: Web3,
    deployment: Deployment,
    account: str,
    actions: list[ProposedAction],
    observation: Observation,
) -> SimulationResult:
    """Build every action's calls and simulate them all in one block, in action order.

    `expected` holds what the chain should show afterwards, as signed deltas in human units:
    `delta:<SYMBOL>` for wallet balances, `delta:collateral` / `delta:debt` for the lending position,
    `delta:lp_shares` for the golem's pool shares (LP_SHARE_DECIMALS units), `amount_in` /
    `amount_out` for swaps (amount_out decoded from the swap's return data), and `shares` minted or
    burned by add/remove_liquidity (the amounts out of remove_liquidity decoded from its return data).
    """
    account = Web3.to_checksum_address(account)
    block = w3.eth.block_number
    planned: list[tuple[ProposedAction, list[PlannedCall]]] = []
    results: dict[int, SimulatedAction] = {}
    for action in actions:
        try:
            calls = build_calls(w3, deployment, account, action, observation)
        except ToolArgumentError as e:
            results[action.action_index] = SimulatedAction(
                action_index=action.action_index, ok=False, revert_reason=f"invalid arguments: {e}"
            )
            continue
        planned.append((action, calls))

    flat = [c for _, calls in planned for c in calls]
    outcomes = simulate_calls(w3, account, flat, block) if flat else []

    debt = None  # the lending debt, read once and carried through simulated borrows/repays
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
        expected: dict[str, float] = {}
        if action.tool == "swap":
            main = next(i for i, c in enumerate(calls) if c.main)
            out_base = _decode_return(calls[main], mine[main])
            if out_base is None:
                raise SimulationError(f"swap simulation of action {action.action_index} returned no amount_out")
            amount_in = from_base_units(to_base_units(args["amount_in"], args["token_in"]), args["token_in"])
            amount_out = from_base_units(int(out_base), args["token_out"])
            expected = {
                "amount_in": amount_in,
                "amount_out": amount_out,
                f"delta:{args['token_in']}": -amount_in,
                f"delta:{args['token_out']}": amount_out,
            }
        elif action.tool in ("add_liquidity", "remove_liquidity"):
            main = next(i for i, c in enumerate(calls) if c.main)
            ret = _decode_return(calls[main], mine[main])
            if ret is None:
                raise SimulationError(f"{action.tool} simulation of action {action.action_index} returned nothing")
            if action.tool == "add_liquidity":
                amount0 = from_base_units(to_base_units(args["amount_weth"], POOL_TOKEN0), POOL_TOKEN0)
                amount1 = from_base_units(to_base_units(args["amount_usdc"], POOL_TOKEN1), POOL_TOKEN1)
                minted = lp_shares_from_base(int(ret))
                expected = {
                    "amount_weth": amount0,
                    "amount_usdc": amount1,
                    "shares": minted,
                    f"delta:{POOL_TOKEN0}": -amount0,
                    f"delta:{POOL_TOKEN1}": -amount1,
                    f"delta:{LP_SHARES_KEY}": minted,
                }
            else:
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
            amount = from_base_units(to_base_units(args["amount"], symbol), symbol)
            if action.tool == "supply":
                expected = {f"delta:{symbol}": -amount, "delta:collateral": amount}
            elif action.tool == "withdraw":
                expected = {f"delta:{symbol}": amount, "delta:collateral": -amount}
            else:
                if debt is None:
                    lending = contract(w3, deployment, "LENDING")
                    debt = from_base_units(lending.functions.debt_of(account).call(block_identifier=block), DEBT_TOKEN)
                if action.tool == "borrow":
                    debt += amount
                    expected = {f"delta:{symbol}": amount, "delta:debt": amount}
                else:  # repay is capped at the outstanding debt (Lending.repay)
                    paid = min(amount, debt)
                    debt -= paid
                    expected = {f"delta:{symbol}": -paid, "delta:debt": -paid}
        results[action.action_index] = SimulatedAction(
            action_index=action.action_index, ok=True, gas_estimate=gas, expected=expected
        )

    return SimulationResult(actions=[results[a.action_index] for a in actions], block_number=block)
