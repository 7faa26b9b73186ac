"""`golem status [--json]`: the running golem, from a query on its workflow (and the running tick's FSM)."""

from __future__ import annotations

import sqlite3
import sys
from collections import Counter
from argparse import Namespace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.common import Command, NoAnswer, arun, client, golem_config, one_line, query_golem
from cli.life import life_line
from golem.ids import golem_workflow_id

if TYPE_CHECKING:
    from golem.models.record import DecisionCycleRecord
    from golem.models.golem import GolemStatus
    from golem.models.interventions import RejectedIntervention
    from golem.models.state import ChainHealth

ALERT_WINDOW_MIN = 10  # the monitor's alerts `golem status` mentions: the last ten minutes


def alerts_line(data: Path, now: datetime | None = None) -> str | None:
    """The heartbeat-monitor's alerts of the last ten minutes, the worst and newest first, or None: a golem whose
    ticks stalled says so here, not only in `golem alerts`."""
    from golem.events.store import EventStore
    from golem.layout import DataLayout

    if not DataLayout(data).events.exists():  # a golem that never ran: nothing to say
        return None
    since = ((now or datetime.now(timezone.utc)) - timedelta(minutes=ALERT_WINDOW_MIN)).isoformat()
    events = EventStore(data).read(kinds=["alerts.probe"], since=since, limit=1000)
    if not events:
        return None
    rank = {"critical": 3, "high": 2, "medium": 1, "low": 0}
    worst = max(events, key=lambda e: (rank.get(e.payload.get("severity", "low"), 0), e.seq or 0))
    p = worst.payload
    return (f"  alerts:     {len(events)} in the last {ALERT_WINDOW_MIN} min; worst {p.get('vital')} "
            f"{p.get('value')} (threshold {p.get('threshold')}, {p.get('severity')}) at {worst.time[11:19]} UTC "
            + (f"({p['detail']}) " if p.get("detail") else "")  # the figure's unit and meaning, as the monitor wrote it
            + "— `golem alerts` lists them")


def _newest_record_line(args: Namespace) -> str:
    """The newest tick record in --data (tick, tier, phase, equity, when), for a golem whose worker does not answer."""
    from golem.layout import DataLayout
    from workers.fleet_view import newest_record

    layout = DataLayout.of(Path(args.data))
    try:
        rec = newest_record(layout) if Path(args.data).is_dir() else {}
    except (OSError, ValueError, sqlite3.Error) as err:
        return f"  newest record: unreadable ({one_line(err)})"
    if not rec:
        return f"  newest record: none in {args.data}"
    return f"  newest record: tick {rec['tick']} {rec['tier']} {rec['phase']}, equity {rec['equity']}, at {rec['time']}"


