"""The heartbeat-monitor's activities: read the golem's recorded vitals; deliver a batch of alerts."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import httpx
from temporalio import activity

from activities import ActivitySet
from golem.events.models import make_event
from golem.events.store import EventStore
from golem.life.vitals import AlertBatch, ProbeAlert, TickFact, VitalsInput, evaluate_vitals
from golem.services import Services

log = logging.getLogger("golem.monitor")
HISTORY = 100  # recorded ticks the vitals look back over (the longest window is the 100-tick PLAYBOOK staleness)


def tick_facts(store: EventStore, n: int = HISTORY) -> list[TickFact]:
    facts = []
    for e in store.read(kinds=["heartbeat.tick_finished", "heartbeat.tick_failed"], limit=n, newest=True):
        p = e.payload
        if e.tick is None:  # tick events always name their tick; anything else is not a tick's vitals
            continue
        if e.kind == "heartbeat.tick_failed":
            facts.append(TickFact(tick=e.tick, time=e.time, failed=True, errors=1))
        else:
            facts.append(TickFact(tick=e.tick, time=e.time, errors=len(p.get("errors") or []),
                                  gas_usd=p.get("gas_usd", 0.0), inference_usd=p.get("inference_usd", 0.0),
                                  equity_usd=p.get("equity_usd"), usdc=p.get("usdc"),
                                  ticks_lived=p.get("ticks_lived"), hayflick_ticks=p.get("hayflick_ticks")))
    return facts


class MonitorActivities(ActivitySet):
    def __init__(self, services: Services) -> None:
        self.s = services
        # the stall clock starts here at the earliest: the stack's downtime before this worker is no stall
        self.serving_since = datetime.now(timezone.utc).isoformat()

    @activity.defn(name="check_vitals")
    def check_vitals(self, inp: VitalsInput) -> list[ProbeAlert]:
        store = self.s.events.store
        playbook = store.read(kinds=["grimoire.playbook_revised"], limit=1, newest=True)
        control = store.read(kinds=["control.paused", "control.resumed"], limit=1, newest=True)
        paused = control[0].payload.get("note", "paused") if control and control[0].kind == "control.paused" else None
        alerts = evaluate_vitals(tick_facts(store), inp.now, inp.theta_seconds, playbook[0].tick if playbook else None,
                                 paused=paused, serving_since=self.serving_since)
        # "LOG all metric readings for audit trail"
        log.info("vitals of %s at %s: %s", inp.golem_id, inp.now,
                 "; ".join(f"{a.vital}={a.value} (threshold {a.threshold})" for a in alerts) or "all within thresholds")
        return alerts

    @activity.defn(name="deliver_alerts")
    def deliver_alerts(self, batch: AlertBatch) -> int:
        """Each alert onto the Event Fabric (the dashboard, `golem alerts`, the golem's next observe), then the
        whole batch to [alerts] webhook_url when set. Idempotent by batch id: a retry stores nothing twice and the
        webhook body carries the batch id for the receiver to deduplicate."""
        now = datetime.now(timezone.utc).isoformat()
        self.s.events.emit([
            make_event(batch.golem_id, a.tick, now, "alerts.probe", f"{batch.batch_id}:{a.vital}", batch_id=batch.batch_id,
                       vital=a.vital, severity=a.severity, value=a.value, threshold=a.threshold, detail=a.detail,
                       window_start=batch.window_start, window_end=batch.window_end)
            for a in batch.alerts
        ])
        url = self.s.config.alerts.webhook_url
        if url:
            resp = httpx.post(url, json=batch.model_dump(mode="json"), timeout=5.0)
            resp.raise_for_status()  # a failing receiver: Temporal retries the delivery
        return len(batch.alerts)
