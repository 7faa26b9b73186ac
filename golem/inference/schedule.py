"""When a strategy may run: cron expressions (the 5-field subset), daily time windows and date bounds, all in UTC.

Pure: every function takes the time it judges (the tick's clock: workflow time live, path time in a backtest),
never the wall clock. Grammar and meaning: docs/how-to/strategies.md; why: docs/design/strategies.md.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pydantic import BaseModel, Field

_DAY_NAMES = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
_MONTH_NAMES = {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
# (name, lowest, highest, names) of the five fields, in order
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
           ("month", 1, 12, _MONTH_NAMES), ("day of week", 0, 7, _DAY_NAMES))
# how far back a run's opening is looked for: a run longer than this is a window, not a cron run
MAX_DURATION = timedelta(days=31)


class ScheduleError(ValueError):
    """A schedule field that does not parse; the message says what to write instead."""


def _value(raw: str, lo: int, hi: int, names: dict[str, int], name: str) -> int:
    key = raw.lower()
    if key in names:
        return names[key]
    if not raw.isdigit():
        raise ScheduleError(f"{name} {raw!r} is not a number" + (f" or a name ({', '.join(names)})" if names else ""))
    v = int(raw)
    if not lo <= v <= hi:
        raise ScheduleError(f"{name} {v} is out of range {lo}-{hi}")
    return v


def _field(text: str, lo: int, hi: int, names: dict[str, int], name: str) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        rng, _, step_raw = part.partition("/")
        step = 1
        if step_raw:
            if not step_raw.isdigit() or int(step_raw) == 0:
                raise ScheduleError(f"{name} step {step_raw!r} must be a positive whole number")
            step = int(step_raw)
        if rng == "*":
            a, b = lo, hi
        elif "-" in rng:
            a_raw, b_raw = rng.split("-", 1)
            a, b = _value(a_raw, lo, hi, names, name), _value(b_raw, lo, hi, names, name)
            if a > b:
                raise ScheduleError(f"{name} range {rng!r} runs backwards")
        else:
            a = _value(rng, lo, hi, names, name)
            b = hi if step_raw else a
        out.update(range(a, b + 1, step))
    return frozenset(out)


class Cron(BaseModel):
    """A parsed 5-field cron expression: minute hour day-of-month month day-of-week (0 or 7 = Sunday)."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool  # day-of-month is `*`
    any_weekday: bool  # day-of-week is `*`

    def matches(self, t: datetime) -> bool:
        return (t.minute in self.minutes and t.hour in self.hours and t.month in self.months
                and self._day_ok(t))

    def _day_ok(self, t: datetime) -> bool:
        dom = t.day in self.days
        dow = (t.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:  # cron's rule: when both are restricted, either may match
            return dom and dow
        return dom or dow

    def last_fire(self, t: datetime, within: timedelta) -> datetime | None:
        """The latest minute at or before `t` the expression fires, looking back at most `within`."""
        cur = t.replace(second=0, microsecond=0)
        earliest = t - within
        while cur >= earliest:
            if cur.month not in self.months or not self._day_ok(cur):
                cur = cur.replace(hour=0, minute=0) - timedelta(minutes=1)  # the previous day's last minute
            elif cur.hour not in self.hours:
                cur = cur.replace(minute=0) - timedelta(minutes=1)
            elif cur.minute not in self.minutes:
                cur -= timedelta(minutes=1)
            else:
                return cur
        return None


def parse_cron(text: str) -> Cron:
    parts = text.split()
    if len(parts) != 5:
        raise ScheduleError(f"cron {text!r} has {len(parts)} fields, not 5: write minute hour day-of-month month "
                            "day-of-week, e.g. `0 14 * * mon` (14:00 UTC every Monday)")
    sets = [_field(p, lo, hi, names, name) for p, (name, lo, hi, names) in zip(parts, _FIELDS)]
    weekdays = frozenset(d % 7 for d in sets[4])
    return Cron(text=" ".join(parts), minutes=sets[0], hours=sets[1], days=sets[2], months=sets[3], weekdays=weekdays,
                any_day=parts[2] == "*", any_weekday=parts[4] == "*")


class Window(BaseModel):
    """A daily time window in UTC, minutes after midnight; `end` < `start` crosses midnight. `weekdays`: 0 = Sunday
    (the day the window opens on); empty = every day."""

    text: str
    start: int
    end: int
    weekdays: frozenset[int] = frozenset()

    def opened_at(self, t: datetime) -> datetime | None:
        """When the window holding `t` opened, or None when `t` is outside every window."""
        minute = t.hour * 60 + t.minute
        day = t.replace(hour=0, minute=0, second=0, microsecond=0)
        if self.start < self.end:
            opening = day if self.start <= minute < self.end else None
        elif minute >= self.start:
            opening = day
        elif minute < self.end:
            opening = day - timedelta(days=1)
        else:
            opening = None
        if opening is None or (self.weekdays and (opening.isoweekday() % 7) not in self.weekdays):
            return None
        return opening + timedelta(minutes=self.start)


def _clock(raw: str, text: str) -> int:
    hh, sep, mm = raw.partition(":")
    if not sep or not hh.isdigit() or not mm.isdigit() or int(hh) > 24 or int(mm) > 59 or (int(hh) == 24 and int(mm)):
        raise ScheduleError(f"window {text!r}: {raw!r} is not a time of day; write HH:MM-HH:MM in UTC, e.g. 14:00-16:00")
    return int(hh) * 60 + int(mm)


def parse_window(text: str) -> Window:
    """`14:00-16:00`, `22:00-02:00` (across midnight), `mon-fri 09:00-17:00`, `sat,sun 00:00-24:00`."""
    parts = text.split()
    days: frozenset[int] = frozenset()
    if len(parts) == 2:
        days = frozenset(d % 7 for d in _field(parts[0], 0, 7, _DAY_NAMES, "day of week"))
        parts = parts[1:]
    if len(parts) != 1 or parts[0].count("-") != 1:
        raise ScheduleError(f"window {text!r}: write HH:MM-HH:MM in UTC, optionally after days, e.g. "
                            "`14:00-16:00` or `mon-fri 09:00-17:00`")
    a, b = parts[0].split("-")
    start, end = _clock(a, text), _clock(b, text)
    if start == end:
        raise ScheduleError(f"window {text!r} is empty: its start and end are the same time")
    return Window(text=text, start=start, end=end % (24 * 60) if end == 24 * 60 and start > 0 else end, weekdays=days)


def parse_duration(text: str) -> timedelta:
    """`90s`, `30m`, `2h`, `1d`, `1w`."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    raw = text.strip().lower()
    if len(raw) < 2 or raw[-1] not in units or not raw[:-1].replace(".", "", 1).isdigit():
        raise ScheduleError(f"duration {text!r}: write a number and a unit (s, m, h, d, w), e.g. 2h or 30m")
    seconds = float(raw[:-1]) * units[raw[-1]]
    if seconds <= 0:
        raise ScheduleError(f"duration {text!r} must be longer than zero")
    return timedelta(seconds=seconds)


def parse_instant(text: str) -> datetime:
    """An ISO-8601 time; UTC when it names no zone (`2026-01-01T14:00Z`, `2026-01-01 14:00`)."""
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ScheduleError(f"{text!r} is not a date and time; write ISO-8601 in UTC, e.g. 2026-12-01T14:00Z") from None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


class Schedule(BaseModel):
    """When a strategy is in season. Every part given must agree: inside [not_before, not_after), inside a window
    (when there are windows), and within `duration` of a cron firing (when there are cron lines)."""

    crons: list[Cron] = Field(default_factory=list)
    windows: list[Window] = Field(default_factory=list)
    duration: timedelta = timedelta(hours=1)  # how long a cron-started run stays open
    not_before: datetime | None = None
    not_after: datetime | None = None

    def opening(self, t: datetime) -> datetime | None:
        """When the run of the schedule holding `t` opened (the latest of the parts' openings), None when `t` is
        out of season. Two ticks in one run share the opening, so a run that completed early does not restart in it."""
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        if (self.not_before and t < self.not_before) or (self.not_after and t >= self.not_after):
            return None
        openings: list[datetime] = [self.not_before] if self.not_before else []
        if self.windows:
            opened = [o for w in self.windows if (o := w.opened_at(t)) is not None]
            if not opened:
                return None
            openings.append(max(opened))
        if self.crons:
            fired = [f for c in self.crons
                     if (f := c.last_fire(t, min(self.duration, MAX_DURATION))) is not None and t < f + self.duration]
            if not fired:
                return None
            openings.append(max(fired))
        return max(openings) if openings else datetime(1970, 1, 1, tzinfo=timezone.utc)