async def _status(args: Namespace) -> int:
    from golem.models.golem import GolemStatus
    from golem.models.state import FsmState

    from infra.supervisor import supervision_note

    cfg = golem_config(args)
    # what `golem run`'s supervision saw (a process down and being restarted, the last outages): said before the
    # connect, which fails while the dev server itself is down
    note = supervision_note(Path(args.data))
    if note and ("DOWN" in note or "GAVE UP" in note):
        print(f"golem run: {note}", file=sys.stderr)
    temporal = await client(args)
    handle = temporal.get_workflow_handle(golem_workflow_id(cfg.golem.id))
    try:
        st = await query_golem(args, cfg, handle, "status", GolemStatus)  # GolemWorkflow.status
    except NoAnswer:
        print(_newest_record_line(args), file=sys.stderr)  # what the data dir says while the worker is away
        raise
    if st.current_tick_workflow_id:
        try:  # ThetaTickWorkflow.fsm
            st.fsm = await temporal.get_workflow_handle(st.current_tick_workflow_id).query("fsm", result_type=FsmState)
        except Exception:
            pass  # the tick finished between the two queries
    if args.json:
        print(st.model_dump_json(indent=2))
        return 0
    last = st.last_tick
    print(f"golem {st.golem_id}: {st.activity}, next tick {st.tick}")
    print(f"  FSM:        {st.fsm.state.value}" + (f" [{st.fsm.substate}]" if st.fsm.substate != "Normal" else "")
          + (f" for {_since(st.fsm.entered_at)}" if st.current_tick_workflow_id and st.fsm.entered_at else ""))
    print(chain_line(st.chain))
    if note:
        print(f"  processes:  {note}")
    if st.paused or st.entries_stopped:
        print(f"  STOPPED:    {'paused (no new ticks)' if st.paused else ''}{'; ' if st.paused and st.entries_stopped else ''}"
              f"{'entries stopped (no new positions)' if st.entries_stopped else ''} — {st.control_note}")
    if st.chain.alert:
        print(f"  ALERT:      {st.chain.alert}")
    for line in viability_lines(Path(args.data), cfg.golem.home):
        print(line)
    recent = alerts_line(Path(args.data))
    if recent:
        print(recent)
    if last:
        print(f"  last tick:  {last.tick} tier {last.tier.value if last.tier else '-'}"
              + (" FAILED: " + (last.error or "") if last.failed else ""))
    print(f"  regime:     {st.regime}   phase: {st.phase}   vitality: {st.vitality:.2f}")
    print(life_line(st))  # the clocks, the credit, the affect, death
    q = st.tick_queue
    print(f"  theta:      {st.theta_seconds:.1f}s" + (
        f"   queue: {len(q.pending)} pending, {q.dropped} dropped ({q.dropped_during_dream} while dreaming)"
        if q.pending or q.dropped else ""))
    print(spend_line(st))
    print(f"  steers:     {len(st.pending_steers)} pending" + "".join(
        f"\n    - [{s.severity}] {s.message} ({s.id}" + (f", from the {s.source}" if s.source != "owner" else "") + ")"
        for s in st.pending_steers))
    print(f"  follow-ups: {len(st.pending_followups)} pending" + "".join(
        f"\n    - [{f.window}] {f.message} ({f.id})" for f in st.pending_followups))
    for line in approval_lines(st):
        print(line)
    dc = st.decision_cache
    print(f"  gating:     {'learned (Hedge + Thompson)' if st.learned_gating_active else 'cold start (fixed thresholds)'}"
          f"   decision cache: {dc.get('hits', 0)}/{dc.get('lookups', 0)} hits, {dc.get('entries', 0)} entries")
    print(dream_line(st))
    if (woke := wake_line(args, st.tick)) is not None:
        print(woke)
    for line in strategy_lines(st, args):
        print(line)
    if (split := attribution_line(args, cfg.clock.delta_theta_ticks, st.tick)) is not None:
        print(split)
    if (threat := threats_line(args, st.tick)) is not None:
        print(threat)
    if (learned := learning_line(args)) is not None:
        print(learned)
    if cfg.clade.id:
        print(pheromones_line(args, cfg.clade.id, st.tick))
    for r in st.rejected_interventions:
        print(f"  {rejection_line(r)}")
    if st.failed_ticks:
        print(f"  failed ticks: {st.failed_ticks}  (golem rerun N)")
    return 0


def _since(iso: str) -> str:
    from datetime import datetime, timezone

    secs = (datetime.now(timezone.utc) - datetime.fromisoformat(iso)).total_seconds()
    return f"{secs:.0f}s" if secs < 120 else f"{secs / 60:.1f} min"


def chain_line(chain: ChainHealth) -> str:
    """Chain RPC health from the golem's own reads (each tick's observe step)."""
    good = f"last good read {_since(chain.last_good_read_at)} ago (tick {chain.last_good_tick})" \
        if chain.last_good_read_at else "no good read yet"
    if not chain.errors_in_row:
        return f"  chain RPC:  ok, {good}"
    return f"  chain RPC:  {chain.errors_in_row} failed reads in a row, {good}; last error: {chain.last_error}"


