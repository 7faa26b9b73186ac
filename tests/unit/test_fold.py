"""Folding interventions and tick results into GolemState (pure; called from workflow code)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.cognition.fold import (
    MAX_FAILED_TICKS,
    MAX_RECENT_TICKS,
    MAX_REJECTED,
    MAX_SEEN_IDS,
    REJECTION_VISIBLE_TICKS,
    accept_intervention,
    expire_rejections,
    fold_tick_failure,
    rejections_for_record,
    fold_tick_result,
    note_delta_run,
    should_dream,
    should_run_delta,
    utc_day,
)
from golem.models.config import ClockSection, HeartbeatSection
from golem.models.enums import BehavioralPhase, MarketRegime, Tier
from golem.models.interventions import FollowUp, Steer
from golem.models.state import GAS_HISTORY_LEN, PRICE_HISTORY_LEN, GolemState
from golem.models.tick import GasLedger, TickResult

CLOCK = ClockSection(theta_base_seconds=2, theta_min_seconds=1, theta_max_seconds=5, delta_theta_ticks=50,
                     dream_every_ticks=200)
HB = HeartbeatSection(max_daily_cost_usd=10.0)
NOW = "2025-03-01T12:00:00+00:00"


def result(tick=0, tier=Tier.T0, price=2000.0, pe=0.05, cost=0.0, steers=(), followups=(), regime="range_bound"):
    return TickResult(tick=tick, tier=tier, regime=regime, prediction_error=pe, threshold=0.3, price=price,
                      gas_price_gwei=1.5, tvl=4e6, oracle_price=price * 1.001, position_health={"p": 1.9},
                      actions_executed=1 if tier == Tier.T2 else 0, inference_cost=cost, gas_cost=0.01,
                      steers_consumed=list(steers), followups_consumed=list(followups))


# ---- interventions -----------------------------------------------------------------------------

@pytest.mark.parametrize("raw,needle", [
    ({"id": "s1"}, "message"),
    ({"id": "s1", "message": "hi", "severity": "urgent"}, "severity"),
    ("reduce exposure", "expected a JSON object"),
    (["id", "message"], "expected a JSON object"),
    ({"id": "s1", "message": "x" * 5000}, "message"),
    ({"id": "", "message": "hi"}, "id"),
    ({"id": "s1", "message": "   "}, "blank"),
])
def test_malformed_steers_are_rejected_with_reasons(raw, needle):
    s0 = GolemState(golem_id="t")
    s1, reason = accept_intervention(s0, "steer", raw, NOW)
    assert reason and needle in reason
    assert s1.pending_steers == [] and s1.seen_intervention_ids == []
    assert len(s1.rejected_interventions) == 1
    rej = s1.rejected_interventions[0]
    assert rej.kind == "steer" and rej.reason == reason and rej.received_at == NOW
    assert len(rej.payload_excerpt) <= 200
    assert s0.rejected_interventions == []  # input untouched


def test_valid_and_duplicate_interventions():
    s = GolemState(golem_id="t")
    s, r = accept_intervention(s, "steer", {"id": "s1", "message": "reduce exposure", "severity": "high"}, NOW)
    assert r is None and [x.id for x in s.pending_steers] == ["s1"]
    s2, r = accept_intervention(s, "steer", {"id": "s1", "message": "reduce exposure", "severity": "high"}, NOW)
    assert r is None and len(s2.pending_steers) == 1 and s2.rejected_interventions == []
    s3, r = accept_intervention(s2, "follow_up", {"id": "f1", "message": "check fees", "window": "next-reflect"}, NOW)
    assert r is None and [f.id for f in s3.pending_followups] == ["f1"]
    assert s3.seen_intervention_ids == ["s1", "f1"]
    s4, r = accept_intervention(s3, "steer", Steer(id="s2", message="model instance"), NOW)
    assert r is None and len(s4.pending_steers) == 2
    _, r = accept_intervention(s4, "nudge", {"id": "n", "message": "x"}, NOW)
    assert "unknown intervention kind" in r


def test_a_steer_sent_without_an_id_is_named_once_by_the_workflow_clock_and_its_content():
    """What an owner types into the Web UI's Send Signal or `temporal workflow signal --input`: no id."""
    s = GolemState(golem_id="t")
    s, r = accept_intervention(s, "steer", {"message": "reduce exposure", "severity": "high"}, NOW)
    assert r is None and len(s.pending_steers) == 1 and re.fullmatch(r"auto-[0-9a-f]{12}", s.pending_steers[0].id)
    same, r = accept_intervention(s, "steer", {"message": "reduce exposure", "severity": "high"}, NOW)
    assert r is None and len(same.pending_steers) == 1  # the same payload in the same instant: one steer
    other, _ = accept_intervention(s, "steer", {"message": "repay", "severity": "high"}, NOW)
    later, _ = accept_intervention(s, "steer", {"message": "reduce exposure", "severity": "high"}, "2026-01-01T00:05:00+00:00")
    assert len(other.pending_steers) == 2 and len(later.pending_steers) == 2
    assert len({x.id for x in [*other.pending_steers, *later.pending_steers]}) == 3


