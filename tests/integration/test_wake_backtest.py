"""System 1 wakes before a line of STRATEGY.md is crossed (docs/design/wakefulness.md), on real Temporal + Anvil
through the backtest: a slow bleed toward the repay line, and a volatile −10 %/row gap under a high threshold."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from golem.backtest.path import load_path
from golem.life.cycle_store import CycleStore
from infra.backtest import BacktestOptions, VariantRun, _backtest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
HOME = REPO / "examples" / "golem-home"
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
REPAY_LINE, FLOOR = 1.6, 1.3  # examples/golem-home/STRATEGY.md: repay 25 % below 1.6, MUST keep >= 1.3


def _csv(path: Path, prices: list[float], labels: list[str]) -> Path:
    rows = ["tick,timestamp,pool_price,oracle_price,gas_gwei,volume_usd,regime"]
    rows += [f"{i},{T0 + 60 * i},{p:.4f},{p:.4f},1.2,5000,{lb}" for i, (p, lb) in enumerate(zip(prices, labels))]
    path.write_text("\n".join(rows) + "\n")
    return path


def _home(tmp: Path, **heartbeat: float) -> Path:
    """The example home, with [heartbeat] values replaced (a high base threshold: a golem that coasts)."""
    home = tmp / "home"
    shutil.copytree(HOME, home)
    text = (home / "golem.toml").read_text()
    for key, value in heartbeat.items():
        lines = [f"{key} = {value}" if ln.split("=")[0].strip() == key else ln for ln in text.splitlines()]
        text = "\n".join(lines) + "\n"
    (home / "golem.toml").write_text(text)
    return home


def _run(csv: Path, home: Path, out: Path) -> VariantRun:
    opts = BacktestOptions(path=csv, home=home, out=out, progress=False)
    [run] = asyncio.run(_backtest(opts, load_path(csv)))
    return run


def _records(run: VariantRun) -> dict:
    assert run.out_dir is not None
    store = CycleStore(run.out_dir / "data")
    return {r["tick"]: store.load(r["tick"]) for r in store.recent(1000)}


def test_a_slow_bleed_wakes_the_golem_before_the_repay_line(tmp_path):
    # calm at 2,000 (HF ≈ 2.06), then −1.2 % a row: unacted, HF crosses 1.6 near row 26 and 1.3 near row 43
    prices = [2000.0] * 5 + [2000.0 * 0.988 ** k for k in range(1, 31)]
    labels = ["calm"] * 5 + ["trending_down"] * 30
    run = _run(_csv(tmp_path / "bleed.csv", prices, labels), HOME, tmp_path / "out")
    marks = run.marks
    records = _records(run)
    repays = [m for m in marks if any(a.tool == "repay" and a.status == "executed" for a in m.actions)]
    assert repays, "the golem repaid during the bleed"
    first = repays[0]
    # the repay came at or before the row where the health factor (before the golem acted) first fell under 1.6
    under = [m for m in marks if m.row_health_factor is not None and m.row_health_factor < REPAY_LINE]
    assert not under or first.row <= under[0].row, (first.row, under[0].row)
    assert first.tier in ("T1", "T2")
    assert min(m.health_factor for m in marks if m.health_factor is not None) >= FLOOR
    # the tick that repaid says why it woke: the repay rule previewed, or the forecast toward the 1.6 line
    rec = records[first.tick]
    assert rec.wake is not None and rec.wake.floor is not None
    assert any("health_factor" in h.text and "repay" in h.text for h in rec.wake.rule_hits) or (
        rec.wake.forecast is not None and rec.wake.forecast.within_horizon)
    # no tick stayed at T0 while the health factor was within the forecast horizon of a line
    silent = [t for t, r in records.items() if r.tier.value == "T0" and r.wake is not None
              and r.wake.forecast is not None and r.wake.forecast.within_horizon]
    assert silent == [], silent
    # the observe step graded the position probe on the strategy's lines (1.6 + 0.1, 1.3 + 0.1), not 1.5 / 1.2
    assert rec.wake.probe_low == pytest.approx(1.7) and rec.wake.probe_high == pytest.approx(1.4)
    [probe] = [p for p in rec.probe_results if p.probe == "position_health"]
    assert probe.threshold == pytest.approx(1.7) and probe.severity.value != "none", probe


def test_a_volatile_gap_escalates_under_a_high_threshold(tmp_path):
    # a choppy market (±4 % a row) that reads volatile, then six rows of −10 %: HF 2.06 → ~1.1
    chop = [2000.0 * (1.04 if i % 2 else 0.96) for i in range(16)]
    gap = [2000.0 * 0.9 ** k for k in range(1, 7)]
    home = _home(tmp_path, base_deliberation_threshold=0.8)  # θ at its 0.8 ceiling: gating alone coasts
    labels = ["volatile"] * len(chop) + ["crash"] * len(gap)
    run = _run(_csv(tmp_path / "gap.csv", [*chop, *gap], labels), home, tmp_path / "out")
    records = _records(run)
    gap_marks = [m for m in run.marks if m.row >= len(chop) and m.tick is not None]
    assert gap_marks, "the golem ticked during the gap"
    for m in gap_marks:
        rec = records[m.tick]
        assert m.tier in ("T1", "T2"), (m.row, m.tier, rec.gating_reason)
        assert rec.wake is not None and rec.wake.floor is not None, rec.gating_reason
    # gating alone would have kept at least one gap tick at T0 (PE under θ): the wake floor lifted it
    lifted = [records[m.tick] for m in gap_marks if records[m.tick].wake.lifted_from is not None]
    assert lifted, [records[m.tick].gating_reason for m in gap_marks]
    assert all(r.prediction_error < r.deliberation_threshold for r in lifted)
    assert all("wake: T0→T1" in r.gating_reason for r in lifted)
    assert not any(m.liquidations for m in run.marks)
