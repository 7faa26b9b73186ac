"""The heartbeat-monitor's vitals: pure functions over the golem's recorded ticks. Each breach is a ProbeAlert
with its numbers; the monitor only reads, it never modifies the golem's state.
The vitals and their thresholds: docs/design/life.md#the-heartbeat-monitor.
"""

from __future__ import annotations

import statistics
from datetime import datetime

from pydantic import BaseModel, Field

# alert thresholds (docs/design/life.md#the-heartbeat-monitor)
RUNWAY_DAYS = 30.0  # USDC balance below a 30-day runway projection
STALL_FACTOR = 2.0  # > 2× expected interval between ticks
SUCCESS_WINDOW, SUCCESS_FLOOR = 20, 0.40  # below 40 % success over 20 ticks
ERROR_WINDOW, ERROR_LIMIT = 10, 5  # > 5 errors per 10 ticks
GAS_INCOME_CAP = 0.15  # gas > 15 % of gross income
PLAYBOOK_STALE_TICKS = 100  # no PLAYBOOK update for 100+ ticks
# The Hayflick limit (total ticks against the configured maximum): the warning zones are the vitality phases'
# bands of the stochastic clock (1 − lived / limit; docs/design/life.md#phases): Declining below 0.3 (low),
# Terminal below 0.1 (high).
HAYFLICK_LOW, HAYFLICK_HIGH = 0.3, 0.1
BATCH_WINDOW_SECONDS = 300.0  # alerts batched in 5-minute windows, so a bad stretch does not flood the owner


class ProbeAlert(BaseModel):
    vital: str  # usdc_runway | tick_stalled | success_rate | errors | gas_vs_income | playbook_stale | hayflick
    severity: str = "low"  # low | high (the ProbeSeverity the golem's observe reads it as)
    value: float
    threshold: float
    detail: str
    tick: int | None = None  # the last recorded tick when it was measured
    at: str = ""


class TickFact(BaseModel):
    """What the monitor reads of one tick (from its heartbeat.tick_finished / tick_failed event)."""

    tick: int
    time: str
    failed: bool = False
    errors: int = 0
    gas_usd: float = 0.0
    inference_usd: float = 0.0
    equity_usd: float | None = None
    usdc: float | None = None
    ticks_lived: int | None = None  # with a Hayflick limit configured only
    hayflick_ticks: int | None = None


