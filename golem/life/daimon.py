"""The daimon's after_turn: an OCC/Scherer appraisal of the tick → a PAD vector that decays to a baseline →
a Plutchik primary emotion. Pure.

The checks (relevance, congruence, novelty, coping potential, norm compatibility) are computed from what the tick
measured; the target PAD follows from them and the affect moves toward it by IMPULSE, decaying to BASELINE.
The formulas, why coping is life × max(position × control, agency), and the octants: docs/design/life.md#the-daimon.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from golem.grimoire.episodes.model import pad_label
from golem.life.lifespan import HF_ACCURATE
from golem.models.enums import MarketRegime, PlutchikLabel
from golem.models.state import PADVector

BASELINE = PADVector(pleasure=0.05, arousal=-0.1, dominance=0.1)  # ours: a calm, mildly confident temperament
DECAY = 0.8  # per tick, the part of the deviation from the baseline that remains (half-life ~3 ticks)
IMPULSE = 0.7  # how far one fully relevant appraisal moves the affect toward its target
RELEVANCE_FLOOR = 0.3  # ours: the standing situation (coping, calm) is always appraised a little
PNL_SCALE_USD = 50.0  # a $50 gain or loss is a strongly (tanh 1 = 0.76) congruent/incongruent outcome
HF_SCALE = 0.15  # a health factor change of 0.15 in one tick is a strongly felt one
EQUITY_SCALE = 0.01  # the holdings gaining or losing 1 % of net value in one tick is strongly felt
CONTROL_WEIGHT = 0.5  # a full surprise halves the coping potential
DRAWDOWN_WEIGHT = 0.5  # ours, the budget headroom's form: the whole max drawdown used halves the coping potential
NORM_WEIGHT = 0.5
SOMATIC_DOMINANCE = 0.4  # a fired marker of strength 1 lowers dominance by this much

PLUTCHIK_BY_OCTANT: dict[tuple[int, int, int], PlutchikLabel] = {
    (1, 1, 1): PlutchikLabel.JOY,
    (1, 1, -1): PlutchikLabel.SURPRISE,
    (1, -1, 1): PlutchikLabel.TRUST,
    (1, -1, -1): PlutchikLabel.ANTICIPATION,
    (-1, 1, 1): PlutchikLabel.ANGER,
    (-1, 1, -1): PlutchikLabel.FEAR,
    (-1, -1, 1): PlutchikLabel.DISGUST,
    (-1, -1, -1): PlutchikLabel.SADNESS,
}


class Appraisal(BaseModel):
    relevance: float
    congruence: float
    novelty: float
    coping: float
    norms: float
    somatic: float = 0.0  # summed strength of the fired negative markers
    reasons: list[str] = Field(default_factory=list)


class AppraisalInput(BaseModel):
    prediction_error: float = 0.0
    regime_changed: bool = False
    pnl_usd: float | None = None  # verified P&L of the tick's actions
    equity_change: float | None = None  # the holdings marked to market since the last tick, share of net value
    hf_before: float | None = None  # the lending health factor at the last tick (None: no debt)
    hf_now: float | None = None
    liquidated: bool = False
    vitality: float = 1.0
    budget_fraction: float = 0.0
    drawdown_used: float = 0.0  # drawdown below the net-value high-water mark / the risk layer's max drawdown
    proposed: int = 0  # actions proposed
    blocked: int = 0  # of them refused by the PolicyCage
    failed: int = 0  # writes that failed on chain
    somatic_strength: float = 0.0  # summed strength of the negative markers that fired
    # the tick's own writes, as verify measured them (OutcomeRecord) and Reflexion compared them with the prediction
    acted_verified: bool = False  # the golem sent writes this tick and verify found no invariant violated
    acted_hf_before: float | None = None  # min health factor re-read before execution
    acted_hf_after: float | None = None  # … and after it (verified)
    acted_hf_error: float | None = None  # verified − predicted health factor (Reflexion)


def regime_shift(before: MarketRegime | str | None, after: MarketRegime | str | None) -> bool:
    """A regime change the golem can be surprised by (novelty 1): between two regimes it has read. The classifier's
    first reading after its warm-up (none/unknown → range_bound) is the golem learning to see, not the world
    changing, and losing a reading (→ unknown) is no news about the market either."""
    if before is None or after is None:
        return False
    b, a = MarketRegime(before), MarketRegime(after)
    return MarketRegime.UNKNOWN not in (b, a) and b != a


def _clamp(x: float, lo: float = -1.0, hi: float = 1.0) -> float:
    return max(lo, min(hi, x))


def appraise(x: AppraisalInput) -> Appraisal:
    reasons: list[str] = []
    congruence = 0.0
    if x.pnl_usd is not None:
        congruence += math.tanh(x.pnl_usd / PNL_SCALE_USD)
        reasons.append(f"P&L {x.pnl_usd:+.2f}")
    if x.equity_change is not None:
        congruence += math.tanh(x.equity_change / EQUITY_SCALE)
        if abs(x.equity_change) >= 0.001:
            reasons.append(f"holdings {100 * x.equity_change:+.2f}% of net value")
    if x.hf_before is not None and x.hf_now is not None:
        d = x.hf_now - x.hf_before
        congruence += math.tanh(d / HF_SCALE)
        if abs(d) >= 0.005:
            reasons.append(f"health factor {x.hf_before:.3f}→{x.hf_now:.3f}")
    if x.liquidated:
        congruence = -1.0
        reasons.append("liquidated")
    congruence = _clamp(congruence)
    novelty = 1.0 if x.regime_changed else _clamp(x.prediction_error, 0.0, 1.0)
    if x.regime_changed:
        reasons.append("regime changed")
    life = _clamp(x.vitality, 0.0, 1.0) * (1.0 - 0.5 * _clamp(x.budget_fraction, 0.0, 1.0))
    position = _margin(x.hf_now) * (1.0 - DRAWDOWN_WEIGHT * _clamp(x.drawdown_used, 0.0, 1.0))
    control = 1.0 - CONTROL_WEIGHT * novelty
    own = agency(x)
    coping = life * max(position * control, own)
    if x.drawdown_used >= 0.25:
        reasons.append(f"{100 * min(x.drawdown_used, 9.99):.0f}% of the max drawdown used")
    if own > 0:
        reasons.append(f"own write raised the health factor {x.acted_hf_before:.3f}→{x.acted_hf_after:.3f} "
                       f"as predicted (error {x.acted_hf_error:+.3f})")
    norms = 1.0
    if x.proposed:
        norms -= x.blocked / x.proposed
        if x.blocked:
            reasons.append(f"{x.blocked} of {x.proposed} actions refused")
    if x.failed:
        norms = 0.0
        reasons.append(f"{x.failed} writes failed")
    relevance = max(novelty, abs(congruence), 1.0 - norms, 1.0 if x.liquidated else 0.0,
                    min(x.somatic_strength, 1.0))
    if x.somatic_strength > 0:
        reasons.append(f"somatic markers fired (strength {x.somatic_strength:.2f})")
    return Appraisal(relevance=round(relevance, 6), congruence=round(congruence, 6), novelty=round(novelty, 6),
                     coping=round(coping, 6), norms=round(_clamp(norms, 0.0, 1.0), 6), somatic=x.somatic_strength,
                     reasons=reasons)


def _margin(hf: float | None) -> float:
    """The lending health factor's margin above 1 in [0, 1] (HF 2 and above: full margin; no debt: full)."""
    return 1.0 if hf is None else _clamp((hf - 1.0) / 1.0, 0.0, 1.0)


