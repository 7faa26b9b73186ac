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


LINE_SELL = """# Strategy: sell a slice on a drop, repay under the line

## Settings
- collateral: WETH
- debt: USDC

## Rules
- WHEN health_factor < 1.6 THEN repay 25% debt
- WHEN price_change_bps <= -300 THEN swap 10% WETH to USDC

## Constraints
- MUST keep health_factor >= 1.3
"""


def test_an_urgent_sell_over_the_routine_share_is_sent_from_the_slice_keeping_a_repays_reserve(tmp_path):
    """The owner's -300 bps sell in a crash, with the day's routine share spent by the same sell in a chop before:
    once the health factor is within 3 ticks of the 1.6 repay line — or would be after the tick a deferral waits —
    the sell is urgent and is sent on chain from the emergency slice, then past the slice's reserve within the daily ceiling (here $11), each record saying what it
    leaves for a repay; a sell that would leave less than twice its gas under the ceiling waits, and the repay under
    the line still finds its gas (on that tick: it is validated before the sell)."""
    home = tmp_path / "home"
    shutil.copytree(REPO / "examples" / "golem-home", home)
    (home / "STRATEGY.md").write_text(LINE_SELL)
    toml = home / "golem.toml"
    text = toml.read_text()
    assert "gas_ceiling_per_day_usd = 30.0" in text
    toml.write_text(text.replace("gas_ceiling_per_day_usd = 30.0", "gas_ceiling_per_day_usd = 11.0"))
    # a chop (HF ~2.0, 6 ticks from the line at the worst move: routine): the -310 bps rows sell, first at 8 gwei
    # (~$2.4 each, three of them), then at 1.1 gwei (~$0.33) until the $8 routine share is all but spent
    chop = [(2000.0, 7.0), (1938.0, 7.0)] * 3 + [(2000.0, 0.1), (1938.0, 0.1)] * 8
    # the crash at 2 gwei (~$0.5 a sell): two -2.9 % rows, four -4 % rows (the HF nears 1.6: urgent), flat, a row
    # under the line (the repay)
    p, crash = 2000.0, []
    for step in (0.971, 0.971, 0.96, 0.96, 0.96, 0.96, 1.0, 1.0, 0.96, 1.0):
        p *= step
        crash.append((p, 1.0))
    csv = _csv(tmp_path / "crash.csv", [(2000.0, 7.0)] * 4 + chop + crash)
    [run] = asyncio.run(_backtest(BacktestOptions(path=csv, home=home, out=tmp_path / "out", progress=False),
                                  load_path(csv)))
    store = CycleStore(run.out_dir / "data")
    recs = sorted((store.load(r["tick"]) for r in store.recent(200)), key=lambda r: r.tick)
    seen = [(r.tick, r.observation.snapshot.gas_price_gwei, [p.health_factor for p in r.observation.snapshot.positions],
             round(r.gas_cost, 4), [(a.tool_name, a.status.value, a.protective or a.block_reason) for a in r.actions])
            for r in recs]
    acts = [(r, a) for r in recs for a in r.actions]
    routine_spent = sum(r.gas_cost for r in recs if r.observation.snapshot.gas_price_gwei > 1.5
                        and r.observation.snapshot.pool.price > 1900)
    assert routine_spent > 0, seen
    slice_sells = [(r, a) for r, a in acts if a.tool_name == "swap" and a.status is ActionStatus.EXECUTED
                   and (a.protective or "").startswith("urgent") and "uses the emergency slice" in a.protective]
    assert slice_sells, seen  # sent from the slice (red with the wire cut: "the emergency slice is not open to it")
    # the first -4 % row: the 1.6 line 3.4 ticks away at the worst move, past the horizon — but within it after the
    # tick a deferral waits, so the sell is urgent now (red with that rule cut: deferred on the routine share)
    first = next((r, a) for r, a in acts if a.tool_name == "swap" and r.observation.snapshot.pool.price < 1900)
    assert first[1].status is ActionStatus.EXECUTED, seen
    assert "at the worst move, within the horizon 3 after the 1 tick a deferral waits" in first[1].protective, seen
    assert first == slice_sells[0] and "a repay needs (2× its gas)" in first[1].protective, seen
    r, a = next((r, a) for r, a in slice_sells if "ticks away (horizon 3)" in a.protective)
    assert "a repay needs (2× its gas)" in a.protective, a.protective
    assert a.tx_hash and a.gas_cost > 0 and r.observation.snapshot.pool.price < 1900
    beyond = [(r2, a2) for r2, a2 in acts if r2.tick > r.tick and a2.tool_name == "swap"
              and a2.status is ActionStatus.EXECUTED and "within the daily ceiling" in (a2.protective or "")]
    assert beyond and "a repay needs (2× its gas)" in beyond[0][1].protective, seen  # red with the beyond rule cut
    kept = [(r2, a2) for r2, a2 in acts if r2.tick > beyond[0][0].tick and a2.tool_name == "swap"
            and a2.status is ActionStatus.DEFERRED and "(the ceiling keeps it)" in (a2.block_reason or "")]
    assert kept, seen  # the ceiling's last gas is not a sell's
    repaid = [(r2, a2) for r2, a2 in acts if r2.tick >= kept[0][0].tick and a2.tool_name == "repay"
              and a2.status is ActionStatus.EXECUTED]
    assert repaid and repaid[0][1].protective.startswith(("urgent", "critical")), seen  # the repay found its gas
    assert sum(x.gas_cost for x in recs) <= 11.0  # within the day's ceiling
