"""The write-tool registry: what a deliberator may ask for, and how it becomes contract calls.

Tier-2 write tools (runtime-extensions, "Three-Tier Tool Authorization"): each has a JSON schema the
deliberator sees, argument validation that names the bad argument, and a builder that turns a
`ProposedAction` (human units, token symbols) into the exact calls to send. Nothing here signs or
sends; the executor does that, and only with a permit.
"""

from __future__ import annotations

import math
from decimal import ROUND_DOWN, Decimal, InvalidOperation
from typing import Any

from eth_abi import decode as abi_decode
from pydantic import BaseModel

from golem.chain.contracts import TOKEN_DECIMALS, contract
from golem.models.observation import Observation
from golem.models.tick import ProposedAction

# Token symbols the tools understand; whether one may be *traded* is the PolicyCage's call.
KNOWN_TOKENS: tuple[str, ...] = tuple(TOKEN_DECIMALS)
STABLE_TOKENS: frozenset[str] = frozenset({"USDC", "DAI"})

# A swap without max_slippage_bps uses this bound (the PolicyCage still checks it).
DEFAULT_MAX_SLIPPAGE_BPS = 50.0

# The lending market's fixed assets (contracts: Lending.vy collateral WETH, debt USDC).
COLLATERAL_TOKEN = "WETH"
DEBT_TOKEN = "USDC"

# The constant-product pool's pair (Pool.vy token0 = WETH, token1 = USDC) and its LP shares.
POOL_TOKEN0 = "WETH"
POOL_TOKEN1 = "USDC"
LP_TOOLS: frozenset[str] = frozenset({"add_liquidity", "remove_liquidity"})
# Pool.vy mints isqrt(amount0 * amount1) shares for the first deposit, so one share unit is
# sqrt(1 WETH-wei * 1 USDC-base-unit) and 10^((18 + 6) / 2) raw shares are one share in human units.
LP_SHARE_DECIMALS = (18 + 6) // 2
# `delta:<name>` key of the golem's pool shares in simulation expectations and verification.
LP_SHARES_KEY = "lp_shares"
# ChainSnapshot position kind the reader uses for the golem's pool position (see golem.chain.reader).
LP_POSITION_KIND = "lp"


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


