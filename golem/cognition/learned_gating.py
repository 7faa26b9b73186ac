"""Learned gating: discounted Hedge over five expert signals and arousal-conditioned Thompson-sampled tier
boundaries, with epsilon-greedy in shadow as the baseline. Pure: randomness comes only from the integer seed
the caller passes (`workflow.random()` or `tick_seed`), so a replay or a rerun gates the same way. The learned
parameters live in GolemState.learned_gating and travel across continue-as-new.
How the discount and the feedback are read, and why: docs/design/gate.md#learned-gating.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any

from pydantic import BaseModel, Field

from golem.inference.budget import apply_budget
from golem.cognition.prediction_error import ALARMING_REGIMES, expected_price, regime_changed
from golem.cognition.threshold import gate as fixed_gate
from golem.models.config import GatingSection, HeartbeatSection, ProbeThresholds
from golem.models.enums import MarketRegime, Tier
from golem.models.interventions import Steer
from golem.models.observation import Observation
from golem.models.state import (
    AROUSAL_BUCKETS,
    GATING_EXPERTS,
    BetaBoundary,
    EpsilonGreedyState,
    GatingDecision,
    GolemState,
    HedgeState,
    LearnedGatingState,
    ThompsonBoundaries,
    _boundary_priors,
)

TIERS = (Tier.T0, Tier.T1, Tier.T2)
_RANK = {t: i for i, t in enumerate(TIERS)}
PACKAGE_FORMAT = "golem-gating/1"


# ---- seeds -----------------------------------------------------------------------------------
def tick_seed(golem_id: str, tick: int, salt: str = "gate") -> int:
    """A stable 63-bit seed per (golem, tick): a rerun of a tick samples the same boundaries."""
    digest = hashlib.blake2b(f"{golem_id}:{tick}:{salt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


# ---- expert signals --------------------------------------------------------------------------
def expert_signals(
    state: GolemState, observation: Observation, prediction_error: float, thresholds: ProbeThresholds
) -> list[float]:
    """The five expert signals in GATING_EXPERTS order, each in [0, 1].

    oracle_residual       |price − expected| / the price probe's High move (200 bps), capped at 1
    regime_surprise       1 when the regime change counts as surprise
    source_inconsistency  |pool − oracle| / the circuit breaker's halt deviation (two sources disagree)
    risk_severity         the most severe probe: none 0, low 0.5, high 1
    prediction_error      the aggregate prediction error
    """
    price = observation.primary_price
    expected = expected_price(state)
    if expected is not None and price > 0:
        residual = abs(price - expected) / expected / max(thresholds.price_delta_high_bps / 10_000.0, 1e-9)
    else:
        residual = 0.0
    oracle = observation.snapshot.oracle_price
    inconsistency = (abs(price - oracle) / oracle * 10_000.0 / max(thresholds.oracle_deviation_high_bps, 1e-9)
                     if oracle > 0 else 1.0)
    severity = max((p.severity.rank for p in observation.probes), default=0) / 2.0
    signals = [
        residual,
        1.0 if regime_changed(state.regime, observation.regime) else 0.0,
        inconsistency,
        severity,
        prediction_error,
    ]
    return [_unit(s) for s in signals]


def _unit(x: float) -> float:
    return 0.0 if not math.isfinite(x) else max(0.0, min(1.0, x))


# ---- Discounted Hedge ------------------------------------------------------------------------
def _normalised(weights: list[float]) -> list[float]:
    """A probability distribution; uniform when the weights are degenerate (NaN, all zero)."""
    n = len(weights)
    if n == 0 or any(not math.isfinite(w) or w < 0 for w in weights):
        return [1.0 / max(n, 1)] * n
    total = math.fsum(weights)
    if total <= 0:
        return [1.0 / n] * n
    return [w / total for w in weights]


def hedge_combine(hedge: HedgeState, signals: list[float]) -> float:
    """Σ wᵢ·sᵢ over normalised weights: a composite score in [0, 1]."""
    if len(signals) != len(hedge.weights):
        raise ValueError(f"hedge has {len(hedge.weights)} experts but got {len(signals)} signals")
    return _unit(math.fsum(w * _unit(s) for w, s in zip(_normalised(hedge.weights), signals)))


def hedge_update(hedge: HedgeState, signals: list[float], outcome: float, eta: float, discount: float) -> HedgeState:
    """One discounted Hedge round: fixed share toward uniform, then wᵢ ← wᵢ·exp(−η·|sᵢ − outcome|)."""
    if len(signals) != len(hedge.weights):
        raise ValueError(f"hedge has {len(hedge.weights)} experts but got {len(signals)} signals")
    n = len(hedge.weights)
    y = _unit(outcome)
    losses = [min(abs(_unit(s) - y), 1.0) for s in signals]
    w = _normalised(hedge.weights)
    w = [discount * wi + (1.0 - discount) / n for wi in w]
    w = _normalised([wi * math.exp(-eta * li) for wi, li in zip(w, losses)])
    return HedgeState(
        experts=list(hedge.experts),
        weights=w,
        cumulative_loss=[c + li for c, li in zip(hedge.cumulative_loss, losses)],
        rounds=hedge.rounds + 1,
    )


# ---- arousal-conditioned Thompson sampling ---------------------------------------------------
def arousal_bucket(arousal: float) -> str:
    """heartbeat ArousalRegime: low < 0.3 ≤ medium < 0.7 ≤ high (on |arousal|)."""
    a = abs(arousal) if math.isfinite(arousal) else 0.0
    return "low" if a < 0.3 else "medium" if a < 0.7 else "high"


def sample_boundaries(
    thompson: ThompsonBoundaries, arousal: float, dominance: float, rng: random.Random, cfg: GatingSection
) -> list[float]:
    """Three boundaries, T2/T1 ≥ T1/T0 ≥ T0/suppress, each in [0.05, 0.95].

    Each is drawn from its Beta, lowered by arousal (× (1 − 0.2·arousal)) and raised by Daimon
    dominance (+ 0.1·dominance), clamped, then sorted. Both shifts are monotone and
    shared, and the sort enforces the order whatever the draws.
    """
    a = max(0.0, min(1.0, abs(arousal) if math.isfinite(arousal) else 0.0))
    d = max(-1.0, min(1.0, dominance if math.isfinite(dominance) else 0.0))
    out = []
    for b in thompson.boundaries:
        base = rng.betavariate(max(b.alpha, 1e-3), max(b.beta, 1e-3))
        shifted = base * (1.0 - cfg.arousal_shift * a) + cfg.dominance_bias * d
        out.append(max(0.05, min(0.95, shifted)))
    return sorted(out, reverse=True)


def tier_from_boundaries(composite: float, boundaries: list[float]) -> tuple[Tier, bool]:
    """(tier, below the suppress line). T2 above the first boundary, T1 above the second, else T0."""
    if composite > boundaries[0]:
        return Tier.T2, False
    if composite > boundaries[1]:
        return Tier.T1, False
    return Tier.T0, composite <= boundaries[2]


def _pseudo_observe(b: BetaBoundary, value: float) -> BetaBoundary:
    v = max(0.01, min(0.99, value))
    return BetaBoundary(alpha=b.alpha + v, beta=b.beta + (1.0 - v))


def _decay_toward(b: BetaBoundary, prior: BetaBoundary, factor: float) -> BetaBoundary:
    return BetaBoundary(alpha=prior.alpha + (b.alpha - prior.alpha) * factor,
                        beta=prior.beta + (b.beta - prior.beta) * factor)


def thompson_update(
    thompson: ThompsonBoundaries, composite: float, sampled: list[float], required: int, cfg: GatingSection
) -> tuple[ThompsonBoundaries, list[bool]]:
    """Feedback for one judged tick. Returns the new beliefs and, per boundary [T2/T1, T1/T0], whether
    the sampled boundary sorted the tick right (was it correct)."""
    priors = _boundary_priors()
    bs = [_decay_toward(b, p, cfg.thompson_decay) for b, p in zip(thompson.boundaries, priors)]
    correct: list[bool] = []
    # boundary 0 (T2/T1) should sit at or below the composite iff the tick needed T2;
    # boundary 1 (T1/T0) should sit at or below it iff the tick needed any escalation.
    for idx, should_escalate in ((0, required >= 2), (1, required >= 1)):
        escalated = composite > sampled[idx]
        ok = escalated == should_escalate
        correct.append(ok)
        if ok:
            bs[idx] = _pseudo_observe(bs[idx], bs[idx].mean)
        elif should_escalate:  # boundary was too high: lower it below the composite
            bs[idx] = _pseudo_observe(bs[idx], composite - cfg.boundary_margin)
        else:  # boundary was too low (wasted inference): raise it above the composite
            bs[idx] = _pseudo_observe(bs[idx], composite + cfg.boundary_margin)
    return ThompsonBoundaries(boundaries=bs), correct


# ---- epsilon-greedy (shadow baseline) --------------------------------------------------------
def epsilon_select(eg: EpsilonGreedyState, rng: random.Random) -> Tier:
    """What epsilon-greedy would route to. Two draws, always, so the rng stream has a fixed shape."""
    explore, pick = rng.random(), rng.randrange(3)
    if explore < eg.epsilon:
        return TIERS[pick]
    best = max(range(3), key=lambda i: (eg.arm_means[i], -i))
    return TIERS[best]


def epsilon_update(eg: EpsilonGreedyState, arm: Tier, reward: float, cfg: GatingSection) -> EpsilonGreedyState:
    i = _RANK[arm]
    counts = list(eg.arm_counts)
    means = list(eg.arm_means)
    counts[i] += 1
    means[i] += (reward - means[i]) / counts[i]
    return EpsilonGreedyState(epsilon=max(eg.epsilon * cfg.epsilon_decay, cfg.epsilon_min), arm_means=means,
                              arm_counts=counts)


# ---- the gate --------------------------------------------------------------------------------
class GateOutcome(BaseModel):
    tier: Tier  # after forced overrides, gating and the budget cap
    reason: str
    forced: bool
    threshold: float
    decision: GatingDecision  # fold it into state with note_gating_outcome


def learned_active(state: GolemState, cfg: GatingSection) -> bool:
    """Learned gating replaces the fixed thresholds after the cold start, or at once for a golem that
    inherited calibrated parameters."""
    return state.tick >= cfg.cold_start_ticks or state.learned_gating.inherited_from is not None


def gate_tick(
    prediction_error: float,
    threshold: float,
    state: GolemState,
    steers: list[Steer],
    observation: Observation,
    *,
    probe_thresholds: ProbeThresholds,
    heartbeat: HeartbeatSection,
    gating: GatingSection,
    daily_spend: float,
    seed: int,
) -> GateOutcome:
    """The gate: forced T2 first, then fixed thresholds (cold start) or learned gating, then the daily
    budget cap (which overrides even forced T2: "no exceptions").

    Learned gating is always computed, so during the cold start its choice is logged in shadow and
    the learner is warm when it takes over; epsilon-greedy's would-be choice is always logged.
    """
    lg = state.learned_gating
    signals = expert_signals(state, observation, prediction_error, probe_thresholds)
    composite = hedge_combine(lg.hedge, signals)
    bucket = arousal_bucket(state.pad.arousal)
    rng = random.Random(seed)
    boundaries = sample_boundaries(lg.thompson.get(bucket, ThompsonBoundaries()), state.pad.arousal,
                                   state.pad.dominance, rng, gating)
    learned_tier, suppressed = tier_from_boundaries(composite, boundaries)
    shadow = epsilon_select(lg.baseline, rng)

    fixed_tier, fixed_reason, forced = fixed_gate(prediction_error, threshold, state, steers)
    if forced:
        mode, tier, reason = "forced", fixed_tier, fixed_reason
    elif learned_active(state, gating):
        mode, tier = "learned", learned_tier
        b = boundaries
        reason = (f"{tier.value} (learned): composite {composite:.3f} vs boundaries T2 {b[0]:.3f} / T1 {b[1]:.3f}"
                  f" / suppress {b[2]:.3f} [{bucket} arousal]" + (" — below the suppress line" if suppressed else ""))
    else:
        mode, tier = "fixed", fixed_tier
        reason = f"{fixed_reason} (cold start {state.tick}/{gating.cold_start_ticks})"
    capped, note = apply_budget(tier, daily_spend, heartbeat)
    if note:
        reason = f"{reason}; {note}"
    decision = GatingDecision(
        tick=state.tick, mode=mode, gated_tier=tier, tier=capped, prediction_error=round(prediction_error, 6),
        signals=[round(s, 6) for s in signals], composite=round(composite, 6),
        boundaries=[round(x, 6) for x in boundaries], arousal_bucket=bucket, learned_tier=learned_tier,
        shadow_tier=shadow,
    )
    return GateOutcome(tier=capped, reason=reason, forced=forced, threshold=threshold, decision=decision)


# ---- outcome feedback at delta frequency ------------------------------------------------------
def note_gating_outcome(
    learned: LearnedGatingState,
    decision: GatingDecision,
    *,
    regime_before: MarketRegime,
    regime_after: MarketRegime,
    actions: int,
    failed: bool = False,
    log_len: int = 120,
) -> LearnedGatingState:
    """Append a finished tick's gating decision with its outcome to the bounded log (called at fold)."""
    entry = decision.model_copy(update={
        "regime": regime_after,
        "regime_changed": regime_changed(regime_before, regime_after),
        "actions": max(actions, 0),
        "failed": failed,
    })
    log = [e for e in learned.log if e.tick != entry.tick] + [entry]  # a rerun replaces its tick
    log.sort(key=lambda e: e.tick)
    return learned.model_copy(update={"log": log[-log_len:]})


