"""Liquidity on the Uniswap V2 WETH/USDC pair through Router02: the deposit the reserves allow, the shares a
removal burns."""

from __future__ import annotations

from decimal import ROUND_DOWN, Decimal
from typing import Any

from eth_abi import decode as abi_decode
from web3 import Web3

from golem.chain.contracts import Deployment
from golem.chain.tools.arguments import to_base_units
from golem.chain.tools.calls import PlannedCall, approve_exact, cached_contract, revoke_after, swap_deadline
from golem.chain.tools.schemas import DEFAULT_MAX_SLIPPAGE_BPS, LP_PAIR, POOL_TOKEN0, POOL_TOKEN1, ToolArgumentError


def deposit_plan(amount0: int, amount1: int, reserve0: int, reserve1: int) -> tuple[int, int, float]:
    """What Router02.addLiquidity deposits of (amount0, amount1) into a pair holding (reserve0, reserve1),
    and the shortfall in bps: how much less than given it takes of the side it cuts.

    The router's own rule (UniswapV2Router02._addLiquidity): amount1' = quote(amount0) if that fits in
    amount1, else amount0' = quote(amount1); here the kept side is then re-quoted so that, in an
    unchanged pool, the router takes exactly the planned amounts (exact approvals are used up). Exact
    integer inputs (base units); an empty pair takes both as given (the first deposit sets the price)."""
    if reserve0 <= 0 or reserve1 <= 0:
        return amount0, amount1, 0.0
    def short_bps(given: int, taken: int) -> float:
        return float(Decimal(given - taken) / Decimal(given) * 10_000) if given else 0.0

    opt1 = amount0 * reserve1 // reserve0
    if opt1 <= amount1:
        return amount0, opt1, short_bps(amount1, opt1)
    opt0 = amount1 * reserve0 // reserve1
    return opt0, opt0 * reserve1 // reserve0, short_bps(amount0, opt0)


def _pair_reserves(w3: Web3, deployment: Deployment) -> tuple[Any, int, int, int]:
    """The LP pair, its reserves in (POOL_TOKEN0, POOL_TOKEN1) order, and its LP total supply."""
    pair = cached_contract(w3, deployment, LP_PAIR)
    token0 = w3.to_checksum_address(pair.functions.token0().call())
    token1 = w3.to_checksum_address(pair.functions.token1().call())
    want = {deployment.address(POOL_TOKEN0), deployment.address(POOL_TOKEN1)}
    if {token0, token1} != want:
        raise ToolArgumentError(
            f"the pair at {pair.address} holds {token0}/{token1}, not {POOL_TOKEN0}/{POOL_TOKEN1}; check the address book"
        )
    r0, r1, _ts = pair.functions.getReserves().call()
    if token0 != deployment.address(POOL_TOKEN0):
        r0, r1 = r1, r0
    return pair, r0, r1, pair.functions.totalSupply().call()


def pool_calls(w3: Web3, deployment: Deployment, account: str, tool: str, args: dict[str, Any]) -> list[PlannedCall]:
    router = cached_contract(w3, deployment, "UNI_ROUTER")
    pair, reserve0, reserve1, total = _pair_reserves(w3, deployment)
    token0, token1 = deployment.address(POOL_TOKEN0), deployment.address(POOL_TOKEN1)
    if tool == "add_liquidity":
        want0 = to_base_units(args["amount_weth"], POOL_TOKEN0, what="add_liquidity.amount_weth")
        want1 = to_base_units(args["amount_usdc"], POOL_TOKEN1, what="add_liquidity.amount_usdc")
        slip = args["max_slippage_bps"]
        amount0, amount1, short = deposit_plan(want0, want1, reserve0, reserve1) if total > 0 else (want0, want1, 0.0)
        if short > slip:
            price = Decimal(reserve1) / Decimal(reserve0) * Decimal(10) ** (18 - 6)
            fit = (args["amount_weth"] * price).quantize(Decimal("0.01"), rounding=ROUND_DOWN)
            side, sym = ("amount_usdc", "USDC") if amount1 < want1 else ("amount_weth", "WETH")
            raise ToolArgumentError(
                f"add_liquidity.{side}: {args['amount_weth']} WETH with {args['amount_usdc']} USDC is off the pool "
                f"price ({price:,.2f} USDC/WETH): the router would take {short:,.1f} bps less {sym} than given, "
                f"over max_slippage_bps {slip:g}; deposit about {fit} USDC with {args['amount_weth']} WETH"
            )
        if amount0 <= 0 or amount1 <= 0:
            raise ToolArgumentError("add_liquidity.amount_weth: the deposit rounds to nothing on one side; deposit more")
        keep = Decimal(10_000) - Decimal(str(slip))
        min0 = int((Decimal(amount0) * keep / 10_000).to_integral_value(rounding=ROUND_DOWN))
        min1 = int((Decimal(amount1) * keep / 10_000).to_integral_value(rounding=ROUND_DOWN))
        calls = approve_exact(w3, deployment, account, POOL_TOKEN0, router.address, amount0)
        calls += approve_exact(w3, deployment, account, POOL_TOKEN1, router.address, amount1)
        calls.append(
            PlannedCall(
                to=router.address,
                data=router.encode_abi(
                    "addLiquidity", args=[token0, token1, amount0, amount1, min0, min1, account, swap_deadline(w3)]
                ),
                label="add_liquidity",
                main=True,
                returns="(uint256,uint256,uint256)",
            )
        )
        return calls + [revoke_after(w3, deployment, account, s, router.address) for s in (POOL_TOKEN0, POOL_TOKEN1)]

    held = pair.functions.balanceOf(account).call()
    if held <= 0:
        raise ToolArgumentError(
            "remove_liquidity.fraction: the account holds no LP shares of the pair; there is nothing to remove"
        )
    fraction = args["fraction"]
    burn = held if fraction == 1 else int((Decimal(held) * fraction).to_integral_value(rounding=ROUND_DOWN))
    if burn <= 0:
        raise ToolArgumentError(
            f"remove_liquidity.fraction: {fraction} of {held} raw LP units rounds to zero; use a larger fraction"
        )
    keep = Decimal(10_000) - Decimal(str(DEFAULT_MAX_SLIPPAGE_BPS))
    min0 = int((Decimal(burn * reserve0 // total) * keep / 10_000).to_integral_value(rounding=ROUND_DOWN))
    min1 = int((Decimal(burn * reserve1 // total) * keep / 10_000).to_integral_value(rounding=ROUND_DOWN))
    calls = approve_exact(w3, deployment, account, LP_PAIR, router.address, burn)
    calls.append(
        PlannedCall(
            to=router.address,
            data=router.encode_abi("removeLiquidity", args=[token0, token1, burn, min0, min1, account, swap_deadline(w3)]),
            label="remove_liquidity",
            main=True,
            returns="(uint256,uint256)",
        )
    )
    return calls + [revoke_after(w3, deployment, account, LP_PAIR, router.address)]


def burned_shares(call: PlannedCall) -> int:
    """The raw LP amount a planned remove_liquidity call burns (decoded from its removeLiquidity calldata)."""
    if call.label != "remove_liquidity":
        raise ValueError(f"not a remove_liquidity call: {call.label}")
    types = ["address", "address", "uint256", "uint256", "uint256", "address", "uint256"]
    return int(abi_decode(types, bytes.fromhex(call.data[10:]))[2])
