"""Several strategies: the schedule grammar (cron, windows, bounds), the file grammar (levels, schedule, trigger,
completion) with its errors, the bundle, and how a tick moves a strategy between waiting, active and complete."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.inference.schedule import ScheduleError, parse_cron, parse_duration, parse_window, Schedule
from golem.inference.strategies import (
    StrategySet,
    advance,
    after_actions,
    bundle,
    credits,
    parse_set,
    read_bundle,
    unbundle,
)
from golem.inference.strategy import StrategyError, parse_strategy
from golem.models.tick import ProposedAction

REPO = Path(__file__).resolve().parents[2]
MAIN = (REPO / "examples" / "golem-home" / "STRATEGY.md").read_text()


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


# ---- cron -------------------------------------------------------------------------------------------------------

def test_cron_fields_steps_ranges_lists_and_names():
    c = parse_cron("*/15 9-17 * * mon-fri")
    assert c.minutes == frozenset({0, 15, 30, 45}) and c.hours == frozenset(range(9, 18))
    assert c.weekdays == frozenset({1, 2, 3, 4, 5})
    assert c.matches(utc(2026, 1, 5, 9, 30))  # a Monday
    assert not c.matches(utc(2026, 1, 4, 9, 30))  # a Sunday
    assert not c.matches(utc(2026, 1, 5, 9, 31))
    assert parse_cron("0 0 * * 7").weekdays == frozenset({0})  # 7 is Sunday too
    assert parse_cron("5,10 0 1 jan *").months == frozenset({1})


def test_cron_day_of_month_or_day_of_week_when_both_are_restricted():
    c = parse_cron("0 12 13 * fri")  # the 13th, or any Friday
    assert c.matches(utc(2026, 2, 13, 12, 0)) and c.matches(utc(2026, 2, 6, 12, 0))
    assert not c.matches(utc(2026, 2, 7, 12, 0))


@pytest.mark.parametrize("text,fragment", [
    ("0 14 * *", "has 4 fields, not 5"),
    ("61 * * * *", "minute 61 is out of range 0-59"),
    ("0 25 * * *", "hour 25 is out of range"),
    ("0 0 * * funday", "not a number or a name"),
    ("*/0 * * * *", "step '0' must be a positive"),
    ("0 5-2 * * *", "runs backwards"),
])
def test_bad_cron_says_what_to_fix(text, fragment):
    with pytest.raises(ScheduleError, match=fragment):
        parse_cron(text)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 59), st.integers(0, 23), st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2027, 1, 1)))
def test_last_fire_is_the_latest_matching_minute(minute, hour, t):
    t = t.replace(tzinfo=timezone.utc)
    c = parse_cron(f"{minute} {hour} * * *")
    fired = c.last_fire(t, timedelta(days=2))
    assert fired is not None and fired <= t and c.matches(fired)
    # nothing matches between it and t (brute force, a minute at a time)
    cur = fired + timedelta(minutes=1)
    while cur <= t:
        assert not c.matches(cur)
        cur += timedelta(minutes=1)


def test_last_fire_looks_back_no_further_than_asked():
    c = parse_cron("0 14 * * mon")
    assert c.last_fire(utc(2026, 1, 7, 12, 0), timedelta(hours=2)) is None  # Wednesday
    assert c.last_fire(utc(2026, 1, 7, 12, 0), timedelta(days=3)) == utc(2026, 1, 5, 14, 0)


# ---- windows, durations, schedules --------------------------------------------------------------------------------

def test_windows_plain_across_midnight_and_by_day():
    w = parse_window("14:00-16:00")
    assert w.opened_at(utc(2026, 1, 1, 15, 0)) == utc(2026, 1, 1, 14, 0)
    assert w.opened_at(utc(2026, 1, 1, 16, 0)) is None  # the end is open
    night = parse_window("22:00-02:00")
    assert night.opened_at(utc(2026, 1, 2, 1, 0)) == utc(2026, 1, 1, 22, 0)
    assert night.opened_at(utc(2026, 1, 2, 3, 0)) is None
    weekdays = parse_window("mon-fri 09:00-17:00")
    assert weekdays.opened_at(utc(2026, 1, 5, 10, 0)) is not None  # Monday
    assert weekdays.opened_at(utc(2026, 1, 4, 10, 0)) is None  # Sunday
    assert parse_window("00:00-24:00").opened_at(utc(2026, 1, 1, 23, 59)) == utc(2026, 1, 1)


@pytest.mark.parametrize("text,fragment", [("14:00", "HH:MM-HH:MM"), ("25:00-26:00", "not a time of day"),
                                           ("10:00-10:00", "is empty")])
def test_bad_window_says_what_to_fix(text, fragment):
    with pytest.raises(ScheduleError, match=fragment):
        parse_window(text)


def test_durations():
    assert parse_duration("90s") == timedelta(seconds=90) and parse_duration("2h") == timedelta(hours=2)
    with pytest.raises(ScheduleError, match="a number and a unit"):
        parse_duration("2 hours")


def test_a_schedule_needs_every_part_to_agree():
    s = Schedule(crons=[parse_cron("0 14 * * *")], duration=timedelta(minutes=30),
                 windows=[parse_window("mon-fri 00:00-24:00")], not_before=utc(2026, 1, 1))
    assert s.opening(utc(2026, 1, 5, 14, 10)) == utc(2026, 1, 5, 14, 0)  # Monday, 10 min into the run
    assert s.opening(utc(2026, 1, 5, 14, 30)) is None  # the run lasts 30 minutes
    assert s.opening(utc(2026, 1, 4, 14, 10)) is None  # Sunday: outside the window
    assert s.opening(utc(2025, 12, 31, 14, 10)) is None  # before `from`


# ---- the file grammar ---------------------------------------------------------------------------------------------

DCA = """# Strategy: weekly DCA
## Schedule
- cron: 0 14 * * mon
- duration: 2h
## Trigger
- WHEN price_change_bps <= -100
## Completion
- after 3 actions
- WHEN balance.WETH >= 30
- at 2026-03-01T00:00Z
## Rules
- WHEN price > 0 THEN swap 5% USDC to WETH
## Constraints
- MUST NOT borrow
- SHOULD NOT swap more than 2% USDC
- SHOULD keep balance.USDC >= 1000
- SHOULD NOT withdraw
- MAY supply
"""


def test_a_strategy_file_with_every_section():
    s = parse_strategy(DCA, source="strategies/dca.md", strategy_id="dca")
    assert s.id == "dca" and s.schedule is not None and s.schedule.duration == timedelta(hours=2)
    assert [c.text for c in s.schedule.crons] == ["0 14 * * mon"]
    assert [str(c) for t in s.triggers for c in t.conditions] == ["price_change_bps <= -100"]
    assert [c.kind for c in s.completion] == ["actions", "when", "at"]
    assert s.completion[0].count == 3 and s.completion[2].at == utc(2026, 3, 1)
    assert [r.label for r in s.rules] == ["strategies/dca.md:12"]
    assert [(c.level, c.kind) for c in s.constraints] == [("must", "forbid")]
    assert [(c.level, c.kind, c.source) for c in s.should] == [("should", "cap", "strategies/dca.md"),
                                                               ("should", "keep", "strategies/dca.md"),
                                                               ("should", "forbid", "strategies/dca.md")]
    assert [m.tool for m in s.may] == ["supply"]


@pytest.mark.parametrize("line,fragment", [
    ("- COULD swap", "unknown level 'COULD'"),
    ("- MAY teleport", "unknown tool 'teleport'"),
    ("- SHOULD NOT swap more than lots WETH", "not a number"),
])
def test_bad_levels_name_the_file_and_line(line, fragment):
    text = f"# S\n## Rules\n## Constraints\n{line}\n"
    with pytest.raises(StrategyError, match=fragment) as err:
        parse_strategy(text, source="strategies/x.md", strategy_id="x")
    assert str(err.value).startswith("strategies/x.md line 4:")


@pytest.mark.parametrize("line,fragment", [
    ("- every: 5m", "unknown schedule field 'every'"),
    ("- cron: 0 14 * *", "has 4 fields, not 5"),
    ("- window: 9-17", "HH:MM-HH:MM"),
    ("- from: yesterday", "not a date and time"),
])
def test_bad_schedule_fields_say_what_to_write(line, fragment):
    with pytest.raises(StrategyError, match=fragment):
        parse_strategy(f"# S\n## Schedule\n{line}\n", source="strategies/x.md", strategy_id="x")


def test_bad_completion_and_trigger_lines():
    with pytest.raises(StrategyError, match="unknown completion line"):
        parse_strategy("## Completion\n- someday\n", source="strategies/x.md", strategy_id="x")
    with pytest.raises(StrategyError, match="a trigger needs WHEN"):
        parse_strategy("## Trigger\n- price_change_bps < 0\n", source="strategies/x.md", strategy_id="x")


def test_strategy_md_stays_always_active():
    assert parse_strategy(MAIN).schedule is None  # today's file parses as before
    with pytest.raises(StrategyError, match="cannot have a ## Schedule section"):
        parse_strategy(MAIN + "\n## Schedule\n- window: 14:00-16:00\n")
    with pytest.raises(StrategyError, match="widens nothing"):
        parse_strategy(MAIN + "\n- MAY supply\n")


# ---- the bundle and the set -------------------------------------------------------------------------------------

def test_bundle_round_trips_and_is_strategy_md_alone_without_other_files(tmp_path):
    assert bundle(MAIN, []) == MAIN  # existing config versions keep their hashes
    text = bundle(MAIN, [("strategies/b.md", "# B\n"), ("strategies/a.md", "# A\n\n")])
    assert unbundle(text) == (MAIN, [("strategies/a.md", "# A\n\n"), ("strategies/b.md", "# B\n")])
    (tmp_path / "STRATEGY.md").write_text(MAIN)
    assert read_bundle(tmp_path) == MAIN
    (tmp_path / "strategies").mkdir()
    (tmp_path / "strategies" / "dca.md").write_text(DCA)
    assert unbundle(read_bundle(tmp_path))[1] == [("strategies/dca.md", DCA)]


def test_a_bad_file_is_an_error_beside_the_others():
    sset = parse_set(bundle(MAIN, [("strategies/dca.md", DCA), ("strategies/bad.md", "## Schedule\n- cron: nope\n"),
                                   ("strategies/Bad Name.md", "# x\n")]))
    assert sset.main is not None and [s.id for s in sset.others] == ["dca"]
    assert len(sset.errors) == 2 and sset.errors[0].startswith("strategies/Bad Name.md")
    assert sset.errors[1].startswith("strategies/bad.md line 2: bad cron")


def test_effective_joins_the_active_and_gates_may_tools():
    sset = parse_set(bundle(MAIN, [("strategies/dca.md", DCA)]))
    idle = sset.effective([])
    assert idle is not None and [r.source for r in idle.rules] == ["STRATEGY.md"] * len(sset.main.rules)
    assert "supply" in idle.may_gated and "strategies/dca.md line 18" in idle.may_gated["supply"]
    assert idle.should == [] and len(idle.constraints) == len(sset.main.constraints)
    on = sset.effective(["dca"])
    assert on is not None and on.rules[-1].source == "strategies/dca.md" and on.may_gated == {}
    assert len(on.should) == 3 and on.constraints[-1].text == "MUST NOT borrow"
    # the LLM reads STRATEGY.md and the active strategy's file
    assert on.text.startswith(MAIN) and "Active strategy `dca` (strategies/dca.md)" in on.text and DCA in on.text
    assert idle.text == MAIN
    assert StrategySet(main=None).effective(["dca"]) is None


# ---- waiting → active → complete ---------------------------------------------------------------------------------

WINDOW = """# S
## Schedule
- window: 00:10-00:20
## Completion
- after 1 action
## Rules
- WHEN price > 0 THEN swap 1% USDC to WETH
"""


def _set(*files: tuple[str, str]) -> StrategySet:
    return parse_set(bundle(MAIN, list(files)))


def test_a_window_starts_acts_and_completes():
    sset = _set(("strategies/w.md", WINDOW))
    m = {"price": 2000.0}
    before = advance(sset, [], 5, utc(2026, 1, 1, 0, 5), m)
    assert before.runs[0].status == "waiting" and before.events == []
    start = advance(sset, before.runs, 10, utc(2026, 1, 1, 0, 10), m)
    assert start.active == ["w"] and start.events[0].kind == "started"
    assert start.runs[0].started_at == "2026-01-01T00:10:00+00:00"
    # reflect: one rule of the file executed → complete on that very tick (STRATEGY.md's rule is nobody's)
    acts = [ProposedAction(action_index=0, tool="swap"), ProposedAction(action_index=1, tool="repay")]
    credited = credits(acts, {0: "strategies/w.md:7", 1: "STRATEGY.md:20"}, "", sset, start.active)
    assert [(c.strategy, c.why) for c in credited] == [("w", "its rule strategies/w.md:7")]
    done = after_actions(start, sset, credited, 10, utc(2026, 1, 1, 0, 10))
    assert done.credited == credited
    run = done.runs[0]
    assert run.status == "complete" and run.completed_tick == 10 and run.actions == 1
    assert "1 action(s) executed" in run.completion and done.events[-1].kind == "completed"
    # complete stays complete, even when the window opens again the next day
    assert advance(sset, done.runs, 2000, utc(2026, 1, 2, 0, 15), m).runs[0].status == "complete"


def test_a_run_ends_with_its_window_and_starts_again_in_the_next():
    text = WINDOW.replace("- after 1 action", "- after 5 actions")
    sset = _set(("strategies/w.md", text))
    m = {"price": 2000.0}
    a = advance(sset, [], 1, utc(2026, 1, 1, 0, 15), m)
    b = advance(sset, a.runs, 2, utc(2026, 1, 1, 0, 16), m)
    assert b.active == ["w"] and b.runs[0].ticks_active == 2 and b.events == []
    c = advance(sset, b.runs, 3, utc(2026, 1, 1, 0, 25), m)
    assert c.active == [] and [e.kind for e in c.events] == ["ended"]
    d = advance(sset, c.runs, 4, utc(2026, 1, 2, 0, 11), m)
    assert d.active == ["w"] and d.runs[0].run_key == "2026-01-02T00:10:00+00:00"


def test_a_trigger_holds_back_the_start_and_completion_conditions_and_expiry_end_it():
    text = """# T
