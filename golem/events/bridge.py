"""The ui-bridge: what happened, as GolemEvents, translated from what the tick produced.

Every field of the record maps to a typed event with no logic of its own, so a tick's events come from its
observation (at observe) and its record (at reflect); pure functions, no I/O. See docs/design/events.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from golem.events.models import GolemEvent, make_event
from golem.models.approvals import PrivilegedRequest
from golem.models.observation import Observation, ProbeResult
from golem.models.record import DecisionCycleRecord
from golem.models.threats import detector_of
from golem.safety.risk import net_value_usd

if TYPE_CHECKING:
    from golem.events.quality import ExternalTrend
    from golem.events.store import EventStore
    from golem.models.golem import ConsolidationResult, ControlState, DreamResult
    from golem.models.interventions import Steer
    from golem.models.tick import TickContext

_ACTION_KIND = {
    "executed": "actions.executed",
    "blocked": "actions.blocked",
    "deferred": "actions.deferred",
    "failed": "actions.failed",
    "cancelled": "actions.failed",
}


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def vitals(observation: Observation) -> dict[str, Any]:
    """Prices, health factor and equity of one observation (the dashboard's and the metrics' numbers)."""
    snap = observation.snapshot
    hfs = [p.health_factor for p in snap.positions if p.health_factor is not None]
    return {
        "block": snap.block_number,
        "pool_price": round(snap.pool.price, 6),
        "oracle_price": round(snap.oracle_price, 6),
        "health_factor": round(min(hfs), 6) if hfs else None,
        "equity_usd": round(net_value_usd(snap), 4),
        "usdc": snap.balances.get("USDC"),
    }


def tick_started(golem: str, tick: int, time: str, observation: Observation, pending_steers: Iterable[Steer] = (),
                 run_label: str = "") -> list[GolemEvent]:
    """The observe step's events: the tick started, the steers the tick carries, reorgs it found."""
    # The steers were accepted before this tick took them: one "accepted" per steer, whichever tick first carries it.
    out = [make_event(golem, None, time, "interventions.steer_accepted", steer.id, steer_id=steer.id,
                      message=steer.message, severity=steer.severity.value, first_tick=tick) for steer in pending_steers]
    out.append(make_event(golem, tick, time, "heartbeat.tick_started", run_label, regime=observation.regime.value,
                          run=run_label, **vitals(observation)))
    for reorged in observation.reorged_ticks:
        out.append(make_event(golem, tick, time, "actions.reorged", str(reorged), reorged_tick=reorged))
    for liq in observation.liquidations:
        out.append(make_event(golem, tick, time, "alerts.raised", f"liquidation:{_short(str(liq))}",
                              alert="liquidation", detail=liq.model_dump(mode="json")))
    if observation.force_t2_reason:
        out.append(make_event(golem, tick, time, "alerts.raised", "force-t2", alert="forced_t2",
                              detail=observation.force_t2_reason))
    return out


def execution_event(golem: str, tick: int, time: str, stage: str, action_index: int, tool: str, *, key: str = "",
                    **payload: Any) -> GolemEvent:
    """A write as it happens in the execute step (the ui-bridge's tool_execution_* members): `stage` is sending,
    tx or landed; the record's actions.* events follow at the end of the tick."""
    return make_event(golem, tick, time, f"actions.{stage}", f"{action_index}" + (f":{key}" if key else ""),
                      index=action_index, tool=tool, **payload)


