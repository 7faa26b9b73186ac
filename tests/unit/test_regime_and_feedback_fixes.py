"""Issue 10's System 1 defects: a market wild from tick 1 is volatile; learned gating's hindsight does not call
for T2 because a T1 tick (or the next tick) acted."""

from __future__ import annotations

import random

from golem.backtest.report import REGIME_MATCH
from golem.cognition.learned_gating import event_level, required_tier
from golem.cognition.regime_labels import LABEL_MATCH, detect_path, labelled_set, score
from golem.models.config import GatingSection
from golem.models.enums import MarketRegime, Tier
from golem.models.state import GatingDecision


def test_a_market_wild_from_the_first_tick_is_volatile_after_the_warmup():
    rng = random.Random(3)
    prices, p = [], 2000.0
    for _ in range(60):
        p *= 1 + rng.gauss(0, 0.03)
        prices.append(p)
    detected = detect_path(prices)
    assert detected[:5].count("volatile") == 0  # fewer than 5 returns: no judgement yet
    assert detected[20:].count("volatile") / 40 >= 0.9


def test_held_out_accuracy_on_the_labelled_set():
    acc, per, _ = score(labelled_set(range(101, 105, 2)))  # seeds never used for tuning
    assert acc >= 0.9
    assert per["volatile"] >= 0.85 and per["calm"] >= 0.85


def test_report_and_labelled_set_score_labels_alike():
    assert REGIME_MATCH == LABEL_MATCH


def _entry(tick, tier, pe=0.1, actions=0, mode="learned", regime=MarketRegime.VOLATILE, changed=False):
    return GatingDecision(tick=tick, mode=mode, gated_tier=tier, tier=tier, prediction_error=pe, signals=[0.0] * 5,
                          composite=0.3, boundaries=[0.8, 0.5, 0.2], arousal_bucket="low", regime=regime,
                          regime_changed=changed, actions=actions)


def test_an_action_at_t1_shows_t1_sufficed_and_t2_acting_was_needed():
    cfg = GatingSection()
    assert event_level(_entry(1, Tier.T1, actions=1), cfg) == 1
    assert event_level(_entry(1, Tier.T2, actions=1), cfg) == 2
    assert event_level(_entry(1, Tier.T2, actions=1, mode="forced"), cfg) == 0


def test_the_next_ticks_action_is_not_evidence_against_this_tick():
    cfg = GatingSection()
    quiet = _entry(1, Tier.T0)
    assert required_tier(quiet, [_entry(2, Tier.T2, actions=2)], cfg) == 0
    assert required_tier(quiet, [_entry(2, Tier.T0, pe=0.7)], cfg) == 2  # a surprise next window: T0 missed it
    assert required_tier(quiet, [_entry(2, Tier.T1, pe=0.35)], cfg) == 1