def approval_lines(st: GolemStatus) -> list[str]:
    """Privileged requests: the open ones with what to type, then the last few answered."""
    open_ = [a for a in st.approvals if a.status.open]
    done = [a for a in st.approvals if not a.status.open][-3:]
    if not open_ and not done:
        return []
    out = [f"  approvals:  {sum(a.status.value == 'pending' for a in open_)} pending"]
    for a in open_:
        args = ", ".join(f"{k}={v}" for k, v in a.arguments.items())
        when = (f"expires at tick {a.expires_at_tick}: golem approve {a.id} | golem deny {a.id}"
                if a.status.value == "pending" else f"approved by {a.decided_by}: runs on the next tick")
        out.append(f"    - {a.id} {a.tool}({args}) asked at tick {a.tick}: {a.reason}\n      {when}")
    for a in done:
        out.append(f"    - {a.id} {a.tool} {a.status.value}" + (f" by {a.decided_by}" if a.decided_by else "")
                   + (f": {a.outcome}" if a.outcome else "") + (f" ({a.note})" if a.note else ""))
    return out


def rejection_line(r: RejectedIntervention) -> str:
    """One rejected steer or follow-up, dated by time and by the tick whose record reports it."""
    when = r.received_at[:19].replace("T", " ") + " UTC" if r.received_at else "time unknown"
    tick = f"before tick {r.tick}" if r.tick is not None else "tick unknown"
    return f"rejected {r.kind} at {when}, {tick}: {r.reason}"


def dream_line(st: GolemStatus) -> str:
    """The dream yield (healthy 10–30%) and threat coverage (target 100%), the last cycle, the next one's urgency."""
    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.0f}%"

    urgency = f"   urgency {st.dream_urgency:.2f} (dreams at 1.00)" if st.dream_urgency is not None else ""
    return (f"  dreams:     yield {pct(st.dream_yield)} (healthy 10-30%)   threat coverage {pct(st.threat_coverage)} "
            f"(target 100%){urgency}" + (f"\n    last: {st.last_dream}" if st.last_dream else ""))


def records_before(args: Namespace, upto: int, n: int) -> list[DecisionCycleRecord]:
    """The records of the last `n` ticks before `upto` (the golem's next tick), oldest first, from the data dir on this
    host: a data dir may still hold a former golem's records numbered past this one's ticks."""
    from cli.common import data_dir
    from golem.errors import UserError
    from golem.life.cycle_store import CycleStore

    try:
        store = CycleStore(data_dir(args))
    except (OSError, ValueError, UserError):
        return []
    out: list[DecisionCycleRecord] = []
    for tick in range(upto - 1, max(-1, upto - 1 - n), -1):
        try:
            row = store.row(tick)
            if row is not None:
                out.append(store.load(tick, row.get("run") or None))
        except (OSError, LookupError, ValueError):
            continue  # archived or unreadable: the window spans the gap
    return out[::-1]


def wake_line(args: Namespace, upto: int) -> str | None:
    """The last tick's wake check (forecast to the nearest STRATEGY.md line, rules previewed); None when there is
    none to read."""
    from golem.cognition.lines import wake_summary

    recs = records_before(args, upto, 1)
    if not recs or recs[-1].wake is None:
        return None
    return f"  wake:       tick {recs[-1].tick}: {wake_summary(recs[-1].wake)}"


THREAT_TICKS = 20  # the ticks `golem status` looks back over for a DeFi threat detector that fired


def threats_line(args: Namespace, upto: int) -> str | None:
    """The DeFi threat detectors that fired on the last ticks' writes, newest first (docs/design/safety.md#defi-threats);
    None when no record of those ticks proposed a write."""
    recs = [r for r in records_before(args, upto, THREAT_TICKS) if r.actions]
    if not recs:
        return None
    fired = [(r.tick, t) for r in reversed(recs) for t in dict.fromkeys(t for a in r.actions for t in a.threats)]
    if not fired:
        return f"  threats:    none fired on the writes of the last {THREAT_TICKS} ticks"
    return f"  threats:    {len(fired)} on the writes of the last {THREAT_TICKS} ticks" + "".join(
        f"\n    - tick {tick}: {t}" for tick, t in fired[:3])


