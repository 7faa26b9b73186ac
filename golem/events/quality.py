"""rev. 12's external metric trend (revisions-grounding "Revision 12: Cognitive Quality Dashboards"): Sharpe,
drawdown and PnL over a 30-day rolling window, healthy when improving or stable, an alarm when declining 14+ days.

Computed from the equity each recorded tick reports (the `heartbeat.tick_finished` events of the Event Fabric),
once per delta cycle. The window holds what the event store keeps (30 days or its row cap, whichever is shorter):
`days` says how much history the figures stand on.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel

from golem.backtest.report import max_drawdown, sharpe

WINDOW_DAYS = 30  # rev. 12 "Sharpe, drawdown, PnL (30d rolling)"
DECLINING_ALARM_DAYS = 14  # rev. 12 alarm: "Declining 14+ days"


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
