"""One TickMark per path row, from what the chain shows after the row and the golem's record of its tick.
Pure: the runner does the reads and hands them in."""

from __future__ import annotations

from collections.abc import Sequence

from golem.backtest.models import ActionMark, BlockedAction, LiquidationMark, PathRow, TickMark
from golem.models.enums import ActionStatus
from golem.models.observation import ChainSnapshot, LiquidationEvent
from golem.models.record import ActionRecord, DecisionCycleRecord
from golem.models.threats import detector_of
from golem.safety.attribution import holdings_of
from golem.safety.risk import net_value_usd

def blocked_category(reason: str) -> str:
    """gate (the gas gate's spike rule), budget (a gas partition or spend budget), policy (a PolicyCage or
    risk rule), other (dry-run, not validated)."""
    r = (reason or "").lower()
    if "budget" in r or "partition" in r:
        return "budget"
    if r.startswith("gas gate") or "gas gate" in r:
        return "gate"
    if "dry-run" in r or "not validated" in r or not r:
        return "other"
    return "policy"


def urgency_of(action: ActionRecord) -> str | None:
    """The gas gate's class of an action, read from its note (urgent / critical) or its deferral (routine)."""
    note = action.protective or ""
    for level in ("critical", "urgent"):
        if note.startswith(level) or f"gas gate: defer: {level}" in (action.block_reason or ""):
            return level
    if "gas gate: defer: routine" in (action.block_reason or ""):
        return "routine"
    return None


def _protective(action: ActionRecord) -> bool:
    """What the gas gate judged protective (golem.safety.policy.protective_reason, recorded on the action);
    a protective action the cage blocked outright is still marked by its tool (repay)."""
    return action.protective is not None or action.tool_name == "repay"


def liquidation_mark(event: LiquidationEvent, snapshot: ChainSnapshot) -> LiquidationMark:
    """A LiquidationCall event valued at the snapshot's feed answers (WETH at the ETH/USD feed, a stable at its own)."""
    usd = {f.symbol: f.answer for f in snapshot.feeds}
    usd.setdefault("WETH", snapshot.oracle_price)

    def price(sym: str) -> float:
        return usd.get(sym, 1.0)

    return LiquidationMark(
        tx_hash=event.tx_hash, debt_asset=event.debt_asset, debt_covered=event.debt_covered,
        collateral_asset=event.collateral_asset, collateral_seized=event.collateral_seized,
        debt_covered_usd=event.debt_covered * price(event.debt_asset),
        collateral_seized_usd=event.collateral_seized * price(event.collateral_asset),
    )


def mark_row(
    index: int,
    row: PathRow,
    snapshot: ChainSnapshot,
    record: DecisionCycleRecord | None,
    *,
    gas_paid_before: float,
    wall_ms: float | None = None,
    liquidations: Sequence[LiquidationEvent] = (),
    row_health_factor: float | None = None,
) -> TickMark:
    """`gas_paid_before`: the USD of gas the golem paid on earlier rows (equity is net of all gas paid).
    `liquidations`: the Pool's LiquidationCall events against the golem on this row; `row_health_factor`: its health
    factor at the row's prices before anyone acted (as the world's liquidator read it)."""
    gas = record.gas_cost if record is not None else 0.0
    held = holdings_of(snapshot)
    hfs = [p.health_factor for p in snapshot.positions if p.kind == "lending" and p.health_factor is not None]
    hf = min(hfs) if hfs else None
    mark = TickMark(
        row=index,
        timestamp=row.timestamp,
        label_regime=row.regime,
        pool_price=snapshot.pool.price,
        oracle_price=snapshot.oracle_price,
        gas_gwei=row.gas_gwei,
        equity_usd=net_value_usd(snapshot) - gas_paid_before - gas,
        exposure=round(held.exposure, 9),
        stable_usd=round(held.stable_usd, 6),
        health_factor=hf,
        liquidatable=hf is not None and hf < 1.0,
        row_health_factor=row_health_factor,
        underwater=row_health_factor is not None and row_health_factor < 1.0,
        liquidations=[liquidation_mark(e, snapshot) for e in liquidations],
        gas_usd=gas,
        wall_ms=wall_ms,
    )
    if record is None:
        return mark
    d = record.deliberation
    learned = {r.action_index for r in d.rules_applied if r.origin == "learned"} if d is not None else set()
    actions = [
        ActionMark(tool=a.tool_name, status=a.status.value, gas_usd=a.gas_cost, protective=_protective(a),
                   block=a.block_number, clipped=a.clipped is not None, urgency=urgency_of(a),
                   learned=a.action_index in learned, threats=sorted({detector_of(t) for t in a.threats}))
        for a in record.actions
    ]
    out = record.outcome
    restored = (out.health_factor_after - out.health_factor_before
                if out is not None and out.health_factor_after is not None and out.health_factor_before is not None
                else None)
    blocked = [
        BlockedAction(tool=a.tool_name, category=blocked_category(a.block_reason or ""),  # type: ignore[arg-type]
                      reason=a.block_reason or "")
        for a in record.actions if a.status in (ActionStatus.BLOCKED, ActionStatus.DEFERRED)
    ]
    return mark.model_copy(update={
        "tick": record.tick, "tier": record.tier.value, "detected_regime": record.regime.value,
        "prediction_error": record.prediction_error, "actions": actions, "blocked": blocked,
        "inference_usd": record.inference_cost,
        "hf_restored": restored if restored is not None and restored > 0 else None,
        "verified": record.outcome.verified if record.outcome is not None else None,
        "input_tokens": d.input_tokens if d else 0, "output_tokens": d.output_tokens if d else 0,
    })
