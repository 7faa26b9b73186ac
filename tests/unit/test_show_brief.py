"""`golem show N --brief`: the tick as an owner reads it, from a real cycle store."""

from __future__ import annotations

from argparse import Namespace

from cli.records import cmd_show
from golem.cognition.system1 import synthetic_snapshot
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, MarketRegime, Tier
from golem.models.interventions import InterventionSummary
from golem.models.observation import Observation
from golem.models.record import ActionRecord, DecisionCycleRecord, DeliberationRecord, OutcomeRecord


def test_brief_says_why_what_and_what_it_cost(tmp_path, capsys):
    obs = Observation(snapshot=synthetic_snapshot(1590.0, 0, debt_usdc=8000.0), regime=MarketRegime.VOLATILE,
                      observed_at="t")
    rec = DecisionCycleRecord(
        tick=9, timestamp="2026-01-01T00:09:00+00:00", golem_id="g", observation=obs, regime=obs.regime,
        prediction_error=0.41, deliberation_threshold=0.3, tier=Tier.T2, gating_reason="forced T2: owner steer(s) s-9",
        active_interventions=[InterventionSummary(id="s-9", kind="steer", message="repay", severity="high")],
        deliberation=DeliberationRecord(model="offline-deliberator", tier=Tier.T2, decision="repay 2000 USDC",
                                        reasoning_summary="Fired: STRATEGY.md:27"),
        actions=[ActionRecord(action_index=0, action_type="write", tool_name="repay", status=ActionStatus.EXECUTED,
                              tx_hash="0xabc", gas_cost=0.46),
                 ActionRecord(action_index=1, action_type="write", tool_name="swap", status=ActionStatus.BLOCKED,
                              block_reason="policy: max trade size")],
        outcome=OutcomeRecord(verified=True, health_factor_before=1.59, health_factor_after=2.12, pnl_impact=-0.46),
        inference_cost=0.0, gas_cost=0.46, total_cost=0.46)
    CycleStore(tmp_path).persist(rec)
    assert cmd_show(Namespace(data=str(tmp_path), tick=9, run=None, runs=False, brief=True)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tick 9  2026-01-01T00:09:00+00:00  T2  regime volatile  PE 0.410 / θ 0.300  HF 1.590")
    assert "  why:      forced T2: owner steer(s) s-9" in out
    assert '  steer:    s-9 "repay" (high)' in out
    assert "  decided:  repay 2000 USDC  [offline-deliberator]" in out
    assert "  action 0: repay executed  tx 0xabc; gas $0.46" in out
    assert "  action 1: swap blocked  policy: max trade size" in out
    assert "  outcome:  verified; HF 1.590 → 2.120; value -0.46 USD" in out
    assert out[-1] == "  cost:     $0.4600 (inference $0.0000, gas $0.4600)"
    # without --brief: the JSON record, as before
    assert cmd_show(Namespace(data=str(tmp_path), tick=9, run=None, runs=False)) == 0
    assert capsys.readouterr().out.lstrip().startswith("{")


def test_brief_of_a_clade_member_says_what_it_read_and_laid(tmp_path, capsys):
    from golem.models.pheromones import PheromoneReading, PheromoneReadings

    oracle = "oracle:0x" + "cd" * 20
    obs = Observation(snapshot=synthetic_snapshot(1590.0, 0), observed_at="t", pheromones=PheromoneReadings(
        clade="fleet", entities=[oracle], readings=[PheromoneReading(entity=oracle, kind="threat", intensity=0.7,
                                                                     half_life_s=60, depositor="golem-a", age_s=3)]))
    rec = DecisionCycleRecord(tick=3, timestamp="2026-01-01T00:03:00+00:00", golem_id="g", observation=obs,
                              regime=obs.regime, prediction_error=0.105, deliberation_threshold=0.3, tier=Tier.T0,
                              gating_reason="below threshold", prediction_error_sources={"pheromone_threat": 0.105},
                              pheromones_laid=["congestion 0.40 on chain:31337"])
    CycleStore(tmp_path).persist(rec)
    home = tmp_path / "home"
    home.mkdir()
    (home / "golem.toml").write_text('[golem]\nid = "g"\n')
    assert cmd_show(Namespace(data=str(tmp_path), home=str(home), tick=3, run=None, runs=False, brief=True)) == 0
    assert (f"  clade:    fleet read threat 0.70 on {oracle} by golem-a (PE +0.105); laid congestion 0.40 on chain:31337"
            in capsys.readouterr().out.splitlines())
