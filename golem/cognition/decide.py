"""The DECIDE step's policy in one call: the decision cache, the deliberator, the STRATEGY.md
MUST gate and the expectation every acting decision states.

`decide_with_cache` is what the decide activity calls once it has read STRATEGY.md and run the pre-LLM MUST
gate: System 1 answers a pattern decided consistently before (never when the owner is speaking: steers and
follow-ups always get fresh thought), System 2 (the deliberator) answers the rest and its decision is
recorded for next time. Errors of the deliberator (InferenceRetryable, InferenceRejected) propagate: the
activity turns them into Temporal's retry or a non-retryable failure.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from golem.cognition.decision_cache import (
    DecisionCacheStore,
    cache_conditions,
    hit_rate_report,
    lookup,
    pattern_hash,
    record_decision,
)
from golem.inference.deliberator import Deliberator, Route, ToolReads
from golem.inference.strategy import Strategy
from golem.learning.expectation import expect
from golem.models.record import DeliberationRecord, RuleApplied, ToolCallRecord
from golem.models.state import DecisionCacheState
from golem.models.tick import DecideInput, Deliberation, ProposedAction, whole
from golem.safety.constraints import MustGate


def offered(tools: list[dict[str, Any]] | None, must: MustGate | None) -> list[dict[str, Any]] | None:
    """The tool schemas the deliberator is offered: without the tools a MAY line keeps for a strategy that is not
    active (docs/design/strategies.md)."""
    if tools is None or must is None or not must.withheld:
        return tools
    return [t for t in tools if t.get("name") not in must.withheld]


def apply_must_gate(deliberation: Deliberation, must: MustGate) -> Deliberation:
    """Drop proposed calls of tools STRATEGY.md forbids, or a MAY line keeps for an inactive strategy, and say so;
    note breached MUST lines."""
    out = {**must.withheld, **{t: f"STRATEGY.md says MUST NOT {t}" for t in must.forbidden_tools}}
    kept = [a for a in deliberation.actions if a.tool not in out]
    dropped = [a for a in deliberation.actions if a.tool in out]
    if not dropped and not must.breached:
        return deliberation
    record = deliberation.record.model_copy(deep=True)
    record.rejections += [f"{a.tool}: {out[a.tool]}" for a in dropped]
    if must.breached:
        record.reasoning_summary += " | MUST breached: " + "; ".join(must.breached)
    record.recommends_action = record.recommends_action and bool(kept)
    return deliberation.model_copy(update={"record": record, "actions": kept})


def with_expectation(deliberation: Deliberation, inp: DecideInput) -> Deliberation:
    """Predict, then compare: a decision that acts states what it expects, whichever deliberator."""
    if not deliberation.actions or deliberation.record.expected is not None:
        return deliberation
    obs = whole(inp.observation, "observation")
    record = deliberation.record.model_copy(update={"expected": expect(deliberation.actions, obs)})
    return deliberation.model_copy(update={"record": record})


def canonical_actions(actions: list[ProposedAction]) -> str:
    """The cache's action string: the decision as JSON, so a hit can be executed as decided."""
    return json.dumps([{"tool": a.tool, "arguments": a.arguments} for a in actions], sort_keys=True)


@dataclass(frozen=True)
class CacheKey:
    """What a cached decision is looked up by, and invalidated on."""

    pattern: str
    conditions: dict[str, float]
    now: float
    playbook_revision: int
    context_policy_revision: int


def cache_key(inp: DecideInput, playbook_revision: int, context_policy_revision: int) -> CacheKey:
    """The tick's clock (path time in a backtest), not the wall clock, dates the lookup."""
    now = datetime.fromisoformat(inp.ctx.started_at).timestamp() if inp.ctx.started_at else time.time()
    obs = whole(inp.observation, "observation")
    pattern = pattern_hash(obs, inp.ctx.state.last_price)
    if obs.strategies is not None and obs.strategies.active:  # another set of active strategies, another decision
        pattern += "+" + ",".join(sorted(obs.strategies.active))
    return CacheKey(pattern, cache_conditions(obs), now, playbook_revision, context_policy_revision)


