"""A golem's several strategies: STRATEGY.md (always active) and the files under strategies/ (scheduled, triggered,
completed), which run beside it; how one tick moves each between waiting, active and complete; and the tick's
effective strategy (STRATEGY.md joined by the active ones), which every later step reads as one Strategy.
Pure: time is the tick's clock, passed in. docs/design/strategies.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from dataclasses import dataclass, field
from datetime import datetime, timezone

from golem.inference.strategy import (
    Condition,
    Metrics,
    Strategy,
    StrategyError,
    evaluate_condition,
    parse_strategy,
)
from golem.models.strategy_runs import StrategyActivity, StrategyCredit, StrategyEvent, StrategyRun
from golem.models.tick import ProposedAction

STRATEGIES_DIR = "strategies"  # beside STRATEGY.md in the golem home
# How the files travel as one text in a config version: STRATEGY.md's text, then each other file after a marker
# line. With no other file the bundle is STRATEGY.md's text exactly, so existing versions keep their hashes.
_MARKER = "<!-- golem:strategy-file {path} -->"
_MARKER_RE = re.compile(r"^<!-- golem:strategy-file (?P<path>.+) -->$", re.M)
_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def bundle(main_text: str, others: list[tuple[str, str]]) -> str:
    """STRATEGY.md's text and the (relative path, text) of every other strategy file, as one text."""
    parts = [main_text]
    for path, text in sorted(others):
        parts.append("\n" + _MARKER.format(path=path) + "\n" + text)
    return "".join(parts)


def unbundle(text: str) -> tuple[str, list[tuple[str, str]]]:
    """The inverse of bundle: (STRATEGY.md's text, [(path, text), ...])."""
    marks = list(_MARKER_RE.finditer(text))
    if not marks:
        return text, []
    main = text[:marks[0].start()]
    main = main[:-1] if main.endswith("\n") else main
    others = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        body = text[m.end() + 1:end]
        others.append((m["path"], body[:-1] if i + 1 < len(marks) and body.endswith("\n") else body))
    return main, others


def strategy_id(path: str) -> str:
    """A file's strategy id: its name without `.md` (strategies/eth-dca.md → eth-dca)."""
    name = path.rsplit("/", 1)[-1]
    return name[:-3] if name.endswith(".md") else name


@dataclass
class StrategySet:
    """Every strategy of one config version: STRATEGY.md parsed (or its error), the others that parse, and one error
    per file that does not (that file is left out; the rest keep running)."""

    main: Strategy | None
    main_error: str = ""
    others: list[Strategy] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def effective(self, active: list[str]) -> Strategy | None:
        """STRATEGY.md joined by the active strategies: their rules after its own, their MUST and SHOULD lines beside
        its own; a tool only a MAY line names is gated (`may_gated`) unless a strategy naming it is active."""
        if self.main is None:
            return None
        on = [s for s in self.others if s.id in active]
        if not self.others:
            return self.main
        gated: dict[str, str] = {}
        allowed = {m.tool for s in on for m in s.may}
        for s in self.others:
            for m in s.may:
                if m.tool not in allowed and m.tool not in gated:
                    gated[m.tool] = (f"{m.tool} is allowed only while strategy {s.id} is active "
                                     f"(MAY, {m.source} line {m.line}); it is not")
        return self.main.model_copy(update={
            "rules": [*self.main.rules, *(r for s in on for r in s.rules)],
            "constraints": [*self.main.constraints, *(c for s in on for c in s.constraints)],
            "should": [*self.main.should, *(c for s in on for c in s.should)],
            "may": [m for s in on for m in s.may],
            "may_gated": gated,
            "active_files": {s.source: s.text for s in on},
            # what the LLM reads: STRATEGY.md, then each active strategy's own file
            "text": self.main.text + "".join(f"\n\n---\nActive strategy `{s.id}` ({s.source}):\n\n{s.text}"
                                              for s in on),
        })


