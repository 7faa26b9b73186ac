"""Adaptive deliberation threshold and the fixed-threshold gate.

This is the cold-start path. Learned gating (discounted Hedge, Thompson-sampled boundaries) will
replace `tier_for` behind the same `gate()` signature; forced-T2 rules stay in front of it.
"""

from __future__ import annotations

from golem.models.enums import BehavioralPhase, Tier
from golem.models.interventions import Steer
from golem.models.state import GolemState

THRESHOLD_MIN = 0.05  # clamp (docs/design/gate.md#thresholds)
THRESHOLD_MAX = 0.8
CONFIDENCE_GAIN = 0.5  # confidence_factor = 1 + confidence × 0.5
MORTALITY_GAIN = 0.3  # mortality_factor = 1 − (1 − vitality) × 0.3
AROUSAL_GAIN = 0.2  # arousal_factor = 1 − |arousal| × 0.2
# The daimon's modulation: high dominance raises the threshold (the golem trusts its models), low
# dominance (a fired somatic marker, a thin health-factor margin) lowers it. daimon_factor = 1 + dominance × 0.2
# (ours: the same size as the arousal factor; learned gating shifts its boundaries by [gating] dominance_bias).
DOMINANCE_GAIN = 0.2

# Lower bound of each phase (Thriving > 0.7, Stable 0.5–0.7,
# Conservation 0.3–0.5, Declining 0.1–0.3, Terminal < 0.1).
PHASE_FLOORS: list[tuple[BehavioralPhase, float]] = [
    (BehavioralPhase.THRIVING, 0.7),
    (BehavioralPhase.STABLE, 0.5),
    (BehavioralPhase.CONSERVATION, 0.3),
    (BehavioralPhase.DECLINING, 0.1),
    (BehavioralPhase.TERMINAL, 0.0),
]
PHASE_TRANSITION_MARGIN = 0.02  # "imminent": within this of the next lower boundary


def _clamp(x: float, lo: float, hi: float) -> float:
    return max(lo, min(hi, x))


def phase_for_vitality(v: float) -> BehavioralPhase:
    """Thriving is strictly above 0.7; each other phase includes its lower bound (0.5 is Stable)."""
    if v > 0.7:
        return BehavioralPhase.THRIVING
    for phase, floor in PHASE_FLOORS[1:-1]:
        if v >= floor:
            return phase
    return BehavioralPhase.TERMINAL


def phase_transition_imminent(vitality: float) -> tuple[bool, str]:
    """(imminent, why): Terminal, or within PHASE_TRANSITION_MARGIN of the next lower boundary."""
    phase = phase_for_vitality(vitality)
    if phase == BehavioralPhase.TERMINAL:
        return True, f"vitality {vitality:.3f} is Terminal (< 0.1)"
    floor = dict(PHASE_FLOORS)[phase]
    if vitality - floor <= PHASE_TRANSITION_MARGIN:
        nxt = PHASE_FLOORS[[p for p, _ in PHASE_FLOORS].index(phase) + 1][0]
        return True, (
            f"vitality {vitality:.3f} is within {PHASE_TRANSITION_MARGIN} of the {phase.value}→{nxt.value} "
            f"boundary {floor}"
        )
    return False, ""


def threshold_from(base: float, confidence: float, vitality: float, arousal: float, dominance: float = 0.0) -> float:
    """The threshold formula on plain numbers (inputs clamped to [0, 1]; arousal taken as |arousal|), times the daimon's
    dominance factor (dominance in [-1, 1])."""
    confidence = _clamp(confidence, 0.0, 1.0)
    vitality = _clamp(vitality, 0.0, 1.0)
    arousal = _clamp(abs(arousal), 0.0, 1.0)
    confidence_factor = 1.0 + confidence * CONFIDENCE_GAIN
    mortality_factor = 1.0 - (1.0 - vitality) * MORTALITY_GAIN
    arousal_factor = 1.0 - arousal * AROUSAL_GAIN
    daimon_factor = 1.0 + _clamp(dominance, -1.0, 1.0) * DOMINANCE_GAIN
    return _clamp(base * confidence_factor * mortality_factor * arousal_factor * daimon_factor, THRESHOLD_MIN,
                  THRESHOLD_MAX)


def compute_adaptive_threshold(state: GolemState, base: float) -> float:
    """Base × confidence_factor × mortality_factor × arousal_factor (× the daimon's dominance factor),
    clamped to [0.05, 0.8]."""
    return threshold_from(base, state.strategy_confidence, state.vitality.composite, state.pad.arousal,
                          state.pad.dominance)


def tier_for(prediction_error: float, threshold: float) -> Tier:
    """Fixed cold-start boundaries: T0 below θ, T1 in [θ, 2θ), T2 at 2θ and above."""
    if prediction_error < threshold:
        return Tier.T0
    if prediction_error < 2.0 * threshold:
        return Tier.T1
    return Tier.T2


def active_steer_ids(state: GolemState, steers: list[Steer]) -> list[str]:
    """Steers passed for this tick plus any still pending in state, deduplicated, in order."""
    ids: list[str] = []
    for s in [*steers, *state.pending_steers]:
        if s.id not in ids:
            ids.append(s.id)
    return ids


def gate(prediction_error: float, threshold: float, state: GolemState, steers: list[Steer]) -> tuple[Tier, str, bool]:
    """(tier, reason, forced). Forced T2 (active steer, imminent phase transition) always wins."""
    ids = active_steer_ids(state, steers)
    if ids:
        source = {s.id: s.source for s in [*steers, *state.pending_steers]}
        named = ", ".join(i if source.get(i, "owner") == "owner" else f"{i} from the {source[i]}" for i in ids)
        who = "owner steer(s)" if all(source.get(i, "owner") == "owner" for i in ids) else "steer(s)"
        return Tier.T2, f"forced T2: {who} {named} active (PE {prediction_error:.3f})", True
    imminent, why = phase_transition_imminent(state.vitality.composite)
    if imminent:
        return Tier.T2, f"forced T2: phase transition imminent, {why} (PE {prediction_error:.3f})", True
    tier = tier_for(prediction_error, threshold)
    pe, th = prediction_error, threshold
    if tier == Tier.T0:
        reason = f"T0: PE {pe:.3f} < θ {th:.3f}"
    elif tier == Tier.T1:
        reason = f"T1: θ {th:.3f} ≤ PE {pe:.3f} < 2θ {2 * th:.3f}"
    else:
        reason = f"T2: PE {pe:.3f} ≥ 2θ {2 * th:.3f}"
    return tier, reason, False