def market_level(entry: GatingDecision, cfg: GatingSection) -> int:
    """How much thinking the market at a logged tick called for: 2 severe, 1 significant, 0 quiet.

    Evidence independent of the gate: the prediction error (`event_pe` significant, `severe_pe` severe) and a
    regime change (into a falling or volatile market is severe). A failed tick is no evidence."""
    if entry.failed:
        return 0
    if entry.prediction_error >= cfg.severe_pe or (entry.regime_changed and entry.regime in ALARMING_REGIMES):
        return 2
    if entry.prediction_error >= cfg.event_pe or entry.regime_changed:
        return 1
    return 0


def required_tier(entry: GatingDecision, window: list[GatingDecision], cfg: GatingSection) -> int:
    """The tier the tick needed in hindsight, judged per the tier that ran:

    - T0 was correct if neither the tick nor the next theta window (`window`) showed a significant market event
      ("no large prediction error, no position loss, no regime change"); else it needed that event's level.
    - An escalated tick (T1/T2) was needed if its deliberation found something actionable ("T1 was correct if
      the LLM analysis identified something actionable that T0 would have missed"): an action → 1. Without one
      the escalation was unnecessary (0), unless the tick or its window was severe (2: "insufficient", an event
      that required higher-tier reasoning). An action is never evidence that T2 rather than T1 was needed: the
      deliberation that acted at T2 would have been judged T2-correct by its own action, a loop that fed itself
      in volatile markets (54 % of ticks at T2 after the cold start) — T2 needs a severe market.
    - A forced tick (owner steer, phase transition) ran for the owner's reason: only the market judges it.
    """
    if entry.failed:
        return 0
    market = max([market_level(entry, cfg), *(market_level(w, cfg) for w in window)])
    if entry.tier == Tier.T0 or entry.mode == "forced":
        return market
    return max(1 if entry.actions > 0 else 0, 2 if market >= 2 else 0)


