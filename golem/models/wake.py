"""What System 1's wakefulness saw on a tick: the strategy's health-factor lines, the forecast toward the nearest
one, the rules that would fire. Computed by golem.cognition.lines; carried by GateResult and the record."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from golem.models.config import ProbeThresholds
from golem.models.enums import Tier


class HealthLine(BaseModel):
    """One line the health factor must not cross in silence."""

    value: float
    kind: Literal["rule", "must", "probe", "liquidation"]  # a rule's trigger, a MUST floor, a probe default, Aave's 1.0
    label: str  # "STRATEGY.md:24", "probes.health_factor_low", "liquidation"
    text: str = ""  # the rule or constraint as written
    protects_loan: bool = False  # a rule that repays or supplies: its line places the position probe


class HealthLines(BaseModel):
    """The lines of one strategy, highest first, and the position probe's thresholds derived from them."""

    lines: list[HealthLine] = Field(default_factory=list)  # descending by value, one per value
    trigger: float | None = None  # the highest line a loan-protecting rule reacts to (any rule's when none does)
    floor: float | None = None  # the highest `MUST keep health_factor >= x` (or > x)
    probe_low: float  # position probe Low below this: trigger + margin, else [probes] health_factor_low
    probe_high: float  # position probe High below this: floor + margin, else [probes] health_factor_high
    source: str = "strategy"  # "strategy" when STRATEGY.md named a line, else "defaults"

    def probe_thresholds(self, probes: ProbeThresholds) -> ProbeThresholds:
        """[probes] with the position probe's lines replaced by these."""
        return probes.model_copy(update={"health_factor_low": self.probe_low, "health_factor_high": self.probe_high})


class Forecast(BaseModel):
    """How soon the health factor reaches the nearest line below it (ticks are heartbeat ticks)."""

    health_factor: float  # now (the minimum over lending positions)
    line: float  # the nearest line at or below the health factor now; the lowest line once it is under all
    line_label: str  # which line that is ("STRATEGY.md:24", "liquidation", ...)
    line_kind: str
    crossed: list[float] = Field(default_factory=list)  # lines the health factor is already at or below
    slope: float | None = None  # mean health-factor change per tick over the window (negative = falling)
    worst_move: float | None = None  # the most negative per-tick change in the window (None: never fell)
    ticks_at_slope: float | None = None  # (hf − line) / −slope while falling; None when not falling
    ticks_at_worst: float | None = None  # (hf − line) / −worst_move; None when it never fell
    horizon_ticks: float
    samples: int = 0  # health factors the slope was read from, this tick's included
    within_horizon: bool = False  # a line crossed, or reached within the horizon at the slope or the worst move
    reason: str = ""  # one line for the record and `golem show`


class RuleHit(BaseModel):
    """A STRATEGY.md rule that would fire on this tick's observation (previewed by System 1)."""

    rule: str  # "STRATEGY.md:24"
    text: str
    evidence: list[str] = Field(default_factory=list)  # "health_factor 1.58 < 1.6", one per condition


class Wakefulness(BaseModel):
    """The gate's wake check on one tick (docs/design/wakefulness.md): the forecast, the rules previewed to
    fire, and the floor they put under the tier (None when neither asked for one)."""

    forecast: Forecast | None = None  # None: no loan, so no health factor to forecast
    rule_hits: list[RuleHit] = Field(default_factory=list)
    # strategies under strategies/ that started on this tick (observe moved them waiting → active): the model must see
    # a new strategy on the tick it starts, so each one is a reason for the floor ("morning: in season since …")
    started: list[str] = Field(default_factory=list)
    floor: Tier | None = None  # the lowest tier the tick may run at (T1 when a rule fires, a line is near, a strategy starts)
    lifted_from: Tier | None = None  # the tier gating chose before the floor lifted it (None: not lifted)
    reason: str = ""  # why the floor, in one line
    probe_low: float | None = None  # the position probe's lines this tick ran with
    probe_high: float | None = None
