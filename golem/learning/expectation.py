"""Predict, then compare: what a decision that acts expects, projected from the pre-tick state.

Both deliberators get the same projection (the decide activity fills `DeliberationRecord.expected` when
the deliberator left it empty), so Reflexion compares every acted tick against a stated expectation.
Aave's health factor is HF = k × collateral / debt with k = price × liquidation threshold; k is read
from the current HF, so the projection needs no protocol constants of its own.
"""

from __future__ import annotations

from golem.inference.offline import SWAP_OUTPUT_HAIRCUT
from golem.models.observation import Observation
from golem.models.record import ExpectedOutcome
from golem.models.tick import ProposedAction

STABLES = ("USDC", "DAI")
# The offline deliberator's projected swap proceeds are discounted for fee and slippage; the expectation
# says the same so deliberator and Reflexion agree.
SWAP_COST_FRACTION = round(1.0 - SWAP_OUTPUT_HAIRCUT, 6)


def _usd_price(token: str, obs: Observation) -> float | None:
    token = token.upper()
    if token in STABLES:
        return 1.0
    pool = obs.snapshot.pool
    if token == pool.token0.upper() and pool.price > 0:
        return pool.price
    return None


def expect(actions: list[ProposedAction], obs: Observation, *, scale: float = 1.0) -> ExpectedOutcome:
    """The outcome `actions` (amounts × `scale`) should have, from the observation's pre-tick state."""
    lending = [p for p in obs.snapshot.positions if p.kind == "lending"]
    coll = sum(p.collateral for p in lending)
    debt = sum(p.debt for p in lending)
    hf = obs.min_health_factor()
    k = hf * debt / coll if hf is not None and coll > 0 and debt > 0 else None
    value, notional = 0.0, 0.0
    for a in actions:
        amount = float(a.arguments.get("amount_in", a.arguments.get("amount", 0.0)) or 0.0) * scale
        if a.tool == "swap":
            px = _usd_price(str(a.arguments.get("token_in", "")), obs)
            if px is not None:
                notional += amount * px
                value -= amount * px * SWAP_COST_FRACTION
        elif a.tool == "repay":
            debt -= amount
        elif a.tool == "borrow":
            debt += amount
        elif a.tool == "supply":
            coll += amount
        elif a.tool == "withdraw":
            coll -= amount
    after = None
    if k is not None:
        after = None if debt <= 1e-9 else round(k * max(coll, 0.0) / debt, 6)
    return ExpectedOutcome(
        health_factor_before=hf, health_factor_after=after, value_change_usd=round(value, 6),
        slippage_bps=SWAP_COST_FRACTION * 10_000 if notional > 0 else 0.0,
        basis=("HF = k·collateral/debt with k from the pre-tick HF" if k is not None else "no loan to project")
        + (f"; swaps of ${notional:,.2f} at {SWAP_COST_FRACTION:.0%} fee and slippage" if notional else ""),
    )


def scaled(actions: list[ProposedAction], scale: float) -> list[ProposedAction]:
    """The same actions at `scale` × their amounts (the half-size counterfactual)."""
    out = []
    for a in actions:
        args = dict(a.arguments)
        for key in ("amount", "amount_in"):
            if isinstance(args.get(key), (int, float)):
                args[key] = round(float(args[key]) * scale, 6)
        out.append(a.model_copy(update={"arguments": args}))
    return out
