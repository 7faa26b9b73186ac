"""STRATEGY.md: the owner's strategy as human-friendly markdown with a tiny rule grammar.

    - WHEN health_factor < 1.6 THEN repay 25% debt
    - MUST keep health_factor >= 1.3

Rules (WHEN … THEN …) are evaluated top to bottom; constraints (MUST keep / MUST NOT) are hard limits.
The whole grammar, with an example file: docs/reference/strategy.md.
"""

from __future__ import annotations

import operator
import re
from datetime import datetime
from pathlib import Path
from collections.abc import Callable
from typing import Literal, TypeGuard, get_args

from pydantic import BaseModel, Field

from golem.inference.schedule import (
    Schedule,
    ScheduleError,
    parse_cron,
    parse_duration,
    parse_instant,
    parse_window,
)
from golem.models.enums import MarketRegime
from golem.models.observation import Observation

TOKENS = ("WETH", "USDC", "DAI")
NUMERIC_METRICS = (
    "health_factor",  # min over lending positions; absent when there is no debt
    "price_change_bps",  # pool price vs the previous tick, signed
    "price",  # pool price (token1 per token0)
    "oracle_price",
    "pool_oracle_gap_bps",  # (pool − oracle) / oracle, signed
    "gas_gwei",
    "debt",  # total debt, debt-token units
    "collateral",  # total collateral, collateral-token units
    *(f"balance.{t}" for t in TOKENS),
)
METRICS = (*NUMERIC_METRICS, "regime")
OPS = ("<=", ">=", "==", "!=", "<", ">")
TOOLS = ("swap", "repay", "supply", "withdraw", "borrow")
REGIMES = tuple(r.value for r in MarketRegime)

Op = Literal["<", "<=", ">", ">=", "==", "!="]
Tool = Literal["swap", "repay", "supply", "withdraw", "borrow"]


def _is_op(text: str) -> TypeGuard[Op]:
    return text in get_args(Op)


def _is_tool(text: str) -> TypeGuard[Tool]:
    return text in get_args(Tool)


class StrategyError(ValueError):
    """A STRATEGY.md problem: names the line, what is wrong, and how to fix it."""


class Amount(BaseModel):
    value: float = Field(gt=0)
    percent: bool = False

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else f"{self.value:g}"


class Condition(BaseModel):
    kind: Literal["metric", "steer"]
    metric: str | None = None
    op: Op | None = None
    value: float | str | None = None  # number, or a regime name for `regime`
    text: str | None = None  # for `steer contains`

    def __str__(self) -> str:
        if self.kind == "steer":
            return f'steer contains "{self.text}"'
        v = f"{self.value:g}" if isinstance(self.value, float) else self.value
        return f"{self.metric} {self.op} {v}"


class Action(BaseModel):
    tool: Tool
    amount: Amount
    token_in: str | None = None  # swap only
    token_out: str | None = None  # swap only

    def __str__(self) -> str:
        if self.tool == "swap":
            return f"swap {self.amount} {self.token_in} to {self.token_out}"
        obj = "debt" if self.tool in ("repay", "borrow") else "collateral"
        return f"{self.tool} {self.amount} {obj}"


class Rule(BaseModel):
    line: int
    text: str
    conditions: list[Condition]
    action: Action
    source: str = "STRATEGY.md"
    entry_id: str | None = None  # a learned rule (PLAYBOOK.md): the heuristic it came from

    @property
    def label(self) -> str:
        return f"{self.source}:{self.line}"

    @property
    def owner(self) -> bool:
        """The owner wrote it (STRATEGY.md or a file under strategies/), not the Curator (PLAYBOOK.md)."""
        return self.source == "STRATEGY.md" or self.source.startswith("strategies/")


class Constraint(BaseModel):
    line: int
    text: str
    kind: Literal["keep", "forbid", "cap"]
    level: Literal["must", "should"] = "must"  # MUST binds (the cage refuses); SHOULD weighs (sizing shrinks)
    source: str = "STRATEGY.md"  # the file the line is in
    metric: str | None = None  # keep
    op: Op | None = None  # keep
    value: float | None = None  # keep
    tool: Tool | None = None  # forbid / cap
    amount: Amount | None = None  # cap
    token: str | None = None  # cap (swap: token_in)


