"""Decision cache: System 2 distilled into System 1. A market pattern deliberated 3+ times with the same
decision is cached, and the next matching tick reuses it without an LLM call. Pure state and functions; time is
unix seconds from workflow.now(). The worker keeps the entries in `<data>/decision-cache.json`
(DecisionCacheStore); a missing or unreadable file is an empty cache. Invalidation and why a file, not
GolemState: docs/design/gate.md#decision-cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from golem.models.config import DecisionCacheSection
from golem.models.observation import Observation
from golem.models.state import CachedDecision, DecisionCacheState

log = logging.getLogger(__name__)

# Pattern buckets: a move of ±50 bps (the price probe's Low) is one step; health in 0.1 steps.
PRICE_BUCKET_BPS = 50.0
HEALTH_BUCKET = 0.1


def cache_conditions(observation: Observation) -> dict[str, float]:
    """The numeric conditions a cached decision rests on; re-validated before reuse."""
    cond = {"price": observation.primary_price, "oracle_price": observation.snapshot.oracle_price}
    hf = observation.min_health_factor()
    if hf is not None and math.isfinite(hf):
        cond["health_factor"] = hf
    for sym, bal in sorted(observation.snapshot.balances.items()):
        cond[f"balance:{sym}"] = bal
    return cond


def pattern_hash(observation: Observation, previous_price: float | None) -> str:
    """A coarse fingerprint of the market pattern: regime, bucketed price move, bucketed health and the
    probes that fired. Equal fingerprints are "the same pattern"."""
    move = 0.0
    if previous_price and previous_price > 0:
        move = (observation.primary_price - previous_price) / previous_price * 10_000.0
    hf = observation.min_health_factor()
    key = {
        "regime": observation.regime.value,
        "move": math.floor(move / PRICE_BUCKET_BPS),
        "health": None if hf is None else math.floor(hf / HEALTH_BUCKET),
        "fired": sorted(f"{a.probe}:{a.severity.value}" for a in observation.anomalies),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _drift(cached: dict[str, float], now: dict[str, float]) -> tuple[str, float] | None:
    """The worst drifting condition beyond none: (name, relative drift), or None when all hold."""
    worst: tuple[str, float] | None = None
    for name, then in cached.items():
        if name not in now:
            return name, math.inf
        base = abs(then)
        d = abs(now[name] - then) / base if base > 0 else (0.0 if now[name] == then else math.inf)
        if worst is None or d > worst[1]:
            worst = (name, d)
    return worst


def _count(cache: DecisionCacheState, reason: str, n: int) -> dict[str, int]:
    inv = dict(cache.invalidations)
    if n:
        inv[reason] = inv.get(reason, 0) + n
    return inv


class CacheLookup(BaseModel):
    hit: bool
    decision: CachedDecision | None = None
    reason: str


def lookup(
    cache: DecisionCacheState,
    pattern: str,
    conditions: dict[str, float],
    *,
    now: float,
    regime: str,
    playbook_revision: int,
    context_policy_revision: int,
    cfg: DecisionCacheSection,
) -> tuple[DecisionCacheState, CacheLookup]:
    """Look a pattern up, invalidating whatever no longer holds on the way. Counts the lookup."""
    cache = invalidate(cache, regime=regime, context_policy_revision=context_policy_revision, now=now)
    entry = next((e for e in cache.entries if e.pattern_hash == pattern), None)
    cache = cache.model_copy(update={"lookups": cache.lookups + 1})
    if entry is None:
        return cache, CacheLookup(hit=False, reason="miss: pattern not cached")
    if entry.playbook_revision != playbook_revision:
        # on_playbook_revision was not called for this revision: without knowing which heuristics
        # changed, the entry cannot be trusted.
        cache = on_playbook_revision(cache, playbook_revision, None)
        return cache, CacheLookup(hit=False, reason=f"invalidated: PLAYBOOK revision {entry.playbook_revision}"
                                                    f" → {playbook_revision}")
    if entry.consistency_count < cfg.min_consistency:
        return cache, CacheLookup(hit=False, reason=f"miss: seen {entry.consistency_count}× "
                                                    f"(needs {cfg.min_consistency} consistent decisions)")
    drift = _drift(entry.conditions, conditions)
    if drift is not None and drift[1] > cfg.max_drift:
        rest = [e for e in cache.entries if e.pattern_hash != pattern]
        cache = cache.model_copy(update={"entries": rest, "invalidations": _count(cache, "drift", 1)})
        return cache, CacheLookup(hit=False, reason=f"invalidated: {drift[0]} drifted {drift[1]:.0%} "
                                                    f"(> {cfg.max_drift:.0%})")
    cache = cache.model_copy(update={"hits": cache.hits + 1})
    return cache, CacheLookup(hit=True, decision=entry, reason=f"hit: {entry.consistent_action!r} "
                                                               f"({entry.consistency_count}× consistent)")


def invalidate(cache: DecisionCacheState, *, regime: str, context_policy_revision: int, now: float) -> DecisionCacheState:
    """Drop expired entries, and every entry when the regime or the ContextPolicy revision changed."""
    keep, expired, regime_gone, policy_gone = [], 0, 0, 0
    for e in cache.entries:
        if e.cache_regime != regime:
            regime_gone += 1
        elif e.context_policy_revision != context_policy_revision:
            policy_gone += 1
        elif e.expires_at <= now:
            expired += 1
        else:
            keep.append(e)
    if len(keep) == len(cache.entries):
        return cache
    inv = dict(cache.invalidations)
    for reason, n in (("regime_change", regime_gone), ("context_policy_revision", policy_gone), ("ttl", expired)):
        if n:
            inv[reason] = inv.get(reason, 0) + n
    return cache.model_copy(update={"entries": keep, "invalidations": inv})


def on_playbook_revision(cache: DecisionCacheState, revision: int,
                         modified_heuristics: set[str] | None = None) -> DecisionCacheState:
    """A PLAYBOOK.md rewrite: drop entries that used a modified heuristic (all, when unknown) and stamp
    the survivors with the new revision."""
    keep, gone = [], 0
    for e in cache.entries:
        if e.playbook_revision == revision:
            keep.append(e)
        elif modified_heuristics is None or set(e.mental_models_applied) & modified_heuristics:
            gone += 1
        else:
            keep.append(e.model_copy(update={"playbook_revision": revision}))
    return cache.model_copy(update={"entries": keep, "invalidations": _count(cache, "playbook_revision", gone)})


def record_decision(
    cache: DecisionCacheState,
    pattern: str,
    action: str,
    conditions: dict[str, float],
    *,
    mental_models: list[str],
    now: float,
    tick: int,
    regime: str,
    playbook_revision: int,
    context_policy_revision: int,
    cfg: DecisionCacheSection,
    rules_applied: list[dict[str, Any]] | None = None,
) -> DecisionCacheState:
    """After a deliberation: the same action for the same pattern raises its consistency count and
    refreshes TTL and conditions; a different action resets the entry to count 1."""
    entries = [e for e in cache.entries if e.pattern_hash != pattern]
    old = next((e for e in cache.entries if e.pattern_hash == pattern), None)
    count = old.consistency_count + 1 if old is not None and old.consistent_action == action else 1
    entry = CachedDecision(
        pattern_hash=pattern, mental_models_applied=sorted(set(mental_models)), consistent_action=action,
        consistency_count=count, last_validated=now, expires_at=now + cfg.ttl_seconds, conditions=dict(conditions),
        cache_tick=tick, cache_regime=regime, playbook_revision=playbook_revision,
        context_policy_revision=context_policy_revision, rules_applied=list(rules_applied or []),
    )
    entries.append(entry)
    entries.sort(key=lambda e: e.last_validated)
    return cache.model_copy(update={"entries": entries[-cfg.max_entries:]})


def hit_rate_report(cache: DecisionCacheState) -> dict[str, float | int | dict[str, int]]:
    return {"lookups": cache.lookups, "hits": cache.hits, "hit_rate": round(cache.hit_rate, 4),
            "entries": len(cache.entries), "invalidations": dict(cache.invalidations)}


class DecisionCacheStore:
    """The golem's decision cache on the worker's disk: one JSON file, replaced atomically on save."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def load(self) -> DecisionCacheState:
        with self._lock:
            try:
                return DecisionCacheState.model_validate_json(self.path.read_bytes())
            except FileNotFoundError:
                return DecisionCacheState()
            except ValueError as err:  # a torn or hand-edited file: the cache starts empty, nothing else is lost
                log.warning("decision cache %s is unreadable (%s); starting with an empty cache",
                            self.path, str(err).splitlines()[0])
                return DecisionCacheState()

    def save(self, cache: DecisionCacheState) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".json.tmp")
            tmp.write_text(cache.model_dump_json())
            os.replace(tmp, self.path)
