"""Supply, withdraw, borrow and repay on the Aave V3 Pool: the golem's WETH collateral and variable USDC debt,
a withdraw of everything, and a full repay's interest margin."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from web3 import Web3

from golem.chain.contracts import TOKEN_DECIMALS, Deployment
from golem.chain.tools.arguments import to_base_units
from golem.chain.tools.calls import PlannedCall, approve_exact, cached_contract, revoke_after
from golem.chain.tools.schemas import COLLATERAL_TOKEN, DEBT_TOKEN, ToolArgumentError


VARIABLE_RATE_MODE = 2  # Aave interestRateMode: 2 = variable (stable borrowing is off in V3 markets)
MAX_UINT256 = 2**256 - 1  # Aave: repay/withdraw "everything"
SECONDS_PER_YEAR = 365 * 24 * 3600  # Aave's rates are per year, in ray
RAY = 10**27
# A full repay approves the debt plus twice this many seconds of interest at the current rate: the
# debt grows every second between planning and inclusion; what is left is revoked afterwards.
REPAY_INTEREST_MARGIN_S = 3600
# A withdraw of at most this much (relative) above the supplied balance withdraws everything: a
# strategy's "100 %" is read from a float snapshot and may overshoot the aToken balance by a few wei.
WITHDRAW_ALL_TOLERANCE = Decimal("0.0001")


def repay_interest_margin(debt: int, variable_rate_ray: int) -> int:
    """Base units added to a full repay's approval: twice REPAY_INTEREST_MARGIN_S of interest at the
    current variable rate, at least one unit (what is not used is revoked after the repay)."""
    return 2 * debt * variable_rate_ray * REPAY_INTEREST_MARGIN_S // (SECONDS_PER_YEAR * RAY) + 1


def aave_calls(w3: Web3, deployment: Deployment, account: str, tool: str, args: dict[str, Any]) -> list[PlannedCall]:
    pool = cached_contract(w3, deployment, "AAVE_POOL")
    symbol = COLLATERAL_TOKEN if tool in ("supply", "withdraw") else DEBT_TOKEN
    asset = deployment.address(symbol)
    amount = to_base_units(args["amount"], symbol, what=f"{tool}.amount")
    if tool == "supply":
        calls = approve_exact(w3, deployment, account, symbol, pool.address, amount)
        calls.append(PlannedCall(to=pool.address, data=pool.encode_abi("supply", args=[asset, amount, account, 0]),
                                 label="supply", main=True))
        return calls + [revoke_after(w3, deployment, account, symbol, pool.address)]
    if tool == "borrow":
        data = pool.encode_abi("borrow", args=[asset, amount, VARIABLE_RATE_MODE, 0, account])
        return [PlannedCall(to=pool.address, data=data, label="borrow", main=True)]
    if tool == "withdraw":
        supplied = cached_contract(w3, deployment, f"A_{symbol}").functions.balanceOf(account).call()
        if supplied == 0:
            raise ToolArgumentError(f"withdraw.amount: the account has no {symbol} supplied on Aave; nothing to withdraw")
        if amount > supplied:
            if Decimal(amount) > Decimal(supplied) * (1 + WITHDRAW_ALL_TOLERANCE):
                held = supplied / 10 ** TOKEN_DECIMALS[symbol]
                raise ToolArgumentError(
                    f"withdraw.amount: {args['amount']} {symbol} is more than the {held:.6f} {symbol} supplied on "
                    "Aave; withdraw at most that"
                )
            amount = MAX_UINT256  # everything, interest up to inclusion included
        data = pool.encode_abi("withdraw", args=[asset, amount, account])
        return [PlannedCall(to=pool.address, data=data, label="withdraw", main=True, returns="uint256")]
    # repay
    debt = cached_contract(w3, deployment, f"VDEBT_{symbol}").functions.balanceOf(account).call()
    if debt == 0:
        raise ToolArgumentError(f"repay.amount: the account has no variable {symbol} debt on Aave; nothing to repay")
    if amount < debt:
        approve, pay = amount, amount  # Aave takes exactly this: the debt only grows until inclusion
    else:
        # Repay it all: the debt grows per second until inclusion, so approve it with a small interest
        # margin and pass type(uint256).max (Aave pays the debt as of inclusion); the margin is revoked.
        rate = pool.functions.getReserveData(asset).call()[4]  # currentVariableBorrowRate (ray)
        approve, pay = debt + repay_interest_margin(debt, rate), MAX_UINT256
    calls = approve_exact(w3, deployment, account, symbol, pool.address, approve)
    data = pool.encode_abi("repay", args=[asset, pay, VARIABLE_RATE_MODE, account])
    calls.append(PlannedCall(to=pool.address, data=data, label="repay", main=True, returns="uint256"))
    return calls + [revoke_after(w3, deployment, account, symbol, pool.address)]
