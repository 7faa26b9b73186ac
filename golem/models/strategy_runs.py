"""Where each of a golem's strategies stands: waiting for its schedule or trigger, active, or complete.

`StrategyRun` rides in GolemState (one per strategy file besides STRATEGY.md); `StrategyActivity` is one tick's
view of them (what started, ended or completed on it, and files that did not parse), on the Observation and the
record. The rules that move a strategy between states: golem.inference.strategies; docs/design/strategies.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RunStatus = Literal["waiting", "active", "complete"]


class StrategyRun(BaseModel):
    """One strategy's durable state (its id is the file's name without `.md`)."""

    id: str
    status: RunStatus = "waiting"
    started_tick: int | None = None  # the current (or last) run's first tick
    started_at: str = ""  # the tick's clock when it started (path time in a backtest)
    run_key: str = ""  # which schedule opening the run belongs to (a run ended by its window does not restart in it)
    ticks_active: int = 0  # ticks of the current run so far
    actions: int = 0  # actions executed by the strategy's rules, over all its runs
    completed_tick: int | None = None
    completed_at: str = ""
    completion: str = ""  # why it completed, with the evidence ("after 1 action: 1 executed", "expired at …")


class StrategyEvent(BaseModel):
    """A change on this tick: started, ended (its window closed, it waits for the next), completed."""

    strategy: str
    kind: Literal["started", "ended", "completed"]
    why: str


class StrategyCredit(BaseModel):
    """An action of this tick's decision counted toward one strategy (its `after N actions`), and why it is that
    strategy's: its rule, a tool only that strategy's MAY line offers, the strategy the model named, or the only one
    active (golem.inference.strategies.credits)."""

    action_index: int
    tool: str
    strategy: str
    why: str


class StrategyActivity(BaseModel):
    """The strategies as this tick saw them: their states after it, what changed, and files that do not parse."""

    runs: list[StrategyRun] = Field(default_factory=list)
    events: list[StrategyEvent] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)  # "strategies/dca.md line 4: …" (the others keep running)
    credited: list[StrategyCredit] = Field(default_factory=list)  # executed actions counted at reflect, and why

    @property
    def active(self) -> list[str]:
        return [r.id for r in self.runs if r.status == "active"]
