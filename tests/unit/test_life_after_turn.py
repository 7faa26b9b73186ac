"""The after_turn chain inside reflect (issue 17): the registry's order, each member writing its part of the
record, and what comes back for GolemWorkflow to fold."""

from __future__ import annotations

import json

from golem.life.after_turn import AfterTurn, run_after_turn
from golem.life.extensions import registry_for
from golem.models.config import GolemConfig, LifespanSection
from golem.models.state import GolemState, PADVector
from tests.unit.test_unmeasured_fields import _reflected


async def test_the_chain_fires_in_the_spec_order_and_fills_the_fields_it_measures():
    rec = _reflected()
    rec.total_cost = 0.25
    state = GolemState(golem_id="g1", pad=PADVector(arousal=0.4), regime=rec.regime)
    cfg = GolemConfig(lifespan=LifespanSection(credits_usd=1.0))
    ran = []
    handlers = {name: (lambda n: (lambda c: ran.append((n, list(c.record.after_turn)))))(name)
                for name in ("memory", "cybernetics", "telemetry")}
    ctx = await run_after_turn(registry_for(), AfterTurn(record=rec, state=state, config=cfg), handlers)
    assert ctx.record.after_turn == ["heartbeat", "lifespan", "daimon", "memory", "cybernetics", "telemetry"]
    assert [n for n, _ in ran] == ["memory", "cybernetics", "telemetry"]
    assert ran[0][1] == ["heartbeat", "lifespan", "daimon", "memory"]  # memory sees the daimon's PAD already
    r = ctx.record
    assert r.credit_consumed == 0.25 and r.credit_remaining == 0.75 and r.vitality.economic == 0.75
    assert r.pad_after is not None and r.primary_emotion is not None and r.appraisal["novelty"] == 0.4
    assert ctx.update.life.ticks_lived == 1 and ctx.update.pad == r.pad_after and ctx.update.phase == r.phase
    data = json.loads(r.model_dump_json())
    assert data["credit_consumed"] == 0.25 and "death_cause" not in data  # absent until a clock runs out


async def test_a_switched_off_extension_does_not_run():
    rec = _reflected()
    ran = []
    ctx = await run_after_turn(registry_for(["cybernetics"]),
                               AfterTurn(record=rec, state=GolemState(golem_id="g1"), config=GolemConfig()),
                               {"cybernetics": lambda c: ran.append("cybernetics")})
    assert ran == [] and "cybernetics" not in ctx.record.after_turn
