"""The health-factor lines of STRATEGY.md, and how soon the position reaches the nearest one.

`strategy_lines` reads the lines a strategy draws (a rule's `health_factor < x`, a MUST floor) and the position
probe's thresholds derived from them; `forecast` counts the ticks until the health factor reaches the nearest
line at the recent slope and at the recent worst per-tick move; `preview_rules` evaluates the rules System 1
can read every tick. All pure. Why and the formulas: docs/design/wakefulness.md.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from golem.inference.strategy import (Metrics, Rule, Strategy, evaluate_condition, metrics_from,
                                     readable_without_steer, rule_fires)
from golem.models.config import ProbeThresholds, WakeSection
from golem.models.enums import Tier
from golem.models.observation import Observation
from golem.models.wake import Forecast, HealthLine, HealthLines, RuleHit, Wakefulness

__all__ = ["Forecast", "HealthLine", "HealthLines", "RuleHit", "Wakefulness", "forecast", "live_forecast",
           "next_health_history",
           "preview_rules", "strategy_lines", "wake_check", "lift", "lifted_note", "wake_summary", "WAKE_NOTE", "LIQUIDATION_LINE", "HEALTH_HISTORY_LEN"]

LIQUIDATION_LINE = 1.0  # Aave liquidates below a health factor of 1: always a line, whatever the strategy says
HEALTH_HISTORY_LEN = 16  # ticks of min health factor kept in GolemState (≥ [wake] window_ticks)
_FALLING = ("<", "<=")  # a rule reacts when the health factor falls below its value
_LOAN_TOOLS = ("repay", "supply")  # a rule with these protects the loan: its line places the position probe


def _hf_rule_lines(rules: list[Rule]) -> list[HealthLine]:
    out = []
    for rule in rules:
        if not readable_without_steer(rule):
            continue  # fires only on the owner's words: not a line the market can cross
        for c in rule.conditions:
            if c.metric == "health_factor" and c.op in _FALLING and isinstance(c.value, float):
                out.append(HealthLine(value=c.value, kind="rule", label=rule.label, text=rule.text,
                                      protects_loan=rule.action.tool in _LOAN_TOOLS))
    return out


def live_lines(lines: HealthLines, strategy: Strategy | None, metrics: Metrics) -> HealthLines:
    """The lines that can act now: a rule's line whose other conditions (regime, balances, price) do not hold is
    no line this tick — the position can sit under it without anything to do (docs/design/wakefulness.md#live-lines).
    MUST floors and liquidation always stand."""
    rules = {r.label: r for r in (strategy.rules if strategy else [])}

    def can_act(ln: HealthLine) -> bool:
        rule = rules.get(ln.label)
        if ln.kind != "rule" or rule is None:
            return True
        return all(evaluate_condition(c, metrics, [])[0] for c in rule.conditions if c.metric != "health_factor")

    return lines.model_copy(update={"lines": [ln for ln in lines.lines if can_act(ln)]})


def strategy_lines(strategy: Strategy | None, probes: ProbeThresholds, wake: WakeSection) -> HealthLines:
    """The lines of `strategy` (None: no readable strategy), with the probe's thresholds from them.

    Low = the highest trigger of a rule that protects the loan (repay, supply; any rule's when none does) +
    probe_low_margin; High = the MUST floor + probe_high_margin, kept ≤ Low. Where the strategy names no such line,
    [probes] health_factor_low / _high stand (and are lines themselves)."""
    rule_lines = _hf_rule_lines(strategy.rules) if strategy else []
    floors = [HealthLine(value=float(c.value), kind="must", label=f"STRATEGY.md:{c.line}", text=c.text)
              for c in (strategy.constraints if strategy else [])
              if c.kind == "keep" and c.metric == "health_factor" and c.op in (">=", ">") and c.value is not None]
    trigger = max((ln.value for ln in rule_lines if ln.protects_loan),
                  default=max((ln.value for ln in rule_lines), default=None))
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


def live_forecast(every: HealthLines, strategy: Strategy | None, observation: Observation,
                  health_history: list[float], metrics: Metrics, wake: WakeSection) -> Forecast | None:
    """The forecast toward those of `every` (strategy_lines) that can act now (live_lines over `metrics`): what the
    wake check reads and what urgency buys gas on. A rule's line whose other conditions are false now makes nothing
    urgent (docs/design/spending.md#only-a-live-line-makes-a-sell-urgent)."""
    live = live_lines(every, strategy, metrics)
    f = forecast(health_history, observation.min_health_factor(), live, wake)
    if f is None:
        return None
    # shown as context only: a dead line at or above the one forecast toward (the position may sit under it)
    aside = [ln for ln in every.lines if ln not in live.lines and ln.value > f.line]
    if not aside:
        return f
    note = "; ".join(f"line {ln.value:g} ({ln.label}) stands aside: its rule's other conditions are false now"
                     for ln in aside)
    return f.model_copy(update={"reason": f"{f.reason}; {note}"})


def preview_rules(strategy: Strategy | None, observation: Observation, last_price: float | None,
                  metrics: Metrics | None = None, learned: Sequence[Rule] = ()) -> list[RuleHit]:
    """Every rule System 1 can read (no steer condition) that would fire now, by the offline deliberator's
    evaluator (strategy.rule_fires on strategy.metrics_from), in the strategy's order, then PLAYBOOK.md's learned
    rules (`learned`: decide applies them too, so a learned line is not crossed in silence either)."""
    if strategy is None:
        return []
    metrics = metrics if metrics is not None else metrics_from(observation, last_price)
    hits = []
    for rule in [*strategy.rules, *learned]:
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


def wake_check(strategy: Strategy | None, observation: Observation, health_history: list[float],
               last_price: float | None, probes: ProbeThresholds, wake: WakeSection,
               learned: Sequence[Rule] = ()) -> Wakefulness:
    """The tick's wake check: the forecast toward the strategy's nearest line, the rules that would fire (the
    owner's, then `learned`: PLAYBOOK.md's) and the strategies that started, and the floor they put under the tier —
    T1 when a rule would fire, a line is within the horizon or a strategy starts."""
    metrics = metrics_from(observation, last_price)  # read once: the live lines and the preview share it
    lines = strategy_lines(strategy, probes, wake)
    f = live_forecast(lines, strategy, observation, health_history, metrics, wake)
    hits = preview_rules(strategy, observation, last_price, metrics, learned) if wake.preview_rules else []
    why = [f"rule {h.rule} `{h.text}` would fire ({' and '.join(h.evidence)})" for h in hits]
    if f is not None and f.within_horizon:
        why.append(f.reason)
    # a strategy that starts on this tick wakes the deliberator, whether or not a rule of it would fire now
    started = [f"{e.strategy}: {e.why}" for e in (observation.strategies.events if observation.strategies else [])
               if e.kind == "started"]
    why += [f"strategy {s} started" for s in started]
    return Wakefulness(forecast=f, rule_hits=hits, started=started, floor=Tier.T1 if why else None,
                       reason="; ".join(why), probe_low=lines.probe_low, probe_high=lines.probe_high)


_RANK = {Tier.T0: 0, Tier.T1: 1, Tier.T2: 2}


def lift(tier: Tier, reason: str, wake: Wakefulness) -> tuple[Tier, str, Wakefulness]:
    """The gate's tier under the wake floor: neither the adaptive threshold, learned gating nor the budget cap keeps
    a tick below it (over budget the T1 is answered by the free offline deliberator)."""
    if wake.floor is None or _RANK[tier] >= _RANK[wake.floor]:
        return tier, reason, wake
    note = f"{tier.value}→{wake.floor.value}, {wake.reason}"
    return wake.floor, f"{reason}{WAKE_NOTE}{note}", wake.model_copy(update={"lifted_from": tier})


WAKE_NOTE = "; wake: "  # how the gating reason says the floor lifted the tier (`golem ticks` shows what follows)


def lifted_note(gating_reason: str) -> str:
    """What the wake floor said in a gating reason ("" when it did not lift the tick)."""
    return gating_reason.split(WAKE_NOTE, 1)[1] if WAKE_NOTE in gating_reason else ""


def wake_summary(wake: Wakefulness) -> str:
    """One line for `golem show` / `golem status`: the forecast, the rules previewed, the floor."""
    parts = []
    f = wake.forecast
    if f is None:
        parts.append("no loan")
    else:
        def eta(ticks: float | None, per_tick: float | None, how: str) -> str:
            if ticks is None:
                return f"not falling at the {how}" if per_tick is None or per_tick >= 0 else f"never at the {how}"
            return f"{ticks:.1f} ticks at the {how} ({per_tick:+.4f}/tick)"
        parts.append(f"HF {f.health_factor:.3f}, line {f.line:g} ({f.line_label}): "
                     f"{eta(f.ticks_at_slope, f.slope, 'recent slope')}, {eta(f.ticks_at_worst, f.worst_move, 'worst move')}"
                     f" (horizon {f.horizon_ticks:g})")
        if f.crossed:
            parts.append(f"under {', '.join(f'{x:g}' for x in f.crossed)}")
    if wake.rule_hits:
        parts.append("rules would fire: " + ", ".join(h.rule for h in wake.rule_hits))
    if wake.started:
        parts.append("strategies started: " + ", ".join(s.split(":", 1)[0] for s in wake.started))
    if wake.probe_low is not None and wake.probe_high is not None:
        parts.append(f"position probe {wake.probe_low:g}/{wake.probe_high:g}")
    if wake.lifted_from is not None and wake.floor is not None:
        parts.append(f"lifted {wake.lifted_from.value}→{wake.floor.value}")
    return "; ".join(parts)