class MayLine(BaseModel):
    """`MAY <tool>`: the tool may be proposed only while this strategy is active."""

    line: int
    text: str
    tool: Tool
    source: str = "STRATEGY.md"


class Trigger(BaseModel):
    """A `## Trigger` bullet: when every condition holds, a strategy in season starts."""

    line: int
    text: str
    conditions: list[Condition]


class CompletionLine(BaseModel):
    """A `## Completion` bullet: the first that holds ends the strategy for good."""

    line: int
    text: str
    kind: Literal["when", "actions", "ticks", "at"]
    conditions: list[Condition] = Field(default_factory=list)  # when
    count: int = 0  # actions / ticks
    at: datetime | None = None  # at (an expiry)


class Strategy(BaseModel):
    title: str = ""
    rules: list[Rule] = Field(default_factory=list)
    constraints: list[Constraint] = Field(default_factory=list)  # MUST lines
    collateral_token: str = "WETH"
    debt_token: str = "USDC"
    text: str = ""  # the whole file, for LLM prompts
    # Several strategies (docs/design/strategies.md): STRATEGY.md is "main" and always active; a file under
    # strategies/ has an id (its name), may have a schedule, triggers and completion lines.
    id: str = "main"
    source: str = "STRATEGY.md"
    schedule: Schedule | None = None
    triggers: list[Trigger] = Field(default_factory=list)
    completion: list[CompletionLine] = Field(default_factory=list)
    should: list[Constraint] = Field(default_factory=list)  # SHOULD lines
    may: list[MayLine] = Field(default_factory=list)
    # The tick's effective strategy only: tools a MAY line names whose strategy is not active → why not
    may_gated: dict[str, str] = Field(default_factory=dict)
    # The tick's effective strategy only: each active strategy's file (source → text), for a T1 prompt that shows
    # rules, not whole files (a strategy may have no rules: its text is what the model acts on)
    active_files: dict[str, str] = Field(default_factory=dict)


# ---- parsing ---------------------------------------------------------------------------------

_RULE = re.compile(r"^WHEN\s+(?P<cond>.+?)\s+THEN\s+(?P<action>.+)$", re.I)
_STEER = re.compile(r"""^steer\s+contains\s+(?P<q>["'])(?P<text>.*?)(?P=q)$""", re.I)
_COMPARE = re.compile(r"^(?P<metric>[A-Za-z_][A-Za-z_.]*)\s*(?P<op><=|>=|==|!=|<|>|=)\s*(?P<value>\S+)$")
_SWAP = re.compile(r"^swap\s+(?P<amt>\S+)\s+(?P<tin>[A-Za-z]+)\s+(?:to|for|->)\s+(?P<tout>[A-Za-z]+)$", re.I)
_LEND = re.compile(r"^(?P<tool>repay|borrow|supply|withdraw)\s+(?P<amt>\S+)(?:\s+(?P<obj>[A-Za-z]+))?$", re.I)
_KEEP = re.compile(r"^(?P<level>MUST|SHOULD)\s+keep\s+(?P<rest>.+)$", re.I)
_CAP = re.compile(r"^(?P<level>MUST|SHOULD)\s+NOT\s+(?P<tool>[A-Za-z]+)\s+more\s+than\s+(?P<amt>\S+)"
                  r"(?:\s+(?P<tok>[A-Za-z]+))?$", re.I)
_FORBID = re.compile(r"^(?P<level>MUST|SHOULD)\s+NOT\s+(?P<tool>[A-Za-z]+)$", re.I)
_MAY = re.compile(r"^MAY\s+(?P<tool>[A-Za-z_]+)$", re.I)
_LEVELS = ("MUST", "SHOULD", "MAY")
_FIELD = re.compile(r"^(?P<key>[A-Za-z_]+)\s*:\s*(?P<value>.+)$")
SCHEDULE_FIELDS = ("cron", "window", "duration", "from", "until")
_SETTING = re.compile(r"^(?P<key>[A-Za-z_]+)\s*[:=]\s*(?P<value>\S+)$")

