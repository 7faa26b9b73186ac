"""The after_turn chain inside reflect: the registry's order, each member writing its part of the
record, and what comes back for GolemWorkflow to fold."""

from __future__ import annotations

import json

from golem.life.after_turn import AfterTurn, run_after_turn
from golem.extensions import registry_for
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
    assert ctx.record.after_turn == ["heartbeat", "lifespan", "daimon", "memory", "risk", "cybernetics", "telemetry"]
    assert [n for n, _ in ran] == ["memory", "cybernetics", "telemetry"]
    assert ran[0][1] == ["heartbeat", "lifespan", "daimon", "memory"]  # memory sees the daimon's PAD already
    assert ctx.record.risk["nav_usd"] == ctx.update.life.nav_high_water_usd and ctx.record.risk["drawdown_pct"] == 0
    r = ctx.record
    assert r.credit_consumed == 0.25 and r.credit_remaining == 0.75 and r.vitality.economic == 0.75
    assert r.pad_after is not None and r.appraisal["novelty"] == 0.4
    assert abs(r.pad_after.pleasure) < 0.05 and r.primary_emotion is None  # no valence: no emotion (absent)
    assert ctx.update.life.ticks_lived == 1 and ctx.update.pad == r.pad_after and ctx.update.phase == r.phase
    data = json.loads(r.model_dump_json())
    assert data["credit_consumed"] == 0.25 and "death_cause" not in data and "primary_emotion" not in data  # absent until a clock runs out


async def test_a_switched_off_extension_does_not_run():
    rec = _reflected()
    ran = []
    ctx = await run_after_turn(registry_for(["cybernetics"]),
                               AfterTurn(record=rec, state=GolemState(golem_id="g1"), config=GolemConfig()),
                               {"cybernetics": lambda c: ran.append("cybernetics")})
    assert ran == [] and "cybernetics" not in ctx.record.after_turn


def test_status_shows_the_clocks_the_credit_the_affect_and_death():
    from cli.life import life_line
    from golem.models.golem import GolemStatus

    st = GolemStatus(golem_id="g", tick=9, activity="waiting", regime="volatile", phase="conservation", vitality=0.4,
                     theta_seconds=1.0, daily_spend_usd=0.0, clocks={"economic": 0.5, "epistemic": 0.8, "stochastic": 1.0},
                     credit_remaining_usd=1.5, estimated_ttl_ticks=12.0, ticks_lived=9, generation=1, predecessor="old",
                     pad={"pleasure": -0.4, "arousal": 0.6, "dominance": -0.2}, emotion="fear", somatic_markers=2)
    line = life_line(st)
    assert "economic 0.50 × epistemic 0.80 × stochastic 1.00" in line and "credit $1.5000 (runway ~12 ticks)" in line
    paid = life_line(st.model_copy(update={"credit_remaining_usd": None, "runway_days": 0.5, "burn_usd_per_tick": 0.0125}))
    assert "runway ~12 ticks, ~0.5 days (wallet USDC / burn at $0.0125/tick of gas + inference)" in paid
    assert "generation 1 (of old)" in line and "fear (P -0.40 A +0.60 D -0.20)" in line and "DEAD" not in line
    dead = life_line(st.model_copy(update={"certificate": {"cause": "hayflick", "detail": "30 ticks", "legacy_dir": "x"}}))
    assert "DEAD:       hayflick (30 ticks); legacy in x" in dead


async def test_the_daimon_reads_the_drawdown_the_risk_member_folds():
    """The risk member keeps the high-water mark; a golem far below it copes less (docile, not relaxed, in a
    recovery it did not cause)."""
    from golem.models.life import LifeState
    from golem.safety.risk import net_value_usd

    def reflected():
        rec = _reflected()
        rec.observation.snapshot.balances = {"USDC": 7000.0}
        return rec

    async def run(high_water):
        rec = reflected()
        state = GolemState(golem_id="g1", regime=rec.regime, life=LifeState(nav_high_water_usd=high_water))
        return await run_after_turn(registry_for(), AfterTurn(record=rec, state=state, config=GolemConfig()), {})

    nav = net_value_usd(reflected().observation.snapshot)
    top, deep = await run(None), await run(nav / 0.7)  # 30 % under the mark: 1.5× the 20 % max drawdown
    assert top.record.risk["drawdown_pct"] == 0 and deep.record.risk["drawdown_pct"] == 30.0
    assert deep.record.risk["drawdown_used"] == 1.5 and deep.update.life.nav_high_water_usd == round(nav / 0.7, 6)
    assert deep.record.appraisal["coping"] == round(0.5 * top.record.appraisal["coping"], 6)
    assert deep.record.pad_after.dominance < top.record.pad_after.dominance