def test_bounded_rejections_and_seen_ids():
    s = GolemState(golem_id="t")
    for i in range(MAX_REJECTED + 5):
        s, _ = accept_intervention(s, "steer", {"id": f"bad{i}"}, NOW)
    assert len(s.rejected_interventions) == MAX_REJECTED
    assert '"bad24"' in s.rejected_interventions[-1].payload_excerpt
    s = GolemState(golem_id="t", seen_intervention_ids=[f"old{i}" for i in range(MAX_SEEN_IDS)])
    s, _ = accept_intervention(s, "follow_up", {"id": "new", "message": "x"}, NOW)
    assert len(s.seen_intervention_ids) == MAX_SEEN_IDS and s.seen_intervention_ids[-1] == "new"
    assert "old0" not in s.seen_intervention_ids


# ---- tick results ------------------------------------------------------------------------------

def test_fold_tick_result_basics():
    s0 = GolemState(golem_id="t", pending_steers=[Steer(id="s1", message="a"), Steer(id="s2", message="b")],
                    pending_followups=[FollowUp(id="f1", message="c")], spend_day="2025-03-01", daily_spend_usd=1.0)
    before = s0.model_dump()
    s1 = fold_tick_result(s0, result(tier=Tier.T2, pe=0.9, cost=0.05, steers=["s1"], followups=["f1"]), NOW,
                          CLOCK, HB)
    assert s0.model_dump() == before  # pure
    assert s1.tick == 1 and s1.regime == MarketRegime.RANGE_BOUND
    assert s1.price_history == [2000.0] and s1.gas_history == [1.5]
    assert s1.last_tvl == 4e6 and s1.last_oracle_price == pytest.approx(2002.0)
    assert s1.position_health == {"p": 1.9}
    assert [x.id for x in s1.pending_steers] == ["s2"] and s1.pending_followups == []
    assert s1.daily_spend_usd == pytest.approx(1.05) and s1.total_inference_usd == pytest.approx(0.05)
    assert s1.total_gas_usd == pytest.approx(0.01)
    assert s1.recent_ticks[-1].tier == Tier.T2 and s1.recent_ticks[-1].actions == 1
    assert s1.pad.arousal == pytest.approx(0.3 * 0.9)
    assert s1.strategy_confidence == pytest.approx(0.48)
    # range_bound = 2× base, T2 = 0.5× → 2 s
    assert s1.theta_seconds == pytest.approx(2.0)


def test_spend_resets_at_utc_midnight():
    s = GolemState(golem_id="t", spend_day="2025-03-01", daily_spend_usd=9.5)
    s = fold_tick_result(s, result(cost=0.1), "2025-03-02T00:00:01Z", CLOCK, HB)
    assert s.spend_day == "2025-03-02" and s.daily_spend_usd == pytest.approx(0.1)
    # 01:30 at +02:00 is still the previous UTC day
    assert utc_day("2025-03-02T01:30:00+02:00") == "2025-03-01"


