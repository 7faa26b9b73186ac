"""Daily cost budget tiers: the highest tier today's inference spend allows.
The cap is applied after the gate and overrides even a forced T2; our T1 is an LLM call, so "no LLM calls"
caps at T0. The spend fractions and their tiers: docs/design/gate.md#the-daily-budget.
"""

from __future__ import annotations

from datetime import datetime, timezone

from golem.models.config import HeartbeatSection
from golem.models.enums import Tier
from golem.models.state import GolemState

_ORDER = {Tier.T0: 0, Tier.T1: 1, Tier.T2: 2}


def utc_day(now_iso: str) -> str:
    """YYYY-MM-DD of `now_iso` in UTC (naive times are taken as UTC). Pure."""
    dt = datetime.fromisoformat(now_iso.replace("Z", "+00:00"))
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc)
    return dt.date().isoformat()


def daily_spend_on(state: GolemState, now_iso: str) -> float:
    """Today's spend as of `now_iso`: 0 when the ledger is from an earlier UTC day (the midnight reset),
    so a gate running just after midnight does not use yesterday's spend before the next fold."""
    return state.daily_spend_usd if utc_day(now_iso) == state.spend_day else 0.0


def budget_fraction(daily_spend: float, cfg: HeartbeatSection) -> float:
    """Today's spend as a fraction of the cap. With a zero cap, nothing spent is 0 (so the free offline
    deliberator still runs) and anything spent is inf; the router refuses paid calls on its own."""
    if cfg.max_daily_cost_usd <= 0:
        return float("inf") if daily_spend > 0 else 0.0
    return max(daily_spend, 0.0) / cfg.max_daily_cost_usd


def budget_tier_cap(daily_spend: float, cfg: HeartbeatSection) -> Tier:
    """The highest tier the daily budget allows at this spend."""
    f = budget_fraction(daily_spend, cfg)
    if f >= cfg.cost_soft_cap_threshold or f >= 1.0:
        return Tier.T0
    return Tier.T2


def sonnet_ceiling(daily_spend: float, cfg: HeartbeatSection) -> bool:
    """True in the warning band, where T2 may only use a Sonnet-class model (never Opus)."""
    f = budget_fraction(daily_spend, cfg)
    return cfg.cost_warning_threshold <= f < min(cfg.cost_soft_cap_threshold, 1.0)


def apply_budget(tier: Tier, daily_spend: float, cfg: HeartbeatSection) -> tuple[Tier, str | None]:
    """(allowed tier, note): the note says what the budget changed, None when nothing."""
    f = budget_fraction(daily_spend, cfg)
    cap = budget_tier_cap(daily_spend, cfg)
    spent = f"daily spend ${daily_spend:.4f} of ${cfg.max_daily_cost_usd:.2f}"
    if _ORDER[tier] > _ORDER[cap]:
        if f >= 1.0:
            why = f"{spent} (≥ 100 %): hard stop, T0 only until UTC midnight"
        else:
            why = f"{spent} ({f:.0%} ≥ soft cap {cfg.cost_soft_cap_threshold:.0%}): LLM calls suppressed"
        return cap, f"budget: {tier.value}→{cap.value}, {why}"
    if tier == Tier.T2 and sonnet_ceiling(daily_spend, cfg):
        return tier, (
            f"budget: {spent} ({f:.0%} ≥ warning {cfg.cost_warning_threshold:.0%}): "
            "T2 limited to a Sonnet-class model"
        )
    return tier, None


def escalate_every_tick(tier: Tier, daily_spend: float, cfg: HeartbeatSection) -> tuple[Tier, str | None]:
    """`[gating] mode = "always"`: System 1 gating off, every tick at least T1 — within the daily cap."""
    if tier != Tier.T0:
        return tier, None
    allowed, why = apply_budget(Tier.T1, daily_spend, cfg)
    note = '[gating] mode = "always": every tick deliberates (System 1 gating off)'
    return allowed, note + (f"; {why}" if why else "")
