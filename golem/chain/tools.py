"""The write-tool registry: what a deliberator may ask for, and how it becomes contract calls.

Tier-2 write tools (runtime-extensions, "Three-Tier Tool Authorization"): each has a JSON schema the
deliberator sees, argument validation that names the bad argument, and a builder that turns a
`ProposedAction` (human units, token symbols) into the exact calls to send to the real protocols:
swaps and liquidity through Uniswap V2's Router02, supply / withdraw / borrow / repay on the Aave V3
Pool. Nothing here signs or sends; the executor does that, and only with a permit.

Approvals are exact and never outlive the action: each approve is followed by a `cleanup` revoke that
the executor sends only when some allowance is left (the router took less of one side of a deposit, a
full repay's interest margin, a call that failed after its approve went out).
"""

from __future__ import annotations

import math
from decimal import ROUND_DOWN, Decimal, InvalidOperation
from typing import Any

from eth_abi import decode as abi_decode
from pydantic import BaseModel
from web3.exceptions import ContractLogicError

from golem.chain.contracts import MAIN_PAIR, PAIRS, TOKEN_DECIMALS, at, contract
from golem.models.observation import Observation
from golem.models.tick import ProposedAction

# Token symbols the tools understand; whether one may be *traded* is the PolicyCage's call.
KNOWN_TOKENS: tuple[str, ...] = tuple(TOKEN_DECIMALS)
STABLE_TOKENS: frozenset[str] = frozenset({"USDC", "DAI"})

# A swap without max_slippage_bps uses this bound (the PolicyCage still checks it).
DEFAULT_MAX_SLIPPAGE_BPS = 50.0

# The golem's Aave V3 position: WETH collateral (aWETH), USDC variable debt (variableDebtUSDC).
COLLATERAL_TOKEN = "WETH"
DEBT_TOKEN = "USDC"
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
# Router02 deadlines: the latest block's timestamp plus this. A frozen plan retried later than this
# reverts (UniswapV2Router: EXPIRED) instead of trading on a stale quote.
SWAP_DEADLINE_S = 300

# The Uniswap V2 pair the golem provides liquidity to (WETH/USDC) and its LP token.
POOL_TOKEN0 = "WETH"  # the tools' order (amount_weth, amount_usdc), not the pair's token0 (lower address)
POOL_TOKEN1 = "USDC"
LP_PAIR = MAIN_PAIR
LP_TOOLS: frozenset[str] = frozenset({"add_liquidity", "remove_liquidity"})
# The pair's LP token has 18 decimals, but its raw amounts are sqrt(WETH-wei × USDC-base-unit), so one
# human share here is 10^((18 + 6) / 2) = 10^12 raw LP units (1 WETH + 2,000 USDC ≈ 44.7 shares).
# Every delta:lp_shares, `shares` expectation and share price uses this unit.
LP_SHARE_DECIMALS = (18 + 6) // 2
# `delta:<name>` key of the golem's pool shares in simulation expectations and verification.
LP_SHARES_KEY = "lp_shares"
# ChainSnapshot position kind the reader uses for the golem's pool position (see golem.chain.reader).
LP_POSITION_KIND = "lp"

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


class ToolArgumentError(ValueError):
    """An action's arguments do not fit its tool; the message names the argument and the fix."""


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