_RULE_FIX = (
    'Write rules as "WHEN <metric> <op> <number> [AND ...] THEN <action>", e.g. '
    '"WHEN health_factor < 1.6 THEN repay 25% debt" or "WHEN steer contains \\"reduce exposure\\" THEN '
    'swap 25% WETH to USDC".'
)
_CONSTRAINT_FIX = (
    'Write constraints as "MUST keep <metric> <op> <number>", "MUST NOT <tool>" or '
    '"MUST NOT <tool> more than <amount> [TOKEN]", e.g. "MUST keep health_factor >= 1.3", '
    f'"MUST NOT swap more than 50% WETH"; SHOULD in place of MUST for a soft limit; "MAY <tool>". '
    f'Tools: {", ".join(TOOLS)}.'
)


def _err(line_no: int, line: str, problem: str, fix: str) -> StrategyError:
    return StrategyError(f"STRATEGY.md line {line_no}: {problem} in `{line.strip()}`. {fix}")


def _number(raw: str, line_no: int, line: str, what: str) -> float:
    try:
        return float(raw.replace("_", ""))
    except ValueError:
        raise _err(line_no, line, f"{what} {raw!r} is not a number", "Use a plain number such as 1.6 or -300.") from None


def _amount(raw: str, line_no: int, line: str, *, allow_percent: bool = True) -> Amount:
    percent = raw.endswith("%")
    num = _number(raw[:-1] if percent else raw, line_no, line, "amount")
    if percent and not allow_percent:
        raise _err(line_no, line, f"amount {raw!r} cannot be a percentage here",
                   "borrow takes an absolute amount in debt-token units, e.g. `borrow 100 debt`.")
    if num <= 0 or (percent and num > 100):
        raise _err(line_no, line, f"amount {raw!r} is out of range",
                   "Use a positive number, or a percentage in (0, 100].")
    return Amount(value=num, percent=percent)


def _token(raw: str, line_no: int, line: str) -> str:
    tok = raw.upper()
    if tok not in TOKENS:
        raise _err(line_no, line, f"unknown token {raw!r}", f"Tokens: {', '.join(TOKENS)}.")
    return tok


def _split_and(text: str) -> list[str]:
    """Split on AND outside quotes (a steer text may itself contain 'and')."""
    parts: list[str] = []
    cur: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif m := re.match(r"\s+AND\s+", text[i:], re.I):
            parts.append("".join(cur))
            cur = []
            i += m.end()
            continue
        cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _comparison(text: str, line_no: int, line: str) -> tuple[str, Op, float | str]:
    m = _COMPARE.match(text.strip())
    if not m:
        raise _err(line_no, line, f"cannot read the condition {text.strip()!r}",
                   f"Use <metric> <op> <number> with op one of {' '.join(OPS)}. " + _RULE_FIX)
    metric, op, raw = m["metric"], m["op"], m["value"]
    if metric.lower().startswith("balance."):
        metric = "balance." + metric.split(".", 1)[1].upper()
    else:
        metric = metric.lower()
    if op == "=":
        op = "=="
    if not _is_op(op):
        raise _err(line_no, line, f"unknown comparison {m['op']!r}", f"Use one of {' '.join(OPS)}.")
    if metric not in METRICS:
        raise _err(line_no, line, f"unknown metric {m['metric']!r}", f"Metrics: {', '.join(METRICS)}.")
    if metric == "regime":
        if op not in ("==", "!="):
            raise _err(line_no, line, f"regime cannot be compared with {op!r}", "Use regime == <name> or regime != <name>.")
        if raw.lower() not in REGIMES:
            raise _err(line_no, line, f"unknown regime {raw!r}", f"Regimes: {', '.join(REGIMES)}.")
        return metric, op, raw.lower()
    return metric, op, _number(raw, line_no, line, f"value for {metric}")


