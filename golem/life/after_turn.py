"""The after_turn chain inside reflect: the registry's
after_turn order — heartbeat → lifespan → daimon → memory → risk → dream → cybernetics → clade → telemetry —
each a fold over the tick's AfterTurn context that writes its own part of the record. The pure members live
here (heartbeat's facts, lifespan, daimon, risk's figures); the ones with side effects (memory's episode,
cybernetics, the telemetry that persists the record) are given by the reflect activity. A member of the order with
no handler here runs elsewhere in this build (dream: GolemWorkflow between ticks) or is given by the activity only
when it applies (clade: a clade member lays its pheromones); `record.after_turn` lists what ran, in order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from golem.inference.budget import budget_fraction
from golem.life.daimon import AppraisalInput, appraise, plutchik, regime_shift, update_pad
from golem.extensions.hooks import fire
from golem.extensions.registry import ExtensionRegistry, registry_for
from golem.life.lifespan import LifeFacts, tick_clocks
from golem.life.self_steer import refused, risk_band, self_steers
from golem.safety.somatic import age_markers, firing, lay_marker, situation_of
from golem.safety.limits import SafetyLimits
from golem.safety.attribution import Holdings, Interval, attribute, holdings_of, interval_of
from golem.safety.risk import net_value_usd
from golem.models.config import GolemConfig
from golem.models.enums import ActionStatus
from golem.models.life import LifeState, SomaticMarker
from golem.models.record import DecisionCycleRecord, Reflexion
from golem.models.state import GolemState, LifeUpdate, PADVector

if TYPE_CHECKING:
    from golem.grimoire.episodes.store import EpisodeStore
    from golem.grimoire.semantic.store import SemanticStore
    from golem.learning.ledger import LearningLedger
    from golem.life.cycle_store import CycleStore
    from golem.models.observation import Observation
    from golem.models.tick import ProposedAction


@dataclass
class AfterTurn:
    """What the chain folds: the record being written and the golem's life going into the tick."""

    record: DecisionCycleRecord
    state: GolemState  # the reflect step's slice of the pre-tick state
    config: GolemConfig
    life: LifeState = None  # type: ignore[assignment]
    facts: LifeFacts | None = None
    update: LifeUpdate | None = None
    laid: SomaticMarker | None = None
    fired: list[str] = field(default_factory=list)  # extensions that ran, in order
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.life is None:
            self.life = self.state.life


Handler = Callable[[AfterTurn], Awaitable[None] | None]


class TurnStores(Protocol):
    """The worker's stores the side-effect members write (golem.services.Services holds them)."""

    @property
    def episodes(self) -> EpisodeStore: ...
    @property
    def semantic(self) -> SemanticStore: ...
    @property
    def learning(self) -> LearningLedger: ...
    @property
    def cycles(self) -> CycleStore: ...


def heartbeat_after_turn(ctx: AfterTurn) -> None:
    """The heartbeat's part: the tick's facts the later members read (its cost is the credit it consumed)."""
    rec, s = ctx.record, ctx.state
    gamma = s.__dict__.get("gamma")
    reflexion = ctx.extra.get("reflexion") or rec.reflexion
    ctx.facts = LifeFacts(
        tick=rec.tick, credit_consumed_usd=round(max(rec.total_cost, 0.0), 9),
        budget_fraction=budget_fraction(s.daily_spend_usd + max(rec.inference_cost, 0.0), ctx.config.heartbeat),
        prediction_error=rec.prediction_error, threshold=rec.deliberation_threshold,
        gamma_resolved=gamma.resolved if gamma is not None else 0,
        gamma_violations=gamma.violations if gamma is not None else 0,
        hf_error=reflexion.health_factor_error if reflexion is not None else None,
        wallet_usdc=rec.observation.snapshot.balances.get("USDC"),
        tick_seconds=ctx.config.clock.theta_base_seconds,
    )
    rec.credit_consumed = ctx.facts.credit_consumed_usd


def lifespan_after_turn(ctx: AfterTurn) -> None:
    s = ctx.state
    if ctx.facts is None:  # the registry orders heartbeat's member before lifespan's
        raise RuntimeError("lifespan's after_turn ran before heartbeat's, which gathers the tick's facts")
    out = tick_clocks(ctx.life, s.vitality, s.phase, ctx.facts, ctx.config.lifespan, s.golem_id)
    ctx.life = out.life
    ctx.update = LifeUpdate(life=out.life, vitality=out.vitality, phase=out.phase, pad=s.pad, transition=out.transition)
    rec = ctx.record
    rec.vitality, rec.phase, rec.phase_transition = out.vitality, out.phase, out.transition
    rec.credit_remaining = out.life.credit_remaining_usd
    rec.estimated_ttl_ticks = out.life.estimated_ttl_ticks
    rec.death_cause = out.life.death_cause