def record_events(record: DecisionCycleRecord, time: str, *, previous_phase: str | None = None,
                  budgets: dict[str, float] | None = None, spend_today: dict[str, float] | None = None,
                  ) -> list[GolemEvent]:
    """The reflect step's events, in the order things happened in the tick."""
    g, t, run = record.golem_id, record.tick, record.run_label

    def ev(kind: str, key: str = "", tick: int | None = t, **payload: Any) -> GolemEvent:
        return make_event(g, tick, time, kind, f"{run}:{key}" if run else key, **payload)

    out = [ev("heartbeat.gated", tier=record.tier.value, prediction_error=round(record.prediction_error, 6),
              threshold=round(record.deliberation_threshold, 6), reason=record.gating_reason)]
    considered = set(record.deliberation.steers_considered) if record.deliberation else set()
    for iv in record.active_interventions:
        if iv.kind == "steer" and (iv.id in considered or record.deliberation is not None):
            out.append(ev("interventions.steer_applied", iv.id, steer_id=iv.id, message=iv.message,
                          severity=iv.severity, source=iv.source, tier=record.tier.value))
        elif iv.kind == "follow_up":
            out.append(ev("interventions.followup_delivered", iv.id, followup_id=iv.id, window=iv.window,
                          message=iv.message))
    for rej in record.rejected_interventions:
        out.append(ev("interventions.steer_rejected", _short(rej.received_at + rej.payload_excerpt), tick=None,
                      what=rej.kind, reason=rej.reason, excerpt=rej.payload_excerpt, received_at=rej.received_at))
    if record.deliberation is not None:
        for i, read in enumerate(record.deliberation.reads):
            out.append(ev("actions.read", f"r{i}", index=i, round=read.round, tool=read.tool_name,
                          arguments=read.arguments, error=read.error, ms=read.ms))
        for i, call in enumerate(record.deliberation.tool_calls):
            out.append(ev("actions.proposed", str(i), index=i, tool=call.tool_name, arguments=call.arguments,
                          model=record.deliberation.model))
    for a in record.actions:
        kind = _ACTION_KIND.get(a.status.value)
        if kind is None:  # already sent by another run of this tick: that run's events tell it
            continue
        out.append(ev(kind, str(a.action_index), index=a.action_index, tool=a.tool_name, status=a.status.value,
                      reason=a.block_reason, tx_hash=a.tx_hash, block=a.block_number, gas_usd=a.gas_cost,
                      protective=a.protective))
    seen_threats: set[str] = set()  # a market-wide threat rides on every action of the tick: one event each
    for a in record.actions:
        for threat in a.threats:
            if threat in seen_threats:
                continue
            seen_threats.add(threat)
            detector = detector_of(threat)
            out.append(ev("safety.threat", _short(threat), detector=detector, detail=threat, index=a.action_index))
            if detector == "flash_loan":  # a suspect observation is the owner's business too
                out.append(ev("alerts.raised", f"threat:{_short(threat)}", alert="flash_loan", detail=threat))
    if record.strategies is not None:  # docs/design/strategies.md
        for se in record.strategies.events:
            out.append(ev(f"strategies.{se.kind}", f"{se.strategy}:{se.kind}", strategy=se.strategy, why=se.why))
        for i, err in enumerate(record.strategies.errors):
            out.append(ev("strategies.error", f"err{i}", error=err))
    if record.outcome is not None:
        o = record.outcome
        out.append(ev("actions.verified", verified=o.verified, violations=o.invariant_violations,
                      deviations_bps=o.deviations_bps, pnl_impact=o.pnl_impact))
        if o.invariant_violations:
            out.append(ev("safety.incident", violations=o.invariant_violations))
    for st in record.self_steers:
        out.append(ev("interventions.self_steer", st.id, steer_id=st.id, source=st.source,
                      severity=st.severity.value, message=st.message))
    if record.total_cost > 0:
        figures: dict[str, Any] = {**(spend_today or {}), **(budgets or {})}  # payload keys, never ev's own
        out.append(ev("budget.spend", inference_usd=record.inference_cost, gas_usd=record.gas_cost,
                      total_usd=record.total_cost, **figures))
    if previous_phase and previous_phase != record.phase.value:
        out.append(ev("mortality.phase_changed", previous=previous_phase, phase=record.phase.value,
                      vitality=record.vitality.composite))
    for err in record.errors:
        out.append(ev("alerts.raised", _short(err), alert="step_error", detail=err))
    out.append(ev("heartbeat.tick_finished", **tick_summary(record, budgets, spend_today)))
    return out


