"""The adaptive clock: three scales, all pure and deterministic so GolemWorkflow may call them.
GAMMA (5–15 s) resolves the golem's predictions against a fresh chain read; violations speed it up and raise
arousal. THETA (30–120 s) is the tick interval: regime multiplier × T2 speed-up × budget throttle. DELTA runs
every `delta_theta_ticks` (fold.should_run_delta). Formulas and tolerances: docs/design/gate.md#the-clock.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from golem.models.config import ClockSection, ProbeThresholds
from golem.models.enums import Tier
from golem.models.observation import ChainSnapshot
from golem.models.state import GammaState, GolemState, Prediction

ESCALATED_SPEEDUP = 0.5  # a T2 tick was just needed: look again sooner
BUDGET_SLOWDOWN = 2.0  # "throttles rates when approaching the daily budget ceiling"
BUDGET_SLOWDOWN_FRACTION = 0.9  # the budget's soft cap

# Gamma, the perception pulse
GAMMA_MIN_SECONDS = 5.0
GAMMA_MAX_SECONDS = 15.0
GAMMA_VIOLATION_SPEEDUP = 0.3  # interval = max / (1 + 0.3 × violations)
RESIDUAL_EMA = 0.2  # the residual corrector: weight of the newest residual in the running bias and |residual|
HEALTH_TOLERANCE = 0.1  # a 0.1 change in health factor is "significant"
GAS_TOLERANCE = 1.0  # gas doubling (the gas probe's Low line is 2× the average)
AROUSAL_PER_VIOLATION = 0.1


def budget_throttle(budget_fraction: float, warning_fraction: float | None = None,
                    soft_cap_fraction: float = BUDGET_SLOWDOWN_FRACTION) -> float:
    """Clock slowdown factor ≥ 1 for today's spend fraction. Without a warning line it is a step
    (2× at the soft cap); with one it ramps linearly from 1× at the warning line to 2× at the cap."""
    if not math.isfinite(budget_fraction) or budget_fraction >= soft_cap_fraction:
        return BUDGET_SLOWDOWN
    if warning_fraction is None or budget_fraction <= warning_fraction or warning_fraction >= soft_cap_fraction:
        return 1.0
    ramp = (budget_fraction - warning_fraction) / (soft_cap_fraction - warning_fraction)
    return 1.0 + (BUDGET_SLOWDOWN - 1.0) * ramp


def theta_interval_seconds(
    state: GolemState,
    clock: ClockSection,
    budget_fraction: float,
    soft_cap_fraction: float = BUDGET_SLOWDOWN_FRACTION,
    warning_fraction: float | None = None,
) -> float:
    """base × regime multiplier × 0.5 after a T2 tick × budget throttle, clamped to [theta_min, theta_max]."""
    theta = clock.theta_base_seconds * clock.regime_multipliers.get(state.regime, 1.0)
    last = state.recent_ticks[-1] if state.recent_ticks else None
    if last is not None and not last.failed and last.tier == Tier.T2:
        theta *= ESCALATED_SPEEDUP
    theta *= budget_throttle(budget_fraction, warning_fraction, soft_cap_fraction)
    return max(clock.theta_min_seconds, min(clock.theta_max_seconds, theta))


# ---- gamma -----------------------------------------------------------------------------------
def gamma_interval_seconds(violations: int, budget_factor: float = 1.0, gamma_min: float = GAMMA_MIN_SECONDS,
                           gamma_max: float = GAMMA_MAX_SECONDS) -> float:
    """gamma_max / (1 + 0.3·violations) × budget throttle, clamped to [gamma_min, gamma_max]."""
    v = max(int(violations), 0)
    interval = gamma_max / (1.0 + GAMMA_VIOLATION_SPEEDUP * v) * max(budget_factor, 1.0)
    return max(gamma_min, min(gamma_max, interval))


class Resolution(BaseModel):
    kind: str
    subject: str
    expected: float
    actual: float
    residual: float  # relative (price, gas) or absolute (health)
    violation: bool


class GammaReport(BaseModel):
    resolutions: list[Resolution] = Field(default_factory=list)
    violations: int = 0
    interval_seconds: float = GAMMA_MAX_SECONDS
    pending: int = 0


def _observed(snapshot: ChainSnapshot) -> dict[tuple[str, str], float]:
    values = {("price", "pool"): snapshot.pool.price, ("gas", "chain"): snapshot.gas_price_gwei}
    for p in snapshot.positions:
        if p.health_factor is not None and math.isfinite(p.health_factor):
            values[("health", p.id)] = p.health_factor
    return values


def make_predictions(gamma: GammaState, snapshot: ChainSnapshot, tick: int, now: float, horizon_seconds: float,
                     thresholds: ProbeThresholds) -> list[Prediction]:
    """Expectations for the next gamma pulse: naive persistence, price corrected by the residual bias."""
    tol = {"price": thresholds.price_delta_low_bps / 10_000.0, "gas": GAS_TOLERANCE, "health": HEALTH_TOLERANCE}
    out = []
    for (kind, subject), value in sorted(_observed(snapshot).items()):
        if value <= 0 and kind != "health":
            continue
        expected = value * (1.0 + gamma.residual_bias.get(kind, 0.0)) if kind == "price" else value
        out.append(Prediction(kind=kind, subject=subject, expected=expected, tolerance=tol[kind], made_tick=tick,
                              made_at=now, due_at=now + horizon_seconds))
    return out


def resolve_predictions(gamma: GammaState, snapshot: ChainSnapshot, now: float) -> tuple[GammaState, list[Resolution]]:
    """Resolve every due prediction whose subject is still observable; the rest stay pending
    (a prediction about a repaid position is dropped)."""
    observed = _observed(snapshot)
    bias, mag = dict(gamma.residual_bias), dict(gamma.residual_abs)
    pending, resolutions = [], []
    for p in gamma.pending:
        key = (p.kind, p.subject)
        if p.due_at > now:
            pending.append(p)
            continue
        if key not in observed:
            continue
        actual = observed[key]
        if p.kind == "health":
            residual = actual - p.expected
        else:
            residual = (actual - p.expected) / p.expected if p.expected else 0.0
        violation = abs(residual) > p.tolerance
        resolutions.append(Resolution(kind=p.kind, subject=p.subject, expected=p.expected, actual=actual,
                                      residual=residual, violation=violation))
        bias[p.kind] = (1 - RESIDUAL_EMA) * bias.get(p.kind, 0.0) + RESIDUAL_EMA * residual
        mag[p.kind] = (1 - RESIDUAL_EMA) * mag.get(p.kind, 0.0) + RESIDUAL_EMA * abs(residual)
    v = sum(r.violation for r in resolutions)
    new = gamma.model_copy(update={
        "pending": pending, "residual_bias": bias, "residual_abs": mag,
        "resolved": gamma.resolved + len(resolutions), "violations": gamma.violations + v, "last_violations": v,
    })
    return new, resolutions


def gamma_pulse(
    state: GolemState,
    snapshot: ChainSnapshot,
    now: float,
    thresholds: ProbeThresholds,
    *,
    budget_factor: float = 1.0,
    gamma_min: float = GAMMA_MIN_SECONDS,
    gamma_max: float = GAMMA_MAX_SECONDS,
) -> tuple[GolemState, GammaReport]:
    """One gamma pulse: resolve due predictions, predict the next pulse, set the next interval, and
    raise arousal by 0.1 per violation (fast state the next theta gate reads). `now` is unix seconds
    (workflow.now().timestamp())."""
    gamma, resolutions = resolve_predictions(state.gamma, snapshot, now)
    interval = gamma_interval_seconds(gamma.last_violations, budget_factor, gamma_min, gamma_max)
    fresh = make_predictions(gamma, snapshot, state.tick, now, interval, thresholds)
    keys = {(p.kind, p.subject) for p in fresh}
    gamma = gamma.model_copy(update={
        "pending": [p for p in gamma.pending if (p.kind, p.subject) not in keys] + fresh,
        "interval_seconds": interval,
    })
    pad = state.pad
    if gamma.last_violations:
        pad = pad.model_copy(update={"arousal": min(1.0, pad.arousal + AROUSAL_PER_VIOLATION * gamma.last_violations)})
    report = GammaReport(resolutions=resolutions, violations=gamma.last_violations, interval_seconds=interval,
                         pending=len(gamma.pending))
    return state.model_copy(update={"gamma": gamma, "pad": pad}), report


def predict_after_tick(state: GolemState, snapshot: ChainSnapshot, now: float, thresholds: ProbeThresholds) -> GolemState:
    """At the end of a theta tick: replace the pending predictions with fresh ones due at the next gamma pulse."""
    fresh = make_predictions(state.gamma, snapshot, state.tick, now, state.gamma.interval_seconds, thresholds)
    return state.model_copy(update={"gamma": state.gamma.model_copy(update={"pending": fresh})})
