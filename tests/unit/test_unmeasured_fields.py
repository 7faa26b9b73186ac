"""A record field is computed from what happened, or it is absent. pad_after, primary_emotion and
credit_consumed are computed by the after_turn chain's daimon and lifespan (tests/unit/
test_life_after_turn.py); the record step 9 builds before that chain leaves them out, the cycle index stores NULL,
the episode has no emotional tag — and records written before, which carry the old constants, still load."""

from __future__ import annotations

import json

from golem.grimoire.episodes.model import episode_from_record
from golem.life.cycle_store import CycleStore, index_row
from golem.cognition.reflect import build_record
from golem.models.config import GolemConfig
from golem.models.enums import PlutchikLabel, Tier
from golem.models.record import UNMEASURED_FIELDS, DecisionCycleRecord
from golem.models.state import GolemState, PADVector
from golem.models.tick import AnalyzeResult, GateResult, ReflectInput, TickContext
from tests.unit.test_grimoire_episode_schema import record as schema_record


def _reflected() -> DecisionCycleRecord:
    base = schema_record(7)
    state = GolemState(golem_id="g1", pad=PADVector(pleasure=0.0, arousal=0.4, dominance=0.0))
    inp = ReflectInput(
        ctx=TickContext(golem_id="g1", tick=7, config=GolemConfig(), state=state),
        observation=base.observation, analysis=AnalyzeResult(prediction_error=0.4),
        gate=GateResult(tier=Tier.T1, threshold=0.3, reason="PE above threshold"), fsm_trace=["Observing"],
    )
    return build_record(inp, "2026-03-01T12:00:00+00:00")


def test_reflect_records_the_affect_it_measured_and_leaves_out_what_nothing_computes():
    rec = _reflected()
    assert rec.pad_before.arousal == 0.4  # the state going into the tick: measured (PE EMA, gamma violations)
    assert rec.pad_after is None and rec.primary_emotion is None and rec.credit_consumed is None
    data = json.loads(rec.model_dump_json())
    assert not set(UNMEASURED_FIELDS) & set(data), "an unmeasured field was written into the record"
    assert data["pad_before"]["arousal"] == 0.4 and "outcome" in data  # other None fields are kept
    assert DecisionCycleRecord.model_validate(data) == rec


def test_the_cycle_index_and_the_episode_carry_no_invented_affect(tmp_path):
    rec = _reflected()
    assert index_row(rec)["primary_emotion"] is None
    store = CycleStore(tmp_path)
    store.persist(rec)
    shown = json.loads((tmp_path / "cycles" / "cycle-000007.json").read_text())
    assert "pad_after" not in shown and "credit_consumed" not in shown
    assert episode_from_record(rec).emotional_tag is None


def test_a_record_written_before_still_loads_with_its_values():
    old = json.loads(schema_record(3).model_dump_json())
    old.update(pad_after={"pleasure": 0.0, "arousal": 0.2, "dominance": 0.0}, primary_emotion="anticipation",
               credit_consumed=0.0)
    rec = DecisionCycleRecord.model_validate(old)
    assert rec.primary_emotion == PlutchikLabel.ANTICIPATION and rec.credit_consumed == 0.0
    assert rec.pad_after is not None and rec.pad_after.arousal == 0.2
    assert index_row(rec)["primary_emotion"] == "anticipation"
    assert episode_from_record(rec).emotional_tag == "neutral"  # pleasure 0: no valence (PAD_NEUTRAL_PLEASURE)