def agency(x: AppraisalInput) -> float:
    """The control the golem's own write demonstrated this tick (the coping check's agency, see the module doc):
    the margin of the verified health factor when the write verified, raised the health factor and landed within
    HF_ACCURATE of the prediction; 0 otherwise (no write, no loan, a write that lowered it or missed)."""
    before, after, error = x.acted_hf_before, x.acted_hf_after, x.acted_hf_error
    if not x.acted_verified or before is None or after is None or error is None:
        return 0.0
    if after <= before or abs(error) > HF_ACCURATE:
        return 0.0
    return _margin(after)


def target_of(a: Appraisal) -> PADVector:
    return PADVector(
        pleasure=_clamp(a.congruence - (1.0 - a.norms) * NORM_WEIGHT),
        arousal=_clamp(2.0 * a.novelty - 1.0),
        dominance=_clamp(2.0 * a.coping - 1.0 - SOMATIC_DOMINANCE * min(a.somatic, 2.0)),
    )


def update_pad(before: PADVector, a: Appraisal, baseline: PADVector = BASELINE) -> PADVector:
    """Decay toward the baseline, then move toward the appraisal's target by IMPULSE × relevance."""
    target = target_of(a)
    k = IMPULSE * max(_clamp(a.relevance, 0.0, 1.0), RELEVANCE_FLOOR)
    out = {}
    for f in ("pleasure", "arousal", "dominance"):
        b = getattr(baseline, f)
        decayed = b + DECAY * (getattr(before, f) - b)
        out[f] = round(_clamp(decayed + k * (getattr(target, f) - decayed)), 6)
    return PADVector(**out)


def octant(pad: PADVector) -> str:
    return pad_label(pad.pleasure, pad.arousal, pad.dominance)


def plutchik(pad: PADVector) -> PlutchikLabel | None:
    """The primary emotion of the PAD octant (a zero component counts as +, as in the octant tags); None when the
    affect is neutral (no octant: near the origin, or pleasure within the valence band)."""
    if octant(pad) == "neutral":
        return None
    key = tuple(1 if v >= 0 else -1 for v in (pad.pleasure, pad.arousal, pad.dominance))
    return PLUTCHIK_BY_OCTANT[key]  # type: ignore[index]
