"""Urgency buys gas (docs/design/spending.md), on real Temporal + Anvil through the backtest: a repay that protects
a position nowhere near a line is routine, so at a gas spike it waits — deferred, on the record, kept in GolemState —
and goes out on the first later tick where gas is back under its recent median, although that tick would be T0."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from golem.backtest.path import load_path
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus
from infra.backtest import BacktestOptions, _backtest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
STRATEGY = """# Strategy: repay on a drop

## Settings
- collateral: WETH
- debt: USDC

## Rules
- WHEN price_change_bps <= -250 THEN repay 10% debt

## Constraints
- MUST keep health_factor >= 1.3
"""


def _csv(path: Path, rows: list[tuple[float, float]]) -> Path:
    lines = ["tick,timestamp,pool_price,oracle_price,gas_gwei,volume_usd"]
    lines += [f"{i},{T0 + 60 * i},{p:.4f},{p:.4f},{g},5000" for i, (p, g) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_routine_repay_at_a_gas_spike_waits_and_goes_out_when_gas_falls(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(REPO / "examples" / "golem-home", home)
    (home / "STRATEGY.md").write_text(STRATEGY)
    # 8 calm rows at 1 gwei, a −3 % row at 80 gwei (HF ≈ 2.0: far from every line), then 1 gwei again
    rows = [(2000.0, 1.0)] * 8 + [(1940.0, 80.0)] + [(1940.0, 1.0)] * 4
    csv = _csv(tmp_path / "spike.csv", rows)
    [run] = asyncio.run(_backtest(BacktestOptions(path=csv, home=home, out=tmp_path / "out", progress=False),
                                  load_path(csv)))
    store = CycleStore(run.out_dir / "data")
    recs = {r["tick"]: store.load(r["tick"]) for r in store.recent(100)}
    spike = next(r for r in recs.values() if r.observation.snapshot.gas_price_gwei > 50)
    repay = [a for a in spike.actions if a.tool_name == "repay"]
    assert repay and repay[0].status is ActionStatus.DEFERRED, [(a.status, a.block_reason) for a in spike.actions]
    assert "routine" in repay[0].block_reason and "above the recent median" in repay[0].block_reason
    assert spike.gas_cost == 0.0
    later = sorted((r for r in recs.values() if r.tick > spike.tick), key=lambda r: r.tick)
    sent = next((r for r in later if any(a.tool_name == "repay" and a.status is ActionStatus.EXECUTED
                                         for a in r.actions)), None)
    assert sent is not None, [(r.tick, r.tier.value, r.gating_reason, [(a.tool_name, a.status.value) for a in r.actions])
                              for r in later]
    assert sent.tick == later[0].tick  # the first tick after the spike: gas is back under its median
    assert "deferred repay" in sent.gating_reason and sent.observation.snapshot.gas_price_gwei < 5
    assert sent.gas_cost < 1.0  # paid at ~2 gwei, not ~81
