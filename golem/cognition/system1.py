"""System 1 end to end, in process: observe (probes + regime) → analyze (PE) → gate, plus a pure
simulation driver that runs it over a price path (for tests and bench/system1.py).

`system1_tick` is what the observe / analyze / gate activities do, minus the chain read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from golem.cognition.backpressure import merge_into_observation
from golem.inference.budget import daily_spend_on
from golem.cognition.fold import fold_tick_result, should_run_delta
from golem.cognition.learned_gating import GateOutcome, gate_tick, learn_at_delta, tick_seed
from golem.cognition.lines import lift, strategy_lines, wake_check
from golem.cognition.prediction_error import compute_prediction_error
from golem.cognition.probes import anomalies_from, run_probes
from golem.cognition.regime import detect_regime
from golem.cognition.threshold import compute_adaptive_threshold
from golem.grimoire.semantic.topology import TopologyView
from golem.inference.strategy import Strategy
from golem.models.config import GatingSection, GolemConfig
from golem.models.enums import Tier
from golem.models.interventions import Steer
from golem.models.observation import ChainSnapshot, Observation, PoolState, PositionState, ProbeResult
from golem.models.state import GolemState
from golem.models.tick import TickResult
from golem.models.wake import Wakefulness

# per-call averages of the daily cost model (docs/design/inference.md#cost): T1 $0.002, T2 $0.05
COST_PER_CALL = {Tier.T0: 0.0, Tier.T1: 0.002, Tier.T2: 0.05}


def observe(
    snapshot: ChainSnapshot,
    state: GolemState,
    cfg: GolemConfig,
    *,
    now_iso: str,
    kill_switch_triggered: bool = False,
    carried_probes: list[ProbeResult] | None = None,
    topology: TopologyView | None = None,
    strategy: Strategy | None = None,
) -> Observation:
    """Probes (merged with probes carried from dropped ticks) and the regime, from a snapshot; with a
    topology view, each anomaly carries its topology curiosity modifier (docs/design/grimoire.md#knowledge-graph).
    The position probe's lines come from `strategy` (golem.cognition.lines)."""
    thresholds = strategy_lines(strategy, cfg.probes, cfg.wake).probe_thresholds(cfg.probes)
    probes = run_probes(snapshot, state, thresholds, kill_switch_triggered,
                        daily_spend=daily_spend_on(state, now_iso), heartbeat=cfg.heartbeat)
    if carried_probes:
        probes = merge_into_observation(probes, carried_probes)
    regime, _ = detect_regime([*state.price_history, snapshot.pool.price], state.range_bound_run, state.regime)
    anomalies = anomalies_from(probes)
    if topology is not None:
        anomalies = topology.annotate(anomalies, snapshot)
    return Observation(snapshot=snapshot, probes=probes, anomalies=anomalies, regime=regime, observed_at=now_iso)


class System1Tick(BaseModel):
    observation: Observation
    prediction_error: float
    sources: dict[str, float] = Field(default_factory=dict)
    gate: GateOutcome  # its tier is gating's; `tier` is after the wake floor
    wake: Wakefulness
    tier: Tier
    reason: str


def system1_tick(
    snapshot: ChainSnapshot,
    state: GolemState,
    cfg: GolemConfig,
    gating: GatingSection,
    *,
    now_iso: str,
    steers: list[Steer] | None = None,
    seed: int | None = None,
    kill_switch_triggered: bool = False,
    topology: TopologyView | None = None,
    strategy: Strategy | None = None,
) -> System1Tick:
    obs = observe(snapshot, state, cfg, now_iso=now_iso, kill_switch_triggered=kill_switch_triggered,
                  topology=topology, strategy=strategy)
    pe, sources = compute_prediction_error(state, obs, cfg.oracle.enabled, gating.topology_weight)
    threshold = compute_adaptive_threshold(state, cfg.heartbeat.base_deliberation_threshold)
    outcome = gate_tick(
        pe, threshold, state, steers or [], obs, probe_thresholds=cfg.probes, heartbeat=cfg.heartbeat, gating=gating,
        daily_spend=daily_spend_on(state, now_iso), seed=tick_seed(state.golem_id, state.tick) if seed is None else seed,
    )
    wake = wake_check(strategy, obs, state.health_history, state.last_price, cfg.probes, cfg.wake)
    tier, reason, wake = lift(outcome.tier, outcome.reason, wake)
    return System1Tick(observation=obs, prediction_error=pe, sources=sources, gate=outcome, wake=wake, tier=tier,
                       reason=reason)


# ---- synthetic world for simulation ----------------------------------------------------------
def synthetic_snapshot(price: float, tick: int, *, oracle_price: float | None = None, pool_k: float = 1e9,
                       collateral_weth: float = 10.0, debt_usdc: float = 8000.0, liquidation_threshold: float = 0.8,
                       gas_gwei: float = 1.0) -> ChainSnapshot:
    """A snapshot of the dev world at `price`: a constant-product pool (reserve0·reserve1 = k) and one
    lending position whose health factor follows the price."""
    r0 = math.sqrt(pool_k / price)
    r1 = math.sqrt(pool_k * price)
    hf = collateral_weth * price * liquidation_threshold / debt_usdc if debt_usdc > 0 else None
    return ChainSnapshot(
        chain_id=31337, block_number=1000 + tick, block_timestamp=1_700_000_000 + 12 * tick, gas_price_gwei=gas_gwei,
        pool=PoolState(address="0xpool", token0="WETH", token1="USDC", reserve0=r0, reserve1=r1, price=price,
                       tvl=2.0 * r1),
        oracle_price=price if oracle_price is None else oracle_price,
        balances={"WETH": 20.0, "USDC": 20_000.0},
        positions=[PositionState(id="lending:golem", collateral=collateral_weth, debt=debt_usdc, health_factor=hf)],
    )


# The synthetic world's topology as the observe step would find it in the knowledge graph: the golem has a
# position in the lending market and holds WETH/USDC, so the market and the tokens are positions (0 hops) and
# the pool (holds WETH) and the oracle (the market's price feed) are 1 hop away.
SYNTHETIC_TOPOLOGY = TopologyView(
    entities={"pool": "pool:0xpool", "oracle": "oracle:0xoracle", "lending_market": "lending_market:golem"},
    hops={"lending_market:golem": 0, "token:WETH": 0, "token:USDC": 0, "pool:0xpool": 1, "oracle:0xoracle": 1},
    positions=["lending_market:golem", "token:USDC", "token:WETH"],
)


class SimulationRun(BaseModel):
    tiers: list[Tier] = Field(default_factory=list)
    modes: list[str] = Field(default_factory=list)
    actions: list[int] = Field(default_factory=list)
    prediction_errors: list[float] = Field(default_factory=list)
    theta_seconds: list[float] = Field(default_factory=list)
    inference_cost: float = 0.0
    state: GolemState

    def share(self, tier: Tier, start: int = 0, end: int | None = None) -> float:
        xs = self.tiers[start:end]
        return sum(t == tier for t in xs) / len(xs) if xs else 0.0


def simulate(
    prices: list[float],
    cfg: GolemConfig | None = None,
    gating: GatingSection | None = None,
    *,
    golem_id: str = "sim",
    start_iso: str = "2025-01-01T00:00:00+00:00",
    state: GolemState | None = None,
    topology: TopologyView | None = None,
    snapshot: Callable[[float, int], ChainSnapshot] | None = None,
    act: Callable[[GolemState, System1Tick], int] | None = None,
    strategy: Strategy | None = None,
) -> SimulationRun:
    """Drive System 1 over a pool price path: each tick observes, analyses, gates (learned after the
    cold start), pays the per-call cost of its tier, folds into state, and at delta frequency
    closes the learning loop, in GolemWorkflow's order. Pure and deterministic given pure hooks.
    `topology` (e.g. SYNTHETIC_TOPOLOGY) gives the anomalies their topology curiosity modifiers.
    Without `act` no deliberation runs and no actions are taken; with it, every escalated tick (T1/T2) calls
    `act(state, tick)` for the number of actions executed (what learned gating's hindsight judges), and
    `snapshot(price, i)` builds the world the actions changed (default: synthetic_snapshot). With `strategy`, its
    lines set the position probe and the wake floor (golem.cognition.lines)."""
    cfg = cfg or GolemConfig()
    gating = gating or GatingSection()
    st = state or GolemState(golem_id=golem_id, theta_seconds=cfg.clock.theta_base_seconds)
    now = datetime.fromisoformat(start_iso)
    run = SimulationRun(state=st)
    for i, price in enumerate(prices):
        if should_run_delta(st, cfg.clock):
            st, _ = learn_at_delta(st, gating)
            st = st.model_copy(update={"last_delta_tick": st.tick})
        now_iso = now.isoformat()
        snap = snapshot(price, i) if snapshot is not None else synthetic_snapshot(price, i)
        t = system1_tick(snap, st, cfg, gating, now_iso=now_iso, topology=topology, strategy=strategy)
        tier = t.tier
        cost = COST_PER_CALL[tier]
        actions = act(st, t) if act is not None and tier != Tier.T0 else 0
        result = TickResult(
            tick=st.tick, tier=tier, regime=t.observation.regime.value, prediction_error=t.prediction_error,
            threshold=t.gate.threshold, price=price, gas_price_gwei=snap.gas_price_gwei, tvl=snap.pool.tvl,
            oracle_price=snap.oracle_price, position_health={p.id: p.health_factor for p in snap.positions
                                                             if p.health_factor is not None},
            inference_cost=cost, actions_executed=actions,
        )
        st = fold_tick_result(st, result, now_iso, cfg.clock, cfg.heartbeat, t.gate.decision, gating)
        run.tiers.append(tier)
        run.modes.append(t.gate.decision.mode)
        run.actions.append(actions)
        run.prediction_errors.append(t.prediction_error)
        run.theta_seconds.append(st.theta_seconds)
        run.inference_cost += cost
        now += timedelta(seconds=st.theta_seconds)
    run.state = st
    return run
