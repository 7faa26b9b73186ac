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
from golem.events import bridge as events
from golem.extensions.hooks import fire
from golem.extensions.registry import registry_for
from golem.grimoire.episodes.writes import mark_reorged
from golem.grimoire.semantic.topology import TopologyTracker
from golem.inference.strategy import Strategy
from golem.learning import causal
from golem.models.observation import Observation
from golem.models.tick import TickContext
from golem.services import Services


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def observe(services: Services, ctx: TickContext, strategy: Strategy | None, topology: TopologyTracker) -> Observation:
    """The tick's Observation; `strategy` is its config version's STRATEGY.md (None: the [probes] defaults)."""
    t0 = time.perf_counter()
    cfg, state = ctx.cfg, ctx.state
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
    )
    observation = with_causal_link_probe(services, ctx.tick, observation)
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
