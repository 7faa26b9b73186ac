"""System 1 defects, fixed: a market wild from tick 1 is volatile after the warm-up, and regime accuracy holds on
labelled paths the detector was not tuned on; learned gating's hindsight judges each tick by the tier that ran, so
an action is never evidence that T2 was needed and escalation after the cold start stays near the daily cost model."""

from __future__ import annotations

import random

import pytest

import golem.cognition.regime as regime
from golem.backtest.report import REGIME_MATCH
from golem.cognition.learned_gating import market_level, required_tier
from golem.cognition.regime_labels import HELD_OUT_FAMILIES, LABEL_MATCH, detect_path, labelled_set, score
from golem.cognition.system1 import SYNTHETIC_TOPOLOGY, simulate
from golem.models.config import GatingSection, GolemConfig
from golem.models.enums import MarketRegime, Tier
from golem.models.state import GatingDecision
from golem.world.simulator.paths import oracle_path
from golem.world.synthetic import StrategyBook


def _wild(seed: int, n: int = 60, sigma: float = 0.03) -> list[float]:
    rng = random.Random(seed)
    prices, p = [], 2000.0
    for _ in range(n):
        p *= 1 + rng.gauss(0, sigma)
        prices.append(p)
    return prices


def test_a_market_wild_from_the_first_tick_is_volatile_after_the_warmup():
    detected = detect_path(_wild(3))
    assert detected[:5].count("volatile") == 0  # fewer than 5 returns: no judgement yet
    assert detected[20:].count("volatile") / 40 >= 0.9


def test_without_the_absolute_line_a_wild_market_is_never_volatile(monkeypatch):
    """What the line fixes: the relative rule alone compares the market with its own (as wild) history."""
    monkeypatch.setattr(regime, "ABSOLUTE_VOLATILE_SIGMA", float("inf"))
    assert detect_path(_wild(3))[20:].count("volatile") / 40 < 0.2


def test_held_out_accuracy_on_the_labelled_set():
    acc, per, _ = score(labelled_set(range(101, 105, 2)))  # seeds never used for tuning
    assert acc >= 0.9
    assert per["volatile"] >= 0.85 and per["calm"] >= 0.85


def test_accuracy_on_families_never_tuned_on():
    acc, per, _ = score(labelled_set(range(2), HELD_OUT_FAMILIES))
    assert acc >= 0.8
    assert per["volatile"] >= 0.8 and per["crash"] >= 0.8


def test_report_and_labelled_set_score_labels_alike():
    assert REGIME_MATCH == LABEL_MATCH


# ---- learned gating's hindsight --------------------------------------------------------

def _entry(tick, tier, pe=0.1, actions=0, mode="learned", regime=MarketRegime.VOLATILE, changed=False):
    return GatingDecision(tick=tick, mode=mode, gated_tier=tier, tier=tier, prediction_error=pe, signals=[0.0] * 5,
                          composite=0.3, boundaries=[0.8, 0.5, 0.2], arousal_bucket="low", regime=regime,
                          regime_changed=changed, actions=actions)


def test_an_action_shows_escalation_was_needed_never_that_t2_was():
    cfg = GatingSection()
    quiet = [_entry(2, Tier.T0)]
    assert required_tier(_entry(1, Tier.T1, actions=1), quiet, cfg) == 1
    assert required_tier(_entry(1, Tier.T2, actions=1), quiet, cfg) == 1  # T2 acting does not confirm T2
    assert required_tier(_entry(1, Tier.T2, actions=1, pe=0.7), quiet, cfg) == 2  # a severe market does
    assert required_tier(_entry(1, Tier.T2, actions=1, mode="forced"), quiet, cfg) == 0  # the owner's call


def test_an_escalation_that_found_nothing_was_unnecessary_unless_the_market_was_severe():
    cfg = GatingSection()
    assert required_tier(_entry(1, Tier.T1, pe=0.45), [_entry(2, Tier.T0, pe=0.45)], cfg) == 0
    assert required_tier(_entry(1, Tier.T1, pe=0.45), [_entry(2, Tier.T0, pe=0.7)], cfg) == 2
    assert required_tier(_entry(1, Tier.T1), [_entry(2, Tier.T0, changed=True)], cfg) == 2  # into volatile


def test_a_t0_tick_is_judged_by_the_market_in_its_own_and_the_next_window():
    cfg = GatingSection()
    quiet = _entry(1, Tier.T0)
    assert required_tier(quiet, [_entry(2, Tier.T2, actions=2)], cfg) == 0  # the next tick's actions are its own
    assert required_tier(quiet, [_entry(2, Tier.T0, pe=0.7)], cfg) == 2  # a surprise next window: T0 missed it
    assert required_tier(quiet, [_entry(2, Tier.T1, pe=0.35)], cfg) == 1
    assert required_tier(_entry(1, Tier.T0, pe=0.35), [_entry(2, Tier.T0)], cfg) == 1
    assert market_level(_entry(1, Tier.T0, pe=0.7), cfg) == 2


@pytest.mark.parametrize("seed", [0, 3])
def test_tier_mix_after_the_cold_start_stays_near_the_cost_model_in_a_volatile_market(seed):
    """The demo that sent 54 % of ticks to T2: the simulator's volatile market, the example STRATEGY.md acting on
    every escalated tick, the knowledge graph's topology term on, learned gating fed at delta cycles. Before the
    fix the judge's 'an action shows T2 was needed' made T2 ~35 % here; the heartbeat Daily Cost Model has volatile
    at ~60 % T0, ~15 % T2."""
    cfg, gating = GolemConfig(), GatingSection()
    book = StrategyBook(cfg)
    run = simulate(oracle_path("volatile", 2000.0, 400, seed=seed), cfg, gating, topology=SYNTHETIC_TOPOLOGY,
                   snapshot=book.snapshot, act=book.act)
    assert run.modes[100] == "learned" and sum(run.actions) > 10
    after = gating.cold_start_ticks
    assert run.share(Tier.T2, start=after) <= 0.15
    assert 0.5 <= run.share(Tier.T0, start=after) <= 0.8
