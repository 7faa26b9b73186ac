"""Pure parts of the Grimoire: admission thresholds (rev. 3), polarity, MMR, Self-RAG decision, artifact quality."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from golem.grimoire.admission import (
    WEIGHTS,
    AdmissionAction,
    artifact_quality,
    classify,
    composite,
    polarity,
)
from golem.grimoire.retrieval import estimate_tokens, mmr, should_retrieve


def test_thresholds_match_rev3():
    assert classify(0.4499) == AdmissionAction.REJECTED
    assert classify(0.45) == AdmissionAction.ADMITTED_LOW
    assert classify(0.5499) == AdmissionAction.ADMITTED_LOW
    assert classify(0.55) == AdmissionAction.ADMITTED
    with pytest.raises(ValueError, match="finite"):
        classify(float("nan"))


def test_weights_sum_to_one_and_composite_is_weighted_sum():
    assert sum(WEIGHTS.values()) == pytest.approx(1.0)
    f = {"future_utility": 1.0, "factual_confidence": 0.0, "novelty": 1.0, "recency": 0.0, "type_prior": 1.0}
    assert composite(f) == pytest.approx(0.25 + 0.20 + 0.15)


@given(st.fixed_dictionaries({k: st.floats(0, 1) for k in WEIGHTS}))
def test_composite_stays_in_unit_interval(f):
    assert 0.0 <= composite(f) <= 1.0 + 1e-9


def test_polarity():
    assert polarity("acting has gained money, profitable") == 1
    assert polarity("acting has lost money; avoid it") == -1
    assert polarity("pool reserves at 1000 WETH") == 0


def test_mmr_prefers_diverse_second_pick():
    a = np.array([1.0, 0.0], np.float32)
    b = np.array([0.0, 1.0], np.float32)
    cands = [(0.9, a), (0.85, a), (0.6, b)]
    assert mmr(cands, 2, lam=0.7) == [0, 2]  # the near-duplicate loses to the diverse candidate
    assert mmr(cands, 2, lam=1.0) == [0, 1]  # pure relevance
    with pytest.raises(ValueError):
        mmr(cands, 1, lam=1.5)


def test_should_retrieve():
    assert should_retrieve("eth crash health factor", tier="T2")[0]
    assert not should_retrieve("eth crash health factor", tier="T0")[0]
    assert not should_retrieve("?", tier="T2")[0]
    assert should_retrieve("x", tier="T0", steered=True)[0]


def test_artifact_quality_flags_vacuous_text():
    good = artifact_quality("When gas is below 10 gwei, swap WETH within 2 hours", novelty=0.8, consistency=0.8)
    bad = artifact_quality("Markets can be volatile, be careful", novelty=0.8, consistency=0.8)
    assert "vacuous platitude" in bad.red_flags and good.score > bad.score


@given(st.text(max_size=400))
def test_token_estimate_positive(t):
    assert estimate_tokens(t) >= 1
