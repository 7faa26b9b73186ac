"""Size to fit: the largest size of a proposed action that every size limit of the cage allows.

Each limit that depends on size gives a cap in the action's own units (`SizeCap`); the action is clipped to the
smallest cap and refused only when what is left is below the minimum worth doing. Pure: the cage builds the caps
from the book it keeps, re-simulates what it clipped, and checks the clipped action through every layer again.
Why and the order of the limits: docs/design/spending.md.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

from golem.models.threats import ThreatVerdict
from golem.models.tick import ProposedAction

AMOUNT_DECIMALS = 6  # clipped amounts are floored to this many decimals, so rounding never crosses a cap
UNISWAP_V2_FEE = 0.003
# The argument that carries each tool's size (add_liquidity's USDC side moves in proportion to its WETH side).
SIZE_ARG = {"swap": "amount_in", "add_liquidity": "amount_weth", "remove_liquidity": "fraction"}


class SizeCap(BaseModel):
    limit: str  # the limit's name: "max_trade_size_usd", "STRATEGY.md line 31", "balance", ...
    layer: str  # the cage layer that enforces it: safety | risk
    max_amount: float  # the largest amount (the action's own units) this limit allows
    why: str  # the limit in words, with its numbers


class Fit(BaseModel):
    """The outcome of sizing one action: `action` is what may go on (None: refused), `clip` says what changed."""

    action: ProposedAction | None
    proposed_amount: float
    amount: float
    binding: SizeCap | None = None  # the smallest cap, when it clipped the action
    refusal: str | None = None  # set when the clipped size is below the minimum worth doing
    should: list[str] = []  # the SHOULD lines the proposal went past (their caps shrank it)
    # the sandwich check tightened the swap's slippage bound (golem.safety.threats): from what, to what, why
    tightened: str | None = None
    threat: ThreatVerdict | None = None  # the sandwich check's verdict on this action (swaps on the pair only)

    @property
    def clipped(self) -> bool:
        return self.binding is not None and self.action is not None


def size_arg(tool: str) -> str:
    return SIZE_ARG.get(tool, "amount")


def amount_of(action: ProposedAction) -> float | None:
    """The action's size in its own units; None when it has none we can read (a bad argument: the cage refuses it)."""
    raw = action.arguments.get(size_arg(action.tool))
    try:
        value = float(raw) if raw is not None else math.nan
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None


def floor_amount(x: float) -> float:
    q = 10**AMOUNT_DECIMALS
    return float(math.floor(max(x, 0.0) * q + 1e-9) / q)


def with_amount(action: ProposedAction, amount: float) -> ProposedAction:
    """The same action at another size (add_liquidity keeps its ratio of USDC to WETH)."""
    args: dict[str, Any] = dict(action.arguments)
    old = amount_of(action) or 0.0
    args[size_arg(action.tool)] = amount
    if action.tool == "add_liquidity" and old > 0:
        args["amount_usdc"] = floor_amount(float(args.get("amount_usdc", 0.0)) * amount / old)
    return action.model_copy(update={"arguments": args, "clipped_from": action.clipped_from or dict(action.arguments)})


SOFT_LAYER = "strategy"  # a SHOULD line's cap: it shrinks an action, never refuses it


def soft_floor(caps: list[SizeCap], min_amount: float, proposed: float | None) -> tuple[list[SizeCap], list[str]]:
    """SHOULD caps raised to the minimum worth doing (so a SHOULD never refuses an action), and the SHOULD lines the
    proposal went past. Other caps unchanged."""
    if proposed is None:
        return caps, []
    least = min(math.ceil(min_amount * 10**AMOUNT_DECIMALS) / 10**AMOUNT_DECIMALS, proposed)
    out, past = [], []
    for c in caps:
        if c.layer == SOFT_LAYER:
            if c.max_amount < proposed:
                past.append(c.why)
            c = c.model_copy(update={"max_amount": max(c.max_amount, least)})
        out.append(c)
    return out, past


def fit(action: ProposedAction, caps: list[SizeCap], min_amount: float) -> Fit:
    """Clip `action` to the smallest of `caps` (never up); refuse when a clip leaves less than `min_amount`.
    An action no cap binds goes on unchanged, whatever its size (the minimum only judges a clip)."""
    proposed = amount_of(action)
    if proposed is None:
        return Fit(action=action, proposed_amount=0.0, amount=0.0)
    binding = min(caps, key=lambda c: c.max_amount, default=None)
    if binding is None or binding.max_amount >= proposed:
        return Fit(action=action, proposed_amount=proposed, amount=proposed)
    amount = floor_amount(binding.max_amount)
    if amount <= 0 or amount < min_amount:
        return Fit(action=None, proposed_amount=proposed, amount=max(amount, 0.0), binding=binding,
                   refusal=(f"{binding.why}: the most it allows is {max(binding.max_amount, 0.0):,.6g} of the "
                            f"{proposed:,.6g} proposed, below the minimum worth doing ({min_amount:,.6g})"))
    return Fit(action=with_amount(action, amount), proposed_amount=proposed, amount=amount, binding=binding)


def clip_note(f: Fit, unit_usd: float) -> str:
    """The clip in words, for the record and the audit trail."""
    assert f.binding is not None
    return (f"clipped from {f.proposed_amount:,.6g} (${f.proposed_amount * unit_usd:,.2f}) to {f.amount:,.6g} "
            f"(${f.amount * unit_usd:,.2f}) by {f.binding.limit}: {f.binding.why}")


# ── the caps ─────────────────────────────────────────────────────────────────────────────────────────────────


def value_cap(limit: str, layer: str, cap_usd: float, unit_usd: float, why: str) -> SizeCap | None:
    """A USD limit as a cap in units (actions are valued linearly in their size)."""
    if unit_usd <= 0:
        return None
    return SizeCap(limit=limit, layer=layer, max_amount=max(cap_usd, 0.0) / unit_usd, why=why)


def price_impact(amount_in: float, reserve_in: float) -> float:
    """Uniswap V2: how far the swap's average price falls short of the mid price, the 0.3 % fee included:
    1 − out / (amount × mid) = 1 − 997·x / (1000·x + 997·a)."""
    if reserve_in <= 0:
        return 1.0
    keep = 1.0 - UNISWAP_V2_FEE
    return 1.0 - keep * reserve_in / (reserve_in + keep * amount_in)


def impact_cap_amount(max_impact: float, reserve_in: float) -> float:
    """The largest amount in with price_impact ≤ max_impact (the inverse of price_impact)."""
    keep = 1.0 - UNISWAP_V2_FEE
    if max_impact >= 1.0:
        return math.inf
    if max_impact <= UNISWAP_V2_FEE:
        return 0.0
    return reserve_in * (keep / (1.0 - max_impact) - 1.0) / keep


def hf_borrow_cap(collateral: float, price_lt: float, debt: float, floor: float) -> float:
    """The most that can be borrowed keeping collateral × price × LT / (debt + x) ≥ floor."""
    return collateral * price_lt / floor - debt


def hf_withdraw_cap(collateral: float, price_lt: float, debt: float, floor: float) -> float:
    """The most collateral that can be withdrawn keeping (collateral − x) × price × LT / debt ≥ floor."""
    if debt <= 1e-12:
        return collateral
    return collateral - floor * debt / price_lt