def test_the_gas_ledger_the_cage_counts_is_what_the_state_shows():
    """A reset run's or a rerun's transactions are in the risk store, not in any result the parent folded: the
    ledger the tick hands back lifts the day's and the total's figures to it; a ledger of another day moves only
    the total; a result from before the ledger adds its own gas as it always did."""
    s0 = GolemState(golem_id="t", spend_day="2025-03-01", daily_gas_usd=1.0, total_gas_usd=5.0)
    s = fold_tick_result(s0, result().model_copy(update={"gas_ledger": GasLedger(
        day="2025-03-01", today_usd=3.5, total_usd=9.0)}), NOW, CLOCK, HB)
    assert (s.daily_gas_usd, s.total_gas_usd) == (pytest.approx(3.5), pytest.approx(9.0))
    s = fold_tick_result(s0, result().model_copy(update={"gas_ledger": GasLedger(
        day="2025-02-28", today_usd=3.5, total_usd=9.0)}), NOW, CLOCK, HB)
    assert (s.daily_gas_usd, s.total_gas_usd) == (pytest.approx(1.01), pytest.approx(9.0))
    s = fold_tick_result(s0, result(), NOW, CLOCK, HB)
    assert (s.daily_gas_usd, s.total_gas_usd) == (pytest.approx(1.01), pytest.approx(5.01))
    # a store that holds less (verify never ran for a sent action) lowers nothing the results counted
    s = fold_tick_result(s0, result().model_copy(update={"gas_ledger": GasLedger(
        day="2025-03-01", today_usd=0.0, total_usd=0.0)}), NOW, CLOCK, HB)
    assert (s.daily_gas_usd, s.total_gas_usd) == (pytest.approx(1.01), pytest.approx(5.01))


def test_budget_pressure_lowers_economic_vitality_and_slows_clock():
    s = GolemState(golem_id="t", spend_day="2025-03-01", daily_spend_usd=9.2)
    s = fold_tick_result(s, result(regime="trending_up"), NOW, CLOCK, HB)
    assert s.vitality.economic == pytest.approx(1 - 0.5 * 0.92)
    assert s.phase == BehavioralPhase.STABLE
    assert s.theta_seconds == pytest.approx(4.0)  # 2 s × 1.0 × 2 past the soft cap


def test_quiet_ticks_raise_confidence_boundedly():
    s = GolemState(golem_id="t", strategy_confidence=0.999)
    for i in range(5):
        s = fold_tick_result(s, result(tick=i, pe=0.0), NOW, CLOCK, HB)
    assert s.strategy_confidence == 1.0
    assert s.pad.arousal == 0.0


def test_fold_failure_keeps_steers_and_counts():
    s0 = GolemState(golem_id="t", tick=7, pending_steers=[Steer(id="s1", message="a")], consecutive_failures=1)
    s1 = fold_tick_failure(s0, 7, "boom " * 500, "golem-t-tick-7", "run-1", NOW)
    assert s0.tick == 7 and s0.failed_ticks == []
    assert s1.tick == 8 and s1.failed_ticks == [7] and s1.consecutive_failures == 2
    assert [x.id for x in s1.pending_steers] == ["s1"]
    last = s1.recent_ticks[-1]
    assert last.failed and last.workflow_id == "golem-t-tick-7" and len(last.error) <= 500
    s2 = fold_tick_result(s1, result(tick=8), NOW, CLOCK, HB)
    assert s2.consecutive_failures == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.floats(1.0, 5000.0), st.sampled_from(list(Tier))), min_size=1,
                max_size=160))
def test_histories_stay_bounded_and_fold_is_pure(events):
    s = GolemState(golem_id="t")
    for i, (ok, price, tier) in enumerate(events):
        snapshot = s.model_dump()
        if ok:
            new = fold_tick_result(s, result(tick=s.tick, tier=tier, price=price, pe=0.2), NOW, CLOCK, HB)
        else:
            new = fold_tick_failure(s, s.tick, "err", f"w{i}", "", NOW)
        assert s.model_dump() == snapshot
        assert new.tick == s.tick + 1
        s = new
    assert len(s.price_history) <= PRICE_HISTORY_LEN and len(s.gas_history) <= GAS_HISTORY_LEN
    assert len(s.recent_ticks) <= MAX_RECENT_TICKS and len(s.failed_ticks) <= MAX_FAILED_TICKS
    assert 0.0 <= s.strategy_confidence <= 1.0 and -1.0 <= s.pad.arousal <= 1.0
    if events[-1][0]:  # fold_tick_failure has no clock and leaves theta as it was
        assert CLOCK.theta_min_seconds <= s.theta_seconds <= CLOCK.theta_max_seconds


