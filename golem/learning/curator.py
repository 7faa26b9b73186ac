"""The ExpeL Curator: at every delta cycle, over the learning ledger's compared outcomes and their credit, ADD a
learned rule (an owner rule that kept paying in one regime, or an owner's hedge for a regime in which holding kept
losing, fired one step earlier), UPVOTE or DOWNVOTE learned
rules by their net credit, and EDIT a downvoted rule's threshold back. A learned rule may only reduce risk and
never ask for more than a MUST cap allows. Pure: `plan` decides, `apply` writes through the HeuristicStore.
The operations and their bounds: docs/design/learning.md#the-curator.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, Field

from golem.grimoire.playbook.heuristics import GLOBAL_SCOPE, Heuristic, HeuristicStore
from golem.inference.strategy import Condition, Rule, Strategy, rules_in
from golem.learning.ledger import OutcomeRow
from golem.models.enums import MarketRegime

MIN_SUPPORT = 5  # nothing is learned from fewer than 5 supporting episodes
MAX_PARAMETER_SHIFT = 0.10  # a parameter moves <= 10 % per consolidation cycle
RISK_REDUCING = ("repay", "supply", "swap")  # tools a learned rule may use; borrow/withdraw can only add risk
# a k-tick price move counts for or against hedging only beyond what a hedge costs: a swap's fee and slippage on the
# dev world's pool are about 0.8 % of its notional (docs/design/learning.md#hindsight-settlement)
HEDGE_COST = 0.01


class MarketTick(BaseModel):
    """One recorded tick as the market read it: its regime, the collateral token's price and the units held."""

    tick: int
    regime: str
    price: float
    exposure: float  # collateral-token units (wallet + supplied)


def holding_losses(market: Sequence[MarketTick], k: int) -> dict[str, tuple[list[int], int]]:
    """Per regime: the ticks at which holding the collateral token lost more than a hedge costs over the next `k`
    recorded ticks (the market-beta loss a sale would have avoided), and how many ticks it gained as much instead
    (a sale would have missed it). Only ticks that held some exposure count; the settling price is the first
    recorded tick from t + k on."""
    rows = sorted(market, key=lambda m: m.tick)
    out: dict[str, tuple[list[int], int]] = {}
    j = 0
    for i, m in enumerate(rows):
        j = max(j, i)
        while j < len(rows) and rows[j].tick < m.tick + k:
            j += 1
        if j >= len(rows):
            break
        if m.exposure <= 0 or m.price <= 0 or m.regime == MarketRegime.UNKNOWN.value:
            continue
        move = rows[j].price / m.price - 1.0
        lost, gained = out.get(m.regime, ([], 0))
        if move <= -HEDGE_COST:
            lost = [*lost, m.tick]
        elif move >= HEDGE_COST:
            gained += 1
        out[m.regime] = (lost, gained)
    return out


def _sells_collateral(rule: Rule, strategy: Strategy) -> bool:
    a = rule.action
    return (a.tool == "swap" and (a.token_in or "").upper() == strategy.collateral_token.upper()
            and (a.token_out or "").upper() != strategy.collateral_token.upper())


def _regime_of(rule: Rule) -> str | None:
    return next((str(c.value) for c in rule.conditions
                 if c.kind == "metric" and c.metric == "regime" and c.op == "=="), None)


class CuratorOp(BaseModel):
    op: str  # ADD | UPVOTE | DOWNVOTE | EDIT | REFUSED
    entry_id: str | None = None
    text: str = ""
    net: int = 0
    reason: str = ""
    support: list[str] = Field(default_factory=list)  # episode ids (ADD)


class CuratorReport(BaseModel):
    tick: int
    operations: list[CuratorOp] = Field(default_factory=list)
    focus: str | None = None  # what a next-curator follow-up narrowed ADD to, and which follow-ups
    outcomes_seen: int = 0
    demoted: list[str] = Field(default_factory=list)  # left PLAYBOOK.md this cycle (confidence < 0.4)
    retired: list[str] = Field(default_factory=list)  # importance reached 0 (row kept)


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def earlier(cond: Condition, shift: float = MAX_PARAMETER_SHIFT) -> Condition:
    """The condition moved so it fires sooner: `<` thresholds up, `>` thresholds down, by `shift` of |value|."""
    v = float(cond.value)  # type: ignore[arg-type]
    moved = v + abs(v) * shift if cond.op in ("<", "<=") else v - abs(v) * shift
    return cond.model_copy(update={"value": round(moved, 4)})


def rule_text(conditions: list[Condition], rule: Rule) -> str:
    parts = [f"{c.metric} {c.op} {_fmt(c.value) if isinstance(c.value, float) else c.value}" for c in conditions]
    return f"WHEN {' AND '.join(parts)} THEN {rule.action}"