def pheromones_line(args: Namespace, clade: str, upto: int) -> str:
    """The clade's pheromone field as the last tick read it (peers' threat on this golem's entities, the term it added)
    and what that tick laid (docs/how-to/clade.md)."""
    recs = records_before(args, upto, 1)
    head = f"  clade:      {clade}"
    if not recs or recs[-1].observation.pheromones is None:
        return head + " (no tick has read the pheromone field yet)"
    rec, read = recs[-1], recs[-1].observation.pheromones
    if read.error:
        return head + f"; tick {rec.tick}: {read.error}"
    strongest = sorted(read.readings, key=lambda r: -r.intensity)[:3]
    seen = ", ".join(f"{r.kind} {r.intensity:.2f} on {r.entity} by {r.depositor}" for r in strongest) or "nothing"
    term = rec.prediction_error_sources.get("pheromone_threat", 0.0)
    laid = "; ".join(rec.pheromones_laid) or "nothing"
    return head + f"; tick {rec.tick} read {seen} (prediction error +{term:.3f}); laid {laid}"


def strategy_lines(st: GolemStatus, args: Namespace) -> list[str]:
    """Each strategy under strategies/: waiting, active since, or complete (when and why); and the newest record's
    files in error (docs/how-to/strategies.md)."""
    from cli.common import data_dir
    from golem.errors import UserError
    from golem.life.cycle_store import CycleStore

    out = []
    for r in st.strategies:
        if r.status == "active":
            what = f"active since tick {r.started_tick} ({r.started_at}), {r.actions} action(s)"
        elif r.status == "complete":
            what = f"complete at tick {r.completed_tick} ({r.completed_at}): {r.completion}"
        else:
            what = "waiting" + (f" (last run from tick {r.started_tick})" if r.started_tick is not None else "")
        out.append(f"  strategy:   {r.id}: {what}")
    try:
        store = CycleStore(data_dir(args))
        rows = store.recent(1)
        rec = store.load(rows[0]["tick"]) if rows else None
    except (OSError, LookupError, ValueError, UserError):
        rec = None
    if rec is not None and rec.strategies is not None:
        out += [f"  STRATEGY FILE ERROR (left out, the others run): {e}" for e in rec.strategies.errors]
    return out


def viability_lines(data: Path, home: str) -> list[str]:
    """The last delta cycle's judgement of the strategy by experience: RESTRICTED while a critical finding binds,
    else its warnings, until the owner acknowledges them (docs/how-to/strategies.md#unviable-from-experience)."""
    from golem.inference.strategies import read_bundle
    from golem.layout import DataLayout
    from golem.models.config_version import strategy_sha256
    from golem.safety.experience import ViabilityStore

    try:
        state = ViabilityStore(DataLayout(data).viability).load()
        sha = strategy_sha256(read_bundle(Path(home)))
    except (OSError, ValueError) as err:
        return [f"  viability:  unreadable ({err})"]
    a = state.assessment
    if a is None or sha != state.strategy_sha or not a.findings:
        return []
    binding = {f.kind for f in state.binding(sha)}
    head = (f"  RESTRICTED: strategy unviable from experience (delta cycle at tick {a.tick}); nothing that opens "
            "exposure runs, no paid model — `golem strategy-check --ack` accepts it" if binding
            else f"  viability:  findings at tick {a.tick}" + (" (acknowledged)" if all(
                f.kind in state.acknowledged for f in a.findings) else " — `golem strategy-check --ack`"))
    return [head, *(f"    - {'' if f.kind in binding or f.kind not in state.acknowledged else 'acknowledged '}"
                    f"{f}" for f in a.findings)]


