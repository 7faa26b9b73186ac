"""Hindsight settlement of an acted tick: its outcome judged `settle_ticks` later, not at the tick.

A swap's immediate pnl is its fee and slippage; what it was for shows over the next ticks. The settled pnl is the
immediate pnl plus the change in collateral-token units held (wallet + supplied) times the oracle move from the
tick to k ticks later; a tick that moved no exposure (repay, supply) keeps its immediate verdict. Pure; the delta
cycle's settle step feeds it the records. Why and the formula: docs/design/learning.md#hindsight-settlement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from golem.learning.ledger import LearningLedger
from golem.learning.reflexion import HF_IMPROVED
from golem.models.observation import ChainSnapshot

EXPOSURE_DUST = 1e-9  # collateral-token units: a smaller change is rounding, not a trade


class Settlement(BaseModel):
    """What a settled row gets in the ledger beside its immediate pnl and verdict."""

    pnl: float | None
    verdict: str
    at_tick: int  # the tick whose price settled it (t + k)
    exposure_change: float  # collateral-token units the tick's actions added (+) or sold (−)
    price_from: float
    price_to: float


def exposure(snapshot: ChainSnapshot, token: str) -> float:
    """Collateral-token units the account holds: the wallet balance plus what is supplied to a lending position
    (a supply or withdraw moves units between the two and changes no exposure)."""
    wallet = next((v for k, v in snapshot.balances.items() if k.upper() == token.upper()), 0.0)
    return wallet + sum(p.collateral for p in snapshot.positions if p.kind == "lending")


def price_of(snapshot: ChainSnapshot) -> float:
    # pnl_impact values the account at the oracle price (golem/chain/verify.py); the pool's when no oracle answered
    return snapshot.oracle_price if snapshot.oracle_price > 0 else snapshot.pool.price


def settle(*, pnl: float | None, verdict: str, hf_before: float | None, hf_after: float | None,
           at: ChainSnapshot, after: ChainSnapshot, later: ChainSnapshot, later_tick: int,
           token: str) -> Settlement:
    """The row's outcome `later_tick - tick` ticks on. `at`: the tick's own observation (before it acted);
    `after`: the next tick's (what the actions left); `later`: the settling tick's.

    A tick that moved no exposure keeps its verdict (a repay is judged by the health factor it restored); so does a
    failure (negative with no loss measured: the ledger keeps no other trace of it). Otherwise the verdict is read
    as at the tick with the settled pnl: positive if it gained or the health factor improved."""
    delta = exposure(after, token) - exposure(at, token)
    p0, p1 = price_of(at), price_of(later)

    def settled_as(value: float | None, judged: str) -> Settlement:
        return Settlement(pnl=value, verdict=judged, at_tick=later_tick, exposure_change=round(delta, 12),
                          price_from=p0, price_to=p1)

    if abs(delta) <= EXPOSURE_DUST or pnl is None:
        return settled_as(pnl, verdict)
    settled = pnl + delta * (p1 - p0)
    improved = hf_before is not None and (hf_after is None or hf_after > hf_before + HF_IMPROVED)
    if verdict == "negative" and pnl >= 0 and not improved:  # failed or broke an invariant: hindsight cannot mend
        return settled_as(settled, verdict)
    return settled_as(settled, "positive" if settled > 0 or improved else ("negative" if settled < 0 else "neutral"))


def settle_due(ledger: LearningLedger, snapshot_of: Callable[[int, str], ChainSnapshot | None], *, k: int,
               cycle_tick: int, token: str) -> dict[str, Any]:
    """Settle every ledger row acted at least `k` ticks before `cycle_tick`, once each; `snapshot_of(tick, run)`
    reads a tick's recorded observation (None: no record). The settling tick is the first recorded one from t + k
    on (a tick that failed left none); a row with no record after it stays unsettled. Returns the step's summary."""
    def first_from(start: int) -> tuple[int, ChainSnapshot | None]:
        for t in range(start, cycle_tick + 1):
            if (snap := snapshot_of(t, "")) is not None:
                return t, snap
        return start, None

    verdicts: Counter[str] = Counter()
    changed = missing = 0
    for row in ledger.unsettled(cycle_tick - k):
        at = snapshot_of(row.tick, row.run_label)
        _, after = first_from(row.tick + 1)
        later_tick, later = first_from(row.tick + k)
        if at is None or after is None or later is None:
            missing += 1
            continue
        s = settle(pnl=row.pnl, verdict=row.verdict, hf_before=row.hf_before, hf_after=row.hf_after, at=at,
                   after=after, later=later, later_tick=later_tick, token=token)
        if ledger.settle(row, s.pnl, s.verdict, s.at_tick, cycle_tick):
            verdicts[s.verdict] += 1
            changed += s.verdict != row.verdict
    return {"settle_ticks": k, "settled": sum(verdicts.values()), "verdicts": dict(sorted(verdicts.items())),
            "changed_verdict": changed, "no_record": missing, "waiting": len(ledger.unsettled(cycle_tick))}