class FeedbackReport(BaseModel):
    judged: int = 0
    correct: int = 0
    unnecessary: int = 0
    insufficient: int = 0
    learned_correct: int = 0
    shadow_correct: int = 0
    judged_through_tick: int = -1
    hedge_weights: dict[str, float] = Field(default_factory=dict)
    boundary_means: dict[str, list[float]] = Field(default_factory=dict)


def apply_outcome_feedback(learned: LearnedGatingState, cfg: GatingSection) -> tuple[LearnedGatingState, FeedbackReport]:
    """Close the loop (at delta frequency): judge every logged tick whose next window is complete and
    not yet judged, and update Hedge, the Thompson beliefs of the arousal bucket it was gated in,
    and the shadow epsilon-greedy. Ticks whose window is still open wait for the next call."""
    log = sorted(learned.log, key=lambda e: e.tick)
    hedge, thompson = learned.hedge, dict(learned.thompson)
    baseline, stats = learned.baseline, learned.stats.model_copy()
    report = FeedbackReport()
    judged_through = learned.judged_through_tick
    h = cfg.feedback_horizon_ticks
    for i, e in enumerate(log):
        if e.tick <= learned.judged_through_tick:
            continue
        window = log[i + 1:i + 1 + h]  # the next h logged ticks (a failed tick logs nothing)
        if len(window) < h:
            break  # window still open (ticks are judged in order)
        r = required_tier(e, window, cfg)
        ran = _RANK[e.tier]
        report.judged += 1
        report.correct += ran == r
        report.unnecessary += ran > r
        report.insufficient += ran < r
        if e.learned_tier is not None:
            report.learned_correct += _RANK[e.learned_tier] == r
        if e.shadow_tier is not None:
            report.shadow_correct += _RANK[e.shadow_tier] == r
            baseline = epsilon_update(baseline, e.shadow_tier, 1.0 if _RANK[e.shadow_tier] == r else 0.0, cfg)
        if len(e.signals) == len(hedge.weights):
            hedge = hedge_update(hedge, e.signals, r / 2.0, cfg.hedge_eta, cfg.hedge_discount)
        if len(e.boundaries) == 3:
            tb = thompson.get(e.arousal_bucket, ThompsonBoundaries())
            thompson[e.arousal_bucket], _ = thompson_update(tb, e.composite, e.boundaries, r, cfg)
        judged_through = e.tick
    stats.judged += report.judged
    stats.correct += report.correct
    stats.unnecessary += report.unnecessary
    stats.insufficient += report.insufficient
    stats.learned_correct += report.learned_correct
    stats.shadow_correct += report.shadow_correct
    keep = [e for e in log if e.tick > judged_through]
    new = learned.model_copy(update={
        "hedge": hedge, "thompson": thompson, "baseline": baseline, "stats": stats, "log": keep,
        "judged_through_tick": judged_through,
        "feedback_rounds": learned.feedback_rounds + (1 if report.judged else 0),
    })
    report.judged_through_tick = judged_through
    report.hedge_weights = dict(zip(hedge.experts, (round(w, 4) for w in hedge.weights)))
    report.boundary_means = {k: [round(b.mean, 4) for b in v.boundaries] for k, v in thompson.items()}
    return new, report