def cache_lookup(inp: DecideInput, key: CacheKey, cache: DecisionCacheState) -> tuple[DecisionCacheState,
                                                                                      Deliberation | None]:
    """A hit is the cached decision as a Deliberation System 1 made (model "decision-cache")."""
    obs = whole(inp.observation, "observation")
    cache, found = lookup(
        cache, key.pattern, key.conditions, now=key.now, regime=obs.regime.value,
        playbook_revision=key.playbook_revision, context_policy_revision=key.context_policy_revision,
        cfg=inp.ctx.cfg.decision_cache,
    )
    if not found.hit or found.decision is None:
        return cache, None
    actions = [ProposedAction(action_index=i, **a) for i, a in enumerate(json.loads(found.decision.consistent_action))]
    record = DeliberationRecord(
        model="decision-cache", tier=inp.tier, recommends_action=bool(actions), confidence=1.0,
        decision="; ".join(f"{a.tool} {a.arguments}" for a in actions) or "hold",
        reasoning_summary=f"System 1 reuse of a consistent System 2 decision (pattern {key.pattern}): {found.reason}",
        tool_calls=[ToolCallRecord(tool_name=a.tool, arguments=a.arguments) for a in actions],
        # the rules the cached decision came from: a learned rule reused by System 1 still gets its credit
        rules_applied=[RuleApplied.model_validate(r) for r in found.decision.rules_applied],
    )
    return cache, Deliberation(record=record, actions=actions)


def _finished(deliberation: Deliberation, cache: DecisionCacheState, must: MustGate, inp: DecideInput) -> Deliberation:
    """MUST-gated, with its expectation and the cache's counters (for `golem status`), not the cache itself."""
    out = deliberation.model_copy(update={"decision_cache": None, "decision_cache_stats": hit_rate_report(cache)})
    return with_expectation(apply_must_gate(out, must), inp)


async def decide_with_cache(
    inp: DecideInput,
    *,
    deliberator: Deliberator,
    cache_store: DecisionCacheStore,
    strategy: Strategy,
    must: MustGate,
    playbook_text: str,
    playbook_revision: int,
    context_policy_revision: int,
    remember_facts: Callable[[Deliberation], Deliberation] | None = None,
    tools: list[dict[str, Any]] | None = None,
    route: Route | None = None,
    reads: ToolReads | None = None,
) -> Deliberation:
    """One tick's decision: System 1 from the cache when it may answer, else System 2, then recorded.

    `remember_facts` (blocking; run on a thread) puts the model's knowledge-graph facts in memory before the
    decision is cached. The cache lives on the worker's disk, loaded and saved here. `tools` and `route`
    are what before_agent_start produced for System 2 (the offered schemas, the model); `reads` what it may read."""
    key = cache_key(inp, playbook_revision, context_policy_revision)
    obs = whole(inp.observation, "observation")
    cache = await asyncio.to_thread(cache_store.load)
    if not inp.steers and not inp.followups:
        cache, hit = cache_lookup(inp, key, cache)
        if hit is not None:
            await asyncio.to_thread(cache_store.save, cache)
            return _finished(hit, cache, must, inp)
    deliberation = await deliberator.decide(inp, strategy, playbook_text, tools=tools, route=route, reads=reads)
    if deliberation.kg_facts and remember_facts is not None:
        deliberation = await asyncio.to_thread(remember_facts, deliberation)
    cache = record_decision(
        cache, key.pattern, canonical_actions(deliberation.actions), key.conditions,
        mental_models=[r.entry_id for r in deliberation.record.rules_applied if r.entry_id]
        + deliberation.record.mental_models,
        now=key.now, tick=inp.ctx.tick, regime=obs.regime.value,
        playbook_revision=key.playbook_revision, context_policy_revision=key.context_policy_revision,
        cfg=inp.ctx.cfg.decision_cache,
        rules_applied=[r.model_dump(mode="json") for r in deliberation.record.rules_applied],
    )
    await asyncio.to_thread(cache_store.save, cache)
    return _finished(deliberation, cache, must, inp)
