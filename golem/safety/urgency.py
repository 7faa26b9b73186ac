"""Urgency buys gas: each proposed action is classed by the danger it answers, read from the chain (the health
factor's forecast against STRATEGY.md's lines, the line a firing rule draws), the strategy, PLAYBOOK.md and the
owner's steer — never from the model's words. routine pays routine gas (a routine "protective" action waits while
gas is above its recent median); urgent may spend the partition and, answering the position (not a steer), go
beyond it up to the hard daily ceiling as critical may — a sell keeping a repay's gas under it. Both urgent classes
are held to the per-action ceiling. Formulas and thresholds: docs/design/spending.md.
"""

from __future__ import annotations

import statistics
from enum import Enum

from pydantic import BaseModel

from golem.chain.tools.arguments import parse_arguments
from golem.chain.tools.schemas import STABLE_TOKENS, ToolArgumentError
from golem.inference.strategy import Metrics, Rule, evaluate_condition, readable_without_steer
from golem.models.config import PolicySection
from golem.models.enums import SteerSeverity
from golem.models.interventions import Steer
from golem.models.enums import ActionStatus
from golem.models.record import ActionRecord
from golem.models.state import DeferredIntent
from golem.models.tick import ProposedAction
from golem.models.wake import Forecast
from golem.safety.gas import GAS_GATE_DEFER, GasPartition, gas_gate

FLOOR_KINDS = ("must", "liquidation")  # lines whose crossing is critical; a rule's trigger line is urgent
LIQUIDATION = 1.0
MEDIAN_MIN_SAMPLES = 5  # fewer recent gas prices than this: no median, nothing waits for it
# "Above the median" means above it by more than the noise of one block's base-fee step (EIP-1559 moves it up to 12.5 %
# a block): at flat gas a routine action must not wait on 1.0001 against 1.0000 gwei (docs/design/spending.md).
MEDIAN_TOLERANCE = 0.10
# An urgent sell (its rule's line crossed, or a line crossed or within the forecast's horizon) may draw on the slice
# only while it leaves this many actions' gas at its price there: a repay (and its approval) must still find its gas
# (docs/design/spending.md#the-slice-keeps-a-repays-gas)
REPAY_RESERVE_ACTIONS = 2.0
# A deferred action comes back on the next tick at the earliest. A sell into a stable whose line, at the recent worst
# per-tick move, is within the horizon once that tick has passed is urgent now: waiting would sell a worst move lower
# and find it urgent then anyway. A repay loses nothing by waiting (docs/design/spending.md#a-sell-does-not-wait-into-the-horizon)
DEFERRAL_TICKS = 1.0


class Urgency(str, Enum):
    ROUTINE = "routine"
    URGENT = "urgent"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return {"routine": 0, "urgent": 1, "critical": 2}[self.value]


class UrgencyVerdict(BaseModel):
    level: Urgency
    reason: str
    restores: bool = False  # the action moves the health factor up or funds it (repay, supply, sell to a stable)
    # may draw on the ring-fenced slice: it moves the health factor up by itself (repay, supply, remove_liquidity),
    # the owner steered the tick, or it is a sell answering a line (keeps_reserve; docs/design/spending.md)
    uses_slice: bool = False
    # a sell into a stable on a line crossed or within the horizon (its rule's, or the forecast's): the slice, less
    # a repay's gas kept in it (REPAY_RESERVE_ACTIONS; docs/design/spending.md#the-slice-keeps-a-repays-gas)
    keeps_reserve: bool = False
    # may go beyond the partition, up to the daily ceiling: it answers the position's own danger (a line crossed or
    # within the horizon, a firing line rule), not the owner's steer; a sell keeps a repay's reserve under the ceiling
    beyond: bool = False


class LineRule(BaseModel):
    """A rule (STRATEGY.md or a learned one in PLAYBOOK.md) that fires now because the health factor is under the
    line it draws, and sells into a stable: a proposed sell like it answers that line."""

    label: str
    text: str
    line: float
    health_factor: float
    token_out: str