class VitalsInput(BaseModel):
    golem_id: str
    now: str  # ISO, the monitor workflow's clock
    theta_seconds: float = Field(gt=0)  # the golem's base theta: the floor of the expected interval


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def evaluate_vitals(ticks: list[TickFact], now: str, theta_seconds: float, last_playbook_tick: int | None,
                    paused: str | None = None, serving_since: str | None = None) -> list[ProbeAlert]:
    """Every vital past its threshold, oldest tick first in `ticks`. paused: the owner's pause note when the
    last stop button pressed was pause (a stall the owner asked for is reported, at low severity). serving_since:
    when the worker reading the vitals started — the stall clock starts there at the earliest, so the hours a stopped
    stack was down are not a stall (a worker that is down reads no vitals either)."""
    if not ticks:
        return []
    out: list[ProbeAlert] = []
    last = ticks[-1]
    ok = [t for t in ticks if not t.failed]

    # Heartbeat regularity: the expected interval is the median of the recent ones (never below theta).
    times = [_ts(t.time) for t in ticks[-21:]]
    gaps = [b - a for a, b in zip(times, times[1:]) if b > a]
    expected = max(statistics.median(gaps) if gaps else theta_seconds, theta_seconds)
    start = max(times[-1], _ts(serving_since)) if serving_since else times[-1]
    since = _ts(now) - start
    if since > STALL_FACTOR * expected:
        out.append(ProbeAlert(vital="tick_stalled", severity="low" if paused else "high", value=round(since, 3),
                              threshold=round(STALL_FACTOR * expected, 3), tick=last.tick, at=now,
                              detail=f"no tick for {since:.1f}s" + (" since the worker started" if start > times[-1]
                                                                     else "") + f"; expected one every {expected:.1f}s (alert above "
                                     f"{STALL_FACTOR:g}x)" + (f"; the golem is paused ({paused})" if paused else "")))

    recent = ticks[-SUCCESS_WINDOW:]
    if len(recent) >= SUCCESS_WINDOW:
        good = sum(1 for t in recent if not t.failed and not t.errors)
        rate = good / len(recent)
        if rate < SUCCESS_FLOOR:
            out.append(ProbeAlert(vital="success_rate", severity="high", value=round(rate, 4), threshold=SUCCESS_FLOOR,
                                  tick=last.tick, at=now,
                                  detail=f"{good} of the last {len(recent)} ticks ran clean ({rate:.0%} < {SUCCESS_FLOOR:.0%})"))

    errs = sum(max(t.errors, 1 if t.failed else 0) for t in ticks[-ERROR_WINDOW:])
    if errs > ERROR_LIMIT:
        out.append(ProbeAlert(vital="errors", severity="high", value=errs, threshold=ERROR_LIMIT, tick=last.tick, at=now,
                              detail=f"{errs} errors in the last {min(len(ticks), ERROR_WINDOW)} ticks (limit {ERROR_LIMIT})"))

    # Gas efficiency: gas against gross income, income = the equity gains between recorded ticks.
    eq = [t for t in ok if t.equity_usd is not None]
    equity = [t.equity_usd for t in ok if t.equity_usd is not None]
    income = sum(max(b - a, 0.0) for a, b in zip(equity, equity[1:]))
    gas = sum(t.gas_usd for t in ok[1:]) if len(ok) > 1 else 0.0
    if gas > 0 and income > 0 and gas > GAS_INCOME_CAP * income:
        out.append(ProbeAlert(vital="gas_vs_income", severity="low", value=round(gas / income, 4),
                              threshold=GAS_INCOME_CAP, tick=last.tick, at=now,
                              detail=f"gas ${gas:.4f} is {gas / income:.1%} of gross income ${income:.2f} "
                                     f"(cap {GAS_INCOME_CAP:.0%})"))

    # USDC runway: balance over the burn rate (inference + gas) of the recorded span.
    span_days = (times[-1] - _ts(ticks[0].time)) / 86400 if len(ticks) > 1 else 0.0
    burn = sum(t.gas_usd + t.inference_usd for t in ticks[1:])
    if last.usdc is not None and burn > 0 and span_days > 0:
        runway = last.usdc / (burn / span_days)
        if runway < RUNWAY_DAYS:
            out.append(ProbeAlert(vital="usdc_runway", severity="high" if runway < RUNWAY_DAYS / 3 else "low",
                                  value=round(runway, 3), threshold=RUNWAY_DAYS, tick=last.tick, at=now,
                                  detail=f"USDC {last.usdc:.2f} lasts {runway:.1f} days at ${burn / span_days:.2f}/day"))

    lived = next((t for t in reversed(ticks) if t.hayflick_ticks and t.ticks_lived is not None), None)
    if lived is not None and lived.hayflick_ticks and lived.ticks_lived is not None:
        left = max(lived.hayflick_ticks - lived.ticks_lived, 0)
        clock = left / lived.hayflick_ticks
        if clock < HAYFLICK_LOW:
            out.append(ProbeAlert(vital="hayflick", severity="high" if clock < HAYFLICK_HIGH else "low", value=left,
                                  threshold=round(HAYFLICK_LOW * lived.hayflick_ticks, 3), tick=last.tick, at=now,
                                  detail=f"{lived.ticks_lived} of {lived.hayflick_ticks} ticks lived: {left} left "
                                         f"before the Hayflick limit (stochastic clock {clock:.2f})"))

    stale = last.tick - (last_playbook_tick if last_playbook_tick is not None else ticks[0].tick)
    if stale >= PLAYBOOK_STALE_TICKS:
        out.append(ProbeAlert(vital="playbook_stale", severity="low", value=stale, threshold=PLAYBOOK_STALE_TICKS,
                              tick=last.tick, at=now,
                              detail=f"PLAYBOOK.md unchanged for {stale} ticks (since tick "
                                     f"{last_playbook_tick if last_playbook_tick is not None else ticks[0].tick})"))
    return out


class AlertBatch(BaseModel):
    """One batching window's alerts (the latest reading of each vital), delivered once."""

    golem_id: str
    batch_id: str
    window_start: str
    window_end: str
    alerts: list[ProbeAlert] = Field(default_factory=list)
    checks: int = 0  # vitals checks in the window


class MonitorCadence(BaseModel):
    """How often a monitor reads the vitals and batches its alerts."""

    check_seconds: float = Field(default=60.0, gt=0)
    window_seconds: float = Field(default=BATCH_WINDOW_SECONDS, gt=0)
    max_checks: int | None = None  # stop after this many checks (tests)
    continue_every: int = 500  # checks per run before continue-as-new


class MonitorInput(MonitorCadence):
    golem_id: str
    theta_seconds: float = Field(gt=0)


class HostMonitorInput(MonitorCadence):
    """The heartbeat monitor of a fleet host: one workflow watching every golem placed on the host."""

    host: str


class HostVitalsInput(BaseModel):
    host: str
    now: str  # ISO, the monitor workflow's clock


class HostVitals(BaseModel):
    """One check of a host: the golems placed there now (a stopped or moved one is gone, a new one is in), and each
    one's vitals past their thresholds."""

    watched: list[str] = Field(default_factory=list)
    alerts: dict[str, list[ProbeAlert]] = Field(default_factory=dict)  # golem id → its alerts (none: absent)
    unreadable: dict[str, str] = Field(default_factory=dict)  # golem id → why its vitals were not read
