"""Regime-matched evaluation of learning changes: per-tick outcomes from the records, the before and after windows of a
change compared only in the regime cells both saw (weighted to the before window's mix), a one-sided test that rolls
a clearly harmful change back, and a CUSUM change-point detector on the outcome series that bounds the windows.
Pure; the ledger stores changes and verdicts. Thresholds and why: docs/design/learning.md#regime-matched-evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, Field

from golem.models.record import DecisionCycleRecord
from golem.safety.attribution import holdings_of

# matching: the finest level with enough matched ticks on both sides wins
LEVELS: tuple[tuple[str, ...], ...] = (
    ("volatility_quintile", "trend", "gas_band", "liquidity_band"),
    ("volatility_quintile", "trend"),
    ("trend",),
)
Z_ONE_SIDED = 1.645  # one-sided 5 %
MIN_EFFECT = 0.2  # |D| / pooled σ: a "small" effect (Cohen) — smaller differences are not acted on
Z_CAP = 99.0  # a zero-variance window: the statistic is reported as ±99, not infinity
# change points: a two-sided CUSUM on the outcomes standardised against a reference stretch, each outcome clipped
CUSUM_K = 0.5  # slack: shifts under half a σ are not chased
CUSUM_H = 15.0  # alarm line: 0.3 % of 300-tick series without a change alarm (tests/unit/test_regime_eval.py)
CUSUM_REFERENCE = 50  # ticks of a segment that set its mean and σ (30 let estimation error alone alarm 17 %)
CUSUM_CLIP = 3.0  # |z| above it counts as 3: one crash tick does not declare a new regime
CHANGE_POINT_LOOKBACK = 4  # windows of outcomes the detector reads each cycle
GRACE_TICKS = 10  # a change point this near a change may be the change itself: it bounds neither window


class TickOutcome(BaseModel):
    """One tick's outcome: the account's value change to the next record, net of the tick's gas, and its tag."""

    tick: int
    pnl: float
    cells: dict[str, str | int | None] = Field(default_factory=dict)


def outcomes_of(records: Sequence[DecisionCycleRecord]) -> list[TickOutcome]:
    """Per-tick PnL from consecutive records (tick order): value at the next observation − value at this one − this
    tick's gas. A tick without a regime tag (a record from before it) has no cells and matches nothing."""
    rows = sorted(records, key=lambda r: r.tick)
    out = []
    for cur, nxt in zip(rows, rows[1:]):
        tag = cur.observation.regime_tag
        pnl = holdings_of(nxt.observation.snapshot).value - holdings_of(cur.observation.snapshot).value - cur.gas_cost
        cells = {f: getattr(tag, f) for f in LEVELS[0]} if tag is not None else {}
        out.append(TickOutcome(tick=cur.tick, pnl=round(pnl, 6), cells=cells))
    return out


class Comparison(BaseModel):
    level: list[str]  # the tag fields matched on
    cells: int  # matched cells
    n_before: int
    n_after: int
    effect_usd: float  # Σ w_c (mean after − mean before), w_c the before window's share of cell c
    z: float  # effect / its standard error
    d: float  # effect / pooled within-cell σ
    verdict: str  # harmful | improved | no effect


def _key(o: TickOutcome, level: Sequence[str]) -> tuple[str | int, ...] | None:
    vals = tuple(o.cells.get(f) for f in level)
    return None if any(v is None for v in vals) else vals  # type: ignore[return-value]


def _group(xs: Sequence[TickOutcome], level: Sequence[str]) -> dict[tuple[str | int, ...], list[float]]:
    out: dict[tuple[str | int, ...], list[float]] = {}
    for o in xs:
        k = _key(o, level)
        if k is not None:
            out.setdefault(k, []).append(o.pnl)
    return out


def _mean(xs: Sequence[float]) -> float:
    return math.fsum(xs) / len(xs)


def _ss(xs: Sequence[float]) -> float:
    m = _mean(xs)
    return math.fsum((x - m) ** 2 for x in xs)


def _capped(num: float, den: float) -> float:
    if den > 0:
        return max(-Z_CAP, min(Z_CAP, num / den))
    return 0.0 if abs(num) < 1e-9 else math.copysign(Z_CAP, num)


def compare(before: Sequence[TickOutcome], after: Sequence[TickOutcome], min_matched: int) -> Comparison | None:
    """The matched comparison at the finest level where both windows have >= `min_matched` ticks in shared cells,
    or None (too few matched ticks yet)."""
    for level in LEVELS:
        gb, ga = _group(before, level), _group(after, level)
        shared = sorted(set(gb) & set(ga), key=str)
        nb, na = sum(len(gb[c]) for c in shared), sum(len(ga[c]) for c in shared)
        if nb < min_matched or na < min_matched:
            continue
        # pooled within-cell variance over both windows (each cell-side's own mean removed)
        ss = math.fsum(_ss(gb[c]) + _ss(ga[c]) for c in shared)
        dof = nb + na - 2 * len(shared)
        pooled = ss / dof if dof > 0 else 0.0
        effect = var = 0.0
        for c in shared:
            w = len(gb[c]) / nb
            effect += w * (_mean(ga[c]) - _mean(gb[c]))
            vb = _ss(gb[c]) / (len(gb[c]) - 1) if len(gb[c]) > 1 else pooled
            va = _ss(ga[c]) / (len(ga[c]) - 1) if len(ga[c]) > 1 else pooled
            var += w * w * (vb / len(gb[c]) + va / len(ga[c]))
        z, d = _capped(effect, math.sqrt(var)), _capped(effect, math.sqrt(pooled))
        verdict = ("harmful" if z <= -Z_ONE_SIDED and d <= -MIN_EFFECT else
                   "improved" if z >= Z_ONE_SIDED and d >= MIN_EFFECT else "no effect")
        return Comparison(level=list(level), cells=len(shared), n_before=nb, n_after=na,
                          effect_usd=round(effect, 6), z=round(z, 4), d=round(d, 4), verdict=verdict)
    return None