def test_delta_and_dream_schedule():
    s = GolemState(golem_id="t", tick=49)
    assert not should_run_delta(s, CLOCK)
    s = s.model_copy(update={"tick": 50})
    assert should_run_delta(s, CLOCK)
    s = note_delta_run(s)
    assert s.last_delta_tick == 50 and not should_run_delta(s, CLOCK)
    s = GolemState(golem_id="t", tick=200, last_delta_tick=150)
    assert should_run_delta(s, CLOCK) and not should_dream(s, CLOCK)  # never on a delta tick
    s = note_delta_run(s).model_copy(update={"tick": 201})
    assert should_dream(s, CLOCK)
    assert not should_dream(s.model_copy(update={"dreaming": True}), CLOCK)


def test_low_severity_steer_while_executing_becomes_a_follow_up():
    from golem.cognition.fold import steers_to_followups
    from golem.models.enums import DeliveryWindow
    from golem.models.interventions import Steer
    from golem.models.state import GolemState

    state = GolemState(golem_id="g", pending_steers=[Steer(id="a", message="trim a bit", severity="low"),
                                                     Steer(id="b", message="stop", severity="high")])
    out = steers_to_followups(state, ["a"])
    assert [s.id for s in out.pending_steers] == ["b"]
    assert [(f.id, f.message, f.window) for f in out.pending_followups] == [("a", "trim a bit", DeliveryWindow.NEXT_DECIDE)]
    assert len(state.pending_steers) == 2, "pure: the input is unchanged"
    assert steers_to_followups(state, []) is state


def test_rejections_are_dated_by_the_first_tick_that_sees_them():
    s = GolemState(golem_id="t", tick=7)
    s, _ = accept_intervention(s, "steer", {"id": "between"}, NOW)  # waiting: tick 7 has not taken its snapshot
    s, _ = accept_intervention(s, "steer", {"id": "during"}, NOW, tick_running=True)  # tick 7 runs already
    assert [(r.tick, r.received_at) for r in s.rejected_interventions] == [(7, NOW), (8, NOW)]
    assert [r.payload_excerpt for r in rejections_for_record(s, 8)] == ['{"id": "during"}']


def test_rejections_leave_status_after_visible_ticks_and_undated_ones_go_at_once():
    from golem.models.interventions import RejectedIntervention

    s = GolemState(golem_id="t", tick=3)
    s, _ = accept_intervention(s, "steer", {"id": "bad"}, NOW)
    legacy = RejectedIntervention(kind="steer", reason="old", payload_excerpt="{}")
    s = s.model_copy(update={"rejected_interventions": [legacy, *s.rejected_interventions]})
    for _ in range(REJECTION_VISIBLE_TICKS - 1):
        s = expire_rejections(fold_tick_failure(s, s.tick, "x", "w", "", NOW))
        assert [r.tick for r in s.rejected_interventions] == [3], s.tick
    s = expire_rejections(fold_tick_failure(s, s.tick, "x", "w", "", NOW))
    assert s.tick == 3 + REJECTION_VISIBLE_TICKS and s.rejected_interventions == []


def test_a_kill_that_lands_during_a_tick_survives_the_ticks_fold():
    """The owner's kill sets death_cause while a tick runs; that tick's result carries the life its
    reflect computed from the living state, and must not erase the kill."""
    from golem.models.life import LifeState
    from golem.models.state import LifeUpdate, PADVector, VitalityState

    state = GolemState(golem_id="g").model_copy(update={"life": LifeState(death_cause="owner", death_detail="done")})
    result = TickResult(tick=0, tier=Tier.T0, regime="unknown", prediction_error=0.0, threshold=0.3, price=1.0,
                        gas_price_gwei=1.0, tvl=1.0, oracle_price=1.0,
                        life=LifeUpdate(life=LifeState(ticks_lived=1), vitality=VitalityState(), phase="thriving",
                                        pad=PADVector()))
    new = fold_tick_result(state, result, "2026-01-01T00:00:00+00:00", ClockSection(), HeartbeatSection())
    assert new.life.death_cause == "owner" and new.life.death_detail == "done" and new.life.ticks_lived == 1
