"""Swaps through Uniswap V2's Router02: the path (WETH pairs directly, stable to stable through WETH), the
router's quote and the minimum out the slippage bound allows."""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal
from typing import Any

from web3 import Web3
from web3.exceptions import ContractLogicError

from golem.chain.contracts import PAIRS, Deployment
from golem.chain.tools.arguments import to_base_units
from golem.chain.tools.calls import (
    PlannedCall,
    approve_exact,
    cached_contract,
    revert_reason,
    revoke_after,
    swap_deadline,
)
from golem.chain.tools.schemas import ToolArgumentError


def pair_key(sym_a: str, sym_b: str) -> str:
    """The address-book key of the Uniswap V2 pair of two tokens (one of them WETH)."""
    for key, tokens in PAIRS.items():
        if set(tokens) == {sym_a, sym_b}:
            return key
    raise ToolArgumentError(f"swap: there is no Uniswap V2 pair {sym_a}/{sym_b}; pairs are {', '.join(PAIRS)}")


def swap_path(token_in: str, token_out: str) -> list[str]:
    """Router02 path as symbols: WETH↔X directly on the WETH/X pair, stable↔stable through WETH."""
    if "WETH" in (token_in, token_out):
        return [token_in, token_out]
    return [token_in, "WETH", token_out]


def path_pairs(path: list[str]) -> list[str]:
    """Pair keys a path trades through, in order."""
    return [pair_key(a, b) for a, b in zip(path, path[1:])]


def _path_addresses(deployment: Deployment, path: list[str]) -> list[str]:
    for key in path_pairs(path):
        if not deployment.has(key):
            raise ToolArgumentError(
                f"swap: the address book has no {key} (Uniswap V2 pair for {' -> '.join(path)}); "
                "trade a pair the book names or add it to the book"
            )
    return [deployment.address(sym) for sym in path]


def swap_calls(w3: Web3, deployment: Deployment, account: str, args: dict[str, Any]) -> list[PlannedCall]:
    router = cached_contract(w3, deployment, "UNI_ROUTER")
    token_in, token_out = args["token_in"], args["token_out"]
    path = swap_path(token_in, token_out)
    path_addr = _path_addresses(deployment, path)
    amount_in = to_base_units(args["amount_in"], token_in, what="swap.amount_in")
    try:
        quote = router.functions.getAmountsOut(amount_in, path_addr).call()[-1]
    except ContractLogicError as e:
        raise ToolArgumentError(f"swap: Router02.getAmountsOut({' -> '.join(path)}) refused: {revert_reason(e)}") from None
    if quote <= 0:
        raise ToolArgumentError(f"swap.amount_in: {args['amount_in']} {token_in} buys nothing on the pool; sell more")
    slip = Decimal(str(args["max_slippage_bps"]))
    min_out = int((Decimal(quote) * (Decimal(10_000) - slip) / Decimal(10_000)).to_integral_value(rounding=ROUND_DOWN))
    if args["min_amount_out"] is not None:
        min_out = max(min_out, to_base_units(args["min_amount_out"], token_out, what="swap.min_amount_out"))
    calls = approve_exact(w3, deployment, account, token_in, router.address, amount_in)
    calls.append(
        PlannedCall(
            to=router.address,
            data=router.encode_abi(
                "swapExactTokensForTokens", args=[amount_in, max(min_out, 1), path_addr, account, swap_deadline(w3)]
            ),
            label="swap",
            main=True,
            returns="uint256[]",
        )
    )
    calls.append(revoke_after(w3, deployment, account, token_in, router.address))
    return calls
