"""Cybernetic loops over the Context Governor, offline and deterministic.

Loop 1, per tick: workspace categories present against the outcome's quality. Loop 2, per Curator cycle: shift
token allocation from the worst-going category to the best, at most 10 % per cycle, as a new ContextPolicy
revision. Loop 3, per regime change: a partial reset. Why: docs/design/learning.md#cybernetic-loops.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

QUALITY = {"positive": 1.0, "neutral": 0.5, "negative": 0.0}  # verdicts as an outcome quality
MAX_ALLOCATION_SHIFT = 0.10  # <= 10 % per consolidation cycle
MIN_SAMPLES = 5  # nothing from fewer than 5 supporting episodes
RESET_KEEP = 0.5  # ours: a regime change keeps half of what Loop 1 learned (a "partial reset")
PROTECTED = ("invariants", "strategy")  # a decision is never taken without them (golem/inference/config.py)


class ContextSample(BaseModel):
    tick: int
    tier: str
    categories: dict[str, int]  # category → tokens in that tick's workspace
    quality: float
    weight: float = 1.0


class ContextPolicy(BaseModel):
    revision: int = 0  # 0: the configured allocations, never tuned
    tick: int = 0
    allocations: dict[str, dict[str, int]] = Field(default_factory=dict)  # tier → category → tokens
    reason: str = "configured allocations"


def category_effects(samples: list[ContextSample]) -> dict[str, float]:
    """Weighted mean quality of the ticks where a category was present, minus the overall weighted mean."""
    total = sum(s.weight for s in samples)
    if not total:
        return {}
    overall = sum(s.quality * s.weight for s in samples) / total
    present: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for cat, tokens in s.categories.items():
            if tokens > 0:
                present.setdefault(cat, []).append((s.quality, s.weight))
    return {c: round(sum(q * w for q, w in v) / sum(w for _, w in v) - overall, 6)
            for c, v in sorted(present.items()) if sum(w for _, w in v)}


def retune(policy: ContextPolicy, samples: list[ContextSample], tick: int) -> ContextPolicy | None:
    """Loop 2: one bounded shift per tier, from the worst-correlated category to the best; None when nothing moves."""
    allocations = {t: dict(a) for t, a in policy.allocations.items()}
    moves = []
    for tier, alloc in sorted(allocations.items()):
        tier_samples = [s for s in samples if s.tier == tier]
        if sum(s.weight for s in tier_samples) < MIN_SAMPLES:
            continue
        effects = {c: e for c, e in category_effects(tier_samples).items() if c in alloc}
        if len(effects) < 2:
            continue
        best = max(effects, key=lambda c: (effects[c], c))
        worst = min((c for c in effects if c not in PROTECTED), key=lambda c: (effects[c], c), default=None)
        if worst is None or worst == best or effects[best] - effects[worst] <= 0:
            continue
        delta = int(alloc[worst] * MAX_ALLOCATION_SHIFT)
        if delta <= 0:
            continue
        alloc[worst] -= delta
        alloc[best] += delta
        moves.append(f"{tier}: {delta} tokens {worst} (effect {effects[worst]:+.2f}) → {best} ({effects[best]:+.2f})")
    if not moves:
        return None
    return ContextPolicy(revision=policy.revision + 1, tick=tick, allocations=allocations,
                         reason="loop 2: " + "; ".join(moves))


def partial_reset(policy: ContextPolicy, defaults: dict[str, dict[str, int]], tick: int, regime: str) -> ContextPolicy:
    """Loop 3: allocations halfway back to the defaults (a new revision even when already there, so the decision
    cache built in the old regime is dropped)."""
    allocations = {}
    for tier, alloc in defaults.items():
        cur = policy.allocations.get(tier, alloc)
        allocations[tier] = {c: int(round(alloc[c] + (cur.get(c, alloc[c]) - alloc[c]) * RESET_KEEP)) for c in alloc}
    return ContextPolicy(revision=policy.revision + 1, tick=tick, allocations=allocations,
                         reason=f"loop 3: regime changed to {regime}; allocations halfway back to the defaults, "
                                f"correlations kept at {RESET_KEEP:.0%}")
