"""Ebbinghaus decay with retrieval strengthening.

    retention(t)          = exp(-(t - last_accessed) / (half_life × strength))      floor 0.05
    effective_confidence  = confidence × retention                                 floor 0.05

Durations are in seconds (half-lives are wall-clock; a tick is 30–120 s), and `half_life` is the exponential's time
constant (retention e⁻¹ ≈ 0.37 at Δt = half_life). Half-lives, modifiers and why: docs/design/grimoire.md#decay.
"""

from __future__ import annotations

import math
from enum import Enum

HOUR = 3600.0
DAY = 24 * HOUR

RETENTION_FLOOR = 0.05  # floor 0.05, never fully forgotten
PRUNE_FLOOR = 0.1  # entries below 0.1 are flagged for removal
LOW_QUALITY_THRESHOLD = 0.3  # quality_score < 0.3 decays 2× faster
LOW_QUALITY_SPEEDUP = 2.0
DREAM_VALIDATED_SLOWDOWN = 2.0  # dream-validated (class D): 0.5× the standard rate
BLOODSTAIN_SLOWDOWN = 3.0  # bloodstains 3× slower
DREAM_STRENGTH_INCREMENT = 0.5  # dream-retrieval strengthening +0.5
LIVE_STRENGTH_INCREMENT = 1.0  # retrieved AND positive outcome → +1
DEFAULT_TICK_SECONDS = 60.0  # config clock.theta_base_seconds default: the nominal tick for ticks_to_seconds
# |P&L| that maps to replay gain 0.5. Our choice: saturating |x| / (|x| + s) keeps gain in
# [0, 1) per episode without needing the whole population, so the value can be stored at write time.
PNL_HALF_SATURATION_USD = 10.0


class DecayClass(str, Enum):
    """grimoire `DecayClass { Structural, RegimeConditional, Tactical, Ephemeral }`."""

    STRUCTURAL = "structural"  # demurrage class C
    REGIME_CONDITIONAL = "regime_conditional"  # demurrage class B
    TACTICAL = "tactical"  # demurrage class A
    EPHEMERAL = "ephemeral"


class EntryKind(str, Enum):
    """Entry types with their own half-life (docs/design/grimoire.md#decay)."""

    EPISODE = "episode"
    INSIGHT = "insight"
    HEURISTIC = "heuristic"
    WARNING = "warning"


# Half-life per decay class (A 7 d, B 21 d, C 90 d), as the Curator's DECAY phase applies them; ephemeral 24 h.
CLASS_HALF_LIFE_SECONDS: dict[DecayClass, float] = {
    DecayClass.STRUCTURAL: 90 * DAY,
    DecayClass.REGIME_CONDITIONAL: 21 * DAY,
    DecayClass.TACTICAL: 7 * DAY,
    DecayClass.EPHEMERAL: 1 * DAY,
}

# Half-life per entry type.
KIND_HALF_LIFE_SECONDS: dict[EntryKind, float] = {
    EntryKind.EPISODE: 48 * HOUR,
    EntryKind.INSIGHT: 7 * DAY,
    EntryKind.HEURISTIC: 14 * DAY,
    EntryKind.WARNING: 30 * DAY,
}


def base_half_life_seconds(kind: EntryKind, decay_class: DecayClass) -> float:
    """Two clocks (per entry type and per decay class); the faster one wins.

    So an episode never outlives its 48 h scaffold, and an ephemeral heuristic still fades in a day.
    """
    return min(KIND_HALF_LIFE_SECONDS[EntryKind(kind)], CLASS_HALF_LIFE_SECONDS[DecayClass(decay_class)])


def effective_half_life_seconds(
    kind: EntryKind,
    decay_class: DecayClass,
    quality: float = 1.0,
    dream_validated: bool = False,
    bloodstain: bool = False,
) -> float:
    """Half-life after the modifiers (low quality 2× faster, class D 2× slower, bloodstain 3× slower)."""
    if not 0.0 <= quality <= 1.0:
        raise ValueError(f"quality must be in [0, 1], got {quality}")
    half_life = base_half_life_seconds(kind, decay_class)
    if quality < LOW_QUALITY_THRESHOLD:
        half_life /= LOW_QUALITY_SPEEDUP
    if dream_validated:
        half_life *= DREAM_VALIDATED_SLOWDOWN
    if bloodstain:
        half_life *= BLOODSTAIN_SLOWDOWN
    return half_life


def retention(elapsed_seconds: float, half_life_seconds: float, strength: float = 1.0) -> float:
    """exp(-elapsed / (half_life × strength)), floored at 0.05.

    Negative elapsed time (clock skew, a record from the future) counts as zero: nothing decays backwards.
    """
    if half_life_seconds <= 0:
        raise ValueError(f"half_life_seconds must be > 0, got {half_life_seconds}")
    if strength < 1.0:
        raise ValueError(f"strength must be >= 1 (grimoire: 'strength integer >= 1'), got {strength}")
    if math.isnan(elapsed_seconds):
        raise ValueError("elapsed_seconds is NaN")
    elapsed = max(0.0, elapsed_seconds)
    return max(RETENTION_FLOOR, math.exp(-elapsed / (half_life_seconds * strength)))


def effective_confidence(confidence: float, retention_value: float) -> float:
    """confidence × retention, floored at 0.05."""
    if not 0.0 <= confidence <= 1.0:
        raise ValueError(f"confidence must be in [0, 1], got {confidence}")
    return max(RETENTION_FLOOR, confidence * retention_value)


def ticks_to_seconds(elapsed_ticks: int, tick_seconds: float) -> float:
    """Convert a tick count to seconds with the nominal theta interval (clock.theta_base_seconds)."""
    if tick_seconds <= 0:
        raise ValueError(f"tick_seconds must be > 0, got {tick_seconds}")
    return float(elapsed_ticks) * tick_seconds


def retention_at_tick(
    now_tick: int,
    last_accessed_tick: int,
    *,
    kind: EntryKind,
    decay_class: DecayClass,
    strength: float,
    quality: float,
    tick_seconds: float,
    dream_validated: bool = False,
    bloodstain: bool = False,
) -> float:
    """Retention of an entry last accessed at `last_accessed_tick`, seen from `now_tick`."""
    half_life = effective_half_life_seconds(kind, decay_class, quality, dream_validated, bloodstain)
    return retention(ticks_to_seconds(now_tick - last_accessed_tick, tick_seconds), half_life, strength)


def replay_gain(
    pnl_impact: float | None, prediction_error: float, pnl_scale: float = PNL_HALF_SATURATION_USD
) -> float:
    """The gain term of Mattar–Daw replay utility (dreams/replay.py), stored on every episode when it is written:
    gain ∈ [0, 1] = 1 − (1 − g_pnl)(1 − g_surprise) — either a big P&L or a big surprise is enough."""
    if pnl_scale <= 0:
        raise ValueError(f"pnl_scale must be > 0, got {pnl_scale}")
    pnl = abs(pnl_impact) if pnl_impact is not None else 0.0
    g_pnl = pnl / (pnl + pnl_scale)
    g_surprise = min(1.0, max(0.0, prediction_error))
    return 1.0 - (1.0 - g_pnl) * (1.0 - g_surprise)