def parse_set(text: str) -> StrategySet:
    """A config version's strategy bundle, parsed file by file."""
    main_text, others = unbundle(text)
    out = StrategySet(main=None)
    try:
        out.main = parse_strategy(main_text)
    except StrategyError as e:
        out.main_error = str(e)
    seen: set[str] = set()
    for path, body in others:
        sid = strategy_id(path)
        if not _ID.match(sid) or sid == "main":
            out.errors.append(f"{path}: the file name {sid!r} is not a usable strategy id; rename the file to "
                              "lower-case letters, digits, - and _ (and not main.md)")
            continue
        if sid in seen:
            out.errors.append(f"{path}: another strategy file is already named {sid!r}; rename one")
            continue
        seen.add(sid)
        try:
            out.others.append(parse_strategy(body, source=path, strategy_id=sid))
        except StrategyError as e:
            out.errors.append(str(e))
    return out


# ---- one tick: waiting → active → complete ----------------------------------------------------------------------


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat()


def _holds(conditions: list[Condition], metrics: Metrics) -> tuple[bool, list[str]]:
    evidence: list[str] = []
    for cond in conditions:
        ok, ev, _ = evaluate_condition(cond, metrics, [])
        if not ok:
            return False, []
        evidence.append(ev)
    return True, evidence


def _completion(s: Strategy, run: StrategyRun, now: datetime, metrics: Metrics | None) -> str:
    """Why the strategy is complete now ("" when it is not): the first completion line that holds."""
    for c in s.completion:
        if c.kind == "at" and c.at is not None and now >= c.at:
            return f"expired at {_iso(c.at)} (line {c.line}: `{c.text}`)"
        if c.kind == "actions" and run.actions >= c.count:
            return f"{run.actions} action(s) executed (line {c.line}: `{c.text}`)"
        if c.kind == "ticks" and run.ticks_active >= c.count:
            return f"active for {run.ticks_active} tick(s) (line {c.line}: `{c.text}`)"
        if c.kind == "when" and metrics is not None:
            ok, ev = _holds(c.conditions, metrics)
            if ok:
                return f"{'; '.join(ev)} (line {c.line}: `{c.text}`)"
    return ""


def _complete(run: StrategyRun, tick: int, now: datetime, why: str) -> StrategyRun:
    return run.model_copy(update={"status": "complete", "completed_tick": tick, "completed_at": _iso(now),
                                  "completion": why})


def advance(strategies: StrategySet, runs: list[StrategyRun], tick: int, now: datetime,
            metrics: Metrics) -> StrategyActivity:
    """The start of a tick (observe): each strategy's state from the last tick's, the tick's clock and the market.
    A complete strategy stays complete; an active one completes (a completion line holds) or ends (out of season:
    it waits for the next opening); a waiting one starts when in season and a trigger holds (or it has none)."""
    by_id = {r.id: r for r in runs}
    out = StrategyActivity(errors=list(strategies.errors))
    for s in strategies.others:
        run = by_id.get(s.id) or StrategyRun(id=s.id)
        if run.status == "complete":
            out.runs.append(run)
            continue
        opening = s.schedule.opening(now) if s.schedule is not None else None
        in_season = s.schedule is None or opening is not None
        key = _iso(opening) if opening is not None else ""
        if run.status == "active":
            why = _completion(s, run, now, metrics)
            if why:
                run = _complete(run, tick, now, why)
                out.events.append(StrategyEvent(strategy=s.id, kind="completed", why=why))
            elif not in_season or key != run.run_key:
                run = run.model_copy(update={"status": "waiting", "ticks_active": 0})
                out.events.append(StrategyEvent(strategy=s.id, kind="ended", why="its schedule's window closed"))
            else:
                run = run.model_copy(update={"ticks_active": run.ticks_active + 1})
                out.runs.append(run)
                continue
        if run.status == "waiting":
            expired = _completion(s, run, now, None) if any(c.kind == "at" for c in s.completion) else ""
            if expired:
                run = _complete(run, tick, now, expired)
                out.events.append(StrategyEvent(strategy=s.id, kind="completed", why=expired))
            elif in_season and key != run.run_key or (in_season and not run.run_key and run.started_tick is None):
                fired = [(t, ev) for t in s.triggers if (ev := _holds(t.conditions, metrics))[0]]
                if not s.triggers or fired:
                    why = ("in season" + (f" since {key}" if s.schedule is not None else "")) if not s.triggers else \
                        f"trigger line {fired[0][0].line}: {'; '.join(fired[0][1][1])}"
                    run = run.model_copy(update={"status": "active", "started_tick": tick, "started_at": _iso(now),
                                                 "run_key": key, "ticks_active": 1})
                    out.events.append(StrategyEvent(strategy=s.id, kind="started", why=why))
        out.runs.append(run)
    return out