def daimon_after_turn(ctx: AfterTurn) -> None:
    """Appraise, move the affect, name the emotion; fire the markers the situation matches; lay one after a loss."""
    rec, s = ctx.record, ctx.state
    obs = rec.observation
    acted = [a for a in rec.actions if a.status in (ActionStatus.EXECUTED, ActionStatus.FAILED)]
    tool = acted[0].tool_name if acted else ""
    situation = situation_of(obs, s.last_price, tool)
    fired = firing(ctx.life.markers, situation)
    hf_before = min(s.position_health.values()) if s.__dict__.get("position_health") else None
    pnl = rec.outcome.pnl_impact if rec.outcome is not None else None
    nav = net_value_usd(obs.snapshot)
    reflexion = ctx.extra.get("reflexion") or rec.reflexion
    appraisal = appraise(AppraisalInput(
        prediction_error=rec.prediction_error, regime_changed=regime_shift(s.regime, rec.regime), pnl_usd=pnl,
        equity_change=marked_to_market(obs, s.last_price),
        hf_before=hf_before, hf_now=obs.min_health_factor(), liquidated=bool(obs.liquidations),
        vitality=ctx.update.vitality.composite if ctx.update else s.vitality.composite,
        budget_fraction=ctx.facts.budget_fraction if ctx.facts else 0.0,
        drawdown_used=drawdown_pct(nav, ctx.life.nav_high_water_usd) / max_drawdown_pct(ctx.config),
        proposed=len(rec.actions), blocked=sum(1 for a in rec.actions if a.status == ActionStatus.BLOCKED),
        failed=sum(1 for a in rec.actions if a.status == ActionStatus.FAILED),
        somatic_strength=sum(m.strength for m in fired),
        **acted_of(rec, reflexion),
    ))
    pad = update_pad(s.pad, appraisal)
    emotion = plutchik(pad)
    markers = age_markers(ctx.life.markers, [m.id for m in fired])
    markers, laid = lay_marker(markers, rec.tick, situation, pnl, bool(obs.liquidations), pad.pleasure,
                               f"tick {rec.tick}: " + "; ".join(appraisal.reasons or ["loss"]))
    ctx.laid = laid
    ctx.life = ctx.life.model_copy(update={"markers": markers, "emotion": emotion})
    rec.pad_after, rec.primary_emotion = pad, emotion
    rec.somatic_markers_fired = [m.id for m in fired]
    rec.appraisal = appraisal.model_dump(mode="json")
    if laid is not None:
        rec.somatic_marker_laid = laid.id
    if ctx.update is not None:
        ctx.update = ctx.update.model_copy(update={"pad": pad, "life": ctx.life})


def acted_of(rec: DecisionCycleRecord, reflexion: Reflexion | None) -> dict[str, Any]:
    """The appraisal's view of the tick's own writes (its agency): verified, the health factor verify re-read
    before and after them, and Reflexion's verified − predicted health factor. Empty when nothing was sent."""
    out = rec.outcome
    if out is None or not any(a.status in (ActionStatus.EXECUTED, ActionStatus.FAILED) for a in rec.actions):
        return {}
    return {"acted_verified": out.verified and not any(a.status == ActionStatus.FAILED for a in rec.actions),
            "acted_hf_before": out.health_factor_before, "acted_hf_after": out.health_factor_after,
            "acted_hf_error": reflexion.health_factor_error if reflexion is not None else None}


def marked_to_market(obs: Observation, last_price: float | None) -> float | None:
    """The holdings' gain or loss from the price move since the last tick, as a share of net value: the WETH the
    golem holds (wallet, collateral, its side of the pool) × Δprice / net value. None without a last price."""
    snap = obs.snapshot
    if not last_price or last_price <= 0 or snap.pool.price <= 0:
        return None
    weth = snap.balances.get("WETH", 0.0) + sum(p.collateral for p in snap.positions if p.kind == "lending") \
        + sum(p.collateral for p in snap.positions if p.kind == "lp")
    equity = net_value_usd(snap)
    return round(weth * (snap.pool.price - last_price) / equity, 9) if equity > 0 else None


def drawdown_pct(nav: float, high_water: float | None) -> float:
    """How far (%) the net value is below its high-water mark (the mark including this value)."""
    top = max(high_water or 0.0, nav)
    return max(0.0, (top - nav) / top * 100.0) if top > 0 else 0.0


def max_drawdown_pct(config: GolemConfig) -> float:
    return SafetyLimits.from_config(config).risk.max_drawdown_pct


