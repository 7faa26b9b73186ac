"""Return attribution: a window's return net of gas split into market beta (what holding the window's starting
position would have made), strategy alpha and knowledge alpha (what the golem's own actions changed, by whether a
learned PLAYBOOK rule drove them) and noise (holdings that moved without an action: interest, fees). The split is
exact — the four add up to the total — and names the loop that should answer an underperformance
(docs/design/attribution.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from golem.models.enums import ActionStatus
from golem.models.observation import ChainSnapshot
from golem.models.record import DecisionCycleRecord
from golem.chain.tools.schemas import LP_POSITION_KIND, STABLE_TOKENS

Source = Literal["strategy", "knowledge"]
# The loop that answers when a component is the dominant source of underperformance (docs/design/attribution.md).
RESPONSIBLE_LOOP = {"market_beta": "none: wait, do not overreact to the market",
                    "strategy_alpha": "loop 1: adjust parameters",
                    "knowledge_alpha": "loop 2: the Reflector re-evaluates, the Curator prunes",
                    "noise": "loop 1: smaller sizes, more verification"}
PERSISTENT_WINDOWS = 3  # knowledge alpha negative this many windows running: loop 3 examines the reflections
DUST_USD = 1e-6


class Holdings(BaseModel):
    """An account as exposure to the collateral token's price: value = exposure × price + stable."""

    exposure: float  # collateral-token units (wallet, supplied collateral, the pool position's token side)
    stable_usd: float  # stable tokens − debt + the pool position's stable side
    price: float  # the collateral token's price (oracle; the pool's when the oracle reads 0)

    @property
    def value(self) -> float:
        return self.exposure * self.price + self.stable_usd


class Interval(BaseModel):
    """What happened between two holdings besides the price: the actions sent (None: none) and their gas."""

    source: Source | None = None
    gas_usd: float = 0.0


class Attribution(BaseModel):
    market_beta: float
    strategy_alpha: float
    knowledge_alpha: float
    noise: float
    total: float  # net value change minus gas: the four above add up to it
    intervals: int
    dominant: str | None = None  # the most negative component when the window lost, else None
    responsible_loop: str | None = None


def holdings_of(snap: ChainSnapshot) -> Holdings:
    """The account's holdings as golem.safety.risk.net_value_usd values them (native ETH, the gas float, left out)."""
    price = snap.oracle_price if snap.oracle_price > 0 else snap.pool.price
    exposure = stable = 0.0
    for sym, units in snap.balances.items():
        if sym in STABLE_TOKENS:
            stable += units
        else:
            exposure += units
    for p in snap.positions:
        if p.kind == LP_POSITION_KIND:  # its claim: token side at the price, stable side at the pool's price
            exposure += p.collateral
            stable += p.collateral * snap.pool.price
        elif p.kind == "lending":
            exposure += p.collateral
            stable -= p.debt
    return Holdings(exposure=exposure, stable_usd=stable, price=price)


def interval_of(record: DecisionCycleRecord | None) -> Interval:
    """The tick's contribution to the interval after it: what it sent, and whether a learned rule drove it."""
    if record is None:
        return Interval()
    sent = [a for a in record.actions if a.status in (ActionStatus.EXECUTED, ActionStatus.FAILED)]
    gas = record.gas_cost
    if not sent:
        return Interval(gas_usd=gas)
    rules = record.deliberation.rules_applied if record.deliberation is not None else []
    learned = {r.action_index for r in rules if r.origin == "learned"}
    source: Source = "knowledge" if any(a.action_index in learned for a in sent) else "strategy"
    return Interval(source=source, gas_usd=gas)


def attribute(states: Sequence[Holdings], intervals: Sequence[Interval]) -> Attribution:
    """`states[i]` → `states[i+1]` happened over `intervals[i]`. Beta is the first state's exposure over the whole
    price move; every later change of holdings is valued at the last price and given to its interval's source."""
    if len(intervals) != max(0, len(states) - 1):
        raise ValueError(f"{len(states)} states need {max(0, len(states) - 1)} intervals, got {len(intervals)}")
    parts = {"market_beta": 0.0, "strategy_alpha": 0.0, "knowledge_alpha": 0.0, "noise": 0.0}
    if len(states) < 2:
        return Attribution(market_beta=0.0, strategy_alpha=0.0, knowledge_alpha=0.0, noise=0.0, total=0.0, intervals=0)
    first, last = states[0], states[-1]
    parts["market_beta"] = first.exposure * (last.price - first.price)
    for prev, cur, iv in zip(states[:-1], states[1:], intervals, strict=True):
        change = (cur.exposure - prev.exposure) * last.price + (cur.stable_usd - prev.stable_usd) - iv.gas_usd
        parts["noise" if iv.source is None else f"{iv.source}_alpha"] += change
    total = last.value - first.value - sum(iv.gas_usd for iv in intervals)
    dominant = min(parts, key=lambda k: parts[k]) if total < -DUST_USD and min(parts.values()) < 0 else None
    return Attribution(market_beta=round(parts["market_beta"], 6), strategy_alpha=round(parts["strategy_alpha"], 6),
                       knowledge_alpha=round(parts["knowledge_alpha"], 6), noise=round(parts["noise"], 6),
                       total=round(total, 6), intervals=len(intervals), dominant=dominant,
                       responsible_loop=RESPONSIBLE_LOOP[dominant] if dominant else None)


def attribute_records(records: Sequence[DecisionCycleRecord]) -> Attribution:
    """A window of recorded ticks (in tick order): each observation is read before the tick acts, so the change
    into a tick's holdings belongs to the tick before it."""
    states = [holdings_of(r.observation.snapshot) for r in records]
    return attribute(states, [interval_of(r) for r in records[:-1]])


def loop_for_windows(history: Sequence[Attribution]) -> str | None:
    """Loop 3 when knowledge alpha has been negative PERSISTENT_WINDOWS windows running, else the last window's."""
    recent = list(history)[-PERSISTENT_WINDOWS:]
    if len(recent) == PERSISTENT_WINDOWS and all(a.knowledge_alpha < -DUST_USD for a in recent):
        return "loop 3: examine which reflections produce bad insights"
    return recent[-1].responsible_loop if recent else None


def windows_of(records: Sequence[DecisionCycleRecord], window_ticks: int, n: int = PERSISTENT_WINDOWS) -> list[Attribution]:
    """The last `n` windows of `window_ticks` ticks each (oldest first) over records in tick order; a window holds
    the records of its ticks plus the one before it, so consecutive windows share their boundary tick."""
    if not records or window_ticks < 1:
        return []
    end = records[-1].tick
    out = []
    for k in range(n - 1, -1, -1):
        hi, lo = end - k * window_ticks, end - (k + 1) * window_ticks
        part = [r for r in records if lo <= r.tick <= hi]
        if len(part) >= 2:
            out.append(attribute_records(part))
    return out


def window_report(records: Sequence[DecisionCycleRecord], window_ticks: int) -> dict[str, object] | None:
    """The newest window's attribution with the loop that should answer it (loop 3 after a persistent knowledge
    decline); None with fewer than two records."""
    windows = windows_of(records, window_ticks)
    if not windows:
        return None
    last = windows[-1]
    return {**last.model_dump(), "window_ticks": window_ticks, "responsible_loop": loop_for_windows(windows),
            "knowledge_alpha_windows": [w.knowledge_alpha for w in windows]}
