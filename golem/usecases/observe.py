"""observe, a tick's first step: what the golem perceives, as one Observation (docs/concepts/the-tick.md).

One batched chain read; System 1's probes (with the monitor's alerts and triggers carried from dropped ticks) and the
regime; earlier actions confirmed or reorged; topology curiosity; liquidations; the causal-link probe.
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone

from golem.chain.liquidations import force_t2_reason
from golem.cognition.backpressure import merge_into_observation
from golem.inference.budget import daily_spend_on
from golem.cognition.lines import strategy_lines
from golem.cognition.probes import anomalies_from, run_probes
from golem.cognition.regime import detect_regime
from golem.cognition.regime_tag import regime_tag
from golem.events import bridge as events
from golem.extensions.hooks import fire
from golem.extensions.registry import registry_for
from golem.grimoire.episodes.writes import mark_reorged
from golem.grimoire.semantic.topology import TopologyTracker
from golem.inference.strategies import StrategySet, advance
from golem.inference.strategy import metrics_from
from golem.learning import causal
from golem.models.observation import Observation
from golem.models.tick import TickContext
from golem.safety.attribution import holdings_of
from golem.services import Services


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def observe(services: Services, ctx: TickContext, strategies: StrategySet, topology: TopologyTracker) -> Observation:
    """The tick's Observation; `strategies` are its config version's strategy files (STRATEGY.md that does not
    parse: the [probes] defaults). The strategies under strategies/ move on the tick's clock here."""
    t0 = time.perf_counter()
    cfg, state = ctx.cfg, ctx.state
    # the lines of STRATEGY.md and of the strategies active after the last tick
    strategy = strategies.effective([r.id for r in state.strategy_runs if r.status == "active"])
    snapshot = services.read_snapshot()
    lines = strategy_lines(strategy, cfg.probes, cfg.wake)  # the position probe's lines come from STRATEGY.md
    probes = run_probes(
        snapshot, state, lines.probe_thresholds(cfg.probes),
        kill_switch_triggered=os.path.exists(cfg.probes.kill_switch_path),
        daily_spend=daily_spend_on(state, ctx.started_at), heartbeat=cfg.heartbeat,
    )
    probes = [*probes, *events.alert_probes(services.events.store)]  # the heartbeat monitor's alerts
    if ctx.carried_probes:  # ticks dropped by backpressure: the highest severity wins
        probes = merge_into_observation(probes, ctx.carried_probes)
    regime, _ = detect_regime([*state.price_history, snapshot.pool.price], state.range_bound_run, state.regime)
    report = services.safety.confirm(services.w3, ctx.golem_id)  # earlier actions: pending -> confirmed, or reorged
    reorged = sorted({a.tick for a in report.reorged})
    for tick in reorged:
        mark_reorged(services.episodes, ctx.golem_id, tick)
    # each anomaly's topology curiosity modifier, once the golem's topology is synced into the graph at this block
    anomalies = topology.observe(ctx.golem_id, snapshot, ctx.tick, anomalies_from(probes))
    liquidations = services.liquidations(ctx.tick, snapshot.block_number)
    observation = Observation(
        liquidations=liquidations, snapshot=snapshot, probes=probes, anomalies=anomalies, regime=regime,
        observed_at=_now_iso(), read_ms=round((time.perf_counter() - t0) * 1000, 3),
        confirmation_depth=report.depth, newly_confirmed_ticks=sorted({a.tick for a in report.newly_confirmed}),
        reorged_ticks=reorged,
        force_t2_reason=force_t2_reason(report.force_t2, reorged, report.reorg_detected_at, liquidations),
        regime_tag=regime_tag([*state.price_history, snapshot.pool.price], snapshot.gas_price_gwei, state.gas_history,
                              holdings_of(snapshot).exposure, snapshot.pool.reserve0),
    )
    observation = with_causal_link_probe(services, ctx.tick, observation)
    if strategies.others or strategies.errors:  # waiting → active → complete, on the tick's clock
        now = datetime.fromisoformat(ctx.started_at) if ctx.started_at else datetime.now(timezone.utc)
        observation.strategies = advance(strategies, state.strategy_runs, ctx.tick, now,
                                         metrics_from(observation, state.last_price))
    # turn_start: the ui-bridge puts the tick's start and vitals on the Event Fabric
    fire(registry_for(cfg.extensions.disabled), "turn_start", {"ui-bridge": lambda: services.events.emit(
        events.tick_started(ctx.golem_id, ctx.tick, _now_iso(), observation, state.pending_steers))})
    return observation


def with_causal_link_probe(services: Services, tick: int, obs: Observation) -> Observation:
    """The causal-link probe against the learned edges and the last k records; when it fires it is an anomaly, so
    its surprise feeds prediction error. Absent while the graph has learned no edge."""
    edges = services.learning.causal_evidence()
    if not edges:
        return obs
    records = sorted((services.cycles.load(r["tick"]) for r in services.cycles.recent(causal.CAUSAL_WINDOW_TICKS + 1)
                      if r["tick"] < tick), key=lambda r: r.tick)
    prev = records[-1] if records else None
    now = causal.tick_events(tick, obs, prev.observation if prev else None,
                             obs.regime.value if prev is not None and obs.regime != prev.regime else None)
    probe = causal.probe_causal_link(causal.events_of(records), now, edges)
    return obs.model_copy(update={"probes": [*obs.probes, probe],
                                  "anomalies": [*obs.anomalies, *anomalies_from([probe])]})