def learn_at_delta(state: GolemState, cfg: GatingSection) -> tuple[GolemState, FeedbackReport]:
    """GolemWorkflow calls this when a delta cycle starts."""
    learned, report = apply_outcome_feedback(state.learned_gating, cfg)
    return state.model_copy(update={"learned_gating": learned}), report


# ---- explanation (`golem gating show`) ---------------------------------------------------------
EXPERT_MEANING = {
    "oracle_residual": "the price moved away from the expected one",
    "regime_surprise": "the regime changed",
    "source_inconsistency": "pool and oracle disagree",
    "risk_severity": "the most severe probe fired",
    "prediction_error": "the prediction error (with the topology term)",
}


def explain_experts(learned: LearnedGatingState, last: GatingDecision | None = None) -> list[str]:
    """Why each expert weighs what it does: Hedge moves weight toward the experts whose signal tracked
    the tier the hindsight judge said a tick needed (loss = |signal − needed tier / 2|), with a fixed share
    toward uniform. Per expert: weight against uniform, mean loss per judged tick, and — for `last`, the newest
    logged gate — its signal and its share of the composite."""
    h = learned.hedge
    n = len(h.weights) or 1
    w = _normalised(h.weights)
    lines = [f"hedge weights per expert (uniform {1 / n:.3f}), mean loss per judged tick over {h.rounds} "
             "(|signal − needed tier/2|: lower = its signal tracked what the judge said the tick needed)"
             + (f", and at tick {last.tick} its signal → share of the composite" if last is not None else "")]
    for i, name in enumerate(h.experts):
        mean_loss = h.cumulative_loss[i] / h.rounds if h.rounds and i < len(h.cumulative_loss) else None
        trend = "trusted more" if w[i] > 1 / n * 1.05 else "trusted less" if w[i] < 1 / n * 0.95 else "as uniform"
        row = f"  {name:<21} {w[i]:.3f} {trend:<13}"
        row += f" mean loss {mean_loss:.3f}" if mean_loss is not None else " no feedback yet"
        if last is not None and len(last.signals) == n:
            row += f" | signal {last.signals[i]:.3f} → {w[i] * last.signals[i]:.3f}"
        lines.append(row + f"  ({EXPERT_MEANING.get(name, name)})")
    if last is not None and len(last.boundaries) == 3:
        b = last.boundaries
        lines.append(f"  composite {last.composite:.3f} vs sampled boundaries T2 {b[0]:.3f} / T1 {b[1]:.3f} "
                     f"[{last.arousal_bucket} arousal] → learned {last.learned_tier.value if last.learned_tier else '?'}"
                     f", ran {last.tier.value} ({last.mode})")
    return lines