def line_rules(rules: list[Rule], metrics: Metrics) -> list[LineRule]:
    """The rules whose every condition holds now, one of them `health_factor <` / `<=` a line, whose action is a swap
    into a stable (rules that need the owner's words are the steer's business)."""
    hf = metrics.get("health_factor")
    out = []
    for rule in rules:
        act = rule.action
        if act.tool != "swap" or (act.token_out or "").upper() not in STABLE_TOKENS or not readable_without_steer(rule):
            continue
        lines = [float(c.value) for c in rule.conditions if c.metric == "health_factor" and c.op in ("<", "<=")
                 and isinstance(c.value, (int, float))]
        if not lines or not isinstance(hf, float) or not all(evaluate_condition(c, metrics, [])[0]
                                                                for c in rule.conditions):
            continue
        out.append(LineRule(label=rule.label, text=rule.text, line=min(lines), health_factor=hf,
                            token_out=(act.token_out or "").upper()))
    return out


def _answers_line(action: ProposedAction, rules: list[LineRule]) -> LineRule | None:
    """The crossed line a proposed sell answers: a firing line rule selling into the same stable."""
    if action.tool != "swap" or not rules:
        return None
    try:
        out = str(parse_arguments("swap", action.arguments)["token_out"]).upper()
    except ToolArgumentError:
        return None
    return next((r for r in rules if r.token_out == out), None)


DIRECT_TOOLS = ("repay", "supply", "remove_liquidity")  # restore the health factor by themselves


def restores_health(action: ProposedAction) -> bool:
    """Actions that answer a falling health factor: repay, supply, remove_liquidity (frees assets to repay with)
    and a swap into a stable (sells exposure). Nothing else can be urgent on the position's account."""
    if action.tool in DIRECT_TOOLS:
        return True
    if action.tool == "swap":
        try:
            return parse_arguments("swap", action.arguments)["token_out"] in STABLE_TOKENS
        except ToolArgumentError:
            return False
    return False


def classify(action: ProposedAction, forecast: Forecast | None, steers: list[Steer],
             floor: float | None = None, lines: list[LineRule] | None = None) -> UrgencyVerdict:
    """The urgency an action answers. An owner's high or critical steer makes every action of its tick urgent;
    otherwise only an action that restores health can be urgent, and only as urgent as the position is: critical
    when a MUST floor or the liquidation line is crossed or within the forecast horizon, urgent when a rule's line
    is (a sell also when a deferral's tick would bring the line within the horizon at the worst move), routine
    otherwise (however protective the tool sounds). `floor`: STRATEGY.md's MUST health-factor floor.
    `lines`: the line rules firing now (line_rules): a sell answering one is urgent on that line's account and may
    draw on the slice, less a repay's reserve."""
    verdict = _classify(action, forecast, steers, floor)
    rule = _answers_line(action, lines or [])
    if rule is None or verdict.level is Urgency.CRITICAL or verdict.uses_slice:
        return verdict
    return UrgencyVerdict(level=Urgency.URGENT, restores=True, uses_slice=True, keeps_reserve=True, beyond=True,
                          reason=f"health factor {rule.health_factor:.3f} is under the line {rule.line:g} of "
                                 f"{rule.label} `{rule.text}`, which this sell answers")