def credits(actions: list[ProposedAction], rules: dict[int, str], named: str, strategies: StrategySet,
            active: list[str]) -> list[StrategyCredit]:
    """Which active strategy each of a decision's own actions serves (its `after N actions` counts it), first match:
    the file of the rule that made it; a tool only one active strategy's MAY line offers (it could not have been
    proposed otherwise); the strategy the model named in decide; the only active strategy when the model named
    none. An action of STRATEGY.md's or PLAYBOOK.md's rules, one the model said serves STRATEGY.md, and one the
    owner approved are no strategy's. `rules`: action index → rule label (RuleApplied)."""
    on = [s for s in strategies.others if s.id in active]
    if not on:
        return []
    by_source = {s.source: s.id for s in on}
    out: list[StrategyCredit] = []
    for a in actions:
        if a.approval_id:
            continue
        rule = rules.get(a.action_index)
        mays = [s.id for s in on if any(m.tool == a.tool for m in s.may)]
        if rule is not None:
            sid = by_source.get(rule.rsplit(":", 1)[0])
            why = f"its rule {rule}"
        elif len(mays) == 1:
            sid, why = mays[0], f"only strategy {mays[0]}'s MAY line offers {a.tool}"
        elif named in by_source.values():
            sid, why = named, "the decision named it (decide.strategy)"
        elif not named and len(on) == 1:
            sid, why = on[0].id, "the only active strategy (the decision named none)"
        else:
            sid = None
        if sid is not None:
            out.append(StrategyCredit(action_index=a.action_index, tool=a.tool, strategy=sid, why=why))
    return out


def after_actions(activity: StrategyActivity, strategies: StrategySet, credited: list[StrategyCredit], tick: int,
                  now: datetime) -> StrategyActivity:
    """The end of a tick (reflect): the executed actions credited to an active strategy (`credits`) are counted on
    it, and one whose `after <n> actions` or `after <n> ticks` line now holds completes on this tick."""
    active = {r.id for r in activity.runs if r.status == "active"}
    counted = [c for c in credited if c.strategy in active]
    counts: dict[str, int] = {}
    for c in counted:
        counts[c.strategy] = counts.get(c.strategy, 0) + 1
    runs, events = [], list(activity.events)
    for run in activity.runs:
        s = next((x for x in strategies.others if x.id == run.id), None)
        if run.status == "active" and s is not None:
            run = run.model_copy(update={"actions": run.actions + counts.get(run.id, 0)})
            why = _completion(s, run, now, None)
            if why:
                run = _complete(run, tick, now, why)
                events.append(StrategyEvent(strategy=run.id, kind="completed", why=why))
        runs.append(run)
    return activity.model_copy(update={"runs": runs, "events": events, "credited": counted})


def read_bundle(home: str | Path) -> str:
    """The strategy files of a golem home as one text: STRATEGY.md ("" when absent: the decide step reports it) and
    every `strategies/*.md`, sorted by name."""
    root = Path(home)
    main = root / "STRATEGY.md"
    folder = root / STRATEGIES_DIR
    others = [(f"{STRATEGIES_DIR}/{p.name}", p.read_text()) for p in sorted(folder.glob("*.md"))] \
        if folder.is_dir() else []
    return bundle(main.read_text() if main.exists() else "", others)