def _condition(text: str, line_no: int, line: str) -> Condition:
    if text.lower().startswith("steer"):
        m = _STEER.match(text)
        if not m or not m["text"].strip():
            raise _err(line_no, line, f"cannot read the steer condition {text!r}",
                       'Write it as steer contains "some words" (quoted, non-empty).')
        return Condition(kind="steer", text=m["text"].strip())
    metric, op, value = _comparison(text, line_no, line)
    return Condition(kind="metric", metric=metric, op=op, value=value)


def _action(text: str, line_no: int, line: str, collateral: str, debt: str) -> Action:
    text = text.strip().rstrip(".")
    tool = text.split()[0].lower() if text.split() else ""
    if not _is_tool(tool):
        raise _err(line_no, line, f"unknown action {tool!r}",
                   "Actions: swap <amount> <TOKEN> to <TOKEN>, repay <amount> debt, supply <amount> collateral, "
                   "withdraw <amount> collateral, borrow <number> debt.")
    if tool == "swap":
        m = _SWAP.match(text)
        if not m:
            raise _err(line_no, line, "cannot read the swap", "Write swap <amount> <TOKEN> to <TOKEN>, e.g. swap 20% WETH to USDC.")
        tin, tout = _token(m["tin"], line_no, line), _token(m["tout"], line_no, line)
        if tin == tout:
            raise _err(line_no, line, f"swap from {tin} to itself", "Name two different tokens.")
        return Action(tool="swap", amount=_amount(m["amt"], line_no, line), token_in=tin, token_out=tout)
    m = _LEND.match(text)
    if not m:
        raise _err(line_no, line, f"cannot read the {tool} action", f"Write {tool} <amount> "
                   + ("debt" if tool in ("repay", "borrow") else "collateral") + ", e.g. repay 25% debt.")
    obj = (m["obj"] or "").lower()
    want = ("debt", debt.lower()) if tool in ("repay", "borrow") else ("collateral", collateral.lower())
    if obj and obj not in want:
        raise _err(line_no, line, f"{tool} acts on {want[0]} ({want[1].upper()}), not {m['obj']!r}",
                   f"Write {tool} <amount> {want[0]}.")
    return Action(tool=tool, amount=_amount(m["amt"], line_no, line, allow_percent=tool != "borrow"))


def _rule(body: str, line_no: int, line: str, strategy: Strategy, source: str) -> Rule:
    m = _RULE.match(body)
    if not m:
        raise _err(line_no, line, "a rule needs WHEN … THEN …", _RULE_FIX)
    conds = [_condition(c, line_no, line) for c in _split_and(m["cond"])]
    action = _action(m["action"], line_no, line, strategy.collateral_token, strategy.debt_token)
    return Rule(line=line_no, text=body, conditions=conds, action=action, source=source)


def _level(word: str) -> Literal["must", "should"]:
    return "should" if word.lower() == "should" else "must"


def _constraint(body: str, line_no: int, line: str, source: str) -> Constraint | MayLine:
    level_word = body.split()[0] if body.split() else ""
    if level_word.upper() not in _LEVELS:
        if level_word.isalpha() and level_word.isupper():
            raise _err(line_no, line, f"unknown level {level_word!r}",
                       "Levels: MUST (a hard limit), SHOULD (a soft one: sizing shrinks what breaks it), "
                       "MAY (a tool allowed only while this strategy is active).")
        raise _err(line_no, line, "cannot read the constraint", _CONSTRAINT_FIX)
    if m := _MAY.match(body):
        tool = m["tool"].lower()
        if not _is_tool(tool):
            raise _err(line_no, line, f"unknown tool {m['tool']!r}", f"Write MAY <tool>; tools: {', '.join(TOOLS)}.")
        return MayLine(line=line_no, text=body, tool=tool, source=source)
    if level_word.upper() == "MAY":
        raise _err(line_no, line, "cannot read the MAY line", f"Write MAY <tool>, e.g. `MAY borrow`; tools: {', '.join(TOOLS)}.")
    if m := _KEEP.match(body):
        metric, op, value = _comparison(m["rest"], line_no, line)
        if metric == "regime" or isinstance(value, str):  # only regime compares with a name
            raise _err(line_no, line, "regime cannot be kept", _CONSTRAINT_FIX)
        return Constraint(line=line_no, text=body, kind="keep", metric=metric, op=op, value=value,
                          level=_level(m["level"]), source=source)
    for pattern, kind in ((_CAP, "cap"), (_FORBID, "forbid")):
        if m := pattern.match(body):
            tool = m["tool"].lower()
            if not _is_tool(tool):
                raise _err(line_no, line, f"unknown tool {m['tool']!r}", _CONSTRAINT_FIX)
            level = _level(m["level"])
            if kind == "forbid":
                return Constraint(line=line_no, text=body, kind="forbid", tool=tool, level=level, source=source)
            token = _token(m["tok"], line_no, line) if m["tok"] else None
            return Constraint(line=line_no, text=body, kind="cap", tool=tool, amount=_amount(m["amt"], line_no, line),
                              token=token, level=level, source=source)
    raise _err(line_no, line, "cannot read the constraint", _CONSTRAINT_FIX)