def _classify(action: ProposedAction, forecast: Forecast | None, steers: list[Steer],
              floor: float | None = None) -> UrgencyVerdict:
    restores, direct = restores_health(action), action.tool in DIRECT_TOOLS
    steer = max((s for s in steers if s.severity.rank >= SteerSeverity.HIGH.rank), key=lambda s: s.severity.rank,
                default=None)
    if steer is not None:
        return UrgencyVerdict(level=Urgency.URGENT, restores=restores, uses_slice=True,
                              reason=f"owner steer {steer.id} ({steer.severity.value}) governs this tick")
    if not restores:
        return UrgencyVerdict(level=Urgency.ROUTINE, reason=f"{action.tool} does not restore the health factor")
    if forecast is None:
        return UrgencyVerdict(level=Urgency.ROUTINE, restores=True, reason="no loan: no line to defend")
    f = forecast
    soon = min((t for t in (f.ticks_at_slope, f.ticks_at_worst) if t is not None), default=None)
    at = f"health factor {f.health_factor:.3f}, line {f.line:g} ({f.line_label})"
    if f.crossed:
        deepest = max(x for x in (floor, LIQUIDATION) if x is not None)
        kind = Urgency.CRITICAL if f.health_factor <= deepest else Urgency.URGENT
        under = max(f.crossed)  # the forecast's `line` is the next one below, not yet reached, once it is under one
        reason = (f"{at}: crossed" if under == f.line else
                  f"health factor {f.health_factor:.3f} is under the line {under:g} (next: {f.line:g}, {f.line_label})")
        return UrgencyVerdict(level=kind, restores=True, uses_slice=True, keeps_reserve=not direct, beyond=True,
                              reason=reason)
    if f.within_horizon:
        # a sell into a stable answers the imminent crossing too: the slice, less a repay's reserve
        kind = Urgency.CRITICAL if f.line_kind in FLOOR_KINDS else Urgency.URGENT
        return UrgencyVerdict(level=kind, restores=True, uses_slice=True, keeps_reserve=not direct, beyond=True,
                              reason=f"{at}: {soon:.1f} ticks away (horizon {f.horizon_ticks:g})")
    worst = f.ticks_at_worst
    if not direct and worst is not None and worst <= f.horizon_ticks + DEFERRAL_TICKS:
        # a sell that waits a tick sells a worst move lower and is urgent then anyway: it is urgent now
        return UrgencyVerdict(level=Urgency.URGENT, restores=True, uses_slice=True, keeps_reserve=True, beyond=True,
                              reason=f"{at}: {worst:.1f} ticks away at the worst move, within the horizon "
                                     f"{f.horizon_ticks:g} after the {DEFERRAL_TICKS:g} tick a deferral waits: "
                                     "a sell that waits sells lower")
    when = "not falling" if soon is None else f"{soon:.1f} ticks away at the worst move"
    return UrgencyVerdict(level=Urgency.ROUTINE, restores=True,
                          reason=f"{at}: {when}, beyond the horizon of {f.horizon_ticks:g}")


def recent_median(gas_history: list[float]) -> float | None:
    """The recent median gas price (gwei) routine protective actions wait under; None with too little history."""
    hist = [g for g in gas_history if g > 0]
    return statistics.median(hist) if len(hist) >= MEDIAN_MIN_SAMPLES else None


def action_ceiling_usd(policy: PolicySection, value_protected_usd: float) -> float:
    """The most gas one urgent action may pay: the absolute ceiling, or its share of the value it protects."""
    return min(policy.gas_ceiling_per_action_usd, policy.gas_ceiling_share_of_protected * max(value_protected_usd, 0.0))


