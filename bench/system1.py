"""System 1 in process: the per-tick cost of observe (probes + regime) + analyze (PE) + gate with
learned gating, beside a floor measured in the same run (an empty function call), and the tier mix
and simulated daily inference cost per market scenario beside the spec's daily cost model
(heartbeat "Daily Cost Model": Calm ~90 % T0, Normal ~80 %, Volatile ~60 %).

Prints figures only; it never fails a build. Run: python bench/system1.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from golem.cognition.probes import run_probes  # noqa: E402
from golem.cognition.system1 import (  # noqa: E402
    COST_PER_CALL,
    SYNTHETIC_TOPOLOGY,
    simulate,
    synthetic_snapshot,
    system1_tick,
)
from golem.models.config import (
    GatingSection,  # noqa: E402
    GolemConfig,  # noqa: E402
)
from golem.models.enums import Tier  # noqa: E402
from golem.world.simulator import oracle_path  # noqa: E402

CALLS = 2000
TICKS = 600  # per scenario and seed; the first 100 are the cold start
SEEDS = (0, 1, 2)
# scenario label → simulator scenario ("normal" is the trending path: steady drift, low noise)
SCENARIOS = {"calm": "calm", "normal": "trending", "volatile": "volatile"}
# spec table: T0 rate, T1 calls, T1 cost, T2 calls, T2 cost, raw daily (at ~1,440 ticks/day)
SPEC = {
    "calm": (0.90, 461, 0.92, 115, 5.76, 6.68),
    "normal": (0.80, 864, 1.73, 288, 14.40, 16.13),
    "volatile": (0.60, 1440, 2.88, 864, 43.20, 46.08),
}


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _time(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out


def per_tick_cost() -> None:
    cfg, gating = GolemConfig(), GatingSection()
    warm = simulate(oracle_path("volatile", 2000.0, 150, seed=5), cfg, gating)  # learned gating active
    state = warm.state
    snaps = [synthetic_snapshot(p, 150 + i) for i, p in enumerate(oracle_path("volatile", 2000.0, 64, seed=6))]
    now = "2025-01-02T00:00:00+00:00"

    def noop(*_a, **_k):
        return None

    i = 0

    def tick():
        nonlocal i
        i += 1
        system1_tick(snaps[i % len(snaps)], state, cfg, gating, now_iso=now, seed=i)

    def probes():
        run_probes(snaps[i % len(snaps)], state, cfg.probes, False, daily_spend=0.0, heartbeat=cfg.heartbeat)

    def floor():
        noop(snaps[0], state, cfg, gating, now_iso=now, seed=i)

    for _ in range(200):
        tick()  # warm-up
    floor_ms, probe_ms, tick_ms = _time(floor, CALLS), _time(probes, CALLS), _time(tick, CALLS)
    f50 = statistics.median(floor_ms)
    print(f"System 1 per tick, in process ({CALLS} calls, learned gating active at tick {state.tick})")
    print(f"  {'':44} {'p50':>9} {'p99':>9}   p50 / floor")
    for name, xs in (("floor: empty function call", floor_ms), ("probes only (10 of §S9)", probe_ms),
                     ("observe + analyze + gate (system1_tick)", tick_ms)):
        print(f"  {name:44} {statistics.median(xs):7.4f}ms {_pct(xs, 0.99):7.4f}ms   {statistics.median(xs) / f50:8.0f}×")
    p99 = _pct(tick_ms, 0.99)
    print(f"  target p99 < 10 ms: {'met' if p99 < 10 else 'NOT met'} ({p99:.3f} ms)\n")


def scenarios() -> None:
    cfg, gating = GolemConfig(), GatingSection()
    print(f"Tier mix and daily inference cost ({TICKS} ticks × {len(SEEDS)} seeds per scenario, simulator oracle "
          f"paths;\ncost per call T1 ${COST_PER_CALL[Tier.T1]}, T2 ${COST_PER_CALL[Tier.T2]}; ticks/day from the "
          f"adaptive theta; after the {gating.cold_start_ticks}-tick cold start)")
    head = (f"  {'scenario':14} {'T0':>6} {'T1':>6} {'T2':>6} {'theta':>6} {'ticks/d':>8} {'T1/d':>6} {'T2/d':>6}"
            f" {'$/day':>8} | spec: {'T0':>4} {'T1/d':>5} {'T2/d':>5} {'$/day':>7} | learned ok  ε-greedy ok")
    print(head)
    # Each scenario twice: without the knowledge graph, and with the synthetic world's topology (every protocol
    # event 0-1 hop from the golem's positions, so the topology curiosity modifier adds to each anomaly).
    runs = [(label, scenario, None) for label, scenario in SCENARIOS.items()]
    runs += [(label + "+topo", scenario, SYNTHETIC_TOPOLOGY) for label, scenario in SCENARIOS.items()]
    for label, scenario, topology in runs:
        tiers, thetas, judged, learned_ok, shadow_ok = [], [], 0, 0, 0
        for seed in SEEDS:
            run = simulate(oracle_path(scenario, 2000.0, TICKS, seed=seed), cfg, gating, topology=topology)
            tiers += run.tiers[gating.cold_start_ticks:]
            thetas += run.theta_seconds[gating.cold_start_ticks:]
            s = run.state.learned_gating.stats
            judged, learned_ok, shadow_ok = judged + s.judged, learned_ok + s.learned_correct, shadow_ok + s.shadow_correct
        share = {t: sum(x == t for x in tiers) / len(tiers) for t in Tier}
        theta = statistics.mean(thetas)
        per_day = 86_400 / theta
        t1, t2 = share[Tier.T1] * per_day, share[Tier.T2] * per_day
        cost = t1 * COST_PER_CALL[Tier.T1] + t2 * COST_PER_CALL[Tier.T2]
        sp = SPEC[label.removesuffix("+topo")]
        print(f"  {label:14} {share[Tier.T0]:6.1%} {share[Tier.T1]:6.1%} {share[Tier.T2]:6.1%} {theta:5.0f}s "
              f"{per_day:8.0f} {t1:6.0f} {t2:6.0f} {cost:8.2f} | {sp[0]:10.0%} {sp[1]:5d} {sp[3]:5d} {sp[5]:7.2f} | "
              f"{learned_ok / max(judged, 1):10.1%} {shadow_ok / max(judged, 1):11.1%}")
    print("  (learned ok / ε-greedy ok: share of judged ticks where learned gating's and the shadow baseline's "
          "choice matched the tier the outcome called for)")


if __name__ == "__main__":
    per_tick_cost()
    scenarios()