def _schedule_line(body: str, line_no: int, line: str, schedule: Schedule) -> None:
    m = _FIELD.match(body)
    key = m["key"].lower() if m else ""
    if not m or key not in SCHEDULE_FIELDS:
        raise _err(line_no, line, f"unknown schedule field {(m['key'] if m else body)!r}",
                   "Schedule fields: `cron: 0 14 * * mon`, `window: 14:00-16:00`, `duration: 2h`, "
                   "`from: 2026-12-01T00:00Z`, `until: 2026-12-31T00:00Z` (all UTC).")
    value = m["value"].strip()
    try:
        if key == "cron":
            schedule.crons.append(parse_cron(value))
        elif key == "window":
            schedule.windows.append(parse_window(value))
        elif key == "duration":
            schedule.duration = parse_duration(value)
        elif key == "from":
            schedule.not_before = parse_instant(value)
        else:
            schedule.not_after = parse_instant(value)
    except ScheduleError as e:
        raise _err(line_no, line, f"bad {key}", str(e) + ".") from None


_AFTER = re.compile(r"^after\s+(?P<n>\d+)\s+(?P<what>actions?|ticks?)$", re.I)
_AT = re.compile(r"^(?:at|expires?)\s*:?\s+(?P<when>.+)$", re.I)
_COMPLETION_FIX = ("Completion lines: `WHEN <condition> [AND ...]`, `after <n> actions`, `after <n> ticks`, "
                   "`at 2026-12-01T00:00Z` (UTC).")


def _conditions_line(body: str, line_no: int, line: str, what: str) -> list[Condition]:
    m = re.match(r"^WHEN\s+(?P<cond>.+)$", body, re.I)
    if not m:
        raise _err(line_no, line, f"a {what} needs WHEN <condition>",
                   'e.g. "WHEN price_change_bps <= -200" or "WHEN regime == trending_up AND gas_gwei < 30".')
    return [_condition(c, line_no, line) for c in _split_and(m["cond"])]


def _completion_line(body: str, line_no: int, line: str) -> CompletionLine:
    if body.upper().startswith("WHEN"):
        return CompletionLine(line=line_no, text=body, kind="when",
                              conditions=_conditions_line(body, line_no, line, "completion"))
    if m := _AFTER.match(body):
        n = int(m["n"])
        if n <= 0:
            raise _err(line_no, line, f"after {n}: the count must be at least 1", _COMPLETION_FIX)
        return CompletionLine(line=line_no, text=body, kind="actions" if m["what"].lower().startswith("action")
                              else "ticks", count=n)
    if m := _AT.match(body):
        try:
            return CompletionLine(line=line_no, text=body, kind="at", at=parse_instant(m["when"]))
        except ScheduleError as e:
            raise _err(line_no, line, "bad completion time", str(e) + ".") from None
    raise _err(line_no, line, "unknown completion line", _COMPLETION_FIX)


def _bullet(line: str) -> str | None:
    s = line.strip()
    if s[:2] in ("- ", "* ", "+ "):
        return s[2:].strip()
    return None


_SECTIONS = ("rules", "constraints", "settings", "schedule", "trigger", "triggers", "completion")