def refusal(rule: Rule, strategy: Strategy) -> str | None:
    """Why a learned rule may not run, or None. It may only reduce risk, never ask for more than a MUST cap
    allows, and never use a forbidden tool: a learned rule can never widen a limit."""
    a = rule.action
    if a.tool not in RISK_REDUCING:
        return f"a learned rule may only reduce risk; `{a.tool}` can lower a kept health factor"
    if a.tool == "swap" and (a.token_out or "").upper() == strategy.collateral_token.upper():
        return "a learned rule may only reduce risk; buying the collateral token adds exposure"
    for c in strategy.constraints:
        if c.kind == "forbid" and c.tool == a.tool:
            return f"MUST (line {c.line}: {c.text}) forbids {a.tool}"
        if c.kind == "cap" and c.tool == a.tool and c.amount is not None and c.amount.percent == a.amount.percent:
            token = a.token_in if a.tool == "swap" else None
            if (not c.token or not token or c.token == token.upper()) and a.amount.value > c.amount.value:
                return f"asks {a.amount} where MUST (line {c.line}: {c.text}) caps it: that would widen a limit"
    if any(c.kind == "steer" for c in rule.conditions):
        return "a learned rule cannot depend on the owner's steers"
    return None


def focus_of(messages: list[tuple[str, str]], what_for: str = "distillation") -> tuple[set[str], set[str], str | None]:
    """Regimes and tools named in next-curator (or next-dream) follow-ups (id, message) → (regimes, tools,
    description)."""
    regimes, tools = set(), set()
    for _, msg in messages:
        low = msg.lower().replace("-", "_")
        regimes |= {r.value for r in MarketRegime if re.search(rf"\b{r.value}\b", low) or
                    re.search(rf"\b{r.value.replace('_', ' ')}\b", msg.lower())}
        tools |= {t for t in RISK_REDUCING if re.search(rf"\b{t}\b", low)}
    if not regimes and not tools:
        return regimes, tools, None
    what = ", ".join(sorted(regimes | tools))
    return regimes, tools, f"{what_for} focused on {what} (follow-up {', '.join(i for i, _ in messages)})"


def _learned_from(owner_text: str, regime: str, strategy: Strategy) -> Rule | None:
    parsed = rules_in(f"- {owner_text}", "STRATEGY.md", strategy)
    if not parsed:
        return None
    rule = parsed[0]
    conds = [c for c in rule.conditions if not (c.kind == "metric" and c.metric == "regime")]
    numeric = [i for i, c in enumerate(conds) if c.kind == "metric" and isinstance(c.value, float)]
    if not numeric:
        return None
    conds[numeric[0]] = earlier(conds[numeric[0]])
    if regime != MarketRegime.UNKNOWN.value:  # "unknown" (warm-up) is no regime to scope a rule to
        conds.append(Condition(kind="metric", metric="regime", op="==", value=regime))
    text = rule_text(conds, rule)
    return rule.model_copy(update={"conditions": conds, "text": text, "source": "PLAYBOOK.md"})


def _add_or_refuse(learned: Rule, strategy: Strategy, support: list[str], reason: str) -> CuratorOp:
    """ADD a learned rule with its support and reason, or REFUSED with why when it would widen a limit."""
    why = refusal(learned, strategy)
    if why:
        return CuratorOp(op="REFUSED", text=learned.text, reason=why, support=support)
    return CuratorOp(op="ADD", text=learned.text, support=support, reason=reason)


