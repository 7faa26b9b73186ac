"""The lifespan's three clocks, phases and death triggers (golem.life.lifespan)."""

from golem.life.lifespan import LifeFacts, born, hazard_draw, tick_clocks
from golem.models.config import LifespanSection
from golem.models.enums import BehavioralPhase
from golem.models.state import VitalityState


def run(cfg, ticks, spend=0.0, pe=0.0, life=None, vitality=None, phase=BehavioralPhase.THRIVING, **facts):
    life = life or born(cfg)
    vitality = vitality or VitalityState()
    seen = []
    for t in range(ticks):
        out = tick_clocks(life, vitality, phase, LifeFacts(tick=t, credit_consumed_usd=spend, prediction_error=pe,
                                                           **facts), cfg, "g")
        life, vitality, phase = out.life, out.vitality, out.phase
        seen.append(out)
    return seen


def test_small_credit_walks_the_economic_clock_through_every_phase_to_economic_death():
    cfg = LifespanSection(credits_usd=1.0)
    seen = run(cfg, 12, spend=0.1)
    phases = [o.phase for o in seen]
    for p in BehavioralPhase:
        assert p in phases, (p, phases)
    assert [o.transition for o in seen if o.transition][:1] == ["thriving→stable"]
    assert abs(seen[0].life.credit_remaining_usd - 0.9) < 1e-9 and seen[0].life.estimated_ttl_ticks == 9.0
    died = [o for o in seen if o.life.death_cause]
    assert died and died[0].life.death_cause == "economic" and died[0].life.credit_remaining_usd == 0.0


def test_no_credit_falls_back_to_the_daily_budget_and_never_kills():
    seen = run(LifespanSection(), 5, budget_fraction=1.0)
    assert seen[-1].vitality.economic == 0.5 and seen[-1].phase == BehavioralPhase.STABLE
    assert seen[-1].life.death_cause is None and seen[-1].life.estimated_ttl_ticks is None


def test_hayflick_limit_ages_the_stochastic_clock_and_kills_at_the_limit():
    seen = run(LifespanSection(hayflick_ticks=30), 30)
    assert abs(seen[14].vitality.stochastic - 0.5) < 1e-9
    assert all(o.life.death_cause is None for o in seen[:-1])
    assert seen[-1].life.death_cause == "hayflick" and "30 ticks lived" in seen[-1].life.death_detail


def test_terminal_for_n_ticks_kills_before_hayflick():
    cfg = LifespanSection(hayflick_ticks=100, terminal_ticks=3)
    seen = run(cfg, 3, vitality=VitalityState(economic=1, epistemic=0.05, stochastic=1), pe=1.0)
    assert seen[-1].phase == BehavioralPhase.TERMINAL and seen[-1].life.death_cause == "terminal"


def test_seeded_hazard_strikes_the_same_tick_every_time():
    cfg = LifespanSection(hazard_per_tick=0.2, hazard_seed=42)
    a = [o.life.stochastic_struck_at for o in run(cfg, 40)]
    b = [o.life.stochastic_struck_at for o in run(cfg, 40)]
    assert a == b and a[-1] is not None
    assert hazard_draw(42, "g", a[-1]) < 0.2
    assert run(cfg, 40)[-1].life.death_cause == "stochastic"


def test_epistemic_clock_follows_prediction_accuracy():
    cfg = LifespanSection(epistemic_ema=0.5)
    surprised = run(cfg, 6, pe=0.9, threshold=0.3)  # every tick a T2-size surprise
    assert surprised[-1].vitality.epistemic < 0.05
    calm = run(cfg, 6, pe=0.05, threshold=0.3, vitality=VitalityState(epistemic=0.2))
    assert calm[-1].vitality.epistemic > 0.95
    # gamma: 4 resolved, 4 violated since the last tick → accuracy 0 for that part
    g = run(cfg, 1, pe=0.0, gamma_resolved=4, gamma_violations=4)
    assert g[0].accuracy == 0.5


def test_immortal_golem_runs_its_clocks_without_dying():
    seen = run(LifespanSection(credits_usd=0.1, mortal=False), 3, spend=0.1)
    assert seen[-1].vitality.economic == 0.0 and seen[-1].life.death_cause is None


def test_accuracy_reads_only_new_gamma_resolutions_and_the_verified_health_factor():
    from golem.life.lifespan import accuracy_sample
    from golem.models.life import LifeState

    seen = LifeState(gamma_resolved_seen=10, gamma_violations_seen=4)
    # 4 newly resolved, 0 new violations → 1.0; the tick was not a surprise → 1.0
    assert accuracy_sample(seen, LifeFacts(tick=1, credit_consumed_usd=0, gamma_resolved=14, gamma_violations=4)) \
        == (1.0, 14, 4)
    # counters restarted below what was seen (a new gamma state): taken as new — 2 resolved, both violated
    assert accuracy_sample(seen, LifeFacts(tick=1, credit_consumed_usd=0, gamma_resolved=2, gamma_violations=2)) \
        == (0.5, 2, 2)
    # an acted tick whose verified health factor missed the expected one by more than 0.1
    assert accuracy_sample(LifeState(), LifeFacts(tick=1, credit_consumed_usd=0, hf_error=0.3))[0] == 0.5
    assert accuracy_sample(LifeState(), LifeFacts(tick=1, credit_consumed_usd=0, hf_error=-0.05))[0] == 1.0


def test_the_struck_hazard_zeroes_the_stochastic_clock_and_credits_dropped_clear_the_runway():
    cfg = LifespanSection(hazard_per_tick=1.0, mortal=False)
    out = run(cfg, 1)[0]
    assert out.vitality.stochastic == 0.0 and out.phase == BehavioralPhase.TERMINAL and out.life.death_cause is None
    from golem.models.life import LifeState

    had = LifeState(estimated_ttl_ticks=5.0)  # a runway from an earlier credit, now no credit configured
    assert run(LifespanSection(), 1, life=had)[0].life.estimated_ttl_ticks is None


def test_the_runway_counts_the_wallets_usdc_and_the_credit_against_the_burn():
    # $0.5 of gas + inference a tick, $100 USDC in the wallet, 60 s ticks: 200 ticks = 0.139 days
    out = run(LifespanSection(), 1, spend=0.5, wallet_usdc=100.0, tick_seconds=60.0)[0]
    assert out.life.estimated_ttl_ticks == 200.0 and out.life.runway_days == round(200 * 60 / 86400, 3)
    assert out.vitality.economic == 1.0  # runway_days not configured: reported, not weighed
    # with credit: the credit left pays too (and still kills alone when spent)
    both = run(LifespanSection(credits_usd=10.0), 1, spend=0.5, wallet_usdc=100.0, tick_seconds=60.0)[0]
    assert both.life.estimated_ttl_ticks == round((100.0 + 9.5) / 0.5, 1)
    # runway_days configured: a runway of 0.139 days against 1 day weighs the economic clock down
    short = run(LifespanSection(runway_days=1.0), 1, spend=0.5, wallet_usdc=100.0, tick_seconds=60.0)[0]
    assert short.vitality.economic == round(200 * 60 / 86400, 3) and short.phase == BehavioralPhase.DECLINING
    rich = run(LifespanSection(runway_days=1.0), 1, spend=0.5, wallet_usdc=1e6, tick_seconds=60.0)[0]
    assert rich.vitality.economic == 1.0 and rich.life.death_cause is None
    # no burn yet: no runway
    assert run(LifespanSection(), 1, spend=0.0, wallet_usdc=100.0)[0].life.estimated_ttl_ticks is None