def tick_summary(record: DecisionCycleRecord, budgets: dict[str, float] | None = None,
                 spend_today: dict[str, float] | None = None) -> dict[str, Any]:
    """The tick in one payload: what a timeline row, a chart point and the metrics need."""
    return {
        "tier": record.tier.value,
        "regime": record.regime.value,
        "phase": record.phase.value,
        "vitality": round(record.vitality.composite, 6),
        "prediction_error": round(record.prediction_error, 6),
        "threshold": round(record.deliberation_threshold, 6),
        **vitals(record.observation),
        "actions": len(record.actions),
        "retrieved": len(record.retrieved_entries),
        "executed": sum(1 for a in record.actions if a.status.value == "executed"),
        "inference_usd": record.inference_cost,
        "gas_usd": record.gas_cost,
        "input_tokens": record.deliberation.input_tokens if record.deliberation else 0,
        "output_tokens": record.deliberation.output_tokens if record.deliberation else 0,
        "model": record.deliberation.model if record.deliberation else None,
        "fsm": record.fsm_trace,
        "step_ms": {s.step: s.ms for s in record.step_timings},
        "workflow_id": record.workflow_id,
        "run_id": record.run_id,
        "run": record.run_label,
        "errors": record.errors,
        "decision": record.deliberation.decision if record.deliberation else "",
        **(spend_today or {}),
        **(budgets or {}),
    }


def failure_event(golem: str, tick: int, time: str, error: str, workflow_id: str, run_label: str = "") -> GolemEvent:
    return make_event(golem, tick, time, "heartbeat.tick_failed", run_label, error=error, workflow_id=workflow_id,
                      run=run_label)


def tick_context(ctx: TickContext, record: DecisionCycleRecord) -> dict[str, Any]:
    """From the tick's context: the phase before the tick, today's spend after it, and the budgets."""
    from golem.life.lifespan import lived_after
    from golem.safety.gas import spend_status

    status = spend_status(ctx.state, ctx.config)
    budgets: dict[str, float | str] = {k: status[k] for k in ("max_daily_cost_usd", "gas_budget_usd_per_day")
                                       if k in status}
    spend = {
        "inference_today_usd": round(float(status.get("daily_spend_usd", 0.0)) + record.inference_cost, 6),
        "gas_today_usd": round(float(status.get("daily_gas_usd", 0.0)) + record.gas_cost, 6),
    }
    # The Hayflick counter after this tick (golem.life.lifespan folds one tick lived per tick) and its limit, for the
    # heartbeat-monitor's Hayflick distance.
    limit = ctx.config.lifespan.hayflick_ticks if ctx.config is not None else None
    if limit:
        budgets["ticks_lived"] = lived_after(ctx.state.life)
        budgets["hayflick_ticks"] = limit
    return {"previous_phase": ctx.state.phase.value, "budgets": budgets, "spend_today": spend}


def consolidation_events(golem: str, time: str, result: ConsolidationResult) -> list[GolemEvent]:
    """A delta consolidation's grimoire events (ConsolidationResult)."""
    t, a, q = result.tick, result.admission, result.quarantine_review
    out: list[GolemEvent] = []
    if a.admitted or a.admitted_low:
        out.append(make_event(golem, t, time, "grimoire.admitted", "delta", admitted=a.admitted,
                              admitted_low=a.admitted_low, candidates=a.candidates, utility_source=a.utility_source))
    if a.quarantined or q.kept:
        out.append(make_event(golem, t, time, "grimoire.quarantined", "delta", quarantined=a.quarantined,
                              still_quarantined=q.kept, released=q.released))
    if a.merged:
        out.append(make_event(golem, t, time, "grimoire.superseded", "delta", merged=a.merged))
    rc = getattr(result, "reflection_consistency", None)
    if rc is not None:
        out.append(make_event(golem, t, time, "quality.reflection_consistency", "delta", **rc))
        if rc.get("alarm"):
            out.append(make_event(golem, t, time, "alerts.raised", "reflection_consistency",
                                  alert="reflection_consistency_low",
                                  detail=f"regenerated reflections agree at cosine {rc['mean']:.2f} (alarm below 0.5)"))
    regime = getattr(result, "regime_eval", None) or {}
    for j in regime.get("judged", []):
        if j.get("status") == "rolled_back":
            out.append(make_event(golem, t, time, "grimoire.change_rolled_back", j["id"], change=j["id"], change_kind=j["kind"],
                                  ref=j["ref"], op=j["op"], made_tick=j["made_tick"], reason=j["reason"]))
    for cp in regime.get("change_points", []):
        out.append(make_event(golem, t, time, "quality.outcome_change_point", str(cp), tick_of_change=cp))
    if result.playbook_revision is not None:
        out.append(make_event(golem, t, time, "grimoire.playbook_revised", str(result.playbook_revision),
                              revision=result.playbook_revision, path=result.playbook_path,
                              heuristics_derived=result.heuristics_derived))
    return out