def gas_decision(
    est_usd: float, partition: GasPartition, typical_usd: float | None, spike_multiple: float, verdict: UrgencyVerdict,
    protective: str | None, gas_gwei: float, median_gwei: float | None, policy: PolicySection, value_usd: float,
) -> tuple[str | None, str | None]:
    """(defer reason, note for the record). `protective`: golem.safety.policy.protective_reason of the action (its
    tool answers a risk), which alone buys nothing: a routine protective action waits while gas is above the
    recent median; a routine one of any kind goes through the gas gate on the routine share; urgent and critical ones
    are held to the per-action ceiling, urgent to the partition, critical to the daily ceiling."""
    level = verdict.level
    if level is Urgency.ROUTINE:
        if protective is not None and median_gwei is not None and gas_gwei > median_gwei * (1 + MEDIAN_TOLERANCE):
            return (f"{GAS_GATE_DEFER}: routine ({verdict.reason}); gas {gas_gwei:.2f} gwei is more than "
                    f"{MEDIAN_TOLERANCE:.0%} above the recent median {median_gwei:.2f} gwei: waits until gas falls or "
                    f"urgency rises"), None
        return gas_gate(est_usd, partition.routine_left_usd, typical_usd, spike_multiple), None
    cap = action_ceiling_usd(policy, value_usd)
    if est_usd > cap:
        return (f"{GAS_GATE_DEFER}: {level.value} ({verdict.reason}) but gas ${est_usd:,.4f} is over the per-action "
                f"ceiling ${cap:,.4f} (min of ${policy.gas_ceiling_per_action_usd:,.2f} and "
                f"{policy.gas_ceiling_share_of_protected:.1%} of ${value_usd:,.2f} protected)"), None
    left, routine_left = partition.left_usd, partition.routine_left_usd
    ceiling_left = policy.gas_ceiling_per_day_usd - partition.spent_usd
    reserve = est_usd * REPAY_RESERVE_ACTIONS
    sell = verdict.keeps_reserve  # a sell into a stable answering a line: it funds a repay, whose gas it must keep
    if level is Urgency.URGENT and not verdict.uses_slice and est_usd > routine_left:
        return (f"{GAS_GATE_DEFER}: urgent ({verdict.reason}) but gas ${est_usd:,.4f} exceeds the routine share's "
                f"${max(routine_left, 0.0):,.4f} left today; the emergency slice is not open to it"), None
    # the slice: a repay or supply to its end, a sell while twice its gas stays in it, a critical sell to its end
    in_slice = est_usd <= left and (not sell or level is Urgency.CRITICAL or left - est_usd >= reserve)
    if est_usd > routine_left and not in_slice:
        if level is Urgency.URGENT and not verdict.beyond:
            within = (f"would leave the emergency slice ${max(left - est_usd, 0.0):,.4f} left today, under the "
                      f"${reserve:,.4f} a repay needs" if est_usd <= left else
                      f"exceeds the partition's ${max(left, 0.0):,.4f} left today")
            return (f"{GAS_GATE_DEFER}: urgent ({verdict.reason}) but gas ${est_usd:,.4f} {within}; only an action "
                    "answering the position goes beyond it"), None
        if est_usd > ceiling_left:
            return (f"{GAS_GATE_DEFER}: {level.value} ({verdict.reason}) but gas ${est_usd:,.4f} would pass the daily "
                    f"ceiling ${policy.gas_ceiling_per_day_usd:,.2f} (${partition.spent_usd:,.4f} spent today)"), None
        if sell and ceiling_left - est_usd < reserve:
            # worded "left today": a deferral for the day's gas, released by a new day or a rise in urgency (_cause)
            return (f"{GAS_GATE_DEFER}: {level.value} ({verdict.reason}) but gas ${est_usd:,.4f} would leave "
                    f"${max(ceiling_left - est_usd, 0.0):,.4f} left today under the daily ceiling "
                    f"${policy.gas_ceiling_per_day_usd:,.2f}, under the ${reserve:,.4f} a repay needs (the ceiling "
                    "keeps it)"), None
        # past the slice's reserve (est ≤ left) or past the partition itself: either way the ceiling now keeps it
        where = "the slice past a repay's reserve there" if est_usd <= left else "beyond the partition"
        spent = f"{where}, within the daily ceiling (${ceiling_left - est_usd:,.4f} of it left after"
        spent += (f", at least the ${reserve:,.4f} a repay needs ({REPAY_RESERVE_ACTIONS:g}× its gas))" if sell
                  else ")")
    elif est_usd > routine_left:
        spent = f"uses the emergency slice (${left:,.4f} of ${partition.emergency_usd:,.2f} left today)"
        if sell and level is Urgency.URGENT:
            # a sell that answers a line: the slice's last gas stays for the repay (a day of chop sells spent it)
            spent += (f", keeping ${left - est_usd:,.4f} after it, at least the ${reserve:,.4f} a repay needs "
                      f"({REPAY_RESERVE_ACTIONS:g}× its gas)")
    else:
        spent = f"within the routine share (${routine_left:,.4f} left today)"
    return None, f"{level.value}, {verdict.reason}: gas ${est_usd:,.4f} {spent}, under the ${cap:,.4f} ceiling"


