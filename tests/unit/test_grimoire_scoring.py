"""Pure parts of the Grimoire: admission thresholds, polarity, MMR, Self-RAG decision, artifact quality."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from golem.grimoire.semantic.admission import (
    WEIGHTS,
    AdmissionAction,
    DREAM_QUALITY_WEIGHTS,
    QUALITY_WEIGHTS,
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
    assert "empty rhetoric" in bad.red_flags and good.score > bad.score
    assert good.red_flags == []


def test_artifact_quality_is_the_rev5_weighted_sum_minus_red_flags():
    assert sum(QUALITY_WEIGHTS.values()) == pytest.approx(1.0)
    assert sum(DREAM_QUALITY_WEIGHTS.values()) == pytest.approx(1.0)
    assert (QUALITY_WEIGHTS["specificity"], QUALITY_WEIGHTS["actionability"], QUALITY_WEIGHTS["novelty"],
            QUALITY_WEIGHTS["verifiability"], QUALITY_WEIGHTS["consistency"]) == (0.25, 0.25, 0.20, 0.15, 0.15)
    assert (DREAM_QUALITY_WEIGHTS["specificity"], DREAM_QUALITY_WEIGHTS["consistency"]) == (0.10, 0.25)
    q = artifact_quality("When health factor is below 1.5, repay 25% of the debt", novelty=0.6, consistency=1.0)
    dims = {"specificity": q.specificity, "actionability": q.actionability, "novelty": q.novelty,
            "verifiability": q.verifiability, "consistency": q.consistency}
    assert q.score == pytest.approx(sum(QUALITY_WEIGHTS[k] * v for k, v in dims.items()), abs=1e-6)
    assert q.actionability == 1.0  # trigger + verb (IF-THEN shape)
    # each red flag costs 0.1
    flagged = artifact_quality("Because of this we performed excellent and it is guaranteed, clearly",
                               novelty=0.6, consistency=1.0)
    assert set(flagged.red_flags) >= {"self-referential praise", "overclaims certainty", "weasel words",
                                      "unverified causal claim"}
    raw = sum(QUALITY_WEIGHTS[k] * getattr(flagged, k) for k in QUALITY_WEIGHTS)
    assert flagged.score == pytest.approx(max(0.0, raw - 0.1 * len(flagged.red_flags)), abs=1e-6)


def test_artifact_quality_rules():
    hedged = artifact_quality("Gas might possibly be somewhat high sometimes", novelty=0.5, consistency=1.0)
    concrete = artifact_quality("Gas above 40 gwei at block 1200 doubled swap cost", novelty=0.5, consistency=1.0)
    assert concrete.specificity > hedged.specificity
    assert concrete.verifiability > hedged.verifiability
    # a causal claim backed by episodes is not flagged; the same claim with no evidence is
    claim = "Swaps failed because slippage exceeded 80 bps"
    assert "unverified causal claim" not in artifact_quality(claim, 0.5, 1.0, evidence=3).red_flags
    assert "unverified causal claim" in artifact_quality(claim, 0.5, 1.0, evidence=0).red_flags
    assert "tautological content" in artifact_quality("price falls when the price falls", 0.5, 1.0).red_flags
    # dream hypotheses: vague is cheaper, inconsistency dearer
    vague = "In volatile regimes liquidity tends to thin out"
    assert (artifact_quality(vague, 0.5, 1.0, dream=True).score > artifact_quality(vague, 0.5, 1.0).score)
    assert (artifact_quality(vague, 0.5, 0.2, dream=True).score < artifact_quality(vague, 0.5, 1.0, dream=True).score)
    with pytest.raises(ValueError, match="consistency"):
        artifact_quality("x y z w v", 0.5, 1.5)


@given(st.text(max_size=300), st.floats(0, 1), st.floats(0, 1), st.booleans())
def test_artifact_quality_in_unit_interval(text, novelty, consistency, dream):
    assert 0.0 <= artifact_quality(text, novelty, consistency, dream=dream).score <= 1.0


@given(st.text(max_size=400))
def test_token_estimate_positive(t):
    assert estimate_tokens(t) >= 1