def attribution_line(args: Namespace, window_ticks: int, upto: int) -> str | None:
    """The return of the last delta window (and the last tick) split into market, strategy, knowledge and noise,
    with the loop that should answer a loss (golem.safety.attribution); None without two records to read."""
    from golem.safety.attribution import PERSISTENT_WINDOWS, window_report

    records = records_before(args, upto, PERSISTENT_WINDOWS * window_ticks + 1)
    w = window_report(records, window_ticks)
    if w is None:
        return None

    def parts(a: dict[str, Any]) -> str:
        return (f"market {a['market_beta']:+.2f}  strategy {a['strategy_alpha']:+.2f}  "
                f"knowledge {a['knowledge_alpha']:+.2f}  noise {a['noise']:+.2f}  = {a['total']:+.2f} $")

    last = records[-1].attribution
    line = f"  return:     last {w['intervals']} ticks: {parts(w)}"
    if w["responsible_loop"]:
        line += f"\n              answered by {w['responsible_loop']}"
    if last is not None:
        line += f"\n              tick {records[-1].tick}: {parts(last)}"
    return line


def learning_line(args: Namespace) -> str | None:
    """The learning changes judged in matched regimes (docs/design/learning.md#regime-matched-evaluation): how many
    were rolled back, kept, still waiting, the last rollback and why, and the last shift of the outcomes; None
    before any change was recorded."""
    from cli.common import data_dir
    from golem.errors import UserError
    from golem.layout import DataLayout
    from golem.learning.ledger import LearningLedger

    try:
        path = DataLayout.of(data_dir(args)).learning
        if not path.exists():
            return None
        ledger = LearningLedger(path)
        changes, points = ledger.changes(), ledger.change_points()
    except (OSError, ValueError, UserError, sqlite3.Error):
        return None
    if not changes and not points:
        return None
    n = Counter(c.status for c in changes)
    line = (f"  learning:   {len(changes)} changes: {n['rolled_back']} rolled back, {n['improved']} improved, "
            f"{n['inconclusive']} inconclusive, {n['pending']} waiting"
            + (f", {n['harmful']} harmful (rollback off)" if n["harmful"] else ""))
    back = [c for c in changes if c.status == "rolled_back"]
    if back:
        last = max(back, key=lambda c: (c.judged_tick or 0, c.id))
        line += f"\n              rolled back at tick {last.judged_tick}: {last.kind} {last.ref} ({last.op}) — {last.reason}"
    if points:
        p = points[-1]
        line += f"\n              outcomes shifted {p['direction']} at tick {p['tick']} (CUSUM {p['statistic']:.1f}): windows restart there"
    return line


def spend_line(st: GolemStatus) -> str:
    """Today's inference and gas spend, each beside its budget (the gas partition's emergency slice too)."""
    day = f" ({st.spend_day} UTC)" if st.spend_day else ""
    return (f"  today{day}: inference ${st.daily_spend_usd:.4f} of ${st.max_daily_cost_usd:.2f}   "
            f"gas ${st.daily_gas_usd:.4f} of ${st.gas_budget_usd_per_day:.2f} "
            f"(${st.gas_emergency_usd:.2f} of it ring-fenced for urgent actions)"
            + ceiling_line(st))


def ceiling_line(st: GolemStatus) -> str:
    """Urgency buys gas: what one urgent action and a critical day may pay, and gas per unit of HF restored."""
    if not getattr(st, "gas_ceiling_per_action_usd", 0.0):
        return ""
    per_hf = "n/a" if st.gas_per_hf_restored is None else f"${st.gas_per_hf_restored:.2f}"
    return (f"\n  gas ceilings: urgent or critical ≤ ${st.gas_ceiling_per_action_usd:.2f} and "
            f"{st.gas_ceiling_share_of_protected:.1%} of the value protected per action; critical ≤ "
            f"${st.gas_ceiling_per_day_usd:.2f}/day   gas per 1.0 HF restored {per_hf} "
            f"({st.hf_restored_total:.3f} restored)")


def cmd_status(args: Namespace) -> int:
    return arun(_status(args))


def register(command: Command) -> None:
    s = command("status", "the running golem, from a workflow query")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_status)