_AMOUNT = {"type": "number", "exclusiveMinimum": 0}
_TOKEN = {"type": "string", "enum": list(KNOWN_TOKENS)}

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "swap": {
        "name": "swap",
        "description": (
            "Swap token_in for token_out through Uniswap V2 Router02 (swapExactTokensForTokens; "
            "WETH<->USDC and WETH<->DAI on their pairs, USDC<->DAI through WETH). amount_in is in "
            "human units of token_in. The trade reverts if the output is worse than the router's "
            "quote (getAmountsOut) by more than max_slippage_bps (or below min_amount_out when given), "
            "or if it is not mined within a few minutes."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "token_in": {**_TOKEN, "description": "symbol of the token sold"},
                "token_out": {**_TOKEN, "description": "symbol of the token bought"},
                "amount_in": {**_AMOUNT, "description": "amount of token_in to sell, human units"},
                "max_slippage_bps": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 10_000,
                    "description": f"worst acceptable output vs quote, bps (default {DEFAULT_MAX_SLIPPAGE_BPS:g})",
                },
                "min_amount_out": {**_AMOUNT, "description": "optional hard floor on the output, human units"},
            },
            "required": ["token_in", "token_out", "amount_in"],
            "additionalProperties": False,
        },
    },
    "supply": {
        "name": "supply",
        "description": "Supply WETH as collateral to the Aave V3 Pool (human units of WETH); it earns aWETH.",
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "WETH to supply"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "withdraw": {
        "name": "withdraw",
        "description": (
            "Withdraw WETH collateral from the Aave V3 Pool; Aave refuses if the health factor would drop "
            "below 1. An amount at (or a hair above) the supplied balance withdraws all of it."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "WETH to withdraw"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "borrow": {
        "name": "borrow",
        "description": (
            "Borrow USDC at Aave V3's variable rate against the supplied WETH; Aave refuses if the "
            "collateral cannot cover it (loan-to-value) or the health factor would drop below 1."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "USDC to borrow"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "repay": {
        "name": "repay",
        "description": (
            "Repay variable USDC debt on the Aave V3 Pool. An amount at or above the debt repays all of it, "
            "interest accrued up to inclusion included (Aave takes min(amount, debt))."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "USDC to repay"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "add_liquidity": {
        "name": "add_liquidity",
        "description": (
            "Deposit WETH and USDC into the Uniswap V2 WETH/USDC pair through Router02 (addLiquidity) for "
            "LP shares (amounts in human units). The router deposits at the pair's price ratio, so it may "
            "take less of one side; the deposit is refused when that shortfall is more than "
            "max_slippage_bps of the amount given (supply them at the pool's price), or when the pool "
            "price moves by more than that before inclusion."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "amount_weth": {**_AMOUNT, "description": "WETH to deposit, human units"},
                "amount_usdc": {**_AMOUNT, "description": "USDC to deposit, human units"},
                "max_slippage_bps": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 10_000,
                    "description": (
                        "most the router may take below either amount (ratio off the pool price), bps "
                        f"(default {DEFAULT_MAX_SLIPPAGE_BPS:g})"
                    ),
                },
            },
            "required": ["amount_weth", "amount_usdc"],
            "additionalProperties": False,
        },
    },
    "remove_liquidity": {
        "name": "remove_liquidity",
        "description": (
            "Withdraw a fraction of the golem's LP shares of the Uniswap V2 WETH/USDC pair through Router02 "
            "(removeLiquidity); returns both tokens pro rata to the pair's reserves (refused if either side "
            f"comes out more than {DEFAULT_MAX_SLIPPAGE_BPS:g} bps below the planned claim). "
            "fraction 1 removes every share."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "fraction": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": 1,
                    "description": "share of the golem's pool shares to remove, 0 < fraction <= 1 (0.5 = half)",
                },
            },
            "required": ["fraction"],
            "additionalProperties": False,
        },
    },
}

WRITE_TOOLS: frozenset[str] = frozenset(TOOL_SCHEMAS)

# ActionRecord.action_type per tool (heartbeat ActionRecord: "swap, rebalance, deposit, withdraw, ...").
ACTION_TYPES: dict[str, str] = {
    "swap": "swap",
    "supply": "deposit",
    "withdraw": "withdraw",
    "borrow": "borrow",
    "repay": "repay",
    "add_liquidity": "add_liquidity",
    "remove_liquidity": "remove_liquidity",
}


# ── argument validation ──────────────────────────────────────────────────────────────────────


def _amount(tool: str, name: str, raw: Any) -> Decimal:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str, Decimal)):
        raise ToolArgumentError(f"{tool}.{name}: expected a positive number, got {type(raw).__name__} {raw!r}")
    if isinstance(raw, float) and not math.isfinite(raw):
        raise ToolArgumentError(f"{tool}.{name}: must be a finite positive number, got {raw!r}")
    try:
        value = Decimal(str(raw).strip())
    except InvalidOperation:
        raise ToolArgumentError(f"{tool}.{name}: {raw!r} is not a number") from None
    if not value.is_finite() or value <= 0:
        raise ToolArgumentError(f"{tool}.{name}: must be a finite number > 0, got {raw!r}")
    return value


