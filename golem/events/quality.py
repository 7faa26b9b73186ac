"""The external metric trend (Sharpe, drawdown and PnL over a 30-day rolling window; an alarm when declining 14+
days) and the weekly reflection consistency. Computed from the equity each recorded tick reports, once per delta
cycle; `days` says how much history the figures stand on. Bands and why: docs/design/events.md#quality-figures.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel

from golem.backtest.report import max_drawdown, sharpe

WINDOW_DAYS = 30  # a 30-day rolling window
DECLINING_ALARM_DAYS = 14  # alarm: declining 14+ days in a row


class ExternalTrend(BaseModel):
    points: int  # ticks with an equity in the window
    days: float  # the span the window covers
    pnl_usd: float
    pnl_pct: float | None
    max_drawdown: float
    sharpe: float | None  # per tick, not annualised (the backtest report's definition)
    declining_days: int  # consecutive days, up to the last, on which the rolling PnL fell
    alarm: bool


def _ts(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _window_figures(equity: list[float]) -> tuple[float, float | None, float, float | None]:
    pnl = equity[-1] - equity[0]
    rets = [(b - a) / a for a, b in zip(equity, equity[1:]) if a]
    return pnl, (pnl / equity[0] if equity[0] else None), max_drawdown(equity), sharpe(rets)


def external_trend(points: list[tuple[str, float]], now: str) -> ExternalTrend | None:
    """points: (ISO time, equity USD) of recorded ticks, in time order. None with fewer than two in the window."""
    end = _ts(now)
    start = end - timedelta(days=WINDOW_DAYS)
    window = [(_ts(t), e) for t, e in points if start <= _ts(t) <= end]
    if len(window) < 2:
        return None
    equity = [e for _, e in window]
    pnl, pct, dd, sh = _window_figures(equity)
    # The rolling PnL at the end of each day (a window of WINDOW_DAYS ending there, over what is kept), newest last;
    # declining_days counts the days in a row, ending with the newest, on which it was lower than the day before.
    first_day = window[0][0].date()
    days = (window[-1][0].date() - first_day).days  # up to the day of the newest tick
    rolling: list[float] = []
    for d in range(days + 1):
        day_end = datetime.combine(first_day + timedelta(days=d + 1), datetime.min.time(), tzinfo=end.tzinfo)
        in_w = [e for t, e in window if day_end - timedelta(days=WINDOW_DAYS) <= t < day_end]
        if len(in_w) >= 2:
            rolling.append(in_w[-1] - in_w[0])
    declining = 0
    for before, after in zip(reversed(rolling[:-1]), reversed(rolling)):
        if after < before:
            declining += 1
        else:
            break
    return ExternalTrend(points=len(window), days=round((window[-1][0] - window[0][0]).total_seconds() / 86400, 4),
                         pnl_usd=round(pnl, 6), pnl_pct=None if pct is None else round(pct, 6),
                         max_drawdown=round(dd, 6), sharpe=None if sh is None else round(sh, 6),
                         declining_days=declining, alarm=declining >= DECLINING_ALARM_DAYS)


# ---- reflection consistency ------------------------------------------------------------------------------
CONSISTENCY_EVERY_DAYS = 7.0  # cosine across regenerated reflections, weekly
CONSISTENCY_HEALTHY, CONSISTENCY_ALARM = 0.7, 0.5  # healthy > 0.7, alarm < 0.5
CONSISTENCY_SAMPLE = 5  # reflections regenerated per measurement (ours: five T1 calls a week)
NUMBERS = " Numbers: "  # golem.learning.reflexion_llm.worded: the model's text, then the chain's numbers


class ReflectionConsistency(BaseModel):
    measured_at: str
    sampled: list[int]  # the ticks whose Reflexion was worded again
    cosines: list[float]
    mean: float | None
    alarm: bool
    cost_usd: float = 0.0
    reason: str = ""  # why nothing was measured


def _worded_part(insight: str) -> str:
    """The model's own words: the shared numbers are cut, so they cannot make two wordings look alike."""
    return insight.split(NUMBERS, 1)[0].strip()


def consistency_due(last_measured_at: str | None, now: str) -> bool:
    return last_measured_at is None or (_ts(now) - _ts(last_measured_at)).total_seconds() >= CONSISTENCY_EVERY_DAYS * 86400


async def reflection_consistency(records: list[Any], now: str, *, router: Any, embed: Any, daily_spend: float
                                 ) -> ReflectionConsistency:
    """Word again the Reflexions an LLM wrote in the last week (newest first, up to CONSISTENCY_SAMPLE) from the same
    numbers, and compare the two wordings by the cosine of their embeddings. Offline wording is deterministic:
    nothing to regenerate, so nothing is measured (reason says so). records: DecisionCycleRecords; embed: texts →
    unit-normalised vectors."""
    from golem.learning.reflexion_llm import worded

    start = _ts(now) - timedelta(days=CONSISTENCY_EVERY_DAYS)
    worded_by_llm = [r for r in records if r.reflexion is not None and r.reflexion.model != "offline"
                     and not r.reflexion.model.startswith("offline") and NUMBERS in r.reflexion.insight
                     and _ts(r.timestamp) >= start]
    worded_by_llm = sorted(worded_by_llm, key=lambda r: r.tick, reverse=True)[:CONSISTENCY_SAMPLE]
    if router is None or not worded_by_llm:
        return ReflectionConsistency(measured_at=now, sampled=[], cosines=[], mean=None, alarm=False,
                                     reason="no deliberator to word them again" if router is None else
                                     "no reflection worded by an LLM in the last 7 days")
    cost, pairs, ticks = 0.0, [], []
    for rec in worded_by_llm:
        original = rec.reflexion
        numbers = original.insight.split(NUMBERS, 1)[1]
        base = original.model_copy(update={"insight": numbers, "model": "offline"})
        again, c = await worded(base, rec, router=router, regime_changed=False, daily_spend=daily_spend + cost)
        cost += c
        if again.model.startswith("offline"):  # refused by the budget or no answer: not a wording to compare
            continue
        pairs.append((_worded_part(original.insight), _worded_part(again.insight)))
        ticks.append(rec.tick)
    if not pairs:
        return ReflectionConsistency(measured_at=now, sampled=[], cosines=[], mean=None, alarm=False, cost_usd=cost,
                                     reason="the model did not word any of them again (budget or no answer)")
    vecs = embed([t for pair in pairs for t in pair])
    cosines = [round(float(sum(a * b for a, b in zip(vecs[2 * i], vecs[2 * i + 1]))), 6) for i in range(len(pairs))]
    mean = round(sum(cosines) / len(cosines), 6)
    return ReflectionConsistency(measured_at=now, sampled=ticks, cosines=cosines, mean=mean,
                                 alarm=mean < CONSISTENCY_ALARM, cost_usd=round(cost, 8))
