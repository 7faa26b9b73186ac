"""The gas partition behind the gas gate, its emergency slice, and the day it is counted over.

The partition is `gas_budget_usd_per_day` for one UTC day of the tick's clock, the same day the inference budget
resets on. Routine actions may spend it up to (1 − gas_emergency_fraction); the rest is ring-fenced for urgent
actions, and critical ones may go beyond it up to a hard daily ceiling (golem.safety.urgency).
Why: docs/design/safety.md#the-gas-partition and docs/design/spending.md.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pydantic import BaseModel

from golem.models.config import GolemConfig
from golem.models.state import GolemState
from golem.safety.limits import SafetyLimits

DAY_S = 86_400.0
GAS_GATE_DEFER = "gas gate: defer"


def utc_day_bounds(ts: float) -> tuple[float, float]:
    """[start, end) in unix seconds of the UTC day holding `ts` — the partition's day."""
    start = datetime.fromtimestamp(ts, timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    return start, start + DAY_S


def utc_day_of(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).date().isoformat()


class GasPartition(BaseModel):
    budget_usd: float
    emergency_fraction: float
    spent_usd: float  # the day's gas so far, this tick's already approved actions included

    @property
    def emergency_usd(self) -> float:
        return self.budget_usd * self.emergency_fraction

    @property
    def routine_cap_usd(self) -> float:
        return self.budget_usd - self.emergency_usd

    @property
    def routine_left_usd(self) -> float:
        return self.routine_cap_usd - self.spent_usd

    @property
    def left_usd(self) -> float:
        return self.budget_usd - self.spent_usd


def gas_gate(estimated_gas_usd: float, available_usd: float, typical_usd: float | None, spike_multiple: float) -> str | None:
    """Defer when the estimate exceeds what the gas partition has left, or
    is more than `spike_multiple` (2×) the usual cost. `typical_usd` None = not enough history."""
    if estimated_gas_usd > available_usd:
        return (f"{GAS_GATE_DEFER}: estimated gas ${estimated_gas_usd:,.4f} exceeds the partition's "
                f"${max(available_usd, 0.0):,.4f} left today for routine actions")
    if typical_usd is not None and typical_usd > 0 and estimated_gas_usd > typical_usd * spike_multiple:
        return (f"{GAS_GATE_DEFER}: estimated gas ${estimated_gas_usd:,.4f} is over {spike_multiple:g}× the usual "
                f"${typical_usd:,.4f} per action")
    return None


def gas_limits(config: GolemConfig) -> dict[str, float]:
    """The partition, its ring-fenced slice and the urgency ceilings (golem.safety.urgency), for status and report."""
    risk, policy = SafetyLimits.from_config(config).risk, config.policy
    return {"budget_usd": risk.gas_budget_usd_per_day, "slice_usd": risk.gas_budget_usd_per_day * risk.gas_emergency_fraction,
            "per_action_usd": policy.gas_ceiling_per_action_usd,
            "share_of_protected": policy.gas_ceiling_share_of_protected, "per_day_usd": policy.gas_ceiling_per_day_usd}


def restore_status(state: GolemState) -> dict[str, float]:
    """Gas paid per 1.0 of health factor restored so far (`golem status`; needs the whole state, not a step's slice)."""
    out = {"hf_restored_total": state.hf_restored_total}
    if state.hf_restored_total > 0:
        out["gas_per_hf_restored"] = state.gas_restoring_usd / state.hf_restored_total
    return out


def spend_status(state: GolemState | None, config: GolemConfig | None) -> dict[str, float | str]:
    """The budget fields of `golem status` (GolemStatus): today's inference and gas spend beside each budget,
    and the gas partition's emergency slice. Today = the state's spend_day (the last tick's UTC day)."""
    out: dict[str, float | str] = {}
    if state is not None:
        out.update(spend_day=state.spend_day, daily_spend_usd=state.daily_spend_usd, daily_gas_usd=state.daily_gas_usd)
    if config is not None:
        risk = SafetyLimits.from_config(config).risk
        out.update(max_daily_cost_usd=config.heartbeat.max_daily_cost_usd,
                   gas_budget_usd_per_day=risk.gas_budget_usd_per_day,
                   gas_emergency_usd=risk.gas_budget_usd_per_day * risk.gas_emergency_fraction,
                   gas_ceiling_per_action_usd=config.policy.gas_ceiling_per_action_usd,
                   gas_ceiling_share_of_protected=config.policy.gas_ceiling_share_of_protected,
                   gas_ceiling_per_day_usd=config.policy.gas_ceiling_per_day_usd)
    return out