def _token(tool: str, name: str, raw: Any) -> str:
    if not isinstance(raw, str):
        raise ToolArgumentError(f"{tool}.{name}: expected a token symbol string, got {raw!r}")
    sym = raw.strip().upper()
    if sym not in KNOWN_TOKENS:
        raise ToolArgumentError(f"{tool}.{name}: unknown token {raw!r}; use one of {', '.join(KNOWN_TOKENS)}")
    return sym


def _slippage(tool: str, raw: Any) -> float:
    """max_slippage_bps: the default when omitted, else a number of basis points in [0, 10000]."""
    if raw is None:
        return DEFAULT_MAX_SLIPPAGE_BPS
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise ToolArgumentError(f"{tool}.max_slippage_bps: expected a number of basis points, got {raw!r}")
    if not 0 <= raw <= 10_000:
        raise ToolArgumentError(f"{tool}.max_slippage_bps: must be between 0 and 10000, got {raw}")
    return float(raw)


def _fraction(tool: str, name: str, raw: Any) -> Decimal:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str, Decimal)):
        raise ToolArgumentError(f"{tool}.{name}: expected a number in (0, 1], got {type(raw).__name__} {raw!r}")
    try:
        value = Decimal(str(raw).strip())
    except InvalidOperation:
        raise ToolArgumentError(f"{tool}.{name}: {raw!r} is not a number; give a fraction in (0, 1]") from None
    if not value.is_finite() or not 0 < value <= 1:
        raise ToolArgumentError(
            f"{tool}.{name}: must be in (0, 1] (the share of the golem's pool shares to remove, "
            f"e.g. 0.5 for half, 1 for all), got {raw!r}"
        )
    return value