def parse_strategy(text: str, source: str = "STRATEGY.md", strategy_id: str = "main") -> Strategy:
    """Parse STRATEGY.md (or a file under strategies/, named by `source`). Raises StrategyError naming the file,
    the line, the bad field and the fix."""
    try:
        return _parse(text, source, strategy_id)
    except StrategyError as e:
        raise StrategyError(str(e).replace("STRATEGY.md", source, 1)) from None


def _parse(text: str, source: str, strategy_id: str) -> Strategy:
    main = strategy_id == "main"
    strategy = Strategy(text=text, id=strategy_id, source=source)
    schedule = Schedule()
    has_schedule = False
    section = ""
    seen_rules = False
    in_comment = False
    for line_no, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if in_comment:
            in_comment = "-->" not in s
            continue
        if s.startswith("<!--"):
            in_comment = "-->" not in s
            continue
        if s.startswith("#"):
            heading = s.lstrip("#").strip()
            if s.startswith("# ") and not strategy.title:
                strategy.title = heading
            section = heading.lower() if s.startswith("## ") else section if s.startswith("###") else ""
            seen_rules = seen_rules or section == "rules"
            if main and section in ("schedule", "trigger", "triggers", "completion"):
                raise _err(line_no, line, f"STRATEGY.md is always active and cannot have a ## {heading} section",
                           "Put a scheduled strategy in its own file under strategies/ (e.g. strategies/dca.md).")
            continue
        if not s or section not in _SECTIONS:
            continue
        body = _bullet(line)
        if body is None:
            if re.match(r"^(WHEN|MUST|SHOULD|MAY)\b", s, re.I):
                raise _err(line_no, line, "rules and constraints must be bullets", 'Start the line with "- ".')
            continue  # prose inside the section
        if section == "settings":
            m = _SETTING.match(body)
            if not m or m["key"].lower() not in ("collateral", "debt"):
                raise _err(line_no, line, "unknown setting", "Settings: `- collateral: WETH`, `- debt: USDC`.")
            setattr(strategy, f"{m['key'].lower()}_token", _token(m["value"], line_no, line))
        elif section == "rules":
            strategy.rules.append(_rule(body, line_no, line, strategy, source))
        elif section == "schedule":
            _schedule_line(body, line_no, line, schedule)
            has_schedule = True
        elif section in ("trigger", "triggers"):
            strategy.triggers.append(Trigger(line=line_no, text=body,
                                             conditions=_conditions_line(body, line_no, line, "trigger")))
        elif section == "completion":
            strategy.completion.append(_completion_line(body, line_no, line))
        else:
            c = _constraint(body, line_no, line, source)
            if isinstance(c, MayLine):
                strategy.may.append(c)
            elif c.level == "should":
                strategy.should.append(c)
            else:
                strategy.constraints.append(c)
    if main and not seen_rules:
        raise StrategyError(
            'STRATEGY.md: no "## Rules" section. Add one with a bullet per rule, e.g. '
            '"- WHEN health_factor < 1.6 THEN repay 25% debt" (an empty section means: always hold).'
        )
    if main and strategy.may:
        first = strategy.may[0]
        raise _err(first.line, first.text, "STRATEGY.md is always active, so a MAY line there widens nothing",
                   "Put MAY lines in a strategy file under strategies/, whose activity they follow.")
    if has_schedule:
        if schedule.not_before and schedule.not_after and schedule.not_after <= schedule.not_before:
            raise StrategyError(f"{source}: ## Schedule `until` is not after `from`. Swap or fix the two times.")
        strategy.schedule = schedule
    if strategy.collateral_token == strategy.debt_token:
        raise StrategyError("STRATEGY.md: collateral and debt are the same token. Set different tokens under ## Settings.")
    return strategy


# ---- evaluating rules (pure: the offline deliberator and System 1's rule preview share it) ------------

