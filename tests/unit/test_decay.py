"""Decay math (docs/design/grimoire.md#decay): unit and property tests."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golem.grimoire.decay import (
    DAY,
    HOUR,
    RETENTION_FLOOR,
    DecayClass,
    EntryKind,
    base_half_life_seconds,
    effective_confidence,
    effective_half_life_seconds,
    retention,
    retention_at_tick,
    ticks_to_seconds,
)

elapsed = st.floats(min_value=0.0, max_value=400 * DAY, allow_nan=False)
half_lives = st.floats(min_value=60.0, max_value=365 * DAY, allow_nan=False)
strengths = st.floats(min_value=1.0, max_value=50.0, allow_nan=False)


def test_formula_matches_spec_literally():
    # retention = e^(-(t - lastAccessed) / (halfLife * strength))
    assert retention(0.0, DAY) == 1.0
    assert retention(DAY, DAY) == pytest.approx(math.exp(-1.0))
    assert retention(DAY, DAY, strength=2.0) == pytest.approx(math.exp(-0.5))


def test_floor_is_0_05():
    assert retention(1000 * DAY, HOUR) == RETENTION_FLOOR
    assert effective_confidence(0.9, RETENTION_FLOOR) == RETENTION_FLOOR
    assert effective_confidence(0.8, 0.5) == pytest.approx(0.4)


def test_half_lives_from_spec_tables():
    # demurrage classes A/B/C and the 24 h ephemeral class; per-type 48 h episodes ... 30 d warnings
    assert base_half_life_seconds(EntryKind.WARNING, DecayClass.STRUCTURAL) == 30 * DAY
    assert base_half_life_seconds(EntryKind.HEURISTIC, DecayClass.TACTICAL) == 7 * DAY
    assert base_half_life_seconds(EntryKind.WARNING, DecayClass.REGIME_CONDITIONAL) == 21 * DAY
    assert base_half_life_seconds(EntryKind.EPISODE, DecayClass.STRUCTURAL) == 48 * HOUR
    assert base_half_life_seconds(EntryKind.EPISODE, DecayClass.EPHEMERAL) == 24 * HOUR


def test_modifiers():
    base = effective_half_life_seconds(EntryKind.INSIGHT, DecayClass.TACTICAL, quality=0.5)
    assert effective_half_life_seconds(EntryKind.INSIGHT, DecayClass.TACTICAL, quality=0.29) == base / 2
    assert effective_half_life_seconds(EntryKind.INSIGHT, DecayClass.TACTICAL, quality=0.3) == base
    assert effective_half_life_seconds(EntryKind.INSIGHT, DecayClass.TACTICAL, dream_validated=True) == 2 * base
    assert effective_half_life_seconds(EntryKind.INSIGHT, DecayClass.TACTICAL, bloodstain=True) == 3 * base


def test_low_quality_decays_faster_at_tick_level():
    kw = dict(kind=EntryKind.EPISODE, decay_class=DecayClass.TACTICAL, strength=1.0, tick_seconds=60.0)
    good = retention_at_tick(1500, 0, quality=0.8, **kw)
    poor = retention_at_tick(1500, 0, quality=0.1, **kw)
    assert poor < good
    # 1500 ticks × 60 s = 25 h against a 48 h time constant
    assert good == pytest.approx(math.exp(-25 / 48))


def test_bad_input_is_rejected_with_a_reason():
    with pytest.raises(ValueError, match="strength"):
        retention(10.0, DAY, strength=0.5)
    with pytest.raises(ValueError, match="half_life"):
        retention(10.0, 0.0)
    with pytest.raises(ValueError, match="quality"):
        effective_half_life_seconds(EntryKind.EPISODE, DecayClass.TACTICAL, quality=1.5)
    with pytest.raises(ValueError, match="tick_seconds"):
        ticks_to_seconds(10, 0.0)
    with pytest.raises(ValueError):
        base_half_life_seconds("episode", "permanent")  # type: ignore[arg-type]


@given(elapsed, half_lives, strengths)
def test_retention_in_floor_one(t, h, s):
    r = retention(t, h, s)
    assert RETENTION_FLOOR <= r <= 1.0


@given(elapsed, elapsed, half_lives, strengths)
def test_monotone_non_increasing_in_elapsed_time(t1, t2, h, s):
    lo, hi = sorted((t1, t2))
    assert retention(hi, h, s) <= retention(lo, h, s)


@given(elapsed, half_lives, strengths, strengths)
def test_higher_strength_never_decays_faster(t, h, s1, s2):
    weak, strong = sorted((s1, s2))
    assert retention(t, h, strong) >= retention(t, h, weak)


@given(st.floats(min_value=-10 * DAY, max_value=0.0, allow_nan=False), half_lives)
def test_negative_elapsed_counts_as_fresh(t, h):
    assert retention(t, h) == 1.0


@given(st.sampled_from(list(DecayClass)), st.sampled_from(list(EntryKind)),
       st.floats(min_value=0.0, max_value=1.0), st.booleans(), st.booleans())
def test_half_life_positive_and_dream_validation_only_slows(c, k, q, dream, blood):
    plain = effective_half_life_seconds(k, c, q, False, blood)
    assert plain > 0
    assert effective_half_life_seconds(k, c, q, dream, blood) >= plain
