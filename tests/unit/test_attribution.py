"""Return attribution (golem.safety.attribution): the split is exact, a market move is beta whatever the golem
did, a sale before a fall is alpha of whoever drove it, and the loop that answers a loss follows the split."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.backtest.models import ActionMark, RunInfo, TickMark
from golem.backtest.report import build_report, render_table
from golem.life.after_turn import attribution_step
from golem.models.enums import ActionStatus
from golem.models.observation import ChainSnapshot, PoolState, PositionState
from golem.models.record import ActionRecord, DeliberationRecord, RuleApplied
from golem.models.enums import Tier
from golem.safety.attribution import (Holdings, Interval, attribute, holdings_of, interval_of, loop_for_windows,
                                      windows_of)
from golem.safety.risk import net_value_usd
from tests.unit.test_grimoire_episode_schema import record as schema_record


def _snap(price: float, weth: float, usdc: float, collateral: float = 0.0, debt: float = 0.0) -> ChainSnapshot:
    return ChainSnapshot(chain_id=31337, block_number=1, block_timestamp=0, gas_price_gwei=1.0,
                         pool=PoolState(address="0x0", token0="WETH", token1="USDC", reserve0=1.0, reserve1=price,
                                        price=price, tvl=2 * price),
                         oracle_price=price, balances={"WETH": weth, "USDC": usdc},
                         positions=[PositionState(id="aave", collateral=collateral, debt=debt)] if collateral else [])


def test_holdings_value_the_account_as_net_value_does():
    snap = _snap(2500.0, 3.0, 1200.0, collateral=20.0, debt=18_000.0)
    h = holdings_of(snap)
    assert (h.exposure, h.stable_usd) == (23.0, 1200.0 - 18_000.0)
    assert h.value == pytest.approx(net_value_usd(snap))


def test_holding_through_a_fall_is_all_market_beta_and_asks_no_loop_to_act():
    states = [Holdings(exposure=10, stable_usd=5000, price=p) for p in (2000, 1900, 1700)]
    a = attribute(states, [Interval(), Interval()])
    assert a.market_beta == -3000 and a.total == -3000 and a.strategy_alpha == a.knowledge_alpha == a.noise == 0
    assert a.dominant == "market_beta" and a.responsible_loop.startswith("none")


def test_a_learned_sale_before_the_fall_is_knowledge_alpha_and_the_parts_add_up():
    # 10 WETH at 2000; a learned rule sells 4 at 1990 (slippage) for $2 gas; the price then falls to 1500
    s0 = Holdings(exposure=10, stable_usd=0, price=2000)
    s1 = Holdings(exposure=6, stable_usd=4 * 1990, price=2000)
    s2 = Holdings(exposure=6, stable_usd=4 * 1990, price=1500)
    a = attribute([s0, s1, s2], [Interval(source="knowledge", gas_usd=2.0), Interval()])
    assert a.market_beta == 10 * (1500 - 2000)  # what holding the window's start would have made
    assert a.knowledge_alpha == pytest.approx(4 * 1990 - 4 * 1500 - 2.0)  # the sale's worth at the window's end
    assert a.strategy_alpha == 0 and a.noise == 0
    assert a.market_beta + a.strategy_alpha + a.knowledge_alpha + a.noise == pytest.approx(a.total)
    assert a.total == pytest.approx(s2.value - s0.value - 2.0)
    assert a.dominant == "market_beta"  # the loss was the market's: the heuristic that sold is not to blame


def test_a_sale_before_a_rise_is_a_strategy_loss_that_loop_1_answers():
    s0 = Holdings(exposure=10, stable_usd=0, price=2000)
    s1 = Holdings(exposure=0, stable_usd=20_000, price=2000)
    s2 = Holdings(exposure=0, stable_usd=20_000, price=2400)
    a = attribute([s0, s1, s2], [Interval(source="strategy"), Interval()])
    assert a.market_beta == 4000 and a.strategy_alpha == -4000 and a.total == 0
    assert a.dominant is None  # nothing was lost: no loop is asked to answer
    s3 = Holdings(exposure=0, stable_usd=19_000, price=2400)  # then $1,000 leaks without an action
    a = attribute([s0, s1, s2, s3], [Interval(source="strategy"), Interval(), Interval()])
    assert a.noise == -1000 and a.dominant == "strategy_alpha" and a.responsible_loop.startswith("loop 1")


def test_three_windows_of_knowledge_losses_call_loop_3():
    bad = attribute([Holdings(exposure=1, stable_usd=0, price=100), Holdings(exposure=0, stable_usd=90, price=100)],
                    [Interval(source="knowledge")])
    assert bad.knowledge_alpha == -10 and bad.responsible_loop.startswith("loop 2")
    assert loop_for_windows([bad, bad]).startswith("loop 2")
    assert loop_for_windows([bad, bad, bad]).startswith("loop 3")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 50), st.floats(-1e5, 1e5), st.floats(100, 5000),
                          st.sampled_from([None, "strategy", "knowledge"]), st.floats(0, 20)), min_size=2, max_size=12))
def test_the_four_parts_always_add_up_to_the_return_net_of_gas(rows):
    states = [Holdings(exposure=e, stable_usd=s, price=p) for e, s, p, _, _ in rows]
    intervals = [Interval(source=src, gas_usd=g) for _, _, _, src, g in rows[1:]]
    a = attribute(states, intervals)
    assert a.market_beta + a.strategy_alpha + a.knowledge_alpha + a.noise == pytest.approx(a.total, abs=1e-4)
    assert a.total == pytest.approx(states[-1].value - states[0].value - sum(i.gas_usd for i in intervals), abs=1e-4)


def _record(tick: int, price: float, weth: float, usdc: float, *, learned: bool | None = None, gas: float = 0.0):
    rec = schema_record(tick)
    rec.observation = rec.observation.model_copy(update={"snapshot": _snap(price, weth, usdc)})
    rec.actions, rec.gas_cost, rec.deliberation = [], gas, None
    if learned is not None:
        rec.actions = [ActionRecord(action_index=0, action_type="swap", tool_name="swap",
                                    status=ActionStatus.EXECUTED, gas_cost=gas)]
        rec.deliberation = DeliberationRecord(model="offline-deliberator", tier=Tier.T1, rules_applied=[
            RuleApplied(action_index=0, rule="PLAYBOOK.md:3" if learned else "STRATEGY.md:9",
                        origin="learned" if learned else "owner")])
    return rec


def test_a_ticks_actions_label_the_change_after_it():
    assert interval_of(_record(1, 2000, 1, 0)).source is None
    assert interval_of(_record(1, 2000, 1, 0, learned=True, gas=1.5)) == Interval(source="knowledge", gas_usd=1.5)
    assert interval_of(_record(1, 2000, 1, 0, learned=False)).source == "strategy"


def test_the_risk_member_splits_each_tick_from_the_basis_the_last_one_left():
    first, basis = attribution_step(None, _record(4, 2000, 10, 0, learned=True, gas=2.0))
    assert first is None and basis["tick"] == 4 and basis["interval"]["source"] == "knowledge"
    split, basis = attribution_step(basis, _record(5, 1800, 6, 4 * 1990))  # sold 4 at 1990, then the price fell
    assert split["since_tick"] == 4 and split["market_beta"] == -2000
    assert split["knowledge_alpha"] == pytest.approx(4 * 1990 - 4 * 1800 - 2.0)
    assert basis["tick"] == 5 and basis["interval"]["source"] is None


def test_windows_share_their_boundary_and_read_the_records_in_order():
    recs = [_record(t, 2000 - 10 * t, 10, 0) for t in range(9)]
    ws = windows_of(recs, 4)
    assert len(ws) == 2 and [w.intervals for w in ws] == [4, 4]  # ticks 0-4 and 4-8; a third has no records
    assert ws[-1].market_beta == 10 * ((2000 - 80) - (2000 - 40))


def test_the_backtest_report_splits_the_path_and_says_so():
    marks = [TickMark(row=i, timestamp=i, pool_price=p, oracle_price=p, gas_gwei=1.0, equity_usd=0.0,
                      exposure=e, stable_usd=s, gas_usd=g,
                      actions=[ActionMark(tool="swap", status="executed", learned=True)] if g else [])
             for i, (p, e, s, g) in enumerate([(2000, 10, 0, 0), (2000, 6, 7960, 2.0), (1500, 6, 7960, 0)])]
    rep = build_report(RunInfo(name="golem", path="p.csv", rows=3), marks)
    assert rep.attribution is not None and rep.attribution.market_beta == -5000
    assert rep.attribution.knowledge_alpha == pytest.approx(7960 - 4 * 1500 - 2.0)
    assert "return attribution" in render_table(rep) and "market beta → none" in render_table(rep)
    old = [m.model_copy(update={"exposure": None}) for m in marks]  # a report from before the holdings were marked
    assert build_report(RunInfo(name="golem", path="p.csv", rows=3), old).attribution is None


def test_status_prints_the_window_split_and_the_loop_that_answers(tmp_path):
    from argparse import Namespace

    from cli.status import attribution_line
    from golem.life.cycle_store import CycleStore

    store, basis = CycleStore(tmp_path), None
    # a learned rule sells 4 of 10 WETH at tick 1; the price falls from 2000 to 1600 over ticks 0-4
    for t, (price, weth, usdc, learned) in enumerate([(2000, 10, 0, None), (2000, 10, 0, True), (1900, 6, 7960, None),
                                                       (1700, 6, 7960, None), (1600, 6, 7960, None)]):
        rec = _record(t, price, weth, usdc, learned=learned, gas=2.0 if learned else 0.0)
        rec.attribution, basis = attribution_step(basis, rec)
        store.persist(rec)
    store.persist(_record(90, 100, 0, 0))  # a former golem's record numbered past this golem's ticks: not read
    line = attribution_line(Namespace(data=str(tmp_path)), window_ticks=4, upto=5)
    assert "last 4 ticks: market -4000.00  strategy +0.00  knowledge +1558.00  noise +0.00  = -2442.00 $" in line, line
    assert "answered by none: wait" in line and "tick 4: market -600.00" in line, line
    assert attribution_line(Namespace(data=str(tmp_path / "missing")), window_ticks=4, upto=5) is None