def trend_events(golem: str, tick: int, time: str, trend: ExternalTrend | None) -> list[GolemEvent]:
    """The external metric trend at a delta cycle (golem.events.quality.ExternalTrend); an alert when the
    30-day PnL has declined DECLINING_ALARM_DAYS days in a row."""
    if trend is None:
        return []
    out = [make_event(golem, tick, time, "quality.external_trend", "delta", **trend.model_dump())]
    if trend.alarm:
        out.append(make_event(golem, tick, time, "alerts.raised", "external_trend", alert="external_trend_declining",
                              detail=f"the 30-day PnL has declined {trend.declining_days} days in a row "
                                     f"(PnL ${trend.pnl_usd:,.2f}, max drawdown {trend.max_drawdown:.1%})"))
    return out


def survival_events(golem: str, tick: int, time: str, figures: dict[str, Any] | None) -> list[GolemEvent]:
    """The heuristic survival at a delta cycle (golem.grimoire.playbook.survival.survival), with an alert when
    enough heuristics were judged and the rate is outside the alarm bounds."""
    from golem.grimoire.playbook.survival import ALARM_ABOVE, ALARM_BELOW, HORIZON_TICKS, MIN_JUDGED

    if figures is None:
        return []
    out = [make_event(golem, tick, time, "quality.heuristic_survival", "delta", horizon_ticks=HORIZON_TICKS, **figures)]
    rate = figures.get("rate")
    if rate is not None and figures.get("judged", 0) >= MIN_JUDGED and not ALARM_BELOW <= rate <= ALARM_ABOVE:
        out.append(make_event(golem, tick, time, "alerts.raised", "heuristic_survival", alert="heuristic_survival",
                              detail=f"{figures['survived']} of {figures['judged']} PLAYBOOK heuristics still in force "
                                     f"{HORIZON_TICKS} ticks after they entered ({rate:.0%}; alarm below "
                                     f"{ALARM_BELOW:.0%} or above {ALARM_ABOVE:.0%})"))
    return out


def dream_events(golem: str, time: str, result: DreamResult) -> list[GolemEvent]:
    """A finished dream cycle, with the dream yield and threat coverage when the phased cycle measured them."""
    measured = {k: v for k in ("dream_yield", "threat_coverage") if (v := getattr(result, k, None)) is not None}
    return [make_event(golem, result.tick, time, "dreams.cycle_finished", "dream", replayed=len(result.replayed),
                       heuristics_touched=result.heuristics_touched, report=result.report_path, **measured)]


CONTROL_KINDS = {"pause": "control.paused", "resume": "control.resumed", "stop_entries": "control.entries_stopped",
                 "allow_entries": "control.entries_allowed"}


def control_event(golem: str, what: str, answer: ControlState, time: str) -> GolemEvent:
    """A stop button the golem accepted (its update's answer), stored by whoever pressed it (CLI, dashboard)."""
    return make_event(golem, None, time, CONTROL_KINDS[what], _short(answer.note), paused=answer.paused,
                      entries_stopped=answer.entries_stopped, next_tick=answer.tick, note=answer.note)


def approval_event(golem: str, request: PrivilegedRequest, time: str) -> GolemEvent:
    """An owner's answer to a privileged request, or its expiry (written where it is audited)."""
    return make_event(golem, None, time, f"control.approval_{request.status.value}", request.id, id=request.id,
                      tool=request.tool, arguments=request.arguments, reason=request.reason,
                      decided_by=request.decided_by, note=request.note)


def alert_probes(store: EventStore) -> list[ProbeResult]:
    """The heartbeat-monitor's alerts stored since the previous tick started, as probe results for this tick's
    observe (the golem sees what its monitor saw)."""
    from golem.models.enums import ProbeSeverity

    previous = store.read(kinds=["heartbeat.tick_started"], limit=1, newest=True)
    after = previous[0].stored_seq() if previous else 0
    out: list[ProbeResult] = []
    for e in store.read(kinds=["alerts.probe"], after=after, limit=50):
        p = e.payload
        out.append(ProbeResult(probe=f"monitor_{p['vital']}", severity=ProbeSeverity(p.get("severity", "low")),
                               value=float(p["value"]), threshold=float(p["threshold"]), detail=p.get("detail", "")))
    return out