def plan(tick: int, outcomes: list[OutcomeRow], heuristics: list[Heuristic], net_credit: dict[str, int],
         strategy: Strategy, followups: Iterable[tuple[str, str]] = (), market: Sequence[MarketTick] = (),
         settle_ticks: int = 10) -> CuratorReport:
    """`market`: the cycle window's recorded ticks (regime, price, exposure), read for the market-beta losses of
    holding in a regime; `settle_ticks`: how far ahead a tick's move is read (hindsight settlement's k)."""
    report = CuratorReport(tick=tick, outcomes_seen=len(outcomes))
    regimes, tools, report.focus = focus_of(list(followups))
    # ADD: owner rules that paid in one regime, >= 5 positive outcomes — a swap's as settled in hindsight (its
    # immediate verdict is its fee; an unsettled one waits), a repay's by the health factor it restored
    # and more often than it lost there (a rule that lost as often as it paid has not kept paying)
    support: dict[tuple[str, str], list[str]] = {}
    losses: dict[tuple[str, str], int] = {}
    for o in outcomes:
        verdict = o.judged
        if verdict not in ("positive", "negative") or (regimes and o.regime not in regimes):
            continue
        for r in o.rules:
            if r.get("origin") == "owner" and r.get("text") and (not tools or r.get("tool") in tools):
                key = (o.regime, r["text"])
                if verdict == "positive":
                    support.setdefault(key, []).append(o.episode_id or f"tick-{o.tick}{o.run_label}")
                else:
                    losses[key] = losses.get(key, 0) + 1
    for (regime, owner_text), eps in sorted(support.items()):
        if len(eps) < MIN_SUPPORT or len(eps) <= losses.get((regime, owner_text), 0):
            continue
        learned = _learned_from(owner_text, regime, strategy)
        if learned is None:
            continue
        report.operations.append(_add_or_refuse(
            learned, strategy, eps,
            f"owner rule `{owner_text}` paid {len(eps)} times in {regime} ({losses.get((regime, owner_text), 0)} "
            f"lost); fire it {MAX_PARAMETER_SHIFT:.0%} earlier there"))
    # ADD from what holding lost: an owner's sell scoped to a regime (`regime == R`) waits for its other line (a
    # health factor, a price move); when holding the collateral token in R lost more than a hedge costs over k ticks
    # at >= 5 ticks, and more often than it gained as much, that hedge is fired one step earlier in R. The owner's
    # rule cannot have paid yet (it has not fired), but the loss it hedges is already measured.
    planned = {op.text for op in report.operations}
    for regime, (lost, gained) in sorted(holding_losses(market, settle_ticks).items()):
        if len(lost) < MIN_SUPPORT or len(lost) <= gained or (regimes and regime not in regimes):
            continue
        for owner in strategy.rules:
            if _regime_of(owner) != regime or not _sells_collateral(owner, strategy) or (tools and "swap" not in tools):
                continue
            learned = _learned_from(owner.text, regime, strategy)
            if learned is None or learned.text in planned:
                continue
            planned.add(learned.text)
            report.operations.append(_add_or_refuse(
                learned, strategy, [f"hold-{regime}-tick-{t}" for t in lost],
                f"holding {strategy.collateral_token} in {regime} lost more than a hedge costs over {settle_ticks} "
                f"ticks at {len(lost)} ticks ({gained} gained as much); fire the owner's hedge `{owner.text}` "
                f"{MAX_PARAMETER_SHIFT:.0%} earlier there"))
    # UPVOTE / DOWNVOTE / EDIT by the credit since the last cycle
    by_id = {h.id: h for h in heuristics}
    for hid, net in sorted(net_credit.items()):
        h = by_id.get(hid)
        if h is None or net == 0 or h.status == "retired":
            continue
        if net > 0:
            report.operations.append(CuratorOp(op="UPVOTE", entry_id=hid, net=net, text=h.text,
                                               reason=f"its rule's outcomes net +{net} since the last cycle"))
            continue
        report.operations.append(CuratorOp(op="DOWNVOTE", entry_id=hid, net=net, text=h.text,
                                           reason=f"its rule's outcomes net {net} since the last cycle"))
        rule = next(iter(rules_in(f"- {h.text}", "PLAYBOOK.md", strategy)), None)
        numeric = [c for c in rule.conditions if c.kind == "metric" and isinstance(c.value, float)] if rule else []
        if rule is not None and numeric:
            first = numeric[0]
            back = earlier(first, -MAX_PARAMETER_SHIFT)  # the opposite direction: fire later
            conds = [back if c is first else c for c in rule.conditions]
            report.operations.append(CuratorOp(op="EDIT", entry_id=hid, text=rule_text(conds, rule),
                                               reason=f"{first.metric} threshold {_fmt(float(first.value or 0.0))} → "
                                                      f"{_fmt(float(back.value or 0.0))} after bad outcomes"))
    return report


def apply(report: CuratorReport, store: HeuristicStore, scope: str = GLOBAL_SCOPE) -> CuratorReport:
    """Write the plan: ADD through add_or_reinforce (one call per supporting episode, counted once each), votes
    and edits through `vote`. Fills which entries the votes demoted from PLAYBOOK.md or retired."""
    edits = {op.entry_id: op.text for op in report.operations if op.op == "EDIT"}
    for op in report.operations:
        if op.op == "ADD":
            for ep in op.support:
                h = store.add_or_reinforce(op.text, scope, ep)
            op.entry_id = h.id
        elif op.op in ("UPVOTE", "DOWNVOTE") and op.entry_id is not None:
            before = store.get(op.entry_id)
            # keyed by the cycle: a retried Curator step (crash before the ledger marked the credit) votes once
            after = store.vote(op.entry_id, op.net, report.tick, text=edits.get(op.entry_id),
                               key=f"curator:{report.tick}")
            if before is not None and before.status == "active" and after.status != "active":
                (report.retired if after.status == "retired" else report.demoted).append(after.id)
            elif after.status == "retired" and before is not None and before.status != "retired":
                report.retired.append(after.id)
    return report
