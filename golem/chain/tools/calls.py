"""A planned contract call and what every protocol's builder shares: cached contracts, exact approvals with
the revoke that follows them, Aave's revert codes by name, the swap deadline.

Approvals never outlive the action: each approve is followed by a `cleanup` revoke the executor sends only
when some allowance is left."""

from __future__ import annotations

from eth_abi import decode as abi_decode
from pydantic import BaseModel
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import ContractLogicError

from golem.chain.contracts import Deployment, at, contract


# Router02 deadlines: the latest block's timestamp plus this. A frozen plan retried later than this
# reverts (UniswapV2Router: EXPIRED) instead of trading on a stale quote.
SWAP_DEADLINE_S = 300

# Aave V3 reverts with numeric error codes (protocol/libraries/helpers/Errors.sol); the ones a golem's
# own calls can hit, by name, so a refusal says what happened.
AAVE_ERRORS: dict[str, str] = {
    "26": "INVALID_AMOUNT", "27": "RESERVE_INACTIVE", "28": "RESERVE_FROZEN", "29": "RESERVE_PAUSED",
    "30": "BORROWING_NOT_ENABLED", "32": "NOT_ENOUGH_AVAILABLE_USER_BALANCE",
    "33": "INVALID_INTEREST_RATE_MODE_SELECTED", "34": "COLLATERAL_BALANCE_IS_ZERO",
    "35": "HEALTH_FACTOR_LOWER_THAN_LIQUIDATION_THRESHOLD", "36": "COLLATERAL_CANNOT_COVER_NEW_BORROW",
    "39": "NO_DEBT_OF_SELECTED_TYPE", "43": "UNDERLYING_BALANCE_ZERO", "50": "BORROW_CAP_EXCEEDED",
    "51": "SUPPLY_CAP_EXCEEDED", "57": "LTV_VALIDATION_FAILED", "59": "PRICE_ORACLE_SENTINEL_CHECK_FAILED",
}  # fmt: skip


class PlannedCall(BaseModel):
    """One contract call an action needs, ready to simulate or sign (no gas, no nonce yet)."""

    to: str
    data: str  # 0x-prefixed calldata
    value: int = 0
    label: str  # e.g. "approve", "swap"
    main: bool = False  # the call whose tx hash represents the action
    returns: str | None = None  # ABI type of the return value worth decoding, e.g. "uint256"
    # A call that restores a safe state (revoking an allowance): sent after the action's other calls,
    # also when one of them failed, so a failed action leaves no approval behind.
    cleanup: bool = False
    # Send only if this read answers non-zero (e.g. the allowance a revoke would clear); None = always.
    only_if_nonzero: "ReadCheck | None" = None


class ReadCheck(BaseModel):
    """An eth_call (to, calldata) whose uint256 answer decides whether a conditional call is needed."""

    to: str
    data: str


def cached_contract(w3: Web3, deployment: Deployment, key: str) -> Contract:
    """The web3 Contract at an address-book key."""
    return contract(w3, deployment, key)


def cached_at(w3: Web3, address: str, abi_name: str) -> Contract:
    """The web3 Contract at `address` with a vendored ABI."""
    return at(w3, address, abi_name)


def aave_reason(reason: str | None) -> str | None:
    """Aave V3's numeric revert reason ("35") → "HEALTH_FACTOR_LOWER_THAN_LIQUIDATION_THRESHOLD (Aave error 35)"."""
    if reason is not None and reason in AAVE_ERRORS:
        return f"{AAVE_ERRORS[reason]} (Aave error {reason})"
    return reason


def swap_deadline(w3: Web3) -> int:
    """From the time the next block will carry: on a chain mined only when a transaction comes (Anvil) the latest
    block can be older than the deadline window, and a swap stamped from it would be EXPIRED when mined."""
    latest = int(w3.eth.get_block("latest")["timestamp"])
    try:
        pending = int(w3.eth.get_block("pending")["timestamp"])
    except Exception:  # a node that serves no pending block: the latest is within a slot of now there
        pending = latest
    return max(latest, pending) + SWAP_DEADLINE_S


def revert_reason(e: ContractLogicError) -> str:
    data = e.data if isinstance(e.data, str) else None
    if data and data.startswith("0x08c379a0"):
        return aave_reason(abi_decode(["string"], bytes.fromhex(data[10:]))[0]) or "reverted"
    return aave_reason(e.message) or "reverted"


def approve_exact(w3: Web3, deployment: Deployment, account: str, key: str, spender: str, amount: int) -> list[PlannedCall]:
    """Set the spender's allowance to exactly `amount` (nothing when it already is) and plan its revoke."""
    token = cached_at(w3, deployment.address(key), "ERC20")
    calls = []
    if token.functions.allowance(account, spender).call() != amount:
        calls.append(
            PlannedCall(
                to=token.address, data=token.encode_abi("approve", args=[spender, amount]),
                label=f"approve_{key}", returns="bool",
            )
        )  # fmt: skip
    return calls


def revoke_after(w3: Web3, deployment: Deployment, account: str, key: str, spender: str) -> PlannedCall:
    """approve(spender, 0), sent only when an allowance is left once the action's calls ran."""
    token = cached_at(w3, deployment.address(key), "ERC20")
    return PlannedCall(
        to=token.address, data=token.encode_abi("approve", args=[spender, 0]), label=f"revoke_{key}",
        returns="bool", cleanup=True,
        only_if_nonzero=ReadCheck(to=token.address, data=token.encode_abi("allowance", args=[account, spender])),
    )  # fmt: skip


PlannedCall.model_rebuild()
