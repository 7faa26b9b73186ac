"""The theta interval of the adaptive clock (heartbeat "The Adaptive Clock", §S9 regime table).

Pure and deterministic: GolemWorkflow calls it (through fold) to decide how long to sleep.
"""

from __future__ import annotations

from golem.models.config import ClockSection
from golem.models.enums import Tier
from golem.models.state import GolemState

ESCALATED_SPEEDUP = 0.5  # a T2 tick was just needed: look again sooner
BUDGET_SLOWDOWN = 2.0  # "throttles rates when approaching the daily budget ceiling"
BUDGET_SLOWDOWN_FRACTION = 0.9  # §S12 soft cap


def theta_interval_seconds(
    state: GolemState,
    clock: ClockSection,
    budget_fraction: float,
    soft_cap_fraction: float = BUDGET_SLOWDOWN_FRACTION,
) -> float:
    """base × regime multiplier × 0.5 after a T2 tick × 2 past the budget soft cap,
    clamped to [theta_min, theta_max]."""
    theta = clock.theta_base_seconds * clock.regime_multipliers.get(state.regime, 1.0)
    last = state.recent_ticks[-1] if state.recent_ticks else None
    if last is not None and not last.failed and last.tier == Tier.T2:
        theta *= ESCALATED_SPEEDUP
    if budget_fraction >= soft_cap_fraction:
        theta *= BUDGET_SLOWDOWN
    return max(clock.theta_min_seconds, min(clock.theta_max_seconds, theta))