# ---- inheritance package ---------------------------------------------------------------------
# Where `golem gating import` stages a package in the data dir; a newborn golem loads it at first start.
INHERITANCE_FILE = "gating-inheritance.json"


def export_package(learned: LearnedGatingState, golem_id: str, tick: int) -> dict[str, Any]:
    """The learned parameters as the few-KB generational inheritance package (JSON-ready)."""
    return {
        "format": PACKAGE_FORMAT,
        "golem_id": golem_id,
        "tick": tick,
        "experts": list(learned.hedge.experts),
        "hedge": {"weights": learned.hedge.weights, "cumulative_loss": learned.hedge.cumulative_loss,
                  "rounds": learned.hedge.rounds},
        "thompson": {k: [[b.alpha, b.beta] for b in v.boundaries] for k, v in sorted(learned.thompson.items())},
        "baseline": learned.baseline.model_dump(),
        "stats": learned.stats.model_dump(),
        "feedback_rounds": learned.feedback_rounds,
    }


class PackageError(ValueError):
    """An inheritance package that cannot be imported; the message says what to fix."""


def import_package(package: dict[str, Any]) -> LearnedGatingState:
    """Validate a package and build a fresh LearnedGatingState from it (empty log, stats kept for the
    record, `inherited_from` set so learned gating starts at once)."""
    if not isinstance(package, dict):
        raise PackageError("gating package must be a JSON object (from `golem gating export`)")
    if package.get("format") != PACKAGE_FORMAT:
        raise PackageError(f"unknown package format {package.get('format')!r}: expected {PACKAGE_FORMAT!r}")
    if list(package.get("experts", [])) != list(GATING_EXPERTS):
        raise PackageError(f"package experts {package.get('experts')} do not match this golem's {list(GATING_EXPERTS)}")
    try:
        hedge = package["hedge"]
        weights = [float(w) for w in hedge["weights"]]
        if len(weights) != len(GATING_EXPERTS) or any(not math.isfinite(w) or w < 0 for w in weights) \
                or math.fsum(weights) <= 0:
            raise PackageError(f"hedge.weights must be {len(GATING_EXPERTS)} finite non-negative numbers, not all 0")
        losses = [float(x) for x in hedge.get("cumulative_loss", [0.0] * len(weights))]
        thompson = {}
        for bucket in AROUSAL_BUCKETS:
            pairs = package["thompson"][bucket]
            if len(pairs) != 3 or any(len(p) != 2 or not (float(p[0]) > 0 and float(p[1]) > 0) for p in pairs):
                raise PackageError(f"thompson.{bucket} must be three [alpha, beta] pairs of positive numbers")
            thompson[bucket] = ThompsonBoundaries(
                boundaries=[BetaBoundary(alpha=float(a), beta=float(b)) for a, b in pairs])
        baseline = EpsilonGreedyState.model_validate(package.get("baseline", {}))
    except PackageError:
        raise
    except (KeyError, TypeError, ValueError) as err:
        raise PackageError(f"malformed gating package ({type(err).__name__}: {err}); re-export it") from None
    return LearnedGatingState(
        hedge=HedgeState(weights=_normalised(weights), cumulative_loss=losses, rounds=int(hedge.get("rounds", 0))),
        thompson=thompson,
        baseline=baseline,
        feedback_rounds=int(package.get("feedback_rounds", 0)),
        inherited_from=f"{package.get('golem_id', '?')}@{package.get('tick', '?')}",
    )
