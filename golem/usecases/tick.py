"""A theta tick as GolemWorkflow starts and folds it: the input it starts with, and the state after its result."""

from __future__ import annotations

from datetime import datetime

from golem.cognition.backpressure import MAX_PENDING, HeartbeatEvent, enqueue
from golem.cognition.chain_health import fold_chain_read
from golem.cognition.fold import fold_tick_result, state_for_tick, steers_to_followups
from golem.models.config import GolemConfig
from golem.models.observation import ProbeResult
from golem.models.state import TICK_SLICE, DecisionCacheState, GolemState, PendingTick
from golem.models.tick import TickContext, TickResult
from golem.safety.approvals import add_requests, mark_ran


def tick_context(s: GolemState, cfg: GolemConfig, *, version: str, change: str, started_at: str,
                 carried: list[ProbeResult], settlement: bool, local_steps: bool) -> TickContext:
    """Lean when the config has a version (docs/operations/retention.md): the config travels by its hash, the state
    as the tick's slice, without the learned-gating log only GolemWorkflow reads."""
    ctx = TickContext(golem_id=s.golem_id, tick=s.tick, config=cfg, state=state_for_tick(s), started_at=started_at,
                      carried_probes=carried, settlement=settlement)
    if version or change:  # the tick's activities resolve STRATEGY.md by this version, its record names it
        ctx = ctx.model_copy(update={"config_version": version, "config_change": change})
    if version:
        ctx = ctx.model_copy(update={"config": None, "step_timeout_seconds": cfg.heartbeat.step_timeout_seconds,
                                     "state_slice": TICK_SLICE, "wire": 2})
    if local_steps:  # a new input field only: a golem started without it issues the same commands
        ctx = ctx.model_copy(update={"local_steps": True})
    return ctx


def missed_triggers(started: datetime, now: datetime, theta_seconds: float) -> int:
    """Theta triggers that fell due while the tick ran."""
    return int((now - started).total_seconds() // max(theta_seconds, 1e-3))


def queue_missed(s: GolemState, missed: int, now: float, trigger: str = "theta") -> tuple[GolemState, list[str]]:
    """Queue the missed triggers (at most 3, oldest dropped) and say, one line per kind, what was dropped: at a fast
    theta a slow tick misses dozens, and a line per trigger grew the worker log ~17 MB per 1,000 ticks."""
    if not missed:
        return s, []
    queue, seen = s.tick_queue, dict[str, tuple[HeartbeatEvent, int]]()
    # Once the queue holds only the missed triggers (after MAX_PENDING of them), each further one does the same: it
    # drops an identical queued trigger (no probes) and warns. Those are counted, not run: a slow tick at a fast
    # theta missed ~100, and queuing each built ~100 models a tick (the same state and lines either way).
    run = min(missed, MAX_PENDING + 1)
    counts: dict[str, int] = {}
    for _ in range(run):
        queue, events = enqueue(queue, PendingTick(trigger=trigger, enqueued_at=now))
        counts = {}
        for event in events:
            n = seen.get(event.kind, (event, 0))[1]
            seen[event.kind] = (event, n + 1)
            counts[event.kind] = counts.get(event.kind, 0) + 1
    rest = missed - run
    if rest:  # the last enqueue was the steady step: repeat its effect `rest` times
        dropped = counts.get("heartbeat.tick_dropped", 0) + counts.get("heartbeat.tick_dropped_during_dream", 0)
        queue = queue.model_copy(update={
            "dropped": queue.dropped + rest * dropped,
            "dropped_during_dream": queue.dropped_during_dream + rest * counts.get("heartbeat.tick_dropped_during_dream", 0),
            "warnings": queue.warnings + rest * counts.get("heartbeat.queue_warning", 0)})
        for kind, n in counts.items():
            seen[kind] = (seen[kind][0], seen[kind][1] + rest * n)
    lines = [f"{kind}: {event.detail}" + (f" (x{n} this tick)" if n > 1 else "") for kind, (event, n) in seen.items()]
    return s.model_copy(update={"tick_queue": queue}), lines


def fold_tick(s: GolemState, result: TickResult, cfg: GolemConfig, now: datetime,
              missed: int) -> tuple[GolemState, list[str]]:
    """The state after a tick that completed: its result folded in, steers it turned into follow-ups, the decision
    cache's counters (the cache lives on the worker), missed triggers queued, the chain read as healthy."""
    tick = s.tick
    s = fold_tick_result(s, result, now.isoformat(), cfg.clock, cfg.heartbeat, result.gating, cfg.gating)
    s = steers_to_followups(s, result.steers_to_followups)
    if result.decision_cache_stats is not None:  # a cache carried in the state from before is dropped
        s = s.model_copy(update={"decision_cache_stats": result.decision_cache_stats,
                                 "decision_cache": DecisionCacheState()})
    elif result.decision_cache is not None:  # a tick result from before the cache moved to the worker
        s = s.model_copy(update={"decision_cache": result.decision_cache})
    s, warnings = queue_missed(s, missed, now.timestamp())
    # privileged requests: the approved ones the tick ran, then the ones it asked (pending from now)
    s = add_requests(mark_ran(s, result.approvals_ran, tick), result.privileged_requests, cfg.policy.approval_ttl_ticks)
    return fold_chain_read(s, tick, now.isoformat()), warnings