_AMOUNT = {"type": "number", "exclusiveMinimum": 0}
_TOKEN = {"type": "string", "enum": list(KNOWN_TOKENS)}

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "swap": {
        "name": "swap",
        "description": (
            "Swap token_in for token_out on the WETH/USDC constant-product pool. amount_in is in "
            "human units of token_in. The trade reverts if the output is worse than the pool quote "
            "by more than max_slippage_bps (or below min_amount_out when given)."
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
        "description": "Supply WETH as collateral to the lending market (human units of WETH).",
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "WETH to supply"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "withdraw": {
        "name": "withdraw",
        "description": "Withdraw WETH collateral from the lending market; reverts if health factor would drop below 1.",
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "WETH to withdraw"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "borrow": {
        "name": "borrow",
        "description": "Borrow USDC against supplied WETH collateral; reverts if health factor would drop below 1.",
        "input_schema": {
            "type": "object",
            "properties": {"amount": {**_AMOUNT, "description": "USDC to borrow"}},
            "required": ["amount"],
            "additionalProperties": False,
        },
    },
    "repay": {
        "name": "repay",
        "description": "Repay USDC debt on the lending market (capped at the outstanding debt).",
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
            "Deposit WETH and USDC into the WETH/USDC constant-product pool for pool shares (amounts in "
            "human units; both are pulled in full). Supply them at the pool's price ratio: shares are "
            "minted for the smaller side, so any excess of the other side is given to the pool. The "
            "deposit is refused when its ratio is off the pool price by more than max_slippage_bps."
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
                        "worst acceptable value given up to a ratio off the pool price, bps "
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
            "Withdraw a fraction of the golem's shares of the WETH/USDC pool; returns both tokens "
            "pro rata to the pool's reserves. fraction 1 removes every share."
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


# ── calls ────────────────────────────────────────────────────────────────────────────────────


def _approve_if_needed(w3, deployment, account: str, symbol: str, spender: str, amount: int) -> list[PlannedCall]:
    token = contract(w3, deployment, symbol)
    if token.functions.allowance(account, spender).call() >= amount:
        return []
    # Exact-amount approval: the spender never holds more than this one action needs.
    return [
        PlannedCall(
            to=token.address,
            data=token.encode_abi("approve", args=[spender, amount]),
            label=f"approve_{symbol}",
            returns="bool",
        )
    ]


def build_calls(w3, deployment, account: str, action: ProposedAction, observation: Observation) -> list[PlannedCall]:
    """Turn an action into the contract calls that perform it (approve first when needed).

    Reads the chain (allowances, pool quote), so the plan reflects the state at build time; the
    executor freezes the plan in the tx journal so a retry sends exactly what was planned.
    """
    args = parse_arguments(action.tool, action.arguments)
    account = w3.to_checksum_address(account)

    if action.tool == "swap":
        pool = contract(w3, deployment, "POOL")
        token_in, token_out = args["token_in"], args["token_out"]
        pool_tokens = {
            w3.to_checksum_address(pool.functions.token0().call()),
            w3.to_checksum_address(pool.functions.token1().call()),
        }
        for name, sym in (("token_in", token_in), ("token_out", token_out)):
            addr = w3.to_checksum_address(deployment.addresses[sym])
            if addr not in pool_tokens:
                raise ToolArgumentError(f"swap.{name}: the pool does not trade {sym}; it trades WETH/USDC")
        token_in_addr = w3.to_checksum_address(deployment.addresses[token_in])
        amount_in = to_base_units(args["amount_in"], token_in, what="swap.amount_in")
        quote = pool.functions.get_amount_out(amount_in, token_in_addr).call()
        slip = Decimal(str(args["max_slippage_bps"]))
        min_out = int((Decimal(quote) * (Decimal(10_000) - slip) / Decimal(10_000)).to_integral_value(rounding=ROUND_DOWN))
        if args["min_amount_out"] is not None:
            min_out = max(min_out, to_base_units(args["min_amount_out"], token_out, what="swap.min_amount_out"))
        calls = _approve_if_needed(w3, deployment, account, token_in, pool.address, amount_in)
        calls.append(
            PlannedCall(
                to=pool.address,
                data=pool.encode_abi("swap", args=[token_in_addr, amount_in, min_out, account]),
                label="swap",
                main=True,
                returns="uint256",
            )
        )
        return calls

    if action.tool in LP_TOOLS:
        return _pool_calls(w3, deployment, account, action.tool, args)

    lending = contract(w3, deployment, "LENDING")
    symbol = COLLATERAL_TOKEN if action.tool in ("supply", "withdraw") else DEBT_TOKEN
    amount = to_base_units(args["amount"], symbol, what=f"{action.tool}.amount")
    calls = []
    if action.tool in ("supply", "repay"):
        approve = amount
        if action.tool == "repay":
            # Lending.repay pays min(amount, debt): approve only what it will pull, so no allowance lingers.
            approve = min(amount, lending.functions.debt_of(account).call()) or amount
        calls = _approve_if_needed(w3, deployment, account, symbol, lending.address, approve)
    calls.append(
        PlannedCall(
            to=lending.address,
            data=lending.encode_abi(action.tool, args=[amount]),
            label=action.tool,
            main=True,
        )
    )
    return calls


def imbalance_bps(amount0: int, amount1: int, reserve0: int, reserve1: int) -> float:
    """Share of a deposit's value (at the pool price) given away by Pool.add_liquidity, in bps.

    The pool mints min(a0/r0, a1/r1) × total shares, so the shares are worth 2·min(a0·p, a1) at the
    pool price p = r1/r0 while the deposit is worth a0·p + a1: the loss is |a0·p − a1| / (a0·p + a1).
    Exact integer inputs (base units); 0 when the pool is empty (the first deposit sets the price)."""
    if reserve0 <= 0 or reserve1 <= 0:
        return 0.0
    side0 = Decimal(amount0) * Decimal(reserve1) / Decimal(reserve0)  # WETH side in USDC base units
    side1 = Decimal(amount1)
    total = side0 + side1
    if total <= 0:
        return 0.0
    return float(abs(side0 - side1) / total * 10_000)


def _check_pool_pair(w3, deployment, pool) -> None:
    token0 = w3.to_checksum_address(pool.functions.token0().call())
    token1 = w3.to_checksum_address(pool.functions.token1().call())
    want0, want1 = (w3.to_checksum_address(deployment.addresses[s]) for s in (POOL_TOKEN0, POOL_TOKEN1))
    if (token0, token1) != (want0, want1):
        raise ToolArgumentError(
            f"the pool at {pool.address} holds {token0}/{token1}, not {POOL_TOKEN0}/{POOL_TOKEN1}; check the deployment"
        )


def _pool_calls(w3, deployment, account: str, tool: str, args: dict[str, Any]) -> list[PlannedCall]:
    pool = contract(w3, deployment, "POOL")
    _check_pool_pair(w3, deployment, pool)
    if tool == "add_liquidity":
        amount0 = to_base_units(args["amount_weth"], POOL_TOKEN0, what="add_liquidity.amount_weth")
        amount1 = to_base_units(args["amount_usdc"], POOL_TOKEN1, what="add_liquidity.amount_usdc")
        reserve0, reserve1 = pool.functions.reserve0().call(), pool.functions.reserve1().call()
        if pool.functions.total_shares().call() > 0:
            # Pool.add_liquidity takes no minimum-shares bound, so the ratio is checked here, at plan
            # time, against the pool the simulation runs on.
            off = imbalance_bps(amount0, amount1, reserve0, reserve1)
            if off > args["max_slippage_bps"]:
                price = Decimal(reserve1) / Decimal(reserve0) * Decimal(10) ** (18 - 6)
                fit = (args["amount_weth"] * price).quantize(Decimal("0.01"), rounding=ROUND_DOWN)
                raise ToolArgumentError(
                    f"add_liquidity.amount_usdc: {args['amount_weth']} WETH with {args['amount_usdc']} USDC is "
                    f"{off:,.1f} bps off the pool price ({price:,.2f} USDC/WETH), over max_slippage_bps "
                    f"{args['max_slippage_bps']:g}; deposit about {fit} USDC with {args['amount_weth']} WETH"
                )
        calls = _approve_if_needed(w3, deployment, account, POOL_TOKEN0, pool.address, amount0)
        calls += _approve_if_needed(w3, deployment, account, POOL_TOKEN1, pool.address, amount1)
        calls.append(
            PlannedCall(
                to=pool.address,
                data=pool.encode_abi("add_liquidity", args=[amount0, amount1, account]),
                label="add_liquidity",
                main=True,
                returns="uint256",
            )
        )
        return calls

    held = pool.functions.shares(account).call()
    if held <= 0:
        raise ToolArgumentError("remove_liquidity.fraction: the account holds no pool shares; there is nothing to remove")
    fraction = args["fraction"]
    burn = held if fraction == 1 else int((Decimal(held) * fraction).to_integral_value(rounding=ROUND_DOWN))
    if burn <= 0:
        raise ToolArgumentError(
            f"remove_liquidity.fraction: {fraction} of {held} raw shares rounds to zero; use a larger fraction"
        )
    return [
        PlannedCall(
            to=pool.address,
            data=pool.encode_abi("remove_liquidity", args=[burn, account]),
            label="remove_liquidity",
            main=True,
            returns="(uint256,uint256)",
        )
    ]


def lp_shares_from_base(raw: int) -> float:
    """Raw Pool.shares → human share units (LP_SHARE_DECIMALS)."""
    return raw / 10**LP_SHARE_DECIMALS


def burned_shares(call: PlannedCall) -> int:
    """The share count a planned remove_liquidity call burns (decoded from its calldata)."""
    if call.label != "remove_liquidity":
        raise ValueError(f"not a remove_liquidity call: {call.label}")
    return abi_decode(["uint256", "address"], bytes.fromhex(call.data[10:]))[0]
