"""`golem status` as a pure function of the golem's state and config version (no Temporal)."""

from __future__ import annotations

from golem.cognition.fold import new_golem_state
from golem.models.config import GolemConfig
from golem.models.enums import HeartbeatState
from golem.models.interventions import RejectedIntervention, Steer
from golem.usecases.status import golem_status

CFG = GolemConfig.model_validate({"golem": {"id": "g1"}, "gating": {"cold_start_ticks": 5},
                                  "heartbeat": {"max_daily_cost_usd": 7.5}, "lifespan": {"hayflick_ticks": 900}})


def status(state, config=CFG, **kw):
    args = {"activity": "waiting", "tick_workflow_id": None, "run_ticks": 3, "config_version": "abc"} | kw
    return golem_status(state, config, **args)


def test_the_answer_is_the_state_beside_the_config_budgets():
    s = new_golem_state(CFG).model_copy(update={
        "tick": 7, "dreaming": True, "daily_spend_usd": 1.25,
        "pending_steers": [Steer(id="s1", message="reduce exposure")],
        "rejected_interventions": [RejectedIntervention(kind="steer", reason=f"r{i}", payload_excerpt="")
                                   for i in range(8)],
        "failed_ticks": list(range(12)),
    })
    out = status(s, tick_workflow_id="golem-g1-tick-7")
    assert (out.golem_id, out.tick, out.activity, out.run_ticks, out.config_version) == ("g1", 7, "waiting", 3, "abc")
    assert out.current_tick_workflow_id == "golem-g1-tick-7"
    assert out.fsm.state == HeartbeatState.DREAMING
    assert (out.daily_spend_usd, out.max_daily_cost_usd) == (1.25, 7.5)
    assert [p.id for p in out.pending_steers] == ["s1"]
    assert [r.reason for r in out.rejected_interventions] == ["r3", "r4", "r5", "r6", "r7"]  # the last five
    assert out.failed_ticks == list(range(2, 12))  # the last ten
    assert out.learned_gating_active  # tick 7 is past the cold start of 5
    assert out.hayflick_ticks == 900 and out.dream_urgency is not None


def test_without_a_config_the_config_figures_are_absent():
    s = new_golem_state(CFG).model_copy(update={"tick": 2})
    out = status(s, config=None)
    assert not out.learned_gating_active and out.hayflick_ticks is None and out.dream_urgency is None
    assert out.max_daily_cost_usd == 0.0 and out.fsm.state != HeartbeatState.DREAMING
    assert not status(s).learned_gating_active  # tick 2: still in the cold start
