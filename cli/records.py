"""`golem ticks | show N`: the golem's decision records from the cycle index on the data dir (no Temporal)."""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from typing import TYPE_CHECKING, Any

from cli.common import Command, data_dir, golem_config
from golem.errors import UserError

if TYPE_CHECKING:
    from golem.life.cycle_store import CycleStore
    from golem.models.record import DecisionCycleRecord


def cmd_ticks(args: Namespace) -> int:
    from golem.cognition.lines import lifted_note
    from golem.life.cycle_store import CycleStore

    if args.n < 0:
        raise UserError(f"-n must be >= 0, got {args.n} (-n 5 lists the 5 newest ticks)")
    store = CycleStore(data_dir(args))
    everything = getattr(args, "all", False)
    rows = store.recent(args.n, former=everything)
    former = 0 if everything else store.former_ticks()
    if former:  # on stderr: the table (and --json) stay the golem's own ticks
        print(f"({former} records numbered past this golem's last tick are a former life's in this data dir: "
              "`golem ticks --all` lists them too)", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    # One row per tick (the run an owner cares about); `runs` > 1: `golem show N` lists the others.
    print(f"{'tick':>6} {'tier':4} {'regime':13} {'phase':12} {'PE':>6} {'acted':>5} {'cost':>9} {'runs':>4}  time")
    for r in rows:
        note = f"  recovered by {r['run']} (first run failed)" if r["recovered"] else ""
        woke = lifted_note(r.get("gating_reason") or "")  # the wake floor lifted this tick (golem.cognition.lines)
        note += f"  woke {woke[:90]}" if woke else ""
        print(f"{r['tick']:>6} {r['tier']:4} {r['regime']:13} {r['phase']:12} {r['prediction_error']:6.3f} "
              f"{'yes' if r['has_action'] else '-':>5} {r['total_cost']:9.5f} {r['runs']:>4}  {r['timestamp']}{note}")
    for f in store.failures(args.n):
        print(f"{f['tick']:>6} FAILED {f['error'][:100]}  ({f['failed_at']})")
    return 0


def run_lines(store: CycleStore, tick: int, shown: str | None) -> list[str]:
    """How each run of tick N started and why, the shown one marked (for `golem show`)."""
    lines = []
    failure = store.failure(tick)
    if failure is not None and not any(r["run"] == "" for r in store.runs(tick)):
        lines.append(f"  {'(first run)':24} FAILED: {failure['error'][:100]}  ({failure['failed_at']})")
    for r in store.runs(tick):
        label = r["run"] or "(first run)"
        why = {
            "original": "started by the golem",
            "rerun": f"`golem rerun` of {r['rerun_of']}",
            "reset": f"Temporal reset from run {r['original_run_id']}: {r['reset_reason'] or '(reason not read)'}",
            "retry": f"workflow retry of run {r['original_run_id']}",
        }.get(r["run_kind"], r["run_kind"])
        acted = "acted" if r["has_action"] else "no action"
        mark = "  <- shown" if r["run"] == shown else ""
        lines.append(f"  {label:24} {r['run_kind']:8} run {r['run_id'] or '?'}  {r['tier']} {acted}; {why}{mark}")
    for f in store.run_failures(tick):
        lines.append(f"  {f['run']:24} {f['run_kind']:8} run {f['run_id'] or '?'}  FAILED: {f['error'][:100]}  "
                     f"({f['failed_at']})")
    return lines


def brief(rec: DecisionCycleRecord) -> list[str]:
    """Tick N as an owner reads it: why this tier, what it decided and did, what it cost, what came of it."""
    hf = rec.observation.min_health_factor()
    out = [f"tick {rec.tick}{f' ({rec.run_label})' if rec.run_label else ''}  {rec.timestamp}  {rec.tier.value}  "
           f"regime {rec.regime.value}  PE {rec.prediction_error:.3f} / θ {rec.deliberation_threshold:.3f}  "
           f"HF {'—' if hf is None else f'{hf:.3f}'}  price {rec.observation.snapshot.pool.price:,.2f}",
           f"  why:      {rec.gating_reason}"]
    tag = rec.observation.regime_tag
    if tag is not None:  # docs/design/learning.md#the-regime-tag
        out.append(f"  tag:      {tag.cell}" + (f"  (σ {tag.volatility:.4%}" if tag.volatility is not None else "  (")
                   + (f", gas ×{tag.gas_ratio:.2f}" if tag.gas_ratio is not None else "")
                   + (f", impact {tag.price_impact:.2%})" if tag.price_impact is not None else ")"))
    for iv in rec.active_interventions:
        out.append(f"  {iv.kind}:    {iv.id} \"{iv.message}\"" + (f" ({iv.severity})" if iv.severity else "")
                   + (f" from the {iv.source}" if iv.source != "owner" else ""))
    for st in rec.self_steers:  # what the golem's own systems steered after this tick
        out.append(f"  self-steer: {st.id} [{st.severity.value}] from the {st.source}: {st.message}")
    d = rec.deliberation
    if d is not None:
        out.append(f"  decided:  {d.decision or '(nothing)'}  [{d.model}]")
        if d.reasoning_summary:
            out.append(f"  because:  {d.reasoning_summary[:400]}")
        for r in d.reads:  # the tool loop's reads and speculation, as the model got them
            args = f" {json.dumps(r.arguments, separators=(',', ':'))}" if r.arguments else ""
            out.append(f"  read {r.round}:   {r.tool_name}{args[:120]} → {(r.error or r.result)[:160]}")
    for a in rec.actions:
        extra = [f"tx {a.tx_hash}" if a.tx_hash else "", f"gas ${a.gas_cost:.2f}" if a.gas_cost else "",
                 f"clipped: {a.clipped}" if a.clipped else "", a.block_reason or ""]
        out.append(f"  action {a.action_index}: {a.tool_name} {a.status.value}  " + "; ".join(x for x in extra if x))
    if rec.strategies is not None:  # docs/how-to/strategies.md
        out += [f"  strategy: {e.strategy} {e.kind}: {e.why}" for e in rec.strategies.events]
        out += [f"  strategy: {c.strategy} counts action {c.action_index} ({c.tool}): {c.why}"
                for c in rec.strategies.credited]
        out += [f"  strategy file error: {e}" for e in rec.strategies.errors]
    o = rec.outcome
    if o is not None:
        hb, ha = o.health_factor_before, o.health_factor_after
        out.append(f"  outcome:  {'verified' if o.verified else 'not verified'}; HF "
                   f"{'—' if hb is None else f'{hb:.3f}'} → {'—' if ha is None else f'{ha:.3f}'}"
                   + (f"; value {o.pnl_impact:+.2f} USD" if o.pnl_impact is not None else "")
                   + (f"; violations: {', '.join(o.invariant_violations)}" if o.invariant_violations else ""))
    out.append(f"  cost:     ${rec.total_cost:.4f} (inference ${rec.inference_cost:.4f}, gas ${rec.gas_cost:.4f})")
    for e in rec.errors:
        out.append(f"  error:    {e}")
    return out


def _debug_requested(args: Namespace, rec: Any) -> None:
    """The debug hook: the owner asked what the golem thought at a tick; the observability member puts it on the Event
    Fabric with the tick's DeFi context (regime, phase, tier, cost)."""
    from datetime import datetime, timezone

    from golem.events.models import make_event
    from golem.events.store import EventStore
    from golem.extensions import registry_for
    from golem.extensions.hooks import fire

    now = datetime.now(timezone.utc).isoformat()
    fire(registry_for(golem_config(args).extensions.disabled), "debug", {"observability": lambda: EventStore(
        data_dir(args)).append([make_event(
            rec.golem_id, rec.tick, now, "heartbeat.debug_requested", now, run=rec.run_label or "original",
            regime=rec.regime.value, phase=rec.phase.value, tier=rec.tier.value, cost_usd=rec.total_cost,
            view="brief" if getattr(args, "brief", False) else ("runs" if args.runs else "record"))])})


def cmd_show(args: Namespace) -> int:
    from golem.life.cycle_store import CycleStore

    if args.tick < 0:
        raise UserError(f"tick must be >= 0, got {args.tick} (`golem ticks` lists the recorded ones)")
    store = CycleStore(data_dir(args))
    try:
        rec = store.load(args.tick, args.run)
    except (LookupError, ValueError) as err:
        failure = store.failure(args.tick) if args.run is None else None
        if failure is None:
            sys.exit(f"golem show: {err}")
        if args.runs:  # a failed tick's runs are still worth listing
            print(f"runs of tick {args.tick}:\n" + "\n".join(run_lines(store, args.tick, None)))
            return 0
        later = len(store.run_failures(args.tick))
        sys.exit(f"golem show: tick {args.tick} has no record: its run failed ({failure['error'][:160]})"
                 + (f" and {later} later run(s) failed too (golem show {args.tick} --runs)" if later else "")
                 + f"; `golem rerun {args.tick}` or a Temporal reset runs it again")
    lines = run_lines(store, args.tick, rec.run_label)
    _debug_requested(args, rec)
    if args.runs:
        print(f"runs of tick {args.tick}:\n" + "\n".join(lines))
        return 0
    if getattr(args, "brief", False):
        print("\n".join(brief(rec)))
    else:
        print(rec.model_dump_json(indent=2))
    if rec.wake is not None:  # stderr, like the runs: `golem show N | jq` still reads one record
        from golem.cognition.lines import wake_summary

        print(f"wake: {wake_summary(rec.wake)}", file=sys.stderr)
    if len(lines) > 1:  # the runs go to stderr, so `golem show N | jq` still reads one record
        print(f"tick {args.tick} ran {len(lines)} times (`golem show {args.tick} --run LABEL` shows another):",
              file=sys.stderr)
        print("\n".join(lines), file=sys.stderr)
    return 0


def register(command: Command) -> None:
    s = command("ticks", "recent ticks from the cycle index")
    s.add_argument("-n", type=int, default=20)
    s.add_argument("--json", action="store_true")
    s.add_argument("--all", action="store_true",
                   help="also records numbered past the golem's last tick (a former life's left in the data dir)")
    s.set_defaults(fn=cmd_ticks)
    s = command("show", "print tick N's DecisionCycleRecord (and list its other runs)")
    s.add_argument("tick", type=int)
    s.add_argument("--brief", action="store_true",
                   help="a few lines instead of the JSON record: why this tier, the decision, each action, the outcome")
    s.add_argument("--run", help="the run's label, e.g. rerun-1 or reset-1a2b3c4d (default: the first run, "
                                 "or the latest run that recorded when the first failed)")
    s.add_argument("--runs", action="store_true", help="only list the tick's runs: how each started and why")
    s.set_defaults(fn=cmd_show)