## Trigger
- WHEN price_change_bps <= -100
## Completion
- WHEN balance.WETH >= 30
- at 2026-01-03T00:00Z
"""
    sset = _set(("strategies/t.md", text))
    calm = advance(sset, [], 1, utc(2026, 1, 1), {"price_change_bps": -20.0})
    assert calm.active == []
    dip = advance(sset, calm.runs, 2, utc(2026, 1, 1, 0, 1), {"price_change_bps": -150.0})
    assert dip.active == ["t"] and "trigger line 3: price_change_bps -150 <= -100" in dip.events[0].why
    full = advance(sset, dip.runs, 3, utc(2026, 1, 1, 0, 2), {"balance.WETH": 31.0})
    assert full.runs[0].status == "complete" and "balance.WETH 31 >= 30" in full.runs[0].completion
    never = advance(sset, [], 9, utc(2026, 1, 3), {"price_change_bps": 0.0})
    assert never.runs[0].status == "complete" and never.runs[0].completion.startswith("expired at")


def test_errors_ride_on_the_activity():
    sset = _set(("strategies/bad.md", "## Completion\n- someday\n"), ("strategies/w.md", WINDOW))
    act = advance(sset, [], 1, utc(2026, 1, 1, 0, 12), {"price": 1.0})
    assert act.active == ["w"] and act.errors and act.errors[0].startswith("strategies/bad.md line 2")


# ---- golem strategy-check over every file ---------------------------------------------------------------------------

def _check(home: Path, tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", "--home", str(home), "--data", str(tmp), "strategy-check"],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_strategy_check_validates_every_file_and_says_what_to_fix(tmp_path):
    home = tmp_path / "home"
    (home / "strategies").mkdir(parents=True)
    (home / "STRATEGY.md").write_text(MAIN)
    (home / "golem.toml").write_text('[golem]\nid = "sc"\n[chain]\nrpc_url = "http://127.0.0.1:1"\n')
    (home / "strategies" / "dca.md").write_text(DCA)
    ok = _check(home, tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "STRATEGY.md: ok" in ok.stdout and "strategies/dca.md: ok" in ok.stdout, ok.stdout
    (home / "strategies" / "cron.md").write_text("# C\n## Schedule\n- cron: 0 14 * *\n")
    (home / "strategies" / "level.md").write_text("# L\n## Constraints\n- COULD swap\n")
    (home / "strategies" / "field.md").write_text("# F\n## Schedule\n- every: 5m\n")
    (home / "strategies" / "borrow.md").write_text("# B\n## Constraints\n- MAY borrow\n")  # STRATEGY.md: MUST NOT borrow
    bad = _check(home, tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stdout + bad.stderr
    out = bad.stdout
    assert "strategies/cron.md: STRATEGY_UNVIABLE" in out and "has 4 fields, not 5: write minute hour" in out
    assert "strategies/level.md line 3" in out and "unknown level 'COULD'" in out and "Levels: MUST" in out
    assert "unknown schedule field 'every'" in out and "Schedule fields: `cron:" in out
    assert "`MAY borrow` can never happen: STRATEGY.md line" in out and "MUST NOT borrow" in out
    assert "strategies/dca.md: ok" in out  # the good file is still judged on its own
