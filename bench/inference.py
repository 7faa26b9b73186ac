"""Cognitive Workspace assembly time and token counts per tier, and the projected daily inference cost
per scenario, beside the daily cost model (docs/design/inference.md#cost).

The floor, measured in the same run, is serialising the tick's DecideInput to JSON (what Temporal does
to every decide activity input anyway). Per-call cost is computed from the workspace's own token counts
at the configured prices, for a cold prompt cache (stable prefix written) and a warm one (read).
Tier mix: the cost model's call counts per scenario, and — with `--data DIR` — the mix measured in that
golem's cycle index. Prints figures only; never fails. Run: python bench/inference.py [--data .golem-data]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from golem.inference.config import InferenceConfig  # noqa: E402
from golem.inference.decision import decision_tools  # noqa: E402
from golem.inference.strategy import load_strategy  # noqa: E402
from golem.inference.workspace import WorkspaceSources, approx_tokens, assemble_workspace  # noqa: E402
from golem.models.enums import MarketRegime, Tier  # noqa: E402
from golem.models.interventions import FollowUp, Steer  # noqa: E402
from golem.models.record import RetrievedEntrySummary  # noqa: E402
from golem.models.tick import RetrievedKnowledge  # noqa: E402
from tests.unit.test_offline_deliberator import decide_input  # noqa: E402

HOME = Path(__file__).resolve().parents[1] / "examples" / "golem-home"
RUNS = 300
OUTPUT_TOKENS = {Tier.T1: 200, Tier.T2: 500}  # assumed reply sizes (tool calls + a short reasoning summary)
# Anthropic caches a prefix only from this many tokens on (Haiku 4.5 and Opus 4.5+: 4096; Sonnet: 1024).
MIN_CACHEABLE = {"haiku": 4096, "opus": 4096, "sonnet": 1024}

# the daily cost model (docs/design/inference.md#cost): T0 rate, T1 calls, T1 cost, T2 calls, T2 cost, raw daily,
# and with context engineering
SPEC_TABLE = {
    "calm": ("~90%", 461, 0.92, 115, 5.76, 6.68, 1.00),
    "normal": ("~80%", 864, 1.73, 288, 14.40, 16.13, 2.50),
    "volatile": ("~60%", 1440, 2.88, 864, 43.20, 46.08, 8.00),
}

PLAYBOOK = "\n".join(
    ["# PLAYBOOK (delta consolidation)", ""]
    + [f"- heuristic {i}: in {r} regimes, price moves of {50 + 10 * i} bps reverted within 3 ticks (confidence 0.{60 + i})"
       for i, r in enumerate(["volatile", "trending_down", "range_bound"] * 6)]
    + ["- WHEN gas_gwei > 100 THEN repay 5% debt"]
)


def workspace_input(tier: Tier):
    inp = decide_input(price=1850, prev=2000, hf=1.55, tier=tier, regime=MarketRegime.VOLATILE,
                       steers=[Steer(id="s-1", message="reduce exposure if the crash continues")],
                       followups=[FollowUp(id="f-1", message="check the DAI balance")])
    inp.ctx.state.pending_steers = list(inp.steers)
    inp.retrieved = RetrievedKnowledge(entries=[
        RetrievedEntrySummary(id=f"ep-{i}", summary=f"tick {100 + i}: volatile, price -{200 + 20 * i} bps, repaid 25% "
                              f"debt, health factor 1.{40 + i} → 1.{70 + i}, outcome verified", score=0.8 - i / 50)
        for i in range(8)])
    return inp


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000.0)
    return statistics.median(times)


def tier_mix_from(data: Path) -> dict[str, float] | None:
    index = data / "cycles" / "index.sqlite"
    if not index.exists():
        return None
    from golem.life.cycle_store import CycleStore

    counts = CycleStore(data).tier_counts()
    total = sum(counts.values())
    return {t: n / total for t, n in counts.items()} if total else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=None, help="a golem data dir whose cycle index gives the tier mix")
    ap.add_argument("--ticks-per-day", type=int, default=1440, help="~1,440 at a 60 s theta")
    args = ap.parse_args()

    cfg = InferenceConfig(provider="anthropic")
    strategy = load_strategy(HOME / "STRATEGY.md")
    sources = WorkspaceSources(strategy=strategy, playbook_text=PLAYBOOK,
                               standing_orders=(HOME / "HEARTBEAT.md").read_text(),
                               conversation_tail=[("user", "why did you repay yesterday?"),
                                                  ("golem", "the health factor fell to 1.45")])
    tools = decision_tools(["WETH", "USDC"])
    tools_tokens = approx_tokens(json.dumps(tools))

    print("Cognitive Workspace assembly (median of", RUNS, "runs)")
    floor_inp = workspace_input(Tier.T2)
    floor = median_ms(lambda: floor_inp.model_dump_json(), RUNS)
    print(f"  floor: DecideInput → JSON                       {floor * 1000:8.1f} µs")
    per_call: dict[Tier, tuple[float, float]] = {}
    for tier in (Tier.T1, Tier.T2):
        inp = workspace_input(tier)
        ms = median_ms(lambda: assemble_workspace(inp, sources, cfg.allocations(tier)), RUNS)
        ws = assemble_workspace(inp, sources, cfg.allocations(tier))
        stable = tools_tokens + sum(approx_tokens(b["text"]) for b in ws.system)
        volatile = sum(approx_tokens(c["text"]) for m in ws.messages for c in m["content"])
        model = cfg.t1_model if tier == Tier.T1 else cfg.t2_model
        p = cfg.price(model)
        out = OUTPUT_TOKENS[tier]
        cold = (stable * p.write + volatile * p.input + out * p.output) / 1e6
        cacheable = stable >= next((v for k, v in MIN_CACHEABLE.items() if k in model), 1024)
        if not cacheable:  # below the minimum the prefix is billed as plain input, cold and warm alike
            cold = (stable * p.input + volatile * p.input + out * p.output) / 1e6
        warm = (stable * (p.read if cacheable else p.input) + volatile * p.input + out * p.output) / 1e6
        per_call[tier] = (cold, warm)
        print(f"  {tier.value} assemble                                   {ms * 1000:8.1f} µs  ({ms / floor:.1f}× floor)")
        print("     categories: " + ", ".join(f"{k} {v}" for k, v in ws.categories.items()))
        print(f"     prompt ≈ {stable + volatile} tokens (stable/cached {stable}, per-tick {volatile}); "
              f"truncated: {ws.truncated or 'none'}; "
              + ("prefix cacheable" if cacheable else "prefix below the model's minimum cacheable length"))
        print(f"     {model}: ${cold:.5f}/call cold cache, ${warm:.5f}/call warm (output {out} tokens assumed)")

    print("\nProjected daily inference cost ($/day) beside the daily cost model")
    print(f"  {'scenario':<10}{'T1 calls':>9}{'T2 calls':>9}{'spec raw':>10}{'spec ctx-eng':>13}{'ours cold':>11}{'ours warm':>11}")
    for name, (_t0, n1, _c1, n2, _c2, raw, eng) in SPEC_TABLE.items():
        cold = n1 * per_call[Tier.T1][0] + n2 * per_call[Tier.T2][0]
        warm = n1 * per_call[Tier.T1][1] + n2 * per_call[Tier.T2][1]
        print(f"  {name:<10}{n1:>9}{n2:>9}{raw:>10.2f}{eng:>13.2f}{cold:>11.2f}{warm:>11.2f}")
    mix = tier_mix_from(args.data) if args.data else None
    if mix:
        n1, n2 = mix.get("T1", 0) * args.ticks_per_day, mix.get("T2", 0) * args.ticks_per_day
        warm = n1 * per_call[Tier.T1][1] + n2 * per_call[Tier.T2][1]
        print(f"  measured mix in {args.data}: " + ", ".join(f"{k} {v:.1%}" for k, v in sorted(mix.items()))
              + f" → {n1:.0f} T1 + {n2:.0f} T2 calls at {args.ticks_per_day} ticks/day ≈ ${warm:.2f}/day (warm cache)")
    elif args.data:
        print(f"  (no cycle index in {args.data}; run a golem first for a measured mix)")


if __name__ == "__main__":
    main()