def parse_arguments(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Validate `arguments` against the tool's schema; returns normalised values.

    Amounts and fractions come back as `Decimal` (exact, human units), tokens as upper-case symbols,
    and a swap or add_liquidity always carries `max_slippage_bps` (the default when omitted).
    """
    if tool not in TOOL_SCHEMAS:
        raise ToolArgumentError(f"unknown tool {tool!r}; write tools are {', '.join(sorted(WRITE_TOOLS))}")
    if not isinstance(arguments, dict):
        raise ToolArgumentError(f"{tool}: arguments must be an object, got {type(arguments).__name__}")
    schema = TOOL_SCHEMAS[tool]["input_schema"]
    allowed = set(schema["properties"])
    extra = sorted(set(arguments) - allowed)
    if extra:
        raise ToolArgumentError(f"{tool}: unexpected argument(s) {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}")
    missing = [k for k in schema["required"] if arguments.get(k) is None]
    if missing:
        raise ToolArgumentError(f"{tool}: missing required argument(s) {', '.join(missing)}")

    if tool == "add_liquidity":
        return {
            "amount_weth": _amount(tool, "amount_weth", arguments["amount_weth"]),
            "amount_usdc": _amount(tool, "amount_usdc", arguments["amount_usdc"]),
            "max_slippage_bps": _slippage(tool, arguments.get("max_slippage_bps")),
        }
    if tool == "remove_liquidity":
        return {"fraction": _fraction(tool, "fraction", arguments["fraction"])}
    if tool != "swap":
        return {"amount": _amount(tool, "amount", arguments["amount"])}

    token_in = _token(tool, "token_in", arguments["token_in"])
    token_out = _token(tool, "token_out", arguments["token_out"])
    if token_in == token_out:
        raise ToolArgumentError(f"swap.token_out: must differ from token_in (both {token_in})")
    parsed: dict[str, Any] = {
        "token_in": token_in,
        "token_out": token_out,
        "amount_in": _amount(tool, "amount_in", arguments["amount_in"]),
        "max_slippage_bps": DEFAULT_MAX_SLIPPAGE_BPS,
        "min_amount_out": None,
    }
    parsed["max_slippage_bps"] = _slippage(tool, arguments.get("max_slippage_bps"))
    if arguments.get("min_amount_out") is not None:
        parsed["min_amount_out"] = _amount(tool, "min_amount_out", arguments["min_amount_out"])
    return parsed


def to_base_units(amount: Decimal, symbol: str, *, what: str = "amount") -> int:
    """Human units → integer base units, rounding down; refuses amounts that round to zero."""
    decimals = TOKEN_DECIMALS[symbol]
    base = int((amount * (Decimal(10) ** decimals)).to_integral_value(rounding=ROUND_DOWN))
    if base <= 0:
        raise ToolArgumentError(f"{what} {amount} {symbol} is below the token's smallest unit (10^-{decimals})")
    return base


def from_base_units(amount: int, symbol: str) -> float:
    return amount / 10 ** TOKEN_DECIMALS[symbol]


# ── what an action touches and is worth ──────────────────────────────────────────────────────


def tool_tokens(tool: str, args: dict[str, Any]) -> list[str]:
    """The assets a tool moves, given its parsed arguments (pure; for approved-asset checks)."""
    if tool == "swap":
        return [args["token_in"], args["token_out"]]
    if tool in LP_TOOLS:
        return [POOL_TOKEN0, POOL_TOKEN1]
    if tool in ("supply", "withdraw"):
        return [COLLATERAL_TOKEN]
    return [DEBT_TOKEN]


def action_tokens(action: ProposedAction) -> list[str]:
    """The assets an action moves (for the approved-assets check)."""
    return tool_tokens(action.tool, parse_arguments(action.tool, action.arguments))


def lp_position(snapshot) -> Any:
    """The golem's pool position in a ChainSnapshot (kind "lp"), or None when it holds no shares.

    Its `collateral` is the WETH side of the golem's pro-rata claim on the reserves (shares /
    total_shares × reserve0); the USDC side is that times the pool price (see golem.chain.reader)."""
    return next((p for p in snapshot.positions if p.kind == LP_POSITION_KIND), None)


def lp_value_usd(observation: Observation) -> float:
    """USD value of the golem's pool claim: WETH side at the oracle, USDC side = WETH side × pool price."""
    pos = lp_position(observation.snapshot)
    if pos is None:
        return 0.0
    return pos.collateral * (price_usd(POOL_TOKEN0, observation) + observation.snapshot.pool.price)


def price_usd(symbol: str, observation: Observation) -> float:
    """USD value of one unit: stables at 1, WETH at the oracle (pool price if the oracle reads 0)."""
    if symbol in STABLE_TOKENS:
        return 1.0
    snap = observation.snapshot
    return snap.oracle_price if snap.oracle_price > 0 else snap.pool.price


def action_value_usd(action: ProposedAction, observation: Observation) -> float:
    """The USD size of an action, the number the PolicyCage's max_trade_size_usd limits."""
    args = parse_arguments(action.tool, action.arguments)
    if action.tool == "swap":
        return float(args["amount_in"]) * price_usd(args["token_in"], observation)
    if action.tool == "add_liquidity":
        return float(args["amount_weth"]) * price_usd(POOL_TOKEN0, observation) + float(args["amount_usdc"]) * price_usd(
            POOL_TOKEN1, observation
        )
    if action.tool == "remove_liquidity":
        return float(args["fraction"]) * lp_value_usd(observation)
    symbol = COLLATERAL_TOKEN if action.tool in ("supply", "withdraw") else DEBT_TOKEN
    return float(args["amount"]) * price_usd(symbol, observation)


def slippage_bps_of(action: ProposedAction) -> float | None:
    """The slippage bound a swap or add_liquidity is checked against; None for tools without one."""
    if action.tool not in ("swap", "add_liquidity"):
        return None
    return parse_arguments(action.tool, action.arguments)["max_slippage_bps"]


# ── contracts (built once per node client, address and ABI: golem.chain.contracts.at) ─────────