Metrics = dict[str, float | str | None]
_OPS: dict[str, Callable[[float | str, float | str], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}


def metrics_from(observation: Observation, last_price: float | None) -> Metrics:
    """The values rules can test (names as in METRICS) from an observation and the previous tick's price;
    None where not available."""
    snap = observation.snapshot
    price = snap.pool.price
    lending = [p for p in snap.positions if p.kind == "lending"]
    m: Metrics = {
        "health_factor": observation.min_health_factor(),
        "price_change_bps": (price - last_price) / last_price * 10_000.0 if last_price and last_price > 0 else None,
        "price": price,
        "oracle_price": snap.oracle_price,
        "pool_oracle_gap_bps": (price - snap.oracle_price) / snap.oracle_price * 10_000.0
        if snap.oracle_price > 0 else None,
        "gas_gwei": snap.gas_price_gwei,
        "regime": observation.regime.value,
        "debt": sum(p.debt for p in lending),
        "collateral": sum(p.collateral for p in lending),
    }
    balances = {k.upper(): v for k, v in snap.balances.items()}
    for tok in TOKENS:
        m[f"balance.{tok}"] = balances.get(tok, 0.0)
    return m


def fmt_metric(v: float | str | None) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:.2f}"


def evaluate_condition(cond: Condition, metrics: Metrics,
                       steer_texts: list[tuple[str, str]]) -> tuple[bool, str, list[str]]:
    """(holds, evidence, steer ids that matched). A metric that is not available never holds."""
    if cond.kind == "steer":
        needle = (cond.text or "").lower()
        ids = [sid for sid, msg in steer_texts if needle in msg.lower()]
        return bool(ids), (f'steer {", ".join(ids)} contains "{cond.text}"' if ids else ""), ids
    value = metrics.get(cond.metric or "")
    if value is None:
        return False, "", []
    if cond.op is None or cond.value is None:  # the parser gives every metric condition both
        raise ValueError(f"condition on {cond.metric} has no comparison or no value: {cond}")
    holds = bool(_OPS[cond.op](value, cond.value))
    return holds, f"{cond.metric} {fmt_metric(value)} {cond.op} {fmt_metric(cond.value)}", []


def rule_fires(rule: Rule, metrics: Metrics,
               steer_texts: list[tuple[str, str]]) -> tuple[bool, list[str], list[str]]:
    """(every condition holds, the evidence of each, steer ids matched), conditions read left to right."""
    evidence: list[str] = []
    matched: list[str] = []
    for cond in rule.conditions:
        holds, ev, ids = evaluate_condition(cond, metrics, steer_texts)
        if not holds:
            return False, evidence, []
        evidence.append(ev)
        matched.extend(ids)
    return True, evidence, matched


def readable_without_steer(rule: Rule) -> bool:
    """A rule whose every condition reads the market or the account (no steer text): System 1 can preview it."""
    return all(c.kind == "metric" for c in rule.conditions)


_CURATOR_NOTE = re.compile(r"\s*_\(confidence [^)]*\)_\s*$")
_ENTRY_ID = re.compile(r"\bh-[0-9a-f]{16}\b")  # a heuristic's id (golem/grimoire/playbook/heuristics.py heuristic_id)


def rules_in(text: str, source: str, strategy: Strategy) -> list[Rule]:
    """Rules in free text (e.g. PLAYBOOK.md heuristics): every bullet starting with WHEN that parses.
    Lines that do not parse are skipped — the playbook is prose first."""
    rules = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        body = _bullet(line)
        if body is None or not re.match(r"^WHEN\b", body, re.I):
            continue
        # the Curator's note after a rule: "… THEN repay 25% debt _(confidence 0.90, 5 episodes, h-…)_"
        note = _CURATOR_NOTE.search(body)
        entry = _ENTRY_ID.search(note.group(0)) if note else None
        if note:
            body = body[:note.start()].rstrip()
        try:
            rule = _rule(body, line_no, line, strategy, source)
        except StrategyError:
            continue
        rules.append(rule.model_copy(update={"entry_id": entry.group(0)}) if entry else rule)
    return rules


def load_strategy(path: str | Path) -> Strategy:
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise StrategyError(f"{p}: not found. Copy examples/golem-home/STRATEGY.md next to golem.toml.") from None
    try:
        return parse_strategy(text)
    except StrategyError as e:
        raise StrategyError(str(e).replace("STRATEGY.md", str(p), 1)) from None
