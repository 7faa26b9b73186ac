"""Folding events into GolemState — called from GolemWorkflow code.

Everything here must be pure and deterministic: no clocks, randomness, env, files or I/O. Time
comes in as `now_iso` (workflow.now()). Every function returns a new state and leaves its input
untouched, and every list it grows is bounded so the state stays small across continue-as-new.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from golem.inference.budget import budget_fraction, utc_day
from golem.cognition.clock import theta_interval_seconds
from golem.cognition.learned_gating import note_gating_outcome
from golem.cognition.lines import next_health_history
from golem.cognition.regime import detect_regime
from golem.cognition.threshold import phase_for_vitality
from golem.cognition.dream_scheduler import DreamUrgency, dream_urgency
from golem.models.config import ClockSection, GatingSection, GolemConfig, HeartbeatSection
from golem.models.enums import DeliveryWindow, MarketRegime, Tier
from golem.models.interventions import FollowUp, RejectedIntervention, Steer, parse_intervention
from golem.models.state import (
    GAS_HISTORY_LEN,
    PRICE_HISTORY_LEN,
    BetaBoundary,
    GatingDecision,
    GatingStats,
    GolemState,
    HedgeState,
    TickSummary,
)
from golem.models.golem import DreamResult
from golem.models.tick import TickResult

MAX_REJECTED = 20
# A rejected steer or follow-up stays in `golem status` for this many ticks after the tick that first
# saw it; its own record keeps it for good (rejections used to stick in status forever).
REJECTION_VISIBLE_TICKS = 10
MAX_SEEN_IDS = 500
MAX_RECENT_TICKS = 20
MAX_FAILED_TICKS = 50
MAX_ERROR_CHARS = 500
EXCERPT_CHARS = 200

# Arousal follows surprise: an EMA of prediction error ("if the previous tick was surprising
# … it should be more responsive"). 0.3 lets ~3 surprising ticks take arousal most of the way.
AROUSAL_EMA = 0.3
# Strategy confidence (the threshold's confidence factor, docs/design/gate.md#thresholds): until the
# cybernetics loop scores outcomes, a tick that needed full deliberation is weak evidence the
# strategy does not cover the market (−0.02); a quiet T0 tick is weaker evidence it does (+0.005).
CONFIDENCE_DOWN_ON_T2 = 0.02
CONFIDENCE_UP_ON_QUIET_T0 = 0.005
QUIET_PE = 0.1  # "quiet": PE below this
# Economic vitality from the daily budget only (lifespan owns real mortality): spending the whole
# day's budget halves it, so budget pressure alone can reach Stable but never kill the golem.
ECONOMIC_BUDGET_WEIGHT = 0.5


def new_golem_state(cfg: GolemConfig) -> GolemState:
    """A newborn golem: base theta, gamma at its slowest until the first pulse says otherwise."""
    state = GolemState(golem_id=cfg.golem.id, theta_seconds=cfg.clock.theta_base_seconds)
    return state.model_copy(update={"gamma": state.gamma.model_copy(update={"interval_seconds": cfg.clock.gamma_max_seconds})})


def _bounded(items: list[Any], limit: int) -> list[Any]:
    return items[-limit:] if len(items) > limit else items


# Significant digits kept in the price and gas histories: both ride in every tick's
# input (64 prices, 120 gas prices) and a float's full repr is ~18 characters. Six digits keep a $2,000 price to
# a cent (3 ppm, far below the price probe's 50 bps step ); four keep gas to 0.1 % of the 2× gas-spike probe.
PRICE_DIGITS = 6
GAS_DIGITS = 4
GATING_DIGITS = 6  # the learned-gating parameters a tick's gate step gets (state_for_tick)


def _sig(x: float, digits: int) -> float:
    return float(f"{x:.{digits}g}")


def _excerpt(raw: Any) -> str:
    try:
        text = json.dumps(raw, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(raw)
    except RecursionError:  # a payload nested too deeply to print: say so instead
        text = f"<a {type(raw).__name__} nested too deeply to show>"
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def accept_intervention(
    state: GolemState, kind: Literal["steer", "follow_up"], raw: Any, now_iso: str, tick_running: bool = False
) -> tuple[GolemState, str | None]:
    """Validate and queue a steer or follow-up. Returns (new state, rejection reason or None).

    Signals are delivered at least once, so a repeated id is ignored silently (reason None); a payload without an
    id (typed into the Web UI's Send Signal) gets one from the workflow clock and its content. A rejection
    is dated by time and by the first tick that will see it: `state.tick`, or the one after it when tick
    `state.tick` already took its snapshot (`tick_running`).
    """
    new = state.model_copy(deep=True)
    try:
        if kind not in ("steer", "follow_up"):
            raise ValueError(f"unknown intervention kind {kind!r}: use 'steer' or 'follow_up'")
        item: Steer | FollowUp = parse_intervention(kind, raw, received_at=now_iso)
    except ValueError as err:
        reason = str(err)
        new.rejected_interventions = _bounded(
            [*new.rejected_interventions,
             RejectedIntervention(kind=str(kind), reason=reason, payload_excerpt=_excerpt(raw), received_at=now_iso,
                                  tick=state.tick + 1 if tick_running else state.tick)],
            MAX_REJECTED,
        )
        return new, reason
    if item.id in new.seen_intervention_ids:
        return new, None
    new.seen_intervention_ids = _bounded([*new.seen_intervention_ids, item.id], MAX_SEEN_IDS)
    if isinstance(item, Steer):
        new.pending_steers.append(item)
    else:
        new.pending_followups.append(item)
    return new, None


def _roll_spend_day(new: GolemState, now_iso: str) -> None:
    """The daily spend resets at UTC midnight."""
    day = utc_day(now_iso)
    if day != new.spend_day:
        new.spend_day = day
        new.daily_spend_usd = 0.0
        new.daily_gas_usd = 0.0


def _clamp01(x: float) -> float:
    return max(0.0, min(1.0, x))


def fold_tick_result(
    state: GolemState,
    result: TickResult,
    now_iso: str,
    clock: ClockSection,
    heartbeat: HeartbeatSection,
    gating_decision: GatingDecision | None = None,
    gating: GatingSection | None = None,
) -> GolemState:
    """Fold a finished tick into the golem's durable state. With the tick's gating decision (from
    learned_gating.gate_tick), its outcome is logged for the delta-frequency feedback."""
    new = state.model_copy(deep=True)
    new.tick = state.tick + 1
    try:
        new.regime = MarketRegime(result.regime)
    except ValueError:
        new.regime = MarketRegime.UNKNOWN

    # Range-bound run: recomputed exactly as the observe step did (history + this price).
    if result.price > 0:
        _, new.range_bound_run = detect_regime([*state.price_history, result.price], state.range_bound_run,
                                               state.regime)
        new.price_history = _bounded([*state.price_history, _sig(result.price, PRICE_DIGITS)], PRICE_HISTORY_LEN)
    if result.gas_price_gwei > 0:
        new.gas_history = _bounded([*state.gas_history, _sig(result.gas_price_gwei, GAS_DIGITS)], GAS_HISTORY_LEN)
    new.last_tvl = result.tvl
    new.last_oracle_price = result.oracle_price
    new.position_health = dict(result.position_health)
    new.health_history = next_health_history(state.health_history, min(result.position_health.values(), default=None))
    if result.deferred_intents is not None:  # deferred by the gas gate, not dropped (golem.safety.urgency)
        new.deferred_intents = list(result.deferred_intents)
    if result.strategy_runs is not None:  # the strategies' states after the tick (golem.inference.strategies)
        new.strategy_runs = list(result.strategy_runs)

    consumed_steers = set(result.steers_consumed)
    consumed_followups = set(result.followups_consumed)
    new.pending_steers = [s for s in new.pending_steers if s.id not in consumed_steers]
    new.pending_followups = [f for f in new.pending_followups if f.id not in consumed_followups]

    # Cost ledger: the daily cap gates LLM tiers, so the daily spend meters inference; gas has its
    # own gate (the gas partition, on the risk store) and is tallied here for status.
    _roll_spend_day(new, now_iso)
    new.daily_spend_usd += max(result.inference_cost, 0.0)
    new.daily_gas_usd += max(result.gas_cost, 0.0)
    new.total_inference_usd += max(result.inference_cost, 0.0)
    new.total_gas_usd += max(result.gas_cost, 0.0)
    ledger = result.gas_ledger
    if ledger is not None:  # the cage's ledger: a reset's or rerun's gas too, which no folded result carries
        if ledger.day == new.spend_day:
            new.daily_gas_usd = max(new.daily_gas_usd, ledger.today_usd)
        new.total_gas_usd = max(new.total_gas_usd, ledger.total_usd)
    if result.hf_restored:  # gas paid per unit of health factor restored (golem.safety.urgency)
        new.hf_restored_total += result.hf_restored
        new.gas_restoring_usd += max(result.gas_cost, 0.0)

    new.recent_ticks = _bounded(
        [*new.recent_ticks,
         TickSummary(tick=result.tick, tier=result.tier, regime=new.regime, prediction_error=result.prediction_error,
                     actions=result.actions_executed, error="; ".join(result.errors)[:MAX_ERROR_CHARS] or None)],
        MAX_RECENT_TICKS,
    )
    new.consecutive_failures = 0

    pe = _clamp01(result.prediction_error)
    if result.life is None:  # a reflect from before the daimon: arousal followed surprise alone
        new.pad.arousal = max(-1.0, min(1.0, new.pad.arousal + AROUSAL_EMA * (pe - new.pad.arousal)))
    if result.tier == Tier.T2:
        new.strategy_confidence = _clamp01(new.strategy_confidence - CONFIDENCE_DOWN_ON_T2)
    elif result.tier == Tier.T0 and pe < QUIET_PE:
        new.strategy_confidence = _clamp01(new.strategy_confidence + CONFIDENCE_UP_ON_QUIET_T0)

    fraction = budget_fraction(new.daily_spend_usd, heartbeat)
    if result.life is not None:  # the after_turn chain's lifespan and daimon (golem.life.after_turn)
        new.pad = result.life.pad.model_copy()
        new.vitality = result.life.vitality.model_copy()
        new.phase = result.life.phase
        new.life = result.life.life.model_copy(deep=True)
        if state.life.death_cause and new.life.death_cause is None:
            # the owner's kill landed while this tick ran (its reflect started from the living state): it stands
            new.life = new.life.model_copy(update={"death_cause": state.life.death_cause,
                                                   "death_detail": state.life.death_detail})
    else:
        new.vitality.economic = _clamp01(1.0 - ECONOMIC_BUDGET_WEIGHT * min(fraction, 1.0))
        new.phase = phase_for_vitality(new.vitality.composite)
    new.theta_seconds = theta_interval_seconds(new, clock, fraction, heartbeat.cost_soft_cap_threshold,
                                               heartbeat.cost_warning_threshold)
    if gating_decision is not None:
        g = gating or GatingSection()
        new.learned_gating = note_gating_outcome(
            new.learned_gating, gating_decision.model_copy(update={"tier": result.tier}),
            regime_before=state.regime, regime_after=new.regime, actions=result.actions_executed,
            log_len=g.decision_log_len,
        )
    return new


def fold_tick_failure(
    state: GolemState, tick: int, error: str, workflow_id: str, run_id: str, now_iso: str
) -> GolemState:
    """Record a failed tick and move on; pending steers and follow-ups stay pending."""
    new = state.model_copy(deep=True)
    new.tick = state.tick + 1
    new.failed_ticks = _bounded([*new.failed_ticks, tick], MAX_FAILED_TICKS)
    new.recent_ticks = _bounded(
        [*new.recent_ticks,
         TickSummary(tick=tick, failed=True, error=error[:MAX_ERROR_CHARS], workflow_id=workflow_id, run_id=run_id)],
        MAX_RECENT_TICKS,
    )
    new.consecutive_failures = state.consecutive_failures + 1
    _roll_spend_day(new, now_iso)
    return new


def should_run_delta(state: GolemState, clock: ClockSection) -> bool:
    """DELTA consolidation every `delta_theta_ticks` theta ticks (Adaptive Clock)."""
    return state.tick - state.last_delta_tick >= clock.delta_theta_ticks


def should_dream(state: GolemState, clock: ClockSection) -> bool:
    """Dream every `dream_every_ticks`, never while dreaming, never on a tick that runs delta."""
    return (
        not state.dreaming
        and state.tick - state.last_dream_tick >= clock.dream_every_ticks
        and not should_run_delta(state, clock)
    )


def schedule_dream(state: GolemState, config: GolemConfig) -> DreamUrgency:
    """The DreamScheduler's verdict (golem.cognition.dream_scheduler); never on a tick that runs delta, and never
    later than the fixed `dream_every_ticks` (the gap floor is capped by it)."""
    u = dream_urgency(state, config.clock.dream_every_ticks,
                      min(config.dream.min_gap_ticks, config.clock.dream_every_ticks), curator_tags=state.dream_tags)
    if u.due and should_run_delta(state, config.clock):
        u = u.model_copy(update={"due": False})
    return u


def fold_dream_result(state: GolemState, result: DreamResult | None) -> GolemState:
    """A finished (or interrupted) dream cycle's figures into the state `golem status` shows."""
    if result is None:
        return state
    where = f"stopped before {result.stopped_at} ({result.stop_reason})" if result.stopped_at else "complete"
    note = (f"tick {result.tick}: {where}; replayed {len(result.replayed)}, imagined {result.imagined}, "
            f"rehearsed {result.rehearsed} ({result.broken} broken), {result.forks} forks, staged {result.staged}, "
            f"promoted {result.promoted}")
    return state.model_copy(update={"dream_yield": result.dream_yield, "threat_coverage": result.threat_coverage,
                                    "last_dream": note})


def note_delta_run(state: GolemState) -> GolemState:
    """After a delta cycle started at the current tick."""
    return state.model_copy(update={"last_delta_tick": state.tick}, deep=True)


def note_dream_run(state: GolemState) -> GolemState:
    """After a dream cycle completed at the current tick."""
    return state.model_copy(update={"last_dream_tick": state.tick, "dreaming": False}, deep=True)


def steers_to_followups(state: GolemState, steer_ids: list[str]) -> GolemState:
    """A low-severity steer that arrived while the golem was Executing does not interrupt; it is
    queued as a follow-up for the next decision instead of forcing T2."""
    if not steer_ids:
        return state
    ids = set(steer_ids)
    moved = [s for s in state.pending_steers if s.id in ids]
    new = state.model_copy(deep=True)
    new.pending_steers = [s for s in new.pending_steers if s.id not in ids]
    new.pending_followups += [
        FollowUp(id=s.id, message=s.message, created_at=s.created_at, window=DeliveryWindow.NEXT_DECIDE) for s in moved
    ]
    return new


def fold_upkeep_cost(state: GolemState, cost_usd: float, now_iso: str) -> GolemState:
    """Inference an upkeep cycle paid for (the delta cycle's future-utility calls) counts
    against the daily budget like a tick's."""
    new = state.model_copy(deep=True)
    _roll_spend_day(new, now_iso)
    new.daily_spend_usd += max(cost_usd, 0.0)
    new.total_inference_usd += max(cost_usd, 0.0)
    return new


def expire_rejections(state: GolemState, visible_ticks: int = REJECTION_VISIBLE_TICKS) -> GolemState:
    """Drop rejections that `status` has shown long enough: those first seen `visible_ticks` or more
    ticks ago, and undated ones kept by an older worker (they have been shown for an unknown time).
    Their tick's record still holds them."""
    kept = [r for r in state.rejected_interventions if r.tick is not None and state.tick - r.tick < visible_ticks]
    if len(kept) == len(state.rejected_interventions):
        return state
    return state.model_copy(update={"rejected_interventions": kept})


def rejections_for_record(state: GolemState, tick: int) -> list[RejectedIntervention]:
    """The rejections a tick's record reports: those that arrived since the previous tick took its
    snapshot (dated `tick`), not every recent one again."""
    return [r for r in state.rejected_interventions if r.tick == tick]


def state_for_tick(state: GolemState) -> GolemState:
    """The snapshot a tick workflow and its activities get: the golem's state without the learned-gating
    outcome log, which only the golem workflow reads (fold appends to it, delta feedback consumes it) and
    which is most of the state's size (about 18 of 26 KB after 400 ticks). Every activity input carries
    the TickContext, so this is what keeps each tick's history small in the Temporal UI.

    Of the rest of the learned-gating state the tick gets what the gate step reads (golem.cognition.
    learned_gating.gate_tick: Hedge weights, Thompson beliefs, the shadow baseline) at GATING_DIGITS
    significant digits — not the judging stats or the Hedge losses, which only the golem workflow's delta
    feedback uses (~0.5 KB less in the tick's input, which the parent's history carries too)."""
    lg = state.learned_gating
    hedge = lg.hedge.model_copy(update={"weights": [_sig(w, GATING_DIGITS) for w in lg.hedge.weights],
                                        "cumulative_loss": HedgeState().cumulative_loss, "rounds": 0})
    thompson = {
        bucket: tb.model_copy(update={"boundaries": [
            BetaBoundary(alpha=_sig(b.alpha, GATING_DIGITS), beta=_sig(b.beta, GATING_DIGITS)) for b in tb.boundaries]})
        for bucket, tb in lg.thompson.items()
    }
    baseline = lg.baseline.model_copy(update={"epsilon": _sig(lg.baseline.epsilon, GATING_DIGITS),
                                              "arm_means": [_sig(m, GATING_DIGITS) for m in lg.baseline.arm_means]})
    slim = lg.model_copy(update={"log": [], "stats": GatingStats(), "hedge": hedge, "thompson": thompson,
                                 "baseline": baseline})
    return state.model_copy(update={"learned_gating": slim})