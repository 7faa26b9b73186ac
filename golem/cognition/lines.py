"""The health-factor lines of STRATEGY.md, and how soon the position reaches the nearest one.

`strategy_lines` reads the lines a strategy draws (a rule's `health_factor < x`, a MUST floor) and the position
probe's thresholds derived from them; `forecast` counts the ticks until the health factor reaches the nearest
line at the recent slope and at the recent worst per-tick move; `preview_rules` evaluates the rules System 1
can read every tick. All pure. Why and the formulas: docs/design/wakefulness.md.
"""

from __future__ import annotations

import itertools
import math
from golem.inference.strategy import Rule, Strategy, metrics_from, readable_without_steer, rule_fires
from golem.models.config import ProbeThresholds, WakeSection
from golem.models.observation import Observation
from golem.models.wake import Forecast, HealthLine, HealthLines, RuleHit, Wakefulness

__all__ = ["Forecast", "HealthLine", "HealthLines", "RuleHit", "Wakefulness", "forecast", "next_health_history",
           "preview_rules", "strategy_lines", "LIQUIDATION_LINE", "HEALTH_HISTORY_LEN"]

LIQUIDATION_LINE = 1.0  # Aave liquidates below a health factor of 1: always a line, whatever the strategy says
HEALTH_HISTORY_LEN = 16  # ticks of min health factor kept in GolemState (≥ [wake] window_ticks)
_FALLING = ("<", "<=")  # a rule reacts when the health factor falls below its value


def _hf_rule_lines(rules: list[Rule]) -> list[HealthLine]:
    out = []
    for rule in rules:
        if not readable_without_steer(rule):
            continue  # fires only on the owner's words: not a line the market can cross
        for c in rule.conditions:
            if c.metric == "health_factor" and c.op in _FALLING and isinstance(c.value, float):
                out.append(HealthLine(value=c.value, kind="rule", label=rule.label, text=rule.text))
    return out


def strategy_lines(strategy: Strategy | None, probes: ProbeThresholds, wake: WakeSection) -> HealthLines:
    """The lines of `strategy` (None: no readable strategy), with the probe's thresholds from them.

    Low = the highest rule trigger + probe_low_margin; High = the MUST floor + probe_high_margin, kept ≤ Low.
    Where the strategy names no such line, [probes] health_factor_low / _high stand (and are lines themselves)."""
    rule_lines = _hf_rule_lines(strategy.rules) if strategy else []
    floors = [HealthLine(value=float(c.value), kind="must", label=f"STRATEGY.md:{c.line}", text=c.text)
              for c in (strategy.constraints if strategy else [])
              if c.kind == "keep" and c.metric == "health_factor" and c.op in (">=", ">") and c.value is not None]
    trigger = max((ln.value for ln in rule_lines), default=None)
    floor = max((ln.value for ln in floors), default=None)
    low = trigger + wake.probe_low_margin if trigger is not None else probes.health_factor_low
    high = floor + wake.probe_high_margin if floor is not None else probes.health_factor_high
    high = min(high, low)
    lines = [*rule_lines, *floors]
    if trigger is None and floor is None:
        lines += [HealthLine(value=probes.health_factor_low, kind="probe", label="probes.health_factor_low"),
                  HealthLine(value=probes.health_factor_high, kind="probe", label="probes.health_factor_high")]
    lines.append(HealthLine(value=LIQUIDATION_LINE, kind="liquidation", label="liquidation",
                            text="Aave liquidates below 1.0"))
    # one line per value, the strongest kind winning (a MUST floor over a rule at the same value)
    rank = {"must": 0, "rule": 1, "probe": 2, "liquidation": 3}
    by_value: dict[float, HealthLine] = {}
    for ln in sorted(lines, key=lambda x: rank[x.kind]):
        by_value.setdefault(ln.value, ln)
    return HealthLines(lines=sorted(by_value.values(), key=lambda x: -x.value), trigger=trigger, floor=floor,
                       probe_low=low, probe_high=high,
                       source="strategy" if trigger is not None or floor is not None else "defaults")


def _ticks(distance: float, move: float | None) -> float | None:
    if move is None or move >= 0:
        return None
    return max(distance, 0.0) / -move


def forecast(hf_history: list[float], hf_now: float | None, lines: HealthLines, wake: WakeSection) -> Forecast | None:
    """Ticks until `hf_now` reaches the nearest line of `lines`, reading the recent slope and worst move from the
    last `wake.window_ticks` health factors (`hf_history`, oldest first, excluding this tick) plus this one.
    None without a loan (no health factor) or without lines."""
    if hf_now is None or not math.isfinite(hf_now) or not lines.lines:
        return None
    crossed = [ln.value for ln in lines.lines if hf_now <= ln.value]
    above = [ln for ln in lines.lines if ln.value < hf_now]
    target = above[0] if above else lines.lines[-1]  # lines are highest first
    window = [h for h in hf_history if math.isfinite(h)][-(wake.window_ticks - 1):] if wake.window_ticks > 1 else []
    series = [*window, hf_now]
    moves = [b - a for a, b in itertools.pairwise(series)]
    slope = (series[-1] - series[0]) / (len(series) - 1) if len(series) > 1 else None
    worst = min(moves) if moves and min(moves) < 0 else None
    distance = hf_now - target.value
    at_slope, at_worst = _ticks(distance, slope), _ticks(distance, worst)
    horizon = wake.horizon_ticks
    within = bool(crossed) or any(t is not None and t <= horizon for t in (at_slope, at_worst))
    if crossed:
        reason = f"health factor {hf_now:.3f} is at or below the line {max(crossed):g}"
    elif within:
        soonest = min(t for t in (at_slope, at_worst) if t is not None)
        reason = (f"health factor {hf_now:.3f} reaches the line {target.value:g} ({target.label}) in "
                  f"{soonest:.1f} ticks ≤ horizon {horizon:g}")
    else:
        reason = f"health factor {hf_now:.3f}, nearest line {target.value:g} ({target.label}) beyond the horizon"
    return Forecast(health_factor=round(hf_now, 6), line=target.value, line_label=target.label, line_kind=target.kind,
                    crossed=crossed, slope=None if slope is None else round(slope, 6),
                    worst_move=None if worst is None else round(worst, 6),
                    ticks_at_slope=None if at_slope is None else round(at_slope, 3),
                    ticks_at_worst=None if at_worst is None else round(at_worst, 3),
                    horizon_ticks=horizon, samples=len(series), within_horizon=within, reason=reason)


def preview_rules(strategy: Strategy | None, observation: Observation, last_price: float | None) -> list[RuleHit]:
    """Every rule System 1 can read (no steer condition) that would fire now, by the offline deliberator's
    evaluator (strategy.rule_fires on strategy.metrics_from), in the strategy's order."""
    if strategy is None:
        return []
    metrics = metrics_from(observation, last_price)
    hits = []
    for rule in strategy.rules:
        if not readable_without_steer(rule):
            continue
        holds, evidence, _ = rule_fires(rule, metrics, [])
        if holds:
            hits.append(RuleHit(rule=rule.label, text=rule.text, evidence=evidence))
    return hits


def next_health_history(history: list[float], hf: float | None) -> list[float]:
    """The history after a tick whose min health factor was `hf`: appended and bounded; emptied with no loan
    (a new loan starts a new slope)."""
    if hf is None or not math.isfinite(hf):
        return []
    return [*history, round(hf, 6)][-HEALTH_HISTORY_LEN:]