def risk_after_turn(ctx: AfterTurn) -> None:
    """The risk extension's after_turn: fold the tick's net value into the high-water mark (LifeState) and write
    the risk figures to the record — net value, high-water mark, drawdown against the risk layer's max drawdown —
    and the return attribution since the last recorded tick."""
    nav = net_value_usd(ctx.record.observation.snapshot)
    top = max(ctx.life.nav_high_water_usd or 0.0, nav)
    cap = max_drawdown_pct(ctx.config)
    dd = drawdown_pct(nav, top)
    ctx.record.risk = {"nav_usd": round(nav, 6), "high_water_usd": round(top, 6), "drawdown_pct": round(dd, 4),
                       "max_drawdown_pct": cap, "drawdown_used": round(dd / cap, 4)}
    ctx.record.attribution, basis = attribution_step(ctx.life.attribution_basis, ctx.record)
    # the risk daemon's and the cage's self-steers, and the mortality engine's (lifespan ran before: the phase is set)
    band = risk_band(dd / cap) if cap > 0 else 0
    streak = ctx.life.refusal_streak + 1 if refused(ctx.record) else 0
    ctx.record.self_steers = self_steers(ctx.record, band_before=ctx.life.risk_band, band_now=band,
                                         streak_now=streak, phase_before=ctx.state.phase)
    ctx.life = ctx.life.model_copy(update={"nav_high_water_usd": round(top, 6), "attribution_basis": basis,
                                           "risk_band": band, "refusal_streak": streak})
    if ctx.update is not None:
        ctx.update = ctx.update.model_copy(update={"life": ctx.life})


def attribution_step(basis: dict[str, Any] | None,
                     record: DecisionCycleRecord) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(the change since the last recorded tick, split — None on the first — , the basis the next tick splits from):
    the last tick's holdings and what its actions sent (golem.safety.attribution)."""
    now = holdings_of(record.observation.snapshot)
    split = None
    if basis is not None:
        last = basis.get("tick")
        split = attribute([Holdings.model_validate(basis["holdings"]), now],
                          [Interval.model_validate(basis["interval"])]).model_dump()
        split["since_tick"] = last
    return split, {"tick": record.tick, "holdings": now.model_dump(), "interval": interval_of(record).model_dump()}


PURE: dict[str, Handler] = {"heartbeat": heartbeat_after_turn, "lifespan": lifespan_after_turn,
                            "daimon": daimon_after_turn, "risk": risk_after_turn}


async def run_after_turn(registry: ExtensionRegistry, ctx: AfterTurn, handlers: dict[str, Handler]) -> AfterTurn:
    """Fire after_turn in the registry's order. `handlers`: the activity's members (memory, cybernetics,
    telemetry); they run with the record the members before them wrote."""
    both = {**PURE, **handlers}
    for name in registry.order("after_turn"):
        handler = both.get(name)
        if handler is None:
            continue
        ctx.fired.append(name)
        ctx.record.after_turn = list(ctx.fired)
        out = handler(ctx)
        if out is not None and hasattr(out, "__await__"):
            await out
    return ctx


async def after_turn_in_reflect(services: TurnStores, record: DecisionCycleRecord, state: GolemState,
                                config: GolemConfig, *, proposed: list[ProposedAction], reflexion: Reflexion | None,
                                regime_changed: bool,
                                emit: Callable[[DecisionCycleRecord], object],
                                clade: Handler | None = None) -> tuple[AfterTurn, str, str]:
    """Step 9's after_turn with the worker's stores: memory writes the tick's episode (tagged with the daimon's
    PAD octant) and learns from the outcome, cybernetics tunes the context policy, telemetry persists the record;
    then turn_end's ui-bridge emits its events. `clade`: the activity's member that lays the tick's pheromones on the
    clade's field (None: a lone golem). Returns (the folded context, the record's path, the episode id)."""
    import asyncio

    from golem.grimoire.episodes.writes import write_episode
    from golem.learning.loop import allocation_defaults, learn_from_outcome, tune_context

    chain = AfterTurn(record=record, state=state, config=config, extra={"reflexion": reflexion})
    out: dict[str, str] = {}

    def memory(c: AfterTurn) -> None:
        episode = write_episode(services.episodes, c.record)
        out["episode"] = episode
        c.record.episodes_written = [episode]
        c.record.grimoire_mutations = [f"upsert episode {episode}"]
        # Reflexion and credit assignment on an acted, verified tick
        c.record = learn_from_outcome(c.record, list(proposed), services.semantic, services.learning,
                                      memory=config.grimoire.memory, reflexion=reflexion)

    def cybernetics(c: AfterTurn) -> None:  # loops 1 and 3
        c.record.context_policy_revision = tune_context(c.record, services.learning, allocation_defaults(config),
                                                        regime_changed=regime_changed)

    def telemetry(c: AfterTurn) -> None:
        out["path"] = str(services.cycles.persist(c.record))

    def threaded(fn: Callable[[AfterTurn], None]) -> Callable[[AfterTurn], Awaitable[None]]:
        return lambda c: asyncio.to_thread(fn, c)

    registry = registry_for(config.extensions.disabled)
    members: dict[str, Handler] = {"memory": threaded(memory), "cybernetics": threaded(cybernetics),
                                   "telemetry": threaded(telemetry)}
    if clade is not None:
        members["clade"] = clade
    await run_after_turn(registry, chain, members)
    # turn_end, once the record is persisted: the ui-bridge emits its events (tick_finished last)
    await asyncio.to_thread(fire, registry, "turn_end", {"ui-bridge": lambda: emit(chain.record)})
    return chain, out["path"], out["episode"]
