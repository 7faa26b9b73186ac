"""The gas partition through the real validate / execute / verify activities on Anvil: with only the
emergency slice left, a routine swap and a routine repay (HF 2.06, far from every line) are deferred, while the
same repay with the health factor under the strategy's repay line is urgent and sent (its record says so); an
owner's high steer that interrupted decide makes the swap urgent; the partition's day is the tick's started_at
(path time), so two days later the swap goes through; verify stamps the gas on the tick's day."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from temporalio.testing import ActivityEnvironment

from activities.tick import TickActivities
from golem.models.enums import ActionStatus
from golem.models.interventions import Steer
from golem.models.state import GolemState
from golem.models.tick import (
    ExecuteInput,
    ObserveInput,
    ProposedAction,
    SimulateInput,
    TickContext,
    ValidateInput,
    VerifyInput,
)
from tests.integration.golem_rig import make_rig

pytestmark = pytest.mark.integration

T = datetime(2026, 11, 22, 9, 0, tzinfo=timezone.utc)


@pytest.fixture
def rig(tmp_path):
    rig = make_rig(tmp_path, "gas-golem", "calm")
    yield rig
    rig.stop()


def test_only_protective_actions_reach_the_emergency_slice_on_the_ticks_clock(rig):
    acts = TickActivities(rig.services())
    risk = acts.s.safety.risk
    for i in range(36):  # $9.00 of the $10 partition spent earlier on the path's day: $1 of the $2 slice left
        risk.record_outcome(rig.golem_id, i, 0, "swap", opens_exposure=False, verified=True, value_usd=100,
                            pnl_usd=0, gas_usd=0.25, now=T.timestamp())

    def ctx(tick: int, at: datetime) -> TickContext:
        return TickContext(golem_id=rig.golem_id, tick=tick, config=rig.config, state=GolemState(golem_id=rig.golem_id),
                           started_at=at.isoformat())

    def validate(c: TickContext, actions, steers=()):
        obs = acts.observe(ObserveInput(ctx=c))
        sim = acts.simulate(SimulateInput(ctx=c, observation=obs, actions=actions))
        val = acts.validate(ValidateInput(ctx=c, observation=obs, actions=actions, simulation=sim, steers=list(steers)))
        return obs, sim, val

    swap = ProposedAction(action_index=0, tool="swap", rationale="protective: the model says so",
                          arguments={"token_in": "USDC", "token_out": "WETH", "amount_in": 200})  # buys exposure
    repay = ProposedAction(action_index=1, tool="repay", arguments={"amount": 50})

    c = ctx(100, T + timedelta(hours=1))
    obs, sim, val = validate(c, [swap, repay])
    assert [v.deferred for v in val.actions] == [True, True]  # HF 2.06: the repay is routine
    assert "routine actions" in val.actions[1].reason and val.actions[1].protective is None
    # the health factor fell 0.1 a tick: the downtrend sell's 1.9 line is 1.6 ticks away, but that rule cannot fire
    # (no downtrend), so it is no line to the position: a sell into USDC is routine and waits (1.6 is 4.6 ticks away)
    sell = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 0.1})
    falling = c.model_copy(update={"state": GolemState(golem_id=rig.golem_id, health_history=[2.3, 2.2, 2.1])})
    sell_obs, _, sold = validate(falling, [sell])
    assert sell_obs.regime.value != "trending_down" and 2.0 < sell_obs.min_health_factor() < 2.1
    assert sold.actions[0].deferred and "routine actions" in sold.actions[0].reason, sold.actions[0].reason
    # the health factor fell 0.3 a tick over the last ticks: the repay line 1.6 is 1.5 ticks away, within the
    # 3-tick horizon — the same repay is urgent
    c = c.model_copy(update={"state": GolemState(golem_id=rig.golem_id, health_history=[2.9, 2.6, 2.3])})
    obs, sim, val = validate(c, [swap, repay])
    deferred, approved = val.actions
    assert not deferred.approved and "gas gate: defer" in deferred.reason and deferred.protective is None
    assert approved.approved and approved.protective.startswith("urgent") and "emergency slice" in approved.protective
    records = ActivityEnvironment().run(
        acts.execute, ExecuteInput(ctx=c, observation=obs, actions=[repay], validation=val)).records
    assert records[0].status is ActionStatus.EXECUTED and records[0].protective == approved.protective
    assert records[0].gas_cost > 0
    acts.verify(VerifyInput(ctx=c, observation=obs, actions=[swap, repay], simulation=sim, records=records))
    day, spent, _ = risk.gas_spent_on_day(rig.golem_id, (T + timedelta(hours=1)).timestamp())
    assert day == "2026-11-22" and spent == pytest.approx(9.0 + records[0].gas_cost)

    # an owner's high steer that arrived while the tick was deciding makes its swap protective
    high = Steer(id="s-high", message="reduce exposure", severity="high")
    _, _, val = validate(ctx(101, T + timedelta(hours=2)), [swap], steers=[high])
    assert val.actions[0].approved and "owner steer s-high (high)" in val.actions[0].protective

    # two days later on the path the partition is fresh: the same routine swap goes through as routine
    _, _, val = validate(ctx(102, T + timedelta(days=2)), [swap])
    assert val.actions[0].approved and val.actions[0].protective is None


def test_a_learned_sell_on_its_crossed_line_draws_on_the_slice_the_routine_sells_spent(rig):
    """Urgency, not the tool: with the day's routine share spent, a sell into USDC waits — unless a rule it answers
    fires on a health-factor line the position is under. Here that rule is a learned one in PLAYBOOK.md (HF 2.06
    under its 2.5 line): the validate activity reads it, the sell is urgent and draws on the slice."""
    acts = TickActivities(rig.services())
    for i in range(32):  # $8.00 of the $10 partition spent: nothing left outside the $2 slice
        acts.s.safety.risk.record_outcome(rig.golem_id, i, 0, "swap", opens_exposure=False, verified=True,
                                          value_usd=100, pnl_usd=0, gas_usd=0.25, now=T.timestamp())
    c = TickContext(golem_id=rig.golem_id, tick=100, config=rig.config, state=GolemState(golem_id=rig.golem_id),
                    started_at=(T + timedelta(hours=1)).isoformat())
    sell = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 0.2})

    def validated():
        obs = acts.observe(ObserveInput(ctx=c))
        sim = acts.simulate(SimulateInput(ctx=c, observation=obs, actions=[sell]))
        return acts.validate(ValidateInput(ctx=c, observation=obs, actions=[sell], simulation=sim)).actions[0]

    before = validated()
    assert before.deferred and "emergency slice is kept" not in before.reason and "routine" in before.reason
    acts.s.playbook_path.write_text("<!-- golem PLAYBOOK revision: 1 -->\n# PLAYBOOK\n\n## Global\n\n"
                                    "- WHEN health_factor < 2.5 THEN swap 1% WETH to USDC "
                                    "_(confidence 0.90, 5 episodes, h-0123456789abcdef)_\n")
    after = validated()
    assert after.approved and after.protective.startswith("urgent"), after.reason
    assert "under the line 2.5 of PLAYBOOK.md:6" in after.protective and "emergency slice" in after.protective


def test_a_sell_a_deferral_would_carry_into_the_horizon_is_sent_a_repay_waits(rig):
    """Through the validate activity on the rig: the health factor (~2.06) fell 0.13 a tick, so the repay line 1.6
    is 3.5 ticks away at the worst move — past the 3-tick horizon, within it after the tick a deferral waits. With
    the routine share spent, the WETH→USDC sell is urgent and draws on the slice; the repay, which loses nothing by
    waiting, is routine and deferred."""
    acts = TickActivities(rig.services())
    for i in range(32):  # $8.00 of the $10 partition spent: nothing left outside the $2 slice
        acts.s.safety.risk.record_outcome(rig.golem_id, i, 0, "swap", opens_exposure=False, verified=True,
                                          value_usd=100, pnl_usd=0, gas_usd=0.25, now=T.timestamp())
    state = GolemState(golem_id=rig.golem_id, health_history=[2.45, 2.32, 2.19])
    c = TickContext(golem_id=rig.golem_id, tick=100, config=rig.config, state=state,
                    started_at=(T + timedelta(hours=1)).isoformat())
    sell = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 0.1})
    repay = ProposedAction(action_index=1, tool="repay", arguments={"amount": 50})
    obs = acts.observe(ObserveInput(ctx=c))
    assert 2.0 < obs.min_health_factor() < 2.1 and obs.regime.value != "trending_down"
    sim = acts.simulate(SimulateInput(ctx=c, observation=obs, actions=[sell, repay]))
    sold, waited = acts.validate(ValidateInput(ctx=c, observation=obs, actions=[sell, repay], simulation=sim)).actions
    assert sold.approved and sold.protective.startswith("urgent"), sold.reason
    assert "at the worst move, within the horizon 3 after the 1 tick a deferral waits" in sold.protective
    assert "line 1.6" in sold.protective and "emergency slice" in sold.protective, sold.protective
    assert waited.deferred and "routine actions" in waited.reason, waited.reason
