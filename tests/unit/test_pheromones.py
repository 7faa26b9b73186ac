"""The pheromone field's arithmetic (decay, reinforcement, reading), what a tick lays, and the prediction error's
pheromone term (docs/design/pheromones.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golem.clade.deposits import deposits_from
from golem.clade.field import FLOOR, apply_batch, everything, intensity_at, lay, parse_batch, pruned, read
from golem.cognition.prediction_error import W_PHEROMONE, compute_prediction_error
from golem.models.config import CladeSection
from golem.models.enums import ActionStatus, ProbeSeverity, Tier
from golem.models.observation import Anomaly, LiquidationEvent
from golem.models.pheromones import Deposit, DepositBatch, FieldState, PheromoneReading, PheromoneReadings, Trail
from golem.models.record import ActionRecord, DecisionCycleRecord, OutcomeRecord
from tests.unit.test_prediction_error_gate import make

POOL = "pool:0x" + "ab" * 20
ORACLE = "oracle:0x" + "cd" * 20
MARKET = "lending_market:0x" + "ef" * 20
CHAIN = "chain:31337"


def dep(entity=POOL, kind="threat", intensity=0.8, half_life_s=60.0, depositor="a", reason="") -> Deposit:
    return Deposit(entity=entity, kind=kind, intensity=intensity, half_life_s=half_life_s, depositor=depositor,
                   reason=reason)


def test_a_trail_halves_every_half_life_from_its_deposit():
    t = Trail(entity=POOL, kind="threat", depositor="a", intensity=0.8, half_life_s=60.0, laid_at=1000.0)
    assert intensity_at(t, 1000.0) == 0.8
    assert intensity_at(t, 1060.0) == pytest.approx(0.4)
    assert intensity_at(t, 1180.0) == pytest.approx(0.1)
    assert intensity_at(t, 900.0) == 0.8  # a clock behind the deposit never reads more


def test_the_same_depositor_reinforces_others_lay_beside():
    trails = lay([], dep(intensity=0.6), 0.0)
    trails = lay(trails, dep(intensity=0.6, half_life_s=120.0), 60.0)  # 0.3 left + 0.6, clock restarted
    assert len(trails) == 1 and trails[0].intensity == pytest.approx(0.9) and trails[0].laid_at == 60.0
    assert trails[0].half_life_s == 120.0 and trails[0].deposits == 2
    trails = lay(trails, dep(intensity=0.9), 60.0)
    assert trails[0].intensity == 1.0  # capped
    trails = lay(trails, dep(depositor="b", intensity=0.2), 60.0)
    assert sorted(t.depositor for t in trails) == ["a", "b"]


def test_a_batch_applies_once_and_faded_trails_go():
    state = FieldState(clade="c")
    batch = DepositBatch(id="a/1/r", deposits=[dep(), dep(entity=CHAIN, kind="congestion", intensity=0.4)])
    state, n = apply_batch(state, batch, 0.0)
    assert n == 2 and len(state.trails) == 2
    again, n = apply_batch(state, batch, 10.0)  # a retried send
    assert n == 0 and again == state
    assert pruned(state.trails, 60.0 * 7) == [t for t in state.trails if t.intensity * 2 ** -7 >= FLOOR]
    assert [t.entity for t in pruned(state.trails, 60.0 * 6)] == [POOL]  # 0.4/64 < 0.01 <= 0.8/64


def test_a_golem_reads_its_peers_on_its_entities_not_itself():
    state = FieldState(clade="c")
    state, _ = apply_batch(state, DepositBatch(id="1", deposits=[dep(depositor="a"), dep(entity=ORACLE, depositor="b"),
                                                                 dep(entity=MARKET, depositor="b")]), 0.0)
    seen = read(state, [POOL, ORACLE], "b", 60.0)
    assert [(r.entity, r.depositor, r.intensity) for r in seen.readings] == [(POOL, "a", pytest.approx(0.4))]
    assert seen.max_threat_intensity() == pytest.approx(0.4)
    assert read(state, [POOL], "a", 60.0).readings == []  # its own trail: it saw that itself
    assert [r.entity for r in everything(state, 0.0)] == sorted([MARKET, ORACLE, POOL])


def test_peers_on_one_entity_combine_without_passing_one():
    r = PheromoneReadings(clade="c", readings=[
        PheromoneReading(entity=POOL, kind="threat", intensity=0.5, half_life_s=1, depositor="a", age_s=0),
        PheromoneReading(entity=POOL, kind="threat", intensity=0.5, half_life_s=1, depositor="b", age_s=0),
        PheromoneReading(entity=ORACLE, kind="threat", intensity=0.6, half_life_s=1, depositor="a", age_s=0),
        PheromoneReading(entity=ORACLE, kind="opportunity", intensity=1.0, half_life_s=1, depositor="a", age_s=0)])
    assert r.intensity("threat", POOL) == pytest.approx(0.75)
    assert r.max_threat_intensity() == pytest.approx(0.75)
    assert r.intensity("congestion") == 0.0


@given(st.lists(st.floats(min_value=0.01, max_value=1.0), min_size=1, max_size=6))
def test_combined_intensity_stays_in_range_and_grows_with_peers(xs):
    rs = [PheromoneReading(entity=POOL, kind="threat", intensity=x, half_life_s=1, depositor=f"g{i}", age_s=0)
          for i, x in enumerate(xs)]
    total = PheromoneReadings(clade="c", readings=rs).max_threat_intensity()
    assert max(xs) - 1e-12 <= total <= 1.0


@pytest.mark.parametrize("raw, words", [
    ({"id": "x", "deposits": [{"entity": POOL, "kind": "panic", "intensity": 0.5, "half_life_s": 1, "depositor": "a"}]},
     "deposits.0.kind"),
    ({"id": "x", "deposits": [{"entity": POOL, "kind": "threat", "intensity": 3, "half_life_s": 1, "depositor": "a"}]},
     "deposits.0.intensity"),
    ({"id": "x", "deposits": [{"entity": "the pool", "kind": "threat", "intensity": 0.5, "half_life_s": 1,
                               "depositor": "a"}]}, "deposits.0.entity"),
    ({"id": "x", "deposits": [{"entity": POOL, "kind": "threat", "intensity": 0.5, "half_life_s": 0,
                               "depositor": "a"}]}, "deposits.0.half_life_s"),
    ({"id": "x", "deposits": []}, "deposits"),
    ("not a batch", "batch"),
])
def test_a_malformed_batch_is_refused_saying_where(raw, words):
    with pytest.raises(ValueError, match="malformed pheromone deposit") as err:
        parse_batch(raw)
    assert words in str(err.value) and "threat|opportunity|congestion" in str(err.value)


# ---- what a tick lays ------------------------------------------------------------------------------------------

def record(obs, *, actions=(), outcome=None, verdict=None) -> DecisionCycleRecord:
    from golem.models.record import ExpectedOutcome, Reflexion
    rec = DecisionCycleRecord(tick=5, timestamp="2026-11-27T00:00:00+00:00", golem_id="a", observation=obs,
                              regime=obs.regime, prediction_error=0.2, deliberation_threshold=0.3, tier=Tier.T1,
                              gating_reason="x", actions=list(actions), outcome=outcome)
    if verdict:
        rec.reflexion = Reflexion(verdict=verdict, expected=ExpectedOutcome())
    return rec


def clade_obs(**kw):
    _, obs = make()
    return obs.model_copy(update={"pheromones": PheromoneReadings(clade="c", entities=[POOL, ORACLE, MARKET, CHAIN]),
                                  **kw})


CFG = CladeSection(id="c", threat_half_life_s=100, opportunity_half_life_s=50, congestion_half_life_s=10)


def test_a_tick_lays_what_it_saw():
    obs = clade_obs(anomalies=[
        Anomaly(probe="circuit_breaker", severity=ProbeSeverity.HIGH, description="pool 4 % off the oracle"),
        Anomaly(probe="gas_price", severity=ProbeSeverity.LOW, description="gas 3x"),
        Anomaly(probe="price_delta", severity=ProbeSeverity.HIGH, description="moved")],  # its own: no pheromone
        liquidations=[LiquidationEvent(tx_hash="0x1", log_index=0, block_number=1, collateral_asset="WETH",
                                       debt_asset="USDC", debt_covered=100, collateral_seized=0.1, liquidator="0x2")])
    sandwich = ActionRecord(action_index=0, action_type="swap", tool_name="swap", status=ActionStatus.BLOCKED,
                            threats=["sandwich (refused): loss 80 bps", "flash_loan: jump and revert"])
    laid = {(d.entity, d.kind): (d.intensity, d.half_life_s) for d in deposits_from(record(obs, actions=[sandwich]), CFG)}
    assert laid == {(ORACLE, "threat"): (0.8, 100), (CHAIN, "congestion"): (0.4, 10), (MARKET, "threat"): (1.0, 100),
                    (POOL, "threat"): (0.8, 100)}


def test_a_verified_action_that_paid_lays_an_opportunity_and_one_that_did_not_lays_none():
    swap = ActionRecord(action_index=0, action_type="swap", tool_name="swap", status=ActionStatus.EXECUTED)
    ok = OutcomeRecord(verified=True)
    laid = deposits_from(record(clade_obs(), actions=[swap], outcome=ok, verdict="positive"), CFG)
    assert [(d.entity, d.kind, d.intensity, d.half_life_s) for d in laid] == [(POOL, "opportunity", 0.5, 50)]
    assert deposits_from(record(clade_obs(), actions=[swap], outcome=ok, verdict="negative"), CFG) == []
    assert deposits_from(record(clade_obs(), actions=[swap], outcome=OutcomeRecord(verified=False),
                                verdict="positive"), CFG) == []


def test_a_lone_golem_lays_nothing():
    _, obs = make()
    hot = obs.model_copy(update={"anomalies": [Anomaly(probe="gas_price", severity=ProbeSeverity.HIGH, description="x")]})
    assert deposits_from(record(hot), CFG) == []  # no readings at observe: no clade then
    assert deposits_from(record(clade_obs(anomalies=hot.anomalies)), CladeSection()) == []


# ---- the prediction error's term -------------------------------------------------------------------------------

def test_the_pheromone_term_is_peer_threat_times_its_weight():
    state, obs = make()
    assert compute_prediction_error(state, obs)[1]["pheromone_threat"] == 0.0  # lone golem
    peers = PheromoneReadings(clade="c", entities=[POOL], readings=[
        PheromoneReading(entity=POOL, kind="threat", intensity=0.6, half_life_s=1, depositor="a", age_s=0),
        PheromoneReading(entity=POOL, kind="opportunity", intensity=1.0, half_life_s=1, depositor="a", age_s=0)])
    pe0, _ = compute_prediction_error(state, obs)
    pe, src = compute_prediction_error(state, obs.model_copy(update={"pheromones": peers}))
    assert W_PHEROMONE == 0.15 and src["pheromone_threat"] == pytest.approx(0.6 * 0.15)
    assert pe == pytest.approx(pe0 + 0.09)
    # the oracle-off form takes the max of the signals, the threat among them
    pe, src = compute_prediction_error(state, obs.model_copy(update={"pheromones": peers}), oracle_enabled=False)
    assert src["pheromone_threat"] == pytest.approx(0.6) and pe == pytest.approx(0.6)
    unread = PheromoneReadings(clade="c", entities=[POOL], error="not read")
    assert compute_prediction_error(state, obs.model_copy(update={"pheromones": unread}))[1]["pheromone_threat"] == 0.0



def test_a_backtest_golem_joins_no_clade(tmp_path):
    """A backtest's golem never lays on a live clade's field, whatever its home's golem.toml says."""
    from infra.backtest import _write_home

    src = tmp_path / "src"
    src.mkdir()
    (src / "golem.toml").write_text('[golem]\nid = "owner"\n\n[clade]\nid = "my-fleet"\nthreat_half_life_s = 60\n')
    cfg = _write_home(src, tmp_path / "dst", "bt", "http://127.0.0.1:1", tmp_path, {"clade": {"id": "x"}})
    assert cfg.clade.id == "" and "clade" not in (tmp_path / "dst" / "golem.toml").read_text()