class ChangePoint(BaseModel):
    tick: int  # where the shift began (the CUSUM's last zero before the alarm)
    alarm_tick: int  # where it crossed the line
    direction: str  # up | down
    statistic: float


def change_points(series: Sequence[TickOutcome], *, k: float = CUSUM_K, h: float = CUSUM_H,
                  reference: int = CUSUM_REFERENCE) -> list[ChangePoint]:
    """Two-sided CUSUM over the outcomes in tick order. Each segment's first `reference` outcomes set its mean and σ;
    after an alarm a new segment (a new reference) starts at the alarm's next tick."""
    xs = sorted(series, key=lambda o: o.tick)
    out: list[ChangePoint] = []
    start = 0
    while start + reference < len(xs):
        ref = [o.pnl for o in xs[start:start + reference]]
        mu = _mean(ref)
        sigma = math.sqrt(_ss(ref) / (len(ref) - 1))
        # a flat reference (no exposure, no price move): any move of a cent per tick is a shift, not noise
        sigma = max(sigma, 0.01, 1e-3 * abs(mu))
        up = down = 0.0
        up_from = down_from = start + reference
        alarm = None
        for i in range(start + reference, len(xs)):
            z = max(-CUSUM_CLIP, min(CUSUM_CLIP, (xs[i].pnl - mu) / sigma))
            if up == 0.0:
                up_from = i
            if down == 0.0:
                down_from = i
            up, down = max(0.0, up + z - k), max(0.0, down - z - k)
            if up > h or down > h:
                rising = up > h
                alarm = ChangePoint(tick=xs[up_from if rising else down_from].tick, alarm_tick=xs[i].tick,
                                    direction="up" if rising else "down", statistic=round(max(up, down), 4))
                break
        if alarm is None:
            break
        out.append(alarm)
        start = next(j for j, o in enumerate(xs) if o.tick == alarm.alarm_tick) + 1
    return out


class Windows(BaseModel):
    before: list[TickOutcome]
    after: list[TickOutcome]
    before_from: int  # the first tick the before window may use (a change point clips it)
    after_cut: int | None = None  # a change point past the grace period ended the after window here


def windows(series: Sequence[TickOutcome], change_tick: int, window: int,
            points: Sequence[ChangePoint]) -> Windows:
    """The before window: up to `window` ticks before the change, never reaching back across a change point. The after
    window: up to `window` ticks from the change, cut at the first change point after it. A change point within
    GRACE_TICKS of the change either way is taken for the change's own effect (the CUSUM places an onset a few ticks
    early or late) and bounds neither window."""
    start = max([change_tick - window, *(p.tick for p in points if p.tick < change_tick - GRACE_TICKS)])
    cut = min((p.tick for p in points if p.tick > change_tick + GRACE_TICKS), default=None)
    end = change_tick + window if cut is None else min(change_tick + window, cut)
    return Windows(before=[o for o in series if start <= o.tick < change_tick],
                   after=[o for o in series if change_tick <= o.tick < end], before_from=start, after_cut=cut)


class Judgement(BaseModel):
    status: str  # pending | rolled_back | improved | inconclusive
    reason: str
    comparison: Comparison | None = None
    n_before: int = 0
    n_after: int = 0
    before_from: int = 0
    after_cut: int | None = None


def judge(series: Sequence[TickOutcome], change_tick: int, now_tick: int, window: int, min_matched: int,
          points: Sequence[ChangePoint]) -> Judgement:
    """A change's verdict, once its windows hold `min_matched` matched ticks a side: harmful → rolled_back, improved,
    or inconclusive (kept). With too few: pending while the after window can still grow, else inconclusive."""
    w = windows(series, change_tick, window, points)
    base = Judgement(status="pending", reason="", n_before=len(w.before), n_after=len(w.after),
                     before_from=w.before_from, after_cut=w.after_cut)
    cmp = compare(w.before, w.after, min_matched)
    if cmp is not None:
        fig = (f"matched on {'+'.join(cmp.level)} over {cmp.cells} cells ({cmp.n_before} before, {cmp.n_after} "
               f"after): {cmp.effect_usd:+.2f} $/tick, z {cmp.z:+.2f}, d {cmp.d:+.2f}")
        status = {"harmful": "rolled_back", "improved": "improved"}.get(cmp.verdict, "inconclusive")
        why = {"rolled_back": f"worse in matched regimes (z <= -{Z_ONE_SIDED}, d <= -{MIN_EFFECT}): ",
               "improved": "better in matched regimes: ", "inconclusive": "no clear effect in matched regimes: "}[status]
        return base.model_copy(update={"status": status, "reason": why + fig, "comparison": cmp})
    grown = w.after_cut is not None or now_tick >= change_tick + window
    if grown:
        cut = f" (the outcomes shifted at tick {w.after_cut})" if w.after_cut is not None else ""
        return base.model_copy(update={"status": "inconclusive", "reason": f"fewer than {min_matched} matched ticks "
                                                                           f"a side by the end of the after window{cut}; kept"})
    return base.model_copy(update={"reason": f"waiting for {min_matched} matched ticks a side "
                                             f"({len(w.before)} before, {len(w.after)} after so far)"})
