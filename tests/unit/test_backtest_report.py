"""The backtest report's figures on hand-made marks whose answers are known."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from golem.backtest.marks import liquidation_mark
from golem.backtest.models import ActionMark, BlockedAction, LiquidationMark, RunInfo, TickMark
from golem.models.observation import ChainSnapshot, FeedState, LiquidationEvent, PoolState
from golem.backtest.report import (
    build_report,
    cohens_d,
    compare_reports,
    max_drawdown,
    render_comparison,
    render_table,
    write_report,
)

INFO = RunInfo(name="golem", path="p.csv", rows=0)


def mark(i, equity, *, label="calm", tier="T0", detected="range_bound", hf=2.0, actions=(), blocked=(), gas=0.0,
         tick=True, wall=None, underwater=None, liquidations=(), row_hf=None):
    return TickMark(row=i, timestamp=1000 + 60 * i, label_regime=label, pool_price=2000, oracle_price=2000, gas_gwei=1,
                    equity_usd=equity, health_factor=hf, liquidatable=hf is not None and hf < 1.0,
                    row_health_factor=row_hf, underwater=(hf is not None and hf < 1.0) if underwater is None else underwater,
                    liquidations=list(liquidations),
                    tick=i if tick else None, tier=tier if tick else None, detected_regime=detected if tick else None,
                    actions=list(actions), blocked=list(blocked), gas_usd=gas, wall_ms=wall)


def test_drawdown_return_and_sharpe_sign():
    marks = [mark(0, 100), mark(1, 120), mark(2, 90), mark(3, 110)]
    r = build_report(INFO, marks)
    assert r.figures.total_return == pytest.approx(0.10)
    assert r.figures.max_drawdown == pytest.approx(0.25)  # 120 → 90
    rets = [0.2, -0.25, 20 / 90]
    assert r.figures.sharpe_per_tick == pytest.approx(statistics.fmean(rets) / statistics.pstdev(rets))
    down = math.sqrt(statistics.fmean([0, 0.25**2, 0]))
    assert r.figures.sortino_per_tick == pytest.approx(statistics.fmean(rets) / down)
    assert r.figures.sortino_loss_aware_per_tick == pytest.approx(r.figures.sortino_per_tick)  # mean ≥ 0: the same
    assert max_drawdown([1, 2, 3]) == 0.0


def test_the_loss_aware_sortino_ranks_losing_runs_by_loss_and_downside():
    # two falling runs: `less` falls half as far on the down rows and gains less on the up rows (it sold some)
    def run(rets: list[float]) -> list:
        eq = [100.0]
        for x in rets:
            eq.append(eq[-1] * (1 + x))
        return [mark(i, e) for i, e in enumerate(eq)]
    more, less = run([-0.10, 0.05, -0.10, 0.05]), run([-0.05, 0.01, -0.05, 0.01])
    fm, fl = build_report(INFO, more).figures, build_report(INFO, less).figures
    assert fl.total_return > fm.total_return
    assert fl.sortino_per_tick < fm.sortino_per_tick  # the plain ratio inverts the order when the mean is negative
    assert fl.sortino_loss_aware_per_tick > fm.sortino_loss_aware_per_tick
    rets = [-0.05, 0.01, -0.05, 0.01]
    down = math.sqrt(statistics.fmean([min(x, 0.0) ** 2 for x in rets]))
    assert fl.sortino_loss_aware_per_tick == pytest.approx(statistics.fmean(rets) * down)


def test_liquidation_crossings_and_min_hf():
    hfs = [2.0, 0.9, 0.8, 1.1, 0.95, None]
    r = build_report(INFO, [mark(i, 100, hf=h) for i, h in enumerate(hfs)])
    assert r.figures.hf_crossings == 2  # two crossings into HF < 1 at the rows' prices
    assert r.figures.liquidations == 0  # but no LiquidationCall event: nobody liquidated
    assert r.figures.rows_liquidatable == 3
    assert r.figures.min_health_factor == 0.8


def _liq(covered, seized, price):
    return LiquidationMark(tx_hash="0x01", debt_asset="USDC", debt_covered=covered, collateral_asset="WETH",
                           collateral_seized=seized, debt_covered_usd=covered, collateral_seized_usd=seized * price)


def test_liquidations_count_liquidation_call_events_not_crossings():
    # the liquidator acted on row 1 (HF 0.97 at the row's prices, back to 1.2 after): one crossing, one event;
    # row 3 went under again and was liquidated twice (two calls, 100 % close factor the second time)
    marks = [mark(0, 100, hf=2.0),
             mark(1, 90, hf=1.2, underwater=True, row_hf=0.97, liquidations=[_liq(4000, 4.375, 960)]),
             mark(2, 90, hf=1.3), mark(3, 80, hf=1.1, underwater=True,
                                       liquidations=[_liq(1000, 1.1, 955), _liq(500, 0.55, 955)])]
    f = build_report(INFO, marks).figures
    assert (f.liquidations, f.hf_crossings, f.rows_liquidatable) == (3, 2, 0)
    assert f.min_health_factor == 0.97  # where the liquidator found it, though no row ended that low
    assert f.liquidated_debt_usd == pytest.approx(5500)
    # the bonus: 4.375 WETH × 960 − 4000 = 200, (1.1 + 0.55) × 955 − 1500 = 75.75
    assert f.liquidation_penalty_usd == pytest.approx(200 + 75.75)
    text = render_table(build_report(INFO, marks))
    assert "| liquidations (LiquidationCall events) | 3 |" in text
    assert "| HF < 1 crossings at row prices | 2 |" in text


def test_liquidation_mark_values_at_the_feeds():
    snap = ChainSnapshot(chain_id=1, block_number=1, block_timestamp=1, gas_price_gwei=1.0,
                         pool=PoolState(address="0xp", token0="WETH", token1="USDC", reserve0=1, reserve1=900,
                                        price=900, tvl=1800),
                         oracle_price=960.0, balances={}, positions=[],
                         feeds=[FeedState(symbol="WETH", address="0xf", answer=960.0, round_id=2, updated_at=1, age_s=0),
                                FeedState(symbol="USDC", address="0xg", answer=0.999, round_id=2, updated_at=1, age_s=0)])
    ev = LiquidationEvent(tx_hash="0xab", log_index=3, block_number=9, collateral_asset="WETH", debt_asset="USDC",
                          debt_covered=4000.0, collateral_seized=4.375, liquidator="0x" + "11" * 20)
    m = liquidation_mark(ev, snap)
    assert m.debt_covered_usd == pytest.approx(3996.0)
    assert m.collateral_seized_usd == pytest.approx(4200.0)
    assert m.penalty_usd == pytest.approx(204.0)


def test_blocked_by_category_protective_and_transactions():
    m = mark(0, 100, actions=[ActionMark(tool="swap", status="executed", gas_usd=0.2),
                              ActionMark(tool="repay", status="deferred", protective=True)],
             blocked=[BlockedAction(tool="repay", category="budget", reason="gas partition spent")], gas=0.2)
    m2 = mark(1, 100, blocked=[BlockedAction(tool="swap", category="gate", reason="gas gate: defer: spike"),
                               BlockedAction(tool="swap", category="gate", reason="gas gate: defer: spike")])
    r = build_report(INFO, [m, m2])
    assert r.figures.blocked == {"budget": 1, "gate": 2}
    assert r.figures.protective_blocked == 1
    assert r.figures.transactions == 1
    assert r.figures.gas_usd == pytest.approx(0.2)
    assert r.blocked_reasons[0] == ("gas gate: defer: spike", 2)


def test_tier_mix_t2_on_calm_and_escalation_latency():
    labels = ["calm"] * 4 + ["crash"] * 4 + ["calm"] * 2
    tiers = ["T0", "T2", "T0", "T0", "T0", "T0", "T1", "T2", "T0", "T0"]
    r = build_report(INFO, [mark(i, 100, label=lab, tier=t) for i, (lab, t) in enumerate(zip(labels, tiers))])
    assert r.figures.tier_counts == {"T0": 7, "T1": 1, "T2": 2}
    assert r.t2_share_calm == pytest.approx(1 / 6)
    assert [(e.row, e.ticks_to_escalate) for e in r.escalations] == [(4, 2), (8, None)]


def test_regime_detection_confusion_and_warmup():
    detected = ["unknown"] * 2 + ["range_bound"] * 6 + ["volatile", "trending_down"]
    labels = ["calm"] * 8 + ["crash", "crash"]
    marks = [mark(i, 100, label=lab, detected=d) for i, (lab, d) in enumerate(zip(labels, detected))]
    rd = build_report(INFO, marks).regime_detection
    assert rd.accuracy_all == pytest.approx(8 / 10)
    assert rd.confusion["calm"]["unknown"] == 2 and rd.confusion["crash"]["volatile"] == 1
    from golem.backtest.report import regime_detection
    assert regime_detection(marks, warmup=2).accuracy == 1.0


def test_cohens_d_matches_direct_computation_and_ci():
    a, b = [0.01, 0.02, 0.015, 0.012, 0.018] * 4, [-0.01, -0.02, -0.015, -0.012, -0.011] * 4
    pooled = math.sqrt(((len(a) - 1) * statistics.variance(a) + (len(b) - 1) * statistics.variance(b)) / (len(a) + len(b) - 2))
    assert cohens_d(a, b) == pytest.approx((statistics.fmean(a) - statistics.fmean(b)) / pooled)
    marks = [mark(0, 100)]
    eq = 100.0
    for i, r in enumerate(a + b, 1):
        eq *= 1 + r
        marks.append(mark(i, eq, label="calm" if i <= len(a) else "crash"))
    rep = build_report(INFO, marks)
    [e] = rep.effect_sizes
    assert e.d > 0.2 and e.ci_low > 0 and e.validated
    assert rep.by_regime["crash"].total_return < 0 < rep.by_regime["calm"].total_return
    assert build_report(INFO, marks).model_dump() == rep.model_dump()  # the bootstrap is seeded


def test_files_render_and_compare(tmp_path):
    marks = [mark(i, 100 + i, wall=10.0 * i, actions=[ActionMark(tool="repay", status="executed")] if i == 2 else [])
             for i in range(6)]
    rep = build_report(INFO, marks)
    paths = write_report(rep, marks, tmp_path)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths["png"].stat().st_size > 20_000
    data = json.loads(paths["json"].read_text())
    assert len(data["marks"]) == 6 and data["report"]["figures"]["rows"] == 6
    assert "| return |" in render_table(rep)
    hold = build_report(INFO.model_copy(update={"name": "hold"}), [mark(i, 100, tick=False) for i in range(6)])
    table = compare_reports([hold, rep], marks={"golem": marks, "hold": [mark(i, 100, tick=False) for i in range(6)]})
    cells = dict(table.rows)
    assert table.base == "golem" and cells["return %"][0].endswith("(-5)")
    assert "golem" in render_comparison(table)