DEFERRED_MAX_TICKS = 120  # a deferred intent older than this is dropped: the situation it answered is gone


def _cause(reason: str) -> tuple[str, str]:
    """(cause, urgency level) of a gas-gate deferral, from its reason (gas_decision / gas_gate wrote it)."""
    level = next((lv.value for lv in (Urgency.CRITICAL, Urgency.URGENT) if f"{GAS_GATE_DEFER}: {lv.value}" in reason),
                 Urgency.ROUTINE.value)
    budget = "left today" in reason or "daily ceiling" in reason
    return ("budget" if budget else "price"), level


def next_deferred(intents: list[DeferredIntent], tick: int, proposed: list[ProposedAction],
                  actions: list[ActionRecord], gas_gwei: float, day: str = "") -> list[DeferredIntent]:
    """The deferred intents after a tick, one per tool: a tool this tick decided (sent, refused, cancelled) drops its
    intent; one the gas gate deferred this tick is (re)kept, since its first deferral; the others wait on, until
    DEFERRED_MAX_TICKS after they were first deferred."""
    by_tool = {i.tool: i for i in intents if tick - i.since_tick <= DEFERRED_MAX_TICKS}
    args = {a.action_index: a.arguments for a in proposed}
    for a in actions:
        deferred = a.status is ActionStatus.DEFERRED and (a.block_reason or "").find(GAS_GATE_DEFER) >= 0
        if not deferred:
            by_tool.pop(a.tool_name, None)
            continue
        was = by_tool.get(a.tool_name)
        cause, level = _cause(a.block_reason or "")
        by_tool[a.tool_name] = DeferredIntent(
            tool=a.tool_name, arguments=args.get(a.action_index, was.arguments if was else {}),
            since_tick=was.since_tick if was else tick, last_tick=tick, reason=a.block_reason or "", gas_gwei=gas_gwei,
            cause=cause, day=day, level=level)
    return sorted(by_tool.values(), key=lambda i: i.since_tick)


def release_reason(intents: list[DeferredIntent], gas_gwei: float, gas_history: list[float],
                   forecast: Forecast | None, floor: float | None, day: str = "") -> str | None:
    """Why a deferred intent comes back on this tick (it cannot stay at T0), or None. What deferred it says what
    releases it: an intent deferred for its gas price when gas is at or under its recent median (and under the
    price it was deferred at); one deferred because the day's gas was spent on another day; either when the
    position makes it more urgent than it was."""
    median = recent_median(gas_history)
    for i in intents:
        name = f"deferred {i.tool} (since tick {i.since_tick})"
        verdict = classify(ProposedAction(action_index=0, tool=i.tool, arguments=i.arguments), forecast, [], floor)
        if verdict.level.rank > Urgency(i.level).rank:
            return f"{name}: urgency rose to {verdict.level.value} ({verdict.reason})"
        if i.cause == "budget":
            if day and i.day and day != i.day:
                return f"{name}: a new day's gas partition ({day})"
            continue
        if (median is None or gas_gwei <= median) and gas_gwei < i.gas_gwei:
            return (f"{name}: gas {gas_gwei:.2f} gwei is at or under its recent median "
                    f"{'n/a' if median is None else f'{median:.2f} gwei'}")
    return None


def with_deferred(actions: list[ProposedAction], intents: list[DeferredIntent]) -> list[ProposedAction]:
    """The decision's actions plus each deferred intent whose tool the decision does not already use, after them:
    the intent goes through sizing, urgency and the gas gate again."""
    used = {a.tool for a in actions}
    out = list(actions)
    for i in intents:
        if i.tool in used:
            continue
        out.append(ProposedAction(action_index=len(out), tool=i.tool, arguments=dict(i.arguments),
                                  rationale=f"deferred since tick {i.since_tick}: {i.reason}"))
    return out