def cached_contract(w3, deployment, key: str):
    """The web3 Contract at an address-book key."""
    return contract(w3, deployment, key)


def cached_at(w3, address: str, abi_name: str):
    """The web3 Contract at `address` with a vendored ABI."""
    return at(w3, address, abi_name)


# ── calls ────────────────────────────────────────────────────────────────────────────────────


def aave_reason(reason: str | None) -> str | None:
    """Aave V3's numeric revert reason ("35") → "HEALTH_FACTOR_LOWER_THAN_LIQUIDATION_THRESHOLD (Aave error 35)"."""
    if reason is not None and reason in AAVE_ERRORS:
        return f"{AAVE_ERRORS[reason]} (Aave error {reason})"
    return reason


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


def _path_addresses(deployment, path: list[str]) -> list[str]:
    for key in path_pairs(path):
        if not deployment.has(key):
            raise ToolArgumentError(
                f"swap: the address book has no {key} (Uniswap V2 pair for {' -> '.join(path)}); "
                "trade a pair the book names or add it to the book"
            )
    return [deployment.address(sym) for sym in path]


def _deadline(w3) -> int:
    return int(w3.eth.get_block("latest")["timestamp"]) + SWAP_DEADLINE_S


def _revert_of(e: ContractLogicError) -> str:
    data = e.data if isinstance(e.data, str) else None
    if data and data.startswith("0x08c379a0"):
        return aave_reason(abi_decode(["string"], bytes.fromhex(data[10:]))[0]) or "reverted"
    return aave_reason(e.message) or "reverted"


def _approve(w3, deployment, account: str, key: str, spender: str, amount: int) -> list[PlannedCall]:
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


def _revoke(w3, deployment, account: str, key: str, spender: str) -> PlannedCall:
    """approve(spender, 0), sent only when an allowance is left once the action's calls ran."""
    token = cached_at(w3, deployment.address(key), "ERC20")
    return PlannedCall(
        to=token.address, data=token.encode_abi("approve", args=[spender, 0]), label=f"revoke_{key}",
        returns="bool", cleanup=True,
        only_if_nonzero=ReadCheck(to=token.address, data=token.encode_abi("allowance", args=[account, spender])),
    )  # fmt: skip


def build_calls(w3, deployment, account: str, action: ProposedAction, observation: Observation) -> list[PlannedCall]:
    """Turn an action into the contract calls that perform it (approve first when needed, revoke last).

    Reads the chain (allowances, the router's quote, the debt, the pair's reserves), so the plan
    reflects the state at build time; the executor freezes the plan in the tx journal so a retry sends
    exactly what was planned.
    """
    args = parse_arguments(action.tool, action.arguments)
    account = w3.to_checksum_address(account)
    if action.tool == "swap":
        return _swap_calls(w3, deployment, account, args)
    if action.tool in LP_TOOLS:
        return _pool_calls(w3, deployment, account, action.tool, args)
    return _aave_calls(w3, deployment, account, action.tool, args)


def _swap_calls(w3, deployment, account: str, args: dict[str, Any]) -> list[PlannedCall]:
    router = cached_contract(w3, deployment, "UNI_ROUTER")
    token_in, token_out = args["token_in"], args["token_out"]
    path = swap_path(token_in, token_out)
    path_addr = _path_addresses(deployment, path)
    amount_in = to_base_units(args["amount_in"], token_in, what="swap.amount_in")
    try:
        quote = router.functions.getAmountsOut(amount_in, path_addr).call()[-1]
    except ContractLogicError as e:
        raise ToolArgumentError(f"swap: Router02.getAmountsOut({' -> '.join(path)}) refused: {_revert_of(e)}") from None
    if quote <= 0:
        raise ToolArgumentError(f"swap.amount_in: {args['amount_in']} {token_in} buys nothing on the pool; sell more")
    slip = Decimal(str(args["max_slippage_bps"]))
    min_out = int((Decimal(quote) * (Decimal(10_000) - slip) / Decimal(10_000)).to_integral_value(rounding=ROUND_DOWN))
    if args["min_amount_out"] is not None:
        min_out = max(min_out, to_base_units(args["min_amount_out"], token_out, what="swap.min_amount_out"))
    calls = _approve(w3, deployment, account, token_in, router.address, amount_in)
    calls.append(
        PlannedCall(
            to=router.address,
            data=router.encode_abi(
                "swapExactTokensForTokens", args=[amount_in, max(min_out, 1), path_addr, account, _deadline(w3)]
            ),
            label="swap",
            main=True,
            returns="uint256[]",
        )
    )
    calls.append(_revoke(w3, deployment, account, token_in, router.address))
    return calls


