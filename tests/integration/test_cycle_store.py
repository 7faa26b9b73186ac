"""DecisionCycleRecord files + the SQLite cycle_index on a real data directory."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from golem.life.cycle_store import INDEX_NAMES, CycleNotFoundError, CycleStore, index_row
from golem.models import (
    ActionRecord,
    ActionStatus,
    BehavioralPhase,
    ChainSnapshot,
    DecisionCycleRecord,
    DeliberationRecord,
    MarketRegime,
    Observation,
    OutcomeRecord,
    PlutchikLabel,
    PoolState,
    Tier,
)

REPO = Path(__file__).resolve().parents[2]


def make_record(tick: int, *, tier=Tier.T0, regime=MarketRegime.RANGE_BOUND, acted=False, pnl=None,
                phase=BehavioralPhase.THRIVING, blocked=False) -> DecisionCycleRecord:
    pool = PoolState(address="0x" + "22" * 20, token0="WETH", token1="USDC",
                     reserve0=100.0, reserve1=250_000.0, price=2500.0 + tick, tvl=500_000.0)
    snap = ChainSnapshot(chain_id=31337, block_number=1000 + tick, block_timestamp=1_700_000_000 + 12 * tick,
                         gas_price_gwei=1.5, pool=pool, oracle_price=2500.0, balances={"USDC": 1000.0})
    actions = []
    if acted or blocked:
        actions = [ActionRecord(action_index=0, action_type="swap", tool_name="swap_exact_in",
                                status=ActionStatus.BLOCKED if blocked else ActionStatus.EXECUTED,
                                block_reason="max slippage" if blocked else None,
                                tx_hash=None if blocked else "0x" + f"{tick:064x}")]
    return DecisionCycleRecord(
        tick=tick, timestamp=f"2026-03-01T12:{tick % 60:02d}:00+00:00", golem_id="g1",
        workflow_id=f"golem-g1-tick-{tick}",
        observation=Observation(snapshot=snap, regime=regime, observed_at="2026-03-01T12:00:00+00:00"),
        regime=regime, prediction_error=0.05 * tick, deliberation_threshold=0.3, tier=tier,
        gating_reason=f"pe {0.05 * tick:.2f} vs threshold 0.30",
        deliberation=DeliberationRecord(model="offline-deliberator", tier=tier, decision="swap 0.1 WETH")
        if tier != Tier.T0 else None,
        actions=actions,
        outcome=OutcomeRecord(verified=True, pnl_impact=pnl) if acted else None,
        phase=phase, primary_emotion=PlutchikLabel.FEAR if acted else PlutchikLabel.ANTICIPATION,
        total_cost=0.01 * tick,
    )


def test_round_trip_and_index_rows(tmp_path):
    cs = CycleStore(tmp_path)
    records = [make_record(1), make_record(2, tier=Tier.T1), make_record(3, tier=Tier.T2, regime=MarketRegime.VOLATILE,
                                                                          acted=True, pnl=-3.25),
               make_record(4, tier=Tier.T2, blocked=True, phase=BehavioralPhase.STABLE)]
    for r in records:
        path = cs.persist(r)
        assert path == tmp_path / "cycles" / f"cycle-{r.tick:06d}.json"
        json.loads(path.read_text())  # human-readable JSON on disk
    for r in records:
        assert cs.load(r.tick) == r
    assert cs.count() == 4
    assert cs.tier_counts() == {"T0": 1, "T1": 1, "T2": 2}

    rows = cs.recent(10)
    assert [row["tick"] for row in rows] == [4, 3, 2, 1]
    assert [row["tick"] for row in cs.recent(2)] == [4, 3]
    by_tick = {row["tick"]: row for row in rows}
    for r in records:
        assert by_tick[r.tick] == {**index_row(r), "runs": 1, "recovered": False}
    acted = by_tick[3]
    assert acted["has_action"] is True and acted["has_outcome"] is True and acted["pnl_impact"] == -3.25
    assert acted["regime"] == "volatile" and acted["primary_emotion"] == "fear"
    assert by_tick[4]["has_action"] is False  # a blocked action is not acting
    assert by_tick[4]["phase"] == "stable" and by_tick[1]["pnl_impact"] is None
    assert by_tick[2]["workflow_id"] == "golem-g1-tick-2" and by_tick[2]["gating_reason"].startswith("pe 0.10")


def test_persist_is_idempotent(tmp_path):
    cs = CycleStore(tmp_path)
    cs.persist(make_record(5))
    cs.persist(make_record(5, tier=Tier.T1))  # retried reflect with a later view of the tick
    assert cs.count() == 1
    assert cs.load(5).tier == Tier.T1 and cs.recent(1)[0]["tier"] == "T1"
    assert sorted(p.name for p in (tmp_path / "cycles").iterdir() if p.suffix == ".json") == ["cycle-000005.json"]


def test_schema_and_indexes_as_spec(tmp_path):
    CycleStore(tmp_path)
    conn = sqlite3.connect(tmp_path / "cycles" / "index.sqlite")
    try:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'cycle_index'")}
        assert set(INDEX_NAMES) <= names
        sql = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall())
        assert "(tier, regime)" in sql["idx_cycle_tier_regime"]
        assert "(has_action, has_outcome)" in sql["idx_cycle_outcome"]
        assert "(phase)" in sql["idx_cycle_phase"]
        assert "(tick DESC)" in sql["idx_cycle_recent"]
        cols = [r[1] for r in conn.execute("PRAGMA table_info(cycle_index)")]
        assert cols[:11] == ["tick", "regime", "tier", "has_action", "has_outcome", "phase", "prediction_error",
                             "total_cost", "pnl_impact", "primary_emotion", "timestamp"]
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_missing_and_corrupt_records_are_clear_errors(tmp_path):
    cs = CycleStore(tmp_path)
    with pytest.raises(CycleNotFoundError, match="no ticks are recorded yet"):
        cs.load(1)
    cs.persist(make_record(3))
    with pytest.raises(CycleNotFoundError, match="latest recorded tick is 3"):
        cs.load(9)
    cs.path_for(3).write_text('{"tick": 3}')
    with pytest.raises(ValueError, match="not a valid DecisionCycleRecord"):
        cs.load(3)
    with pytest.raises(ValueError):
        cs.path_for(-1)


def test_reader_while_writer_writes(tmp_path):
    writer = CycleStore(tmp_path)
    reader = CycleStore(tmp_path)
    errors: list[BaseException] = []
    seen: list[int] = []

    def read_loop():
        try:
            for _ in range(200):
                seen.append(reader.count())
                reader.recent(5)
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    t = threading.Thread(target=read_loop)
    t.start()
    for tick in range(1, 41):
        writer.persist(make_record(tick))
    t.join()
    assert not errors
    assert seen == sorted(seen)  # counts only grow
    assert reader.count() == 40 and reader.load(40).tick == 40


def test_every_run_of_a_tick_keeps_its_record(tmp_path):
    cs = CycleStore(tmp_path)
    first = make_record(8, tier=Tier.T2, acted=True).model_copy(update={"run_id": "run-a", "original_run_id": "run-a"})
    reset = first.model_copy(update={
        "run_id": "3c4d5e6f-1", "run_kind": "reset", "run_label": "reset-3c4d5e6f", "reset_reason": "redo",
        "actions": [],
    })
    assert cs.persist(first).name == "cycle-000008.json"
    assert cs.persist(reset).name == "cycle-000008-reset-3c4d5e6f.json"
    cs.persist(reset.model_copy(update={"tier": Tier.T1}))  # a retried reflect of the reset run: its own file again
    assert cs.load(8) == first and cs.load(8, "reset-3c4d5e6f").tier == Tier.T1
    runs = cs.runs(8)
    assert [(r["run"], r["run_kind"], r["has_action"]) for r in runs] == [("", "original", True),
                                                                          ("reset-3c4d5e6f", "reset", False)]
    assert runs[1]["original_run_id"] == "run-a" and runs[1]["reset_reason"] == "redo"
    assert cs.count() == 1 and cs.tier_counts() == {"T2": 1}
    (row,) = cs.recent(10)
    assert row["run"] == "" and row["runs"] == 2 and row["recovered"] is False and row["has_action"] is True
    with pytest.raises(CycleNotFoundError, match="recorded runs: '', 'reset-3c4d5e6f'"):
        cs.load(8, "rerun-1")


def test_a_failed_tick_recovered_by_a_later_run(tmp_path):
    from golem.models.golem import TickFailure

    cs = CycleStore(tmp_path)
    cs.record_failure(TickFailure(golem_id="g1", tick=9, workflow_id="golem-g1-tick-9", error="observe: RPC down",
                                  failed_at="2026-03-01T12:00:00+00:00"))
    assert [f["tick"] for f in cs.failures()] == [9] and cs.row(9) is None
    show = subprocess.run([sys.executable, "-m", "cli", "--data", str(tmp_path), "show", "9"],
                          capture_output=True, text=True, cwd=REPO)
    assert show.returncode == 1 and show.stderr.count("\n") == 1, show.stderr  # one line: what, why, the fix
    assert "its run failed (observe: RPC down)" in show.stderr and "golem rerun 9" in show.stderr
    rerun = make_record(9).model_copy(update={"run_kind": "rerun", "run_label": "rerun-1",
                                              "rerun_of": "golem-g1-tick-9"})
    cs.persist(rerun)
    assert cs.failures() == [] and cs.load(9) == rerun  # the latest run that recorded is the one shown
    row = cs.row(9)
    assert row["recovered"] is True and row["runs"] == 2 and row["rerun_of"] == "golem-g1-tick-9"


def test_an_index_from_before_runs_is_migrated(tmp_path):
    index = tmp_path / "cycles" / "index.sqlite"
    index.parent.mkdir()
    conn = sqlite3.connect(index)
    conn.executescript(
        "CREATE TABLE cycle_index (tick INTEGER PRIMARY KEY, regime TEXT NOT NULL, tier TEXT NOT NULL, "
        "has_action BOOLEAN NOT NULL, has_outcome BOOLEAN NOT NULL, phase TEXT NOT NULL, prediction_error REAL NOT NULL, "
        "total_cost REAL NOT NULL, pnl_impact REAL, primary_emotion TEXT, timestamp TEXT NOT NULL, workflow_id TEXT, "
        "gating_reason TEXT);"
        "CREATE INDEX idx_cycle_recent ON cycle_index(tick DESC);"
        "INSERT INTO cycle_index VALUES (3, 'calm', 'T0', 0, 0, 'thriving', 0.1, 0.0, NULL, 'joy', 't', 'w-3', 'pe');"
    )
    conn.commit()
    conn.close()
    cs = CycleStore(tmp_path)
    (row,) = cs.recent(5)
    assert (row["tick"], row["run"], row["run_kind"], row["runs"]) == (3, "", "original", 1)
    cs.persist(make_record(3).model_copy(update={"run_kind": "reset", "run_label": "reset-0000abcd"}))
    assert [r["run"] for r in cs.runs(3)] == ["", "reset-0000abcd"]
    CycleStore(tmp_path)  # opening again changes nothing
    assert cs.row(3)["runs"] == 2
