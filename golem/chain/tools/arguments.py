"""An action's arguments checked against its tool (each error names the argument and the fix), and the
conversions between human units and a token's base units."""

from __future__ import annotations

import math
from decimal import ROUND_DOWN, Decimal, InvalidOperation
from typing import Any

from golem.chain.contracts import TOKEN_DECIMALS
from golem.chain.tools.schemas import (
    COLLATERAL_TOKEN,
    DEBT_TOKEN,
    DEFAULT_MAX_SLIPPAGE_BPS,
    KNOWN_TOKENS,
    LP_SHARE_DECIMALS,
    LP_TOOLS,
    POOL_TOKEN0,
    POOL_TOKEN1,
    TOOL_SCHEMAS,
    WRITE_TOOLS,
    ToolArgumentError,
)
from golem.models.tick import ProposedAction


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
    return float(amount / 10 ** TOKEN_DECIMALS[symbol])


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


def lp_shares_from_base(raw: int) -> float:
    """Raw LP token units → human share units (LP_SHARE_DECIMALS)."""
    return float(raw / 10**LP_SHARE_DECIMALS)
