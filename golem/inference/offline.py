"""The offline deliberator: a deterministic policy over STRATEGY.md rules and PLAYBOOK.md heuristics.

It answers whenever there is no LLM, so a golem runs end to end with no network; same input, same Deliberation
(apart from the measured latency). Fired rules become actions on a projected book, shrunk so no MUST constraint it
can check is breached; otherwise it holds and says why. See docs/design/inference.md#the-offline-deliberator.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from golem.inference.deliberator import Route, ToolReads
from golem.inference.strategy import (
    Action,
    Constraint,
    Metrics,
    Rule,
    Strategy,
    fmt_metric as _fmt,
    metrics_from,
    rule_fires,
    rules_in,
)
from golem.models.enums import ProbeSeverity
from golem.models.record import DeliberationRecord, RuleApplied, ToolCallRecord
from golem.models.tick import DecideInput, Deliberation, ProposedAction, whole

MODEL_NAME = "offline-deliberator"
SWAP_OUTPUT_HAIRCUT = 0.97  # projected swap proceeds are discounted for fee and slippage
AMOUNT_DECIMALS = 6
POLICY_MARGIN = 0.95  # stay under max_trade_size_usd even if PolicyCage values at a slightly different price


def metrics_for(inp: DecideInput) -> Metrics:
    """The values rules can test (strategy.metrics_from on the tick's observation and the previous price)."""
    return metrics_from(whole(inp.observation, "observation"), inp.ctx.state.last_price)


def _checkable(c: Constraint) -> bool:
    """Constraints this deliberator enforces; the rest are reported as not checkable offline."""
    if c.kind != "keep":
        return True
    metric, lower, upper = c.metric or "", c.op in (">=", ">"), c.op in ("<=", "<")
    return (lower and (metric in ("health_factor", "collateral") or metric.startswith("balance."))) or (
        upper and metric == "debt")


@dataclass
class _Book:
    """The account as the deliberator expects it after the actions proposed so far."""

    balances: dict[str, float]
    collateral: float
    debt: float
    hf_scale: float | None  # k in HF = k × collateral / debt (price × liquidation threshold)
    used: dict[tuple[str, str], float] = field(default_factory=dict)  # (tool, token) → amount this tick


def _floor(x: float) -> float:
    q: int = 10 ** AMOUNT_DECIMALS  # int ** int is typed Any (a negative power is a float)
    return math.floor(max(x, 0.0) * q + 1e-9) / q


class OfflineDeliberator:
    """Deterministic Deliberator (see module docstring). `speculate`: try each proposed swap on the chain first and
    put the answer on the record ([inference] offline_speculate; off by default: two more simulations a swap tick)."""

    model = MODEL_NAME

    def __init__(self, speculate: bool = False) -> None:
        self.speculate = speculate

    def route(self, inp: DecideInput) -> Route:
        return Route(model=MODEL_NAME, why="the offline deliberator answers without a model")

    async def decide(self, inp: DecideInput, strategy: Strategy, playbook_text: str, *,
                     tools: list[dict[str, Any]] | None = None, route: Route | None = None,
                     reads: ToolReads | None = None) -> Deliberation:
        """`tools` and `route` are ignored: the offline deliberator proposes what STRATEGY.md's and PLAYBOOK.md's
        rules say (the PolicyCage refuses the rest), with no model. With `reads` and `speculate`, each swap it proposes
        is speculated and the answer goes on the record (`reads`)."""
        delib = self.decide_now(inp, strategy, playbook_text)
        if reads is None or not self.speculate or not any(a.tool == "swap" for a in delib.actions):
            return delib
        return await speculated(delib, reads)

    def decide_now(self, inp: DecideInput, strategy: Strategy, playbook_text: str = "") -> Deliberation:
        started = time.perf_counter()
        delib = _Decision(inp, strategy, playbook_text).run()
        delib.record.latency_ms = round((time.perf_counter() - started) * 1000.0, 3)
        return delib


class _Decision:
    def __init__(self, inp: DecideInput, strategy: Strategy, playbook_text: str) -> None:
        self.inp, self.strategy = inp, strategy
        self.metrics = metrics_for(inp)
        self.rules: list[Rule] = [*strategy.rules, *rules_in(playbook_text or "", "PLAYBOOK.md", strategy)]
        self.notes: list[str] = []  # constraint effects
        self.unchecked = [f"line {c.line} `{c.text}`" for c in strategy.constraints if not _checkable(c)]
        snap = whole(inp.observation, "observation").snapshot
        m = self.metrics
        hf = m["health_factor"]
        coll, debt = float(m["collateral"] or 0.0), float(m["debt"] or 0.0)
        scale = hf * debt / coll if isinstance(hf, float) and coll > 0 and debt > 0 else None
        self.book = _Book(balances={k.upper(): v for k, v in snap.balances.items()}, collateral=coll, debt=debt,
                          hf_scale=scale)
        self.start = _Book(balances=dict(self.book.balances), collateral=coll, debt=debt, hf_scale=scale)

    # -- tokens and bases ---------------------------------------------------------------------
    def _token_of(self, action: Action) -> str:
        if action.tool == "swap":
            return action.token_in or ""
        return self.strategy.debt_token if action.tool in ("repay", "borrow") else self.strategy.collateral_token

    def _basis(self, tool: str, token: str, book: _Book) -> float:
        """What a percentage is a share of."""
        if tool in ("swap", "supply"):
            return book.balances.get(token, 0.0)
        if tool == "withdraw":
            return book.collateral
        return book.debt  # repay, borrow

    def _requested(self, action: Action) -> tuple[float, str | None]:
        """Amount before constraints, capped by what the account can physically do."""
        tok = self._token_of(action)
        b = self.book
        amount = (action.amount.value / 100.0 * self._basis(action.tool, tok, b) if action.amount.percent
                  else action.amount.value)
        physical = {
            "swap": b.balances.get(tok, 0.0),
            "supply": b.balances.get(tok, 0.0),
            "withdraw": b.collateral,
            "repay": min(b.debt, b.balances.get(tok, 0.0)),
            "borrow": math.inf,
        }[action.tool]
        if amount > physical:
            return physical, f"{action.tool} limited to {_fmt(physical)} {tok} available"
        return amount, None

    # -- constraints ----------------------------------------------------------------------------
    def _limit(self, c: Constraint, action: Action) -> tuple[float, str] | None:
        """Max amount of `action` that keeps constraint `c`, or None when `c` does not bear on it."""
        tool, tok, b = action.tool, self._token_of(action), self.book
        why = f"MUST (line {c.line}: {c.text})"
        if c.kind == "forbid":
            return (0.0, why) if c.tool == tool else None
        if c.kind == "cap":
            if c.tool != tool or (c.token and c.token != tok) or c.amount is None:
                return None
            cap = (c.amount.value / 100.0 * self._basis(tool, tok, self.start) if c.amount.percent
                   else c.amount.value)
            return max(cap - b.used.get((tool, tok), 0.0), 0.0), why
        # keep
        metric, op, x = c.metric or "", c.op or "", float(c.value or 0.0)
        strict = 1e-6 if op in (">", "<") else 0.0
        lower = op in (">=", ">")
        upper = op in ("<=", "<")
        if metric == "health_factor" and lower and tool in ("withdraw", "borrow"):
            if b.debt <= 0 and tool == "withdraw":
                return None
            if b.hf_scale is None:
                return 0.0, f"{why}: no current health factor to project from"
            if tool == "withdraw":
                return b.collateral - x * b.debt / b.hf_scale - strict, why
            return b.hf_scale * b.collateral / x - b.debt - strict, why
        if metric.startswith("balance.") and lower and tok == metric.split(".", 1)[1] and tool in ("swap", "repay",
                                                                                                 "supply"):
            return b.balances.get(tok, 0.0) - x - strict, why
        if metric == "debt" and upper and tool == "borrow":
            return x - b.debt - strict, why
        if metric == "collateral" and lower and tool == "withdraw":
            return b.collateral - x - strict, why
        return None

    def _policy_cap(self, token: str) -> float | None:
        """golem.toml's max_trade_size_usd in `token` units (PolicyCage would block anything larger).
        Stablecoins count as $1, WETH at the pool price; None for a token we cannot value."""
        usd = self.inp.ctx.cfg.policy.max_trade_size_usd * POLICY_MARGIN
        if token in ("USDC", "DAI"):
            return usd
        pool = whole(self.inp.observation, "observation").snapshot.pool
        price = pool.price
        if token == pool.token0.upper() and price > 0:
            return usd / price
        return None

    # -- projection ----------------------------------------------------------------------------
    def _swap_out(self, tin: str, tout: str, amount: float) -> float:
        pool = whole(self.inp.observation, "observation").snapshot.pool
        t0, t1, price = pool.token0.upper(), pool.token1.upper(), pool.price
        if price <= 0:
            return 0.0
        if (tin, tout) == (t0, t1):
            return amount * price * SWAP_OUTPUT_HAIRCUT
        if (tin, tout) == (t1, t0):
            return amount / price * SWAP_OUTPUT_HAIRCUT
        return 0.0  # unknown route: do not count on the proceeds

    def _apply(self, action: Action, amount: float) -> None:
        b, tok = self.book, self._token_of(action)
        b.used[(action.tool, tok)] = b.used.get((action.tool, tok), 0.0) + amount
        if action.tool == "swap":
            b.balances[tok] = b.balances.get(tok, 0.0) - amount
            out = action.token_out or ""
            b.balances[out] = b.balances.get(out, 0.0) + self._swap_out(tok, out, amount)
        elif action.tool == "repay":
            b.balances[tok] = b.balances.get(tok, 0.0) - amount
            b.debt -= amount
        elif action.tool == "borrow":
            b.balances[tok] = b.balances.get(tok, 0.0) + amount
            b.debt += amount
        elif action.tool == "supply":
            b.balances[tok] = b.balances.get(tok, 0.0) - amount
            b.collateral += amount
        elif action.tool == "withdraw":
            b.balances[tok] = b.balances.get(tok, 0.0) + amount
            b.collateral -= amount

    def _propose(self, rule: Rule, index: int) -> ProposedAction | None:
        action = rule.action
        tok = self._token_of(action)
        amount, note = self._requested(action)
        if note:
            self.notes.append(f"{rule.label}: {note}")
        policy_cap = self._policy_cap(tok)
        if policy_cap is not None and policy_cap < amount:
            amount = policy_cap
            self.notes.append(f"{rule.label}: {action.tool} cut to {_fmt(amount)} {tok} by policy max_trade_size_usd "
                              f"{self.inp.ctx.cfg.policy.max_trade_size_usd:g}")
        for c in self.strategy.constraints:
            lim = self._limit(c, action)
            if lim is not None and lim[0] < amount:
                amount = max(lim[0], 0.0)
                self.notes.append(f"{rule.label}: {action.tool} cut to {_fmt(amount)} {tok} by {lim[1]}")
        amount = _floor(amount)
        if amount <= 0:
            self.notes.append(f"{rule.label}: {action} skipped, nothing left to do")
            return None
        self._apply(action, amount)
        if action.tool == "swap":
            args = {"token_in": tok, "token_out": action.token_out, "amount_in": amount}
        else:
            args = {"amount": amount}
        return ProposedAction(action_index=index, tool=action.tool, arguments=args,
                              rationale=f"{rule.label}: {rule.text}")

    # -- the decision --------------------------------------------------------------------------
    def run(self) -> Deliberation:
        inp, m = self.inp, self.metrics
        steer_texts = [(s.id, s.message) for s in inp.steers]
        fired: list[tuple[Rule, list[str]]] = []
        steer_matches: dict[str, list[str]] = {s.id: [] for s in inp.steers}
        for rule in self.rules:
            holds, evidence, matched = rule_fires(rule, m, steer_texts)
            if holds:
                fired.append((rule, evidence))
                for sid in matched:  # a steer only counts as matched when its rule fired
                    steer_matches[sid].append(rule.label)

        probes = whole(inp.observation, "observation").probes
        kill = any(p.probe == "kill_switch" and p.severity == ProbeSeverity.HIGH for p in probes)
        actions: list[ProposedAction] = []
        applied: list[RuleApplied] = []
        if not kill:
            # owner rules first, learned ones after (self.rules order): the owner's fire on the untouched book,
            # and every action is cut by the MUST constraints, so a learned rule can never widen a limit
            owner_fired = [r for r, _ in fired if r.owner]
            for rule, _ in fired:
                # a learned rule is an owner rule fired earlier: when an owner rule with its action fired this tick,
                # that one decides; an owner rule doing something else does not silence it (a crash tick is also a
                # downtrend tick) — docs/design/learning.md#a-learned-rule-beside-the-owners
                owner = next((r for r in owner_fired if r.action == rule.action), None) if not rule.owner else None
                if owner is not None:
                    self.notes.append(f"{rule.label}: learned `{rule.action}` skipped, owner rule {owner.label} wins")
                    continue
                proposed = self._propose(rule, len(actions))
                if proposed is not None:
                    applied.append(RuleApplied(action_index=len(actions), rule=rule.label,
                                               origin="owner" if rule.owner else "learned",
                                               entry_id=rule.entry_id, text=rule.text))
                    actions.append(proposed)

        hf, dp = m["health_factor"], m["price_change_bps"]
        situation = f"health {_fmt(hf)}, Δprice {dp:+.0f} bps" if isinstance(dp, float) else f"health {_fmt(hf)}, Δprice n/a"
        if kill:
            decision, confidence = f"hold: kill switch is present ({situation})", 1.0
        elif not fired:
            decision, confidence = f"hold: no rule matched ({situation})", 0.8
        elif not actions:
            decision, confidence = f"hold: rules fired but constraints left nothing to do ({situation})", 0.5
        else:
            decision = "; ".join(self._describe(a) for a in actions)
            confidence = 0.6 if self.notes else 0.7

        parts = [
            "Offline deliberator: deterministic rules over STRATEGY.md"
            + (" and PLAYBOOK.md" if any(r.source == "PLAYBOOK.md" for r in self.rules) else "") + ".",
            f"Metrics: {situation}, price {_fmt(m['price'])}, oracle {_fmt(m['oracle_price'])}, "
            f"regime {m['regime']}, debt {_fmt(m['debt'])}, collateral {_fmt(m['collateral'])}.",
        ]
        if fired:
            parts.append("Fired: " + "; ".join(f"{r.label}{f' (learned {r.entry_id})' if r.entry_id else ''} `{r.text}` "
                                               f"({' and '.join(ev)})" for r, ev in fired) + ".")
        else:
            parts.append(f"No rule fired ({len(self.rules)} evaluated).")
        if inp.steers:
            parts.append("Steers considered: " + "; ".join(
                f'{s.id} "{s.message[:80]}" → ' + (", ".join(steer_matches[s.id]) or "matched no rule")
                for s in inp.steers) + ".")
        if inp.followups:
            parts.append("Follow-ups noted: " + ", ".join(f.id for f in inp.followups) + ".")
        if self.notes:
            parts.append("Constraints: " + "; ".join(self.notes) + ".")
        if self.unchecked:
            parts.append("Not checkable offline: " + ", ".join(self.unchecked) + ".")

        record = DeliberationRecord(
            model=MODEL_NAME,
            tier=inp.tier,
            reasoning_summary=" ".join(parts),
            tool_calls=[ToolCallRecord(tool_name=a.tool, arguments=a.arguments, rationale=a.rationale)
                        for a in actions],
            decision=decision,
            confidence=confidence,
            cost=0.0,
            recommends_action=bool(actions),
            steers_considered=[s.id for s in inp.steers],
            rules_applied=applied,
        )
        return Deliberation(record=record, actions=actions)

    def _describe(self, a: ProposedAction) -> str:
        if a.tool == "swap":
            return f"swap {_fmt(a.arguments['amount_in'])} {a.arguments['token_in']}→{a.arguments['token_out']}"
        tok = self.strategy.debt_token if a.tool in ("repay", "borrow") else self.strategy.collateral_token
        return f"{a.tool} {_fmt(a.arguments['amount'])} {tok}"


async def speculated(delib: Deliberation, reads: ToolReads) -> Deliberation:
    """Each proposed swap tried on the current block (the tool loop's `speculate`), its answer on the record: what
    the rule would fill at, or why it would revert. The proposal stands either way (the cage's own simulation
    decides whether it is sent), and the reasoning is the rules' alone, so a backtest decides as before."""
    from golem.inference.tool_loop import speculate_each

    records = await speculate_each(reads, [(a.tool, a.arguments) for a in delib.actions if a.tool == "swap"])
    record = delib.record.model_copy(update={"reads": [*delib.record.reads, *records]})
    return delib.model_copy(update={"record": record})
