"""[retention] on a real data directory: old records, outcome files and trace days go into daily
gzipped archives, nothing is lost (`golem show` reads an archived record back), recent files stay; the
console's one line per tick; the daily trace file."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time

from golem.life.cycle_store import CycleStore
from golem.life.retention import compact
from golem.models import Tier
from infra.stack import TickLines
from tests.integration.test_cycle_store import REPO, make_record
from workers.telemetry import DailyTraceFile

DAY = 86400.0


def _age(path, days: float) -> None:
    t = time.time() - days * DAY
    os.utime(path, (t, t))


def test_old_records_outcomes_and_trace_days_go_to_daily_archives(tmp_path):
    store = CycleStore(tmp_path)
    for tick in range(6):
        store.persist(make_record(tick, tier=Tier.T2 if tick == 2 else Tier.T0, acted=tick == 2, pnl=1.5))
    for tick in range(4):  # ticks 0-3 are 20 days old, 4-5 fresh
        _age(store.path_for(tick), 20)
    outcomes = tmp_path / "outcomes"
    outcomes.mkdir()
    (outcomes / "tick-000002.json").write_text(json.dumps({"verified": True, "tick": 2}))
    _age(outcomes / "tick-000002.json", 20)
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "2020-01-01.jsonl").write_text('{"name": "observe"}\n{"name": "gate"}\n')
    _age(traces / "2020-01-01.jsonl", 20)

    report = compact(tmp_path, 14, time.time(), index=store)

    assert (report.records_archived, report.outcomes_archived, report.trace_days_archived) == (4, 1, 1)
    assert sorted(p.name for p in store.dir.glob("cycle-*.json")) == ["cycle-000004.json", "cycle-000005.json"]
    assert not (outcomes / "tick-000002.json").exists()
    assert report.bytes_after < report.bytes_before  # compaction, not a copy
    # nothing lost: the index keeps every tick and an archived record reads back whole
    assert store.count() == 6
    rec = store.load(2)
    assert rec.tick == 2 and rec.outcome is not None and rec.outcome.pnl_impact == 1.5
    assert store.exists(2)
    day_archive = next((outcomes / "archive").glob("*.jsonl.gz"))
    line = json.loads(gzip.open(day_archive, "rt").read().splitlines()[0])
    assert line["file"] == "tick-000002.json" and line["outcome"]["verified"] is True
    assert gzip.open(traces / "2020-01-01.jsonl.gz", "rt").read().count("\n") == 2
    # `golem show` reads the archived record through the CLI, as an owner would
    out = subprocess.run([sys.executable, "-m", "cli", "--data", str(tmp_path), "show", "2"],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert '"tick": 2,' in out.stdout and '"pnl_impact": 1.5' in out.stdout
    # a second pass finds nothing more; appending to a day's archive keeps the earlier lines
    again = compact(tmp_path, 14, time.time(), index=store)
    assert again.records_archived == 0
    _age(store.path_for(4), 20)
    compact(tmp_path, 14, time.time(), index=store)
    assert store.load(4).tick == 4 and store.load(0).tick == 0


def test_console_prints_one_line_per_new_tick(tmp_path):
    store = CycleStore(tmp_path)
    store.persist(make_record(0))
    lines = TickLines(tmp_path)
    assert lines.new_lines() == []  # ticks recorded before start-up are not printed again
    store.persist(make_record(1))
    store.persist(make_record(2, tier=Tier.T2, acted=True))
    out = lines.new_lines()
    assert len(out) == 2 and out[0].startswith("tick      1  T0") and "swap executed" in out[1]
    assert lines.new_lines() == []


def test_trace_file_rolls_over_at_the_day(tmp_path):
    f = DailyTraceFile(tmp_path)
    f.write('{"span": 1}\n')
    f.flush()
    _age(tmp_path / "traces.jsonl", 2)
    f._fh.close()
    f._fh = None
    rolled = DailyTraceFile(tmp_path)  # a worker started on a later day moves yesterday's spans aside
    rolled.write('{"span": 2}\n')
    rolled.flush()
    days = list((tmp_path / "traces").glob("*.jsonl"))
    assert len(days) == 1 and days[0].read_text() == '{"span": 1}\n'
    assert (tmp_path / "traces.jsonl").read_text() == '{"span": 2}\n'
