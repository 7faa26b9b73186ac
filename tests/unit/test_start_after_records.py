"""A golem started without its workflow state on a data dir with records numbers its ticks on from the last one, so
no record of the earlier life is overwritten (infra.stack.after_recorded_ticks)."""

from __future__ import annotations

from golem.cognition.system1 import synthetic_snapshot
from golem.life.cycle_store import CycleStore
from golem.models.config import GolemConfig
from golem.models.enums import MarketRegime, Tier
from golem.models.observation import Observation
from golem.models.record import DecisionCycleRecord
from golem.models.state import GolemState
from infra.stack import after_recorded_ticks


def _record(tick: int) -> DecisionCycleRecord:
    obs = Observation(snapshot=synthetic_snapshot(2000.0, 0), regime=MarketRegime.RANGE_BOUND, observed_at="t")
    return DecisionCycleRecord(tick=tick, timestamp="2026-01-01T00:00:00+00:00", golem_id="g", observation=obs,
                               regime=obs.regime, prediction_error=0.0, deliberation_threshold=0.3, tier=Tier.T0,
                               gating_reason="T0", inference_cost=0.0, gas_cost=0.0, total_cost=0.0)


def test_a_fresh_start_on_records_numbers_on_from_the_last_tick(tmp_path):
    cfg = GolemConfig()
    assert after_recorded_ticks(cfg, tmp_path, None) is None  # nothing recorded: a newborn stays a newborn
    for t in (0, 1, 41):
        CycleStore(tmp_path).persist(_record(t))
    fresh = after_recorded_ticks(cfg, tmp_path, None)
    assert fresh is not None and fresh.tick == 42
    inherited = after_recorded_ticks(cfg, tmp_path, GolemState(golem_id="g", tick=3, theta_seconds=9.0))
    assert inherited is not None and (inherited.tick, inherited.theta_seconds) == (42, 9.0)
    ahead = after_recorded_ticks(cfg, tmp_path, GolemState(golem_id="g", tick=100))
    assert ahead is not None and ahead.tick == 100


def test_a_former_lifes_records_numbered_past_the_golems_last_tick_are_left_out_of_recent(tmp_path):
    store = CycleStore(tmp_path)
    for t in range(10):  # a former life, ticks 0..9
        store.persist(_record(t))
    assert [r["tick"] for r in store.recent(3)] == [9, 8, 7] and store.former_ticks() == 0
    for t in range(4):  # a golem restarted on the data dir before its ticks were numbered on (its tick 0..3)
        store.persist(_record(t))
    assert [r["tick"] for r in store.recent(3)] == [3, 2, 1]
    assert [r["tick"] for r in store.recent(3, former=True)] == [9, 8, 7] and store.former_ticks() == 6
    fresh = after_recorded_ticks(GolemConfig(), tmp_path, None)
    assert fresh is not None and fresh.tick == 10  # a new start still numbers past every record
