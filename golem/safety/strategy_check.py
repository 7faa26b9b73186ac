"""Strategy validation pipeline, run before trading starts and whenever STRATEGY.md changes: schema,
consistency, range, an offline risk assessment, and a dry run of the first rules' actions against the node and the
PolicyCage. A critical finding makes the result STRATEGY_UNVIABLE (no trades; the golem waits for a steer);
warnings need acknowledgment but do not stop trading. The steps: docs/design/safety.md#strategy-validation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Literal

from pydantic import BaseModel, Field

from golem.chain.tools.schemas import STABLE_TOKENS
from golem.inference.strategies import parse_set, strategy_id, unbundle
from golem.inference.strategy import Rule, Strategy, StrategyError, parse_strategy
from golem.models.enums import BehavioralPhase
from golem.models.observation import Observation
from golem.models.tick import ProposedAction, SimulationResult
from golem.safety.limits import SafetyLimits
from golem.safety.policy import PolicyCage

STRATEGY_UNVIABLE: Final = "STRATEGY_UNVIABLE"
DRY_RUN_ACTIONS = 5  # the first few rules' actions
# Plausible ranges for rule thresholds (outside → likely a typo or a unit error).
THRESHOLD_RANGES: dict[str, tuple[float, float]] = {
    "health_factor": (1.0, 10.0),
    "price_change_bps": (-5_000.0, 5_000.0),
    "pool_oracle_gap_bps": (-5_000.0, 5_000.0),
    "gas_gwei": (0.0, 10_000.0),
}

Stage = Literal["schema", "consistency", "range", "risk", "dry_run"]


class StrategyIssue(BaseModel):
    stage: Stage
    severity: Literal["critical", "warning"]
    field: str  # "STRATEGY.md line 12", "policy.approved_assets", ...
    message: str
    fix: str = ""

    def __str__(self) -> str:
        return f"[{self.severity}] {self.stage}: {self.field}: {self.message}" + (f" Fix: {self.fix}" if self.fix else "")


class StrategyValidation(BaseModel):
    status: Literal["ok", "warnings", "STRATEGY_UNVIABLE"]
    issues: list[StrategyIssue] = Field(default_factory=list)
    dry_run: list[dict[str, Any]] = Field(default_factory=list)  # per simulated action: tool, arguments, ok, reason

    @property
    def viable(self) -> bool:
        return self.status != STRATEGY_UNVIABLE

    def explanation(self) -> str:
        if not self.issues:
            return "strategy is valid"
        return "\n".join(str(i) for i in self.issues)


def _rule_tokens(rule: Rule, strategy: Strategy) -> list[str]:
    a = rule.action
    if a.tool == "swap":
        return [a.token_in or "", a.token_out or ""]
    return [strategy.collateral_token if a.tool in ("supply", "withdraw") else strategy.debt_token]


def _static_checks(strategy: Strategy, limits: SafetyLimits) -> list[StrategyIssue]:
    issues: list[StrategyIssue] = []
    approved = {a.upper() for a in limits.policy.approved_assets}
    forbidden = {c.tool for c in strategy.constraints if c.kind == "forbid"}
    usable = 0
    for rule in strategy.rules:
        where = f"{strategy.source} line {rule.line}"
        bad = [t for t in _rule_tokens(rule, strategy) if t not in approved]
        if bad:
            issues.append(StrategyIssue(
                stage="consistency", severity="warning", field=where,
                message=f"`{rule.text}` trades {', '.join(bad)}, not in approved_assets [{', '.join(sorted(approved))}]; "
                        "the PolicyCage will block it",
                fix=f"use approved tokens, or add {', '.join(bad)} to [policy] approved_assets in golem.toml",
            ))  # fmt: skip
            continue
        if rule.action.tool in forbidden:
            issues.append(StrategyIssue(stage="consistency", severity="warning", field=where,
                                        message=f"`{rule.text}` acts with {rule.action.tool}, which a MUST NOT forbids",
                                        fix="remove the rule or the MUST NOT line"))
            continue
        usable += 1
        a = rule.action
        if not a.amount.percent:
            token = _rule_tokens(rule, strategy)[0]
            value = a.amount.value if token in STABLE_TOKENS else None
            if value is not None and value > limits.policy.max_trade_size_usd:
                issues.append(StrategyIssue(
                    stage="range", severity="warning", field=where,
                    message=f"`{rule.text}` moves {a.amount.value:,.6g} {token} (${value:,.0f}), over max_trade_size_usd "
                            f"${limits.policy.max_trade_size_usd:,.0f} — likely a decimal error",
                    fix="check the amount's units, or use a percentage",
                ))  # fmt: skip
        for cond in rule.conditions:
            rng = THRESHOLD_RANGES.get(cond.metric or "")
            if rng and isinstance(cond.value, float) and not rng[0] <= cond.value <= rng[1]:
                issues.append(StrategyIssue(
                    stage="range", severity="warning", field=where,
                    message=f"threshold {cond.metric} {cond.op} {cond.value:g} is outside the plausible range {rng[0]:g}…{rng[1]:g}",
                    fix=f"check the units of {cond.metric}" + (" (basis points: 300 = 3%)" if "bps" in (cond.metric or "") else ""),
                ))  # fmt: skip
    if strategy.rules and usable == 0:
        issues.append(StrategyIssue(stage="consistency", severity="critical", field="## Rules",
                                    message="no rule can ever act: every one trades an unapproved asset or a forbidden tool",
                                    fix="align the rules with [policy] approved_assets and the MUST NOT lines"))
    for token, what in ((strategy.collateral_token, "collateral"), (strategy.debt_token, "debt")):
        if token not in approved:
            issues.append(StrategyIssue(stage="consistency", severity="warning", field=f"## Settings {what}",
                                        message=f"{what} token {token} is not in approved_assets; lending rules will be blocked",
                                        fix=f"add {token} to approved_assets or change `- {what}:`"))
    # MUST keep lines that no state can satisfy together
    lows: dict[str, tuple[float, int]] = {}
    highs: dict[str, tuple[float, int]] = {}
    for c in strategy.constraints:
        if c.kind != "keep" or c.value is None or c.metric is None:
            continue
        if c.op in (">=", ">"):
            lows[c.metric] = max(lows.get(c.metric, (float("-inf"), 0)), (c.value, c.line))
        elif c.op in ("<=", "<"):
            highs[c.metric] = min(highs.get(c.metric, (float("inf"), 0)), (c.value, c.line))
        if c.metric == "health_factor" and c.op in (">=", ">") and c.value < 1.0:
            issues.append(StrategyIssue(stage="risk", severity="warning", field=f"{strategy.source} line {c.line}",
                                        message=f"health_factor floor {c.value:g} is below 1.0 (liquidatable)",
                                        fix="keep the floor at 1.2 or above"))
    for metric, (lo, lo_line) in lows.items():
        if metric in highs and highs[metric][0] < lo:
            hi, hi_line = highs[metric]
            issues.append(StrategyIssue(stage="consistency", severity="critical", field=f"{strategy.source} lines {lo_line}, {hi_line}",
                                        message=f"MUST keep {metric} >= {lo:g} and <= {hi:g} cannot both hold",
                                        fix="remove or correct one of the two lines"))
    # risk (offline)
    borrows = [r for r in strategy.rules if r.action.tool in ("borrow", "withdraw")]
    if borrows and "health_factor" not in lows:
        issues.append(StrategyIssue(stage="risk", severity="warning", field="## Constraints",
                                    message="rules borrow or withdraw collateral but no MUST keep health_factor floor is set",
                                    fix="add `- MUST keep health_factor >= 1.3`"))
    if not strategy.constraints:
        issues.append(StrategyIssue(stage="risk", severity="warning", field="## Constraints",
                                    message="no MUST constraints: only golem.toml's [policy] bounds the golem",
                                    fix="add a `## Constraints` section"))
    return issues


def dry_run_actions(strategy: Strategy, observation: Observation, limits: SafetyLimits,
                    n: int = DRY_RUN_ACTIONS) -> list[tuple[Rule, ProposedAction]]:
    """The first `n` rules' actions sized at today's balances (conditions ignored), capped at the
    trade-size limit the way the deliberator caps them."""
    snap = observation.snapshot
    lend = [p for p in snap.positions if p.kind == "lending"]
    coll, debt = sum(p.collateral for p in lend), sum(p.debt for p in lend)
    eth = snap.oracle_price if snap.oracle_price > 0 else snap.pool.price
    out: list[tuple[Rule, ProposedAction]] = []
    for rule in strategy.rules[:n]:
        a = rule.action
        token = _rule_tokens(rule, strategy)[0]
        basis = {"swap": snap.balances.get(token, 0.0), "supply": snap.balances.get(token, 0.0),
                 "withdraw": coll, "repay": debt, "borrow": debt}[a.tool]
        amount = a.amount.value / 100.0 * basis if a.amount.percent else a.amount.value
        unit_usd = 1.0 if token in STABLE_TOKENS else eth
        if unit_usd > 0:
            amount = min(amount, limits.policy.max_trade_size_usd * 0.95 / unit_usd)
        amount = round(amount, 6)
        if amount <= 0:
            continue
        args = ({"token_in": a.token_in, "token_out": a.token_out, "amount_in": amount} if a.tool == "swap"
                else {"amount": amount})
        out.append((rule, ProposedAction(action_index=len(out), tool=a.tool, arguments=args, rationale=rule.label)))
    return out


def validate_strategy(
    text: str,
    limits: SafetyLimits,
    *,
    observation: Observation | None = None,
    simulate: Callable[[list[ProposedAction], Observation], SimulationResult] | None = None,
    phase: BehavioralPhase = BehavioralPhase.THRIVING,
    dry_run: bool = True,
    source: str = "STRATEGY.md",
    strategy_id: str = "main",
) -> StrategyValidation:
    """Run the five stages; `simulate` is e.g. `lambda acts, obs: simulate_actions(w3, dep, account, acts, obs)`.
    Without an observation and a simulator the dry run is skipped (and says so); `dry_run=False` leaves it
    out on purpose (`golem strategy-check` without --chain), which is no warning about the chain."""
    try:
        strategy = parse_strategy(text, source=source, strategy_id=strategy_id)
    except StrategyError as e:
        msg = str(e)
        field = msg.split(":", 1)[0] if msg.startswith(source) else source
        return StrategyValidation(status=STRATEGY_UNVIABLE, issues=[
            StrategyIssue(stage="schema", severity="critical", field=field, message=msg.split(": ", 1)[-1],
                          fix="see the message; the grammar is in golem/inference/strategy.py")])
    issues = _static_checks(strategy, limits)
    dry: list[dict[str, Any]] = []
    if not dry_run:
        pass
    elif observation is None or simulate is None:
        issues.append(StrategyIssue(stage="dry_run", severity="warning", field="chain",
                                    message="dry run skipped: no chain observation/simulator given",
                                    fix="run with a reachable rpc_url"))
    else:
        cage = PolicyCage(limits.policy)
        planned = dry_run_actions(strategy, observation, limits)
        for rule, action in planned:
            sim = simulate([action], observation).actions[0]
            verdict = cage.check(action, observation, phase)
            ok = sim.ok and verdict.ok
            reason = "" if ok else (f"simulation reverted: {sim.revert_reason}" if not sim.ok else f"policy: {verdict.reason}")
            dry.append({"rule": rule.label, "tool": action.tool, "arguments": action.arguments, "ok": ok,
                        "reason": reason, "gas_estimate": sim.gas_estimate})
            if not ok:
                issues.append(StrategyIssue(stage="dry_run", severity="warning", field=rule.label,
                                            message=f"`{rule.text}` would fail today ({reason})",
                                            fix="check balances, liquidity and limits for this action"))
        if planned and not any(d["ok"] for d in dry):
            issues.append(StrategyIssue(stage="dry_run", severity="critical", field="## Rules",
                                        message=f"none of the first {len(planned)} rule actions would succeed today",
                                        fix="fund the account, change the rules, or wait for a steer"))
    status: Literal["ok", "warnings", "STRATEGY_UNVIABLE"] = STRATEGY_UNVIABLE if any(i.severity == "critical" for i in issues) else ("warnings" if issues else "ok")
    return StrategyValidation(status=status, issues=issues, dry_run=dry)


def validate_strategies(text: str, limits: SafetyLimits, *,
                        observation: Observation | None = None,
                        simulate: Callable[[list[ProposedAction], Observation], SimulationResult] | None = None,
                        dry_run: bool = True) -> list[tuple[str, StrategyValidation]]:
    """Every strategy file of a home (golem.inference.strategies.bundle's text), each through the pipeline, then what
    only the files together show: a file name that is no id, and a MAY line STRATEGY.md's MUST NOT makes empty."""
    main_text, others = unbundle(text)
    out = [("STRATEGY.md", validate_strategy(main_text, limits, observation=observation, simulate=simulate,
                                             dry_run=dry_run))]
    sset = parse_set(text)
    forbidden = {c.tool: c for c in (sset.main.constraints if sset.main else []) if c.kind == "forbid"}
    for path, body in others:
        sid = strategy_id(path)
        bad_id = next((e for e in sset.errors if e.startswith(f"{path}: ")), None)
        if bad_id:
            out.append((path, StrategyValidation(status=STRATEGY_UNVIABLE, issues=[StrategyIssue(
                stage="schema", severity="critical", field=path, message=bad_id.split(": ", 1)[1],
                fix="rename the file")])))
            continue
        result = validate_strategy(body, limits, observation=observation, simulate=simulate, dry_run=dry_run,
                                   source=path, strategy_id=sid)
        parsed = next((s for s in sset.others if s.id == sid), None)
        for m in parsed.may if parsed else []:
            if m.tool in forbidden:
                c = forbidden[m.tool]
                result.issues.append(StrategyIssue(
                    stage="consistency", severity="critical", field=f"{path} line {m.line}",
                    message=f"`{m.text}` can never happen: STRATEGY.md line {c.line} says `{c.text}` (a MUST wins)",
                    fix=f"remove the MAY line, or the MUST NOT {m.tool} line in STRATEGY.md"))
                result.status = STRATEGY_UNVIABLE
        out.append((path, result))
    return out