async def test_the_heartbeat_hands_the_lifespan_the_wallets_usdc_for_the_runway():
    rec = _reflected()
    rec.observation.snapshot.balances = {"USDC": 7000.0, "WETH": 1.0}
    rec.total_cost = 0.5
    ctx = await run_after_turn(registry_for(), AfterTurn(record=rec, state=GolemState(golem_id="g1"),
                                                         config=GolemConfig()), {})
    assert ctx.record.estimated_ttl_ticks == 14_000.0 and ctx.update.life.runway_days == round(14_000 * 60 / 86400, 3)


async def test_the_daimon_reads_the_golems_own_verified_write():
    """The daimon takes the tick's own writes from the record's outcome (verify's health factor before and after)
    and Reflexion's verified − predicted health factor: a repay that landed where predicted is agency (coping 1,
    dominance up); the same tick whose Reflexion missed by 0.3 is not."""
    from golem.models.enums import ActionStatus
    from golem.models.record import ActionRecord, ExpectedOutcome, OutcomeRecord, Reflexion

    async def run(hf_error):
        rec = _reflected()
        rec.actions = [ActionRecord(action_index=0, action_type="repay", tool_name="repay",
                                    status=ActionStatus.EXECUTED, tx_hash="0x1")]
        rec.outcome = OutcomeRecord(verified=True, pnl_impact=-0.4, health_factor_before=1.45,
                                    health_factor_after=2.2)
        reflexion = Reflexion(verdict="positive", expected=ExpectedOutcome(health_factor_after=2.2 - hf_error),
                              verified_health_factor=2.2, health_factor_error=hf_error)
        state = GolemState(golem_id="g1", regime=rec.regime, pad=PADVector(dominance=-0.5))
        ctx = AfterTurn(record=rec, state=state, config=GolemConfig(), extra={"reflexion": reflexion})
        return (await run_after_turn(registry_for(), ctx, {})).record

    hit, miss = await run(0.0), await run(0.3)
    assert hit.appraisal["coping"] == 1.0 and miss.appraisal["coping"] < 1.0
    assert "own write raised the health factor 1.450→2.200 as predicted (error +0.000)" in hit.appraisal["reasons"]
    assert hit.pad_after.dominance > miss.pad_after.dominance


async def test_the_first_regime_reading_after_the_warm_up_is_not_a_surprise():
    """The daimon's novelty is 1 on a regime change — between two regimes the golem has read. The classifier's
    first reading (unknown → range_bound at the end of its warm-up) is not news about the world: novelty stays the
    prediction error. (It read as a regime change before, and gave the calm warm-up's end a jolt of arousal.)"""
    from golem.models.enums import MarketRegime

    async def appraisal(before, now):
        rec = _reflected()
        rec.regime = now
        state = GolemState(golem_id="g1", regime=before)
        return (await run_after_turn(registry_for(), AfterTurn(record=rec, state=state, config=GolemConfig()),
                                     {})).record.appraisal

    pe = _reflected().prediction_error
    first = await appraisal(MarketRegime.UNKNOWN, MarketRegime.RANGE_BOUND)
    assert first["novelty"] == pe and "regime changed" not in first["reasons"]
    lost = await appraisal(MarketRegime.VOLATILE, MarketRegime.UNKNOWN)
    assert lost["novelty"] == pe and "regime changed" not in lost["reasons"]
    shift = await appraisal(MarketRegime.RANGE_BOUND, MarketRegime.VOLATILE)
    assert shift["novelty"] == 1.0 and "regime changed" in shift["reasons"]
