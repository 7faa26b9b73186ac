"""The DreamScheduler: when to dream, and how many Tier 1 threat rehearsals the next cycle runs.

    urgency = time + emotion + novelty + risk + tags

`time` reaches 1.0 at `dream_every_ticks`, so a calm golem dreams on the old fixed schedule; the other terms bring
a troubled golem's dream forward, never sooner than `dream_min_gap_ticks`. Weights and the doubling on volatile or
thin markets: docs/design/dreams.md#when-to-dream.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from golem.models.enums import MarketRegime
from golem.models.state import GolemState

URGENCY_TO_DREAM = 1.0
WEIGHTS = {"emotion": 0.3, "novelty": 0.2, "risk": 0.3, "tags": 0.2}  # ours (module docstring)
RISK_HEALTH_CALM, RISK_HEALTH_DIRE = 2.0, 1.2  # HF 2.0 → no risk; 1.2 (the position probe's High line) → full
TAGS_FOR_FULL = 5  # five curator-flagged episodes saturate the term (ours)
# "volatilityQuintile >= 4 or liquidityCondition === 'thin' → double Tier 1 threat rehearsal".
# We read the volatile and crash-like regimes as quintile ≥ 4.
DOUBLING_REGIMES = frozenset({MarketRegime.VOLATILE, MarketRegime.TRENDING_DOWN})
# A thin pool: its TVL at or below this share of its median over the recent tick records (the threshold is ours). Read
# by the threat phase when the cycle runs.
THIN_LIQUIDITY_SHARE = 0.5


class DreamUrgency(BaseModel):
    urgency: float
    terms: dict[str, float] = Field(default_factory=dict)
    due: bool = False
    reasons: list[str] = Field(default_factory=list)
    threat_rehearsals: int = 1  # per Tier 1 threat in the next cycle (2 = doubled on a volatile or thin market)


def _clip(x: float) -> float:
    return max(0.0, min(1.0, x))


def thin_liquidity(tvl: float | None, recent_tvls: list[float]) -> str | None:
    """Why the pool is thin now (its TVL at or below THIN_LIQUIDITY_SHARE of
    its recent median), or None. Too few records (< 5) to have a median: never thin."""
    known = sorted(t for t in recent_tvls if t > 0)
    if tvl is None or len(known) < 5:
        return None
    median = known[len(known) // 2]
    if tvl > median * THIN_LIQUIDITY_SHARE:
        return None
    return f"thin liquidity: pool TVL {tvl:,.0f} is {tvl / median:.0%} of its recent median {median:,.0f}"


def dream_urgency(state: GolemState, every_ticks: int, min_gap_ticks: int, curator_tags: int = 0) -> DreamUrgency:
    since = state.tick - state.last_dream_tick
    recent = state.recent_ticks[-20:]
    pes = [t.prediction_error for t in recent if t.prediction_error is not None]
    # Emotional load: the daimon's arousal and negative valence; prediction error where the PAD is still neutral.
    affect = _clip(max(state.pad.arousal, 0.0) * 0.5 + max(-state.pad.pleasure, 0.0) * 0.5)
    emotion = affect if affect > 0 else _clip(sum(pes) / len(pes) if pes else 0.0)
    regimes = [t.regime for t in recent if t.regime is not None]
    novelty = _clip(sum(a != b for a, b in zip(regimes, regimes[1:])) / 3.0)  # three regime changes saturate
    hfs = [h for h in state.position_health.values() if h is not None]
    risk = _clip((RISK_HEALTH_CALM - min(hfs)) / (RISK_HEALTH_CALM - RISK_HEALTH_DIRE)) if hfs else 0.0
    tags = _clip(curator_tags / TAGS_FOR_FULL)
    terms = {"time": since / max(every_ticks, 1), "emotion": WEIGHTS["emotion"] * emotion,
             "novelty": WEIGHTS["novelty"] * novelty, "risk": WEIGHTS["risk"] * risk, "tags": WEIGHTS["tags"] * tags}
    urgency = sum(terms.values())
    due = not state.dreaming and since >= min_gap_ticks and urgency >= URGENCY_TO_DREAM
    reasons = [f"{k} {v:.2f}" for k, v in sorted(terms.items(), key=lambda kv: -kv[1]) if v > 0.005]
    doubled = state.regime in DOUBLING_REGIMES  # thin liquidity: read by the threat phase (thin_liquidity)
    return DreamUrgency(urgency=round(urgency, 4), terms={k: round(v, 4) for k, v in terms.items()}, due=due,
                        reasons=reasons, threat_rehearsals=2 if doubled else 1)