def repay_interest_margin(debt: int, variable_rate_ray: int) -> int:
    """Base units added to a full repay's approval: twice REPAY_INTEREST_MARGIN_S of interest at the
    current variable rate, at least one unit (what is not used is revoked after the repay)."""
    return 2 * debt * variable_rate_ray * REPAY_INTEREST_MARGIN_S // (SECONDS_PER_YEAR * RAY) + 1


def _aave_calls(w3, deployment, account: str, tool: str, args: dict[str, Any]) -> list[PlannedCall]:
    pool = cached_contract(w3, deployment, "AAVE_POOL")
    symbol = COLLATERAL_TOKEN if tool in ("supply", "withdraw") else DEBT_TOKEN
    asset = deployment.address(symbol)
    amount = to_base_units(args["amount"], symbol, what=f"{tool}.amount")
    if tool == "supply":
        calls = _approve(w3, deployment, account, symbol, pool.address, amount)
        calls.append(PlannedCall(to=pool.address, data=pool.encode_abi("supply", args=[asset, amount, account, 0]),
                                 label="supply", main=True))
        return calls + [_revoke(w3, deployment, account, symbol, pool.address)]
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
    calls = _approve(w3, deployment, account, symbol, pool.address, approve)
    data = pool.encode_abi("repay", args=[asset, pay, VARIABLE_RATE_MODE, account])
    calls.append(PlannedCall(to=pool.address, data=data, label="repay", main=True, returns="uint256"))
    return calls + [_revoke(w3, deployment, account, symbol, pool.address)]


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


def _pair_reserves(w3, deployment) -> tuple[Any, int, int, int]:
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


def _pool_calls(w3, deployment, account: str, tool: str, args: dict[str, Any]) -> list[PlannedCall]:
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
        calls = _approve(w3, deployment, account, POOL_TOKEN0, router.address, amount0)
        calls += _approve(w3, deployment, account, POOL_TOKEN1, router.address, amount1)
        calls.append(
            PlannedCall(
                to=router.address,
                data=router.encode_abi(
                    "addLiquidity", args=[token0, token1, amount0, amount1, min0, min1, account, _deadline(w3)]
                ),
                label="add_liquidity",
                main=True,
                returns="(uint256,uint256,uint256)",
            )
        )
        return calls + [_revoke(w3, deployment, account, s, router.address) for s in (POOL_TOKEN0, POOL_TOKEN1)]

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
    calls = _approve(w3, deployment, account, LP_PAIR, router.address, burn)
    calls.append(
        PlannedCall(
            to=router.address,
            data=router.encode_abi("removeLiquidity", args=[token0, token1, burn, min0, min1, account, _deadline(w3)]),
            label="remove_liquidity",
            main=True,
            returns="(uint256,uint256)",
        )
    )
    return calls + [_revoke(w3, deployment, account, LP_PAIR, router.address)]


def lp_shares_from_base(raw: int) -> float:
    """Raw LP token units → human share units (LP_SHARE_DECIMALS)."""
    return raw / 10**LP_SHARE_DECIMALS


def burned_shares(call: PlannedCall) -> int:
    """The raw LP amount a planned remove_liquidity call burns (decoded from its removeLiquidity calldata)."""
    if call.label != "remove_liquidity":
        raise ValueError(f"not a remove_liquidity call: {call.label}")
    types = ["address", "address", "uint256", "uint256", "uint256", "address", "uint256"]
    return abi_decode(types, bytes.fromhex(call.data[10:]))[2]


PlannedCall.model_rebuild()
