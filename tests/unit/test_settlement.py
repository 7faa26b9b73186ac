"""Hindsight settlement: a swap judged by what its exposure change was worth k ticks later, stored once in the
learning ledger beside the immediate outcome, and read by the Curator and the distillation."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from golem.grimoire.episodes.model import Episode
from golem.grimoire.playbook.heuristics import derive_heuristics_from_episodes
from golem.learning import curator
from golem.learning.ledger import LearningLedger, OutcomeRow
from golem.learning import settlement
from golem.learning.settlement import exposure, settle
from golem.models.enums import ActionStatus, MarketRegime, Tier
from golem.models.record import (
    ActionRecord,
    DeliberationRecord,
    DecisionCycleRecord,
    OutcomeRecord,
    Reflexion,
    ExpectedOutcome,
    RuleApplied,
)
from tests.unit.test_offline_deliberator import EXAMPLE, decide_input

SELL = "WHEN health_factor < 1.9 AND regime == trending_down AND balance.WETH > 10 THEN swap 30% WETH to USDC"
FEE = -37.46  # the swap's fee and slippage at the tick: its immediate pnl


def _snap(price: float, weth: float, collateral: float = 10.0):
    return decide_input(price=price, weth=weth, collateral=collateral).observation.snapshot


def _sell(later_price: float, **kw):
    """A sell of 2.5 WETH at 2000 (fee $37.46), settled at `later_price`."""
    return settle(pnl=FEE, verdict="negative", hf_before=1.89, hf_after=1.89, at=_snap(2000, 20), after=_snap(1990, 17.5),
                  later=_snap(later_price, 17.5), later_tick=15, token="WETH", **kw)


def test_exposure_counts_wallet_and_supplied_units():
    assert exposure(_snap(2000, 20, collateral=10), "WETH") == 30.0
    assert exposure(_snap(2000, 20, collateral=10), "weth") == 30.0  # the strategy's spelling need not match


def test_a_sell_before_a_fall_settles_positive():
    s = _sell(1900)  # −2.5 WETH × (1900 − 2000) = +$250, less the $37.46 fee
    assert s.verdict == "positive" and s.pnl == pytest.approx(250 + FEE)
    assert s.exposure_change == pytest.approx(-2.5) and (s.price_from, s.price_to, s.at_tick) == (2000, 1900, 15)


def test_a_sell_before_a_rise_settles_negative():
    s = _sell(2100)
    assert s.verdict == "negative" and s.pnl == pytest.approx(-250 + FEE)


def test_a_sell_in_a_flat_market_keeps_its_fee():
    assert _sell(2000).verdict == "negative" and _sell(2000).pnl == pytest.approx(FEE)


def test_a_repay_keeps_its_health_factor_verdict():
    # no collateral-token units moved: the verdict is the tick's (a repay judged by the HF it restored)
    s = settle(pnl=-0.7, verdict="positive", hf_before=1.59, hf_after=2.13, at=_snap(2000, 20), after=_snap(1990, 20),
               later=_snap(1500, 20), later_tick=20, token="WETH")
    assert s.verdict == "positive" and s.pnl == -0.7 and s.exposure_change == 0.0


def test_a_supply_moves_no_exposure():
    s = settle(pnl=-0.2, verdict="negative", hf_before=1.8, hf_after=1.8, at=_snap(2000, 20, 10),
               after=_snap(2000, 15, 15), later=_snap(1000, 15, 15), later_tick=20, token="WETH")
    assert s.verdict == "negative" and s.pnl == -0.2


def test_a_failed_swap_stays_negative():
    # negative with nothing lost and no HF gained: a failure or a broken invariant, which hindsight cannot mend
    s = settle(pnl=0.0, verdict="negative", hf_before=1.8, hf_after=1.8, at=_snap(2000, 20), after=_snap(2000, 17.5),
               later=_snap(1500, 17.5), later_tick=20, token="WETH")
    assert s.verdict == "negative"


# ---- the ledger ------------------------------------------------------------------------------------------
def _record(tick: int, rules: list[RuleApplied], pnl: float = FEE) -> DecisionCycleRecord:
    obs = decide_input(hf=1.89, regime=MarketRegime.TRENDING_DOWN).observation
    return DecisionCycleRecord(
        tick=tick, timestamp="2026-01-01T00:00:00+00:00", golem_id="t", observation=obs,
        regime=MarketRegime.TRENDING_DOWN, tier=Tier.T1, prediction_error=0.5, deliberation_threshold=0.3,
        gating_reason="test", deliberation=DeliberationRecord(model="offline-deliberator", tier=Tier.T1,
                                                              rules_applied=rules),
        actions=[ActionRecord(action_index=0, action_type="swap", tool_name="swap", status=ActionStatus.EXECUTED)],
        outcome=OutcomeRecord(verified=True, pnl_impact=pnl, health_factor_before=1.89, health_factor_after=1.89),
        episodes_written=[f"ep-{tick}"])


def _reflexion(verdict: str = "negative") -> Reflexion:
    return Reflexion(verdict=verdict, expected=ExpectedOutcome())


OWNER_SELL = RuleApplied(action_index=0, rule="STRATEGY.md:27", origin="owner", text=SELL)
LEARNED_SELL = RuleApplied(action_index=0, rule="PLAYBOOK.md:8", origin="learned", entry_id="h-0123456789abcdef",
                           text=SELL.replace("1.9", "2.09"))


def test_ledger_settles_a_row_once(tmp_path):
    ledger = LearningLedger(tmp_path / "learning.sqlite")
    ledger.record(_record(5, [OWNER_SELL]), _reflexion(), [])
    (row,) = ledger.unsettled(10)
    assert row.judged is None  # a swap not settled yet: the Curator waits for it
    assert ledger.settle(row, 212.5, "positive", 15, cycle=50)
    assert not ledger.settle(row, -99.0, "negative", 15, cycle=50)  # a retried settle step: nothing changes
    (row,) = ledger.outcomes()
    assert (row.verdict, row.pnl, row.settled_verdict, row.settled_pnl, row.settled_tick, row.settled_cycle) == (
        "negative", FEE, "positive", 212.5, 15, 50)
    assert row.judged == "positive" and ledger.unsettled(100) == []


def test_a_learned_sells_credit_waits_for_its_settlement_and_takes_its_verdict(tmp_path):
    ledger = LearningLedger(tmp_path / "learning.sqlite")
    from golem.learning.reflexion import credit_for
    rec = _record(5, [LEARNED_SELL])
    ledger.record(rec, _reflexion(), credit_for(rec, "negative"))  # the fee: an immediate downvote
    assert ledger.uncurated(50) == {}  # waiting: neither counted ...
    ledger.close_cycle(50, {"tick": 50})
    (row,) = ledger.unsettled(50)  # ... nor closed by the cycle
    ledger.settle(row, 212.5, "positive", 15, cycle=100)
    assert ledger.uncurated(100) == {"h-0123456789abcdef": 1}


def test_a_repay_is_judged_at_once(tmp_path):
    ledger = LearningLedger(tmp_path / "learning.sqlite")
    repay = RuleApplied(action_index=0, rule="STRATEGY.md:21", origin="owner",
                        text="WHEN health_factor < 1.6 THEN repay 25% debt")
    rec = _record(5, [repay]).model_copy(update={"actions": [
        ActionRecord(action_index=0, action_type="repay", tool_name="repay", status=ActionStatus.EXECUTED)]})
    ledger.record(rec, _reflexion("positive"), [])
    (row,) = ledger.outcomes()
    assert not row.swapped and row.judged == "positive"


def test_a_ledger_from_before_settlement_opens_and_keeps_working(tmp_path):
    path = tmp_path / "learning.sqlite"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE outcomes (tick INTEGER NOT NULL, run_label TEXT NOT NULL, regime TEXT NOT NULL, "
                   "episode_id TEXT, rules TEXT NOT NULL, hf_before REAL, hf_after REAL, pnl REAL, "
                   "verdict TEXT NOT NULL, PRIMARY KEY (tick, run_label))")
        db.execute("INSERT INTO outcomes VALUES (3, '', 'trending_down', 'ep-3', '[]', 1.9, 1.9, -37.0, 'negative')")
    ledger = LearningLedger(path)
    (old,) = ledger.outcomes()
    assert old.settled_verdict is None and old.verdict == "negative"
    ledger.record(_record(5, [OWNER_SELL]), _reflexion(), [])
    assert [r.tick for r in ledger.unsettled(10)] == [3, 5]


# ---- the Curator and the distillation read it ------------------------------------------------------------------
def _rows(n: int, settled: str | None, start: int = 0) -> list[OutcomeRow]:
    return [OutcomeRow(tick=start + i, regime="trending_down", episode_id=f"ep-{start + i}", verdict="negative",
                       pnl=FEE, settled_verdict=settled, settled_pnl=None if settled is None else 200.0,
                       rules=[{"rule": "STRATEGY.md:27", "origin": "owner", "tool": "swap", "text": SELL}])
            for i in range(n)]


def test_curator_learns_the_sell_from_settled_outcomes():
    (op,) = curator.plan(50, _rows(5, "positive"), [], {}, EXAMPLE).operations
    assert op.op == "ADD" and op.text == ("WHEN health_factor < 2.09 AND balance.WETH > 10 AND regime == trending_down "
                                          "THEN swap 30% WETH to USDC")
    assert curator.refusal(curator._learned_from(SELL, "trending_down", EXAMPLE), EXAMPLE) is None
    # unsettled sells wait; a sell that lost as often as it paid has not kept paying
    assert curator.plan(50, _rows(5, None), [], {}, EXAMPLE).operations == []
    assert curator.plan(50, _rows(5, "positive") + _rows(5, "negative", 5), [], {}, EXAMPLE).operations == []


def _episode(i: int, pnl: float) -> Episode:
    return Episode(id=f"ep-{i}", golem_id="g", tick=i, created_at="2026-01-01T00:00:00+00:00",
                   regime=MarketRegime.TRENDING_DOWN, tier=Tier.T1, summary="sold", actions=1, pnl_impact=pnl,
                   prediction_error=0.3, outcome_verified=True)


def test_distillation_reads_settled_pnl_where_present():
    eps = [_episode(i, FEE) for i in range(3)]
    (plain, *_) = derive_heuristics_from_episodes(eps)
    assert "acting has lost money" in plain[0] and "0 settled in hindsight" in plain[0]
    (settled, *_) = derive_heuristics_from_episodes(eps, settled={e.id: 200.0 for e in eps})
    assert "acting has paid: mean pnl +200.00" in settled[0] and "3 settled in hindsight" in settled[0]
    # one identity, settled or not, while the verdict holds: a settled cycle reinforces the row an earlier cycle wrote
    from golem.grimoire.playbook.heuristics import normalise_text
    (part, *_) = derive_heuristics_from_episodes(eps, settled={eps[0].id: -20.0})
    assert normalise_text(part[0]) == normalise_text(plain[0])


def test_settle_due_settles_what_has_a_later_record_once(tmp_path):
    ledger = LearningLedger(tmp_path / "learning.sqlite")
    for t in (5, 8, 30):
        ledger.record(_record(t, [OWNER_SELL]), _reflexion(), [])
    # the recorded observations: 20 WETH before each sell, 17.5 after; the price falls 10 a tick to tick 20, then
    # rises; tick 15 failed (no record) and nothing is recorded after tick 32
    prices = {t: 2000 - 10 * min(t, 20) + 40 * max(0, t - 20) for t in range(0, 33) if t != 15}
    sold = {6, 9, 31}  # the tick after each sell

    def snapshot_of(tick: int, run: str):
        if tick not in prices:
            return None
        return _snap(prices[tick], 17.5 if tick in sold else 20)

    summary = settlement.settle_due(ledger, snapshot_of, k=10, cycle_tick=50, token="WETH")
    assert summary["settled"] == 2 and summary["no_record"] == 1 and summary["waiting"] == 1
    rows = {r.tick: r for r in ledger.outcomes()}
    # tick 5: settled at 16 (15 failed): −2.5 × (1840 − 1950) = +275 less the fee
    assert rows[5].settled_tick == 16 and rows[5].settled_verdict == "positive"
    assert rows[5].settled_pnl == pytest.approx(275 + FEE)
    # tick 8: settled at 18: −2.5 × (1820 − 1920) = +250 less the fee
    assert rows[8].settled_tick == 18 and rows[8].settled_pnl == pytest.approx(250 + FEE)
    assert rows[30].settled_verdict is None  # no record at or after tick 40: stays unsettled
    again = settlement.settle_due(ledger, snapshot_of, k=10, cycle_tick=50, token="WETH")
    assert again["settled"] == 0 and rows[5] == {r.tick: r for r in ledger.outcomes()}[5]  # a retry settles once
