"""A scheduled strategy on real Temporal + Anvil, through the backtest (its replay clock drives the schedule): a file
under strategies/ that waits for its window, starts in it, acts once by its own rule and completes; a malformed file
beside it is recorded on every tick and stops nothing (docs/design/strategies.md)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from golem.backtest.path import load_path
from golem.events.store import EventStore
from golem.layout import DataLayout
from golem.life.cycle_store import CycleStore
from infra.backtest import BacktestOptions, VariantRun, _backtest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
HOME = REPO / "examples" / "golem-home"
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z; one row a minute
ROWS = 24
OPEN_ROW, CLOSE_ROW = 8, 16  # the window 00:08-00:16 UTC

MORNING = """# Strategy: a little WETH in the morning window
## Schedule
- window: 00:08-00:16
## Completion
- after 1 action
## Rules
- WHEN price > 0 THEN swap 2% USDC to WETH
## Constraints
- SHOULD NOT swap more than 1% USDC
"""


def _csv(path: Path) -> Path:
    rows = ["tick,timestamp,pool_price,oracle_price,gas_gwei,volume_usd,regime"]
    rows += [f"{i},{T0 + 60 * i},2000.0000,2000.0000,1.2,5000,calm" for i in range(ROWS)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _home(tmp: Path) -> Path:
    home = tmp / "home"
    shutil.copytree(HOME, home)
    (home / "strategies").mkdir()
    (home / "strategies" / "morning.md").write_text(MORNING)
    (home / "strategies" / "broken.md").write_text("# Broken\n## Schedule\n- cron: 0 25 * * *\n")
    return home


def _run(csv: Path, home: Path, out: Path) -> VariantRun:
    opts = BacktestOptions(path=csv, home=home, out=out, progress=False)
    [run] = asyncio.run(_backtest(opts, load_path(csv)))
    return run


def test_a_scheduled_strategy_starts_acts_in_its_window_and_completes(tmp_path):
    run = _run(_csv(tmp_path / "calm.csv"), _home(tmp_path), tmp_path / "out")
    assert run.out_dir is not None
    store = CycleStore(run.out_dir / "data")
    records = {r["tick"]: store.load(r["tick"]) for r in store.recent(1000)}
    marks = {m.tick: m for m in run.marks if m.tick is not None}
    assert records and all(r.strategies is not None for r in records.values())

    def status(rec):
        [s] = [r for r in rec.strategies.runs if r.id == "morning"]
        return s

    # every tick carries the broken file's error, and the golem kept ticking
    assert all(any("strategies/broken.md line 3" in e and "hour 25" in e for e in r.strategies.errors)
               for r in records.values())
    before = [t for t, r in records.items() if r.timestamp < "2026-01-01T00:08"]
    assert before and all(status(records[t]).status == "waiting" for t in before)
    # the tick at the window's opening starts it, its rule swaps USDC → WETH, and it completes on that tick
    [started] = [t for t, r in records.items() if any(e.kind == "started" for e in r.strategies.events)]
    rec = records[started]
    assert rec.timestamp.startswith("2026-01-01T00:08"), rec.timestamp
    assert [e.kind for e in rec.strategies.events] == ["started", "completed"]
    done = status(rec)
    assert done.status == "complete" and done.completed_tick == started and done.actions == 1
    assert "1 action(s) executed" in done.completion
    assert rec.tier.value in ("T1", "T2") and rec.wake is not None
    assert any(h.rule == "strategies/morning.md:7" for h in rec.wake.rule_hits), rec.wake.rule_hits
    assert rec.deliberation is not None
    assert [r.rule for r in rec.deliberation.rules_applied] == ["strategies/morning.md:7"]
    [swap] = [a for a in rec.actions if a.tool_name == "swap"]
    assert swap.status.value == "executed"
    # the SHOULD line sized the 2 % down to 1 % and says so
    assert swap.should and "SHOULD (strategies/morning.md line 9" in swap.should[0]
    assert swap.clipped and "SHOULD" in swap.clipped
    assert [a.tool for a in marks[started].actions] == ["swap"]
    # complete stays complete: no other tick swapped, inside the window or after it
    later = [t for t in records if t > started]
    assert later and all(status(records[t]).status == "complete" for t in later)
    assert not any(a.tool == "swap" for t, m in marks.items() if t != started for a in m.actions)
    # the start and the completion are events of the fabric
    events = EventStore(DataLayout.of(run.out_dir / "data")).read(kinds=["strategies"])
    kinds = [(e.kind, e.payload.get("strategy")) for e in events if e.kind != "strategies.error"]
    assert kinds == [("strategies.started", "morning"), ("strategies.completed", "morning")], kinds
    assert json.dumps(done.model_dump(mode="json"))  # the record field is plain data
