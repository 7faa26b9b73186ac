"""The clock GolemWorkflow reads: the wall (live, `workflow.now()`) or a backtest's replay of a recorded path.

In replay form the driver hands rows one at a time (the advance_world update); the golem ticks on a row once
theta has elapsed in path time. See docs/how-to/backtesting.md.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from golem.models.golem import WorldAdvanced, WorldTime


def _at(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso) if iso else None


class WallClock:
    """Live: Temporal's time; nothing is handed over."""

    replay = False

    def now(self) -> datetime:
        return workflow.now()

    def ticked(self, at: datetime) -> None:
        """A tick started at `at` (theta counts from it; only the replay form needs to know)."""


class ReplayClock(WallClock):
    """A backtest: time is the path's, delivered row by row; nothing waits on the wall clock.

    Rows may arrive before the workflow's run starts, so the workflow holds one from its start and only reads
    it (`replay = True`) once its input says so."""

    def __init__(self) -> None:
        self.replay = False
        self.at: datetime | None = None  # the path time of the last row taken
        self.last_tick_at: datetime | None = None
        self.next_gamma_at: datetime | None = None
        self.rows: list[WorldTime] = []
        self.done: dict[int, WorldAdvanced] = {}
        self.last = False  # the path's last row was taken

    def start(self, world_time: str | None, last_tick_at: str | None) -> None:
        """Read this clock from now on, at the path time a continue-as-new carried (if any)."""
        self.replay, self.at, self.last_tick_at = True, _at(world_time), _at(last_tick_at)

    def now(self) -> datetime:
        return self.at if self.replay and self.at is not None else workflow.now()

    def ticked(self, at: datetime) -> None:
        self.last_tick_at = at

    def carried(self) -> tuple[str | None, str | None]:
        """(world_time, last_tick_at) for the next run's input."""
        return (self.at.isoformat() if self.at else None,
                self.last_tick_at.isoformat() if self.last_tick_at else None)

    def check(self, t: WorldTime) -> None:
        """The advance_world validator: a row's time has an offset and never goes back."""
        at = datetime.fromisoformat(t.at)
        if at.tzinfo is None:
            raise ValueError(f"row {t.row}: time {t.at!r} needs a UTC offset")
        if self.at is not None and at < self.at:
            raise ValueError(f"row {t.row}: time {t.at} is before the path time already reached "
                             f"({self.at.isoformat()})")

    async def hand_over(self, t: WorldTime) -> WorldAdvanced:
        """The driver's side: queue the row and wait until the golem is done with it."""
        self.rows.append(t)
        await workflow.wait_condition(lambda: t.row in self.done)
        return self.done.pop(t.row)

    async def take(self) -> WorldTime:
        """The golem's side: the next row (waiting for it); the path's time moves to it."""
        await workflow.wait_condition(lambda: bool(self.rows))
        row = self.rows.pop(0)
        self.at = datetime.fromisoformat(row.at)
        self.last = row.last
        return row

    def tick_due(self, theta_seconds: float) -> bool:
        return self.last_tick_at is None or self.now() >= self.last_tick_at + timedelta(seconds=theta_seconds)

    def gamma_due(self) -> bool:
        return self.next_gamma_at is None or self.now() >= self.next_gamma_at

    def gamma_in(self, seconds: float) -> None:
        """The next gamma pulse falls due this long after the path time reached."""
        self.next_gamma_at = self.now() + timedelta(seconds=seconds)

    def answer(self, advanced: WorldAdvanced) -> None:
        """The golem is done with a row: the driver's update returns it."""
        self.done[advanced.row] = advanced

    async def watch_to_end(self) -> None:
        """A dead golem answers the driver's remaining rows without doing anything."""
        while not self.last:
            row = await self.take()
            self.answer(WorldAdvanced(row=row.row))
