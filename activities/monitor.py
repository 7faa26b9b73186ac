"""The heartbeat-monitor's activities: read a golem's recorded vitals; deliver a batch of alerts. MonitorActivities
serve one golem's monitor; HostMonitorActivities a fleet host's, over every golem placed there (docs/design/fleet.md)."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities import ActivitySet
from golem.events.models import GolemEvent, make_event
from golem.events.store import EventStore
from golem.fleet import FleetRegistry
from golem.life.vitals import (AlertBatch, HostVitals, HostVitalsInput, ProbeAlert, TickFact, VitalsInput,
                               evaluate_vitals)
from golem.models.config import GolemConfig, load_config
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


def read_vitals(store: EventStore, golem_id: str, now: str, theta_seconds: float,
                serving_since: str) -> list[ProbeAlert]:
    """The golem's vitals past their thresholds, from its Event Fabric (its ticks, PLAYBOOK revisions, pauses)."""
    playbook = store.read(kinds=["grimoire.playbook_revised"], limit=1, newest=True)
    control = store.read(kinds=["control.paused", "control.resumed"], limit=1, newest=True)
    paused = control[0].payload.get("note", "paused") if control and control[0].kind == "control.paused" else None
    alerts = evaluate_vitals(tick_facts(store), now, theta_seconds, playbook[0].tick if playbook else None,
                             paused=paused, serving_since=serving_since)
    # "LOG all metric readings for audit trail"
    log.info("vitals of %s at %s: %s", golem_id, now,
             "; ".join(f"{a.vital}={a.value} (threshold {a.threshold})" for a in alerts) or "all within thresholds")
    return alerts


def alert_events(batch: AlertBatch) -> list[GolemEvent]:
    """The batch's alerts as Event Fabric events, keyed by batch and vital (a retried delivery stores nothing twice)."""
    now = datetime.now(timezone.utc).isoformat()
    return [make_event(batch.golem_id, a.tick, now, "alerts.probe", f"{batch.batch_id}:{a.vital}",
                       batch_id=batch.batch_id, vital=a.vital, severity=a.severity, value=a.value,
                       threshold=a.threshold, detail=a.detail, window_start=batch.window_start,
                       window_end=batch.window_end)
            for a in batch.alerts]


def post_batch(url: str, batch: AlertBatch) -> None:
    """The whole batch to the owner's webhook; the body names the golem and carries the batch id to deduplicate on."""
    if url:
        resp = httpx.post(url, json=batch.model_dump(mode="json"), timeout=5.0)
        resp.raise_for_status()  # a failing receiver: Temporal retries the delivery


class MonitorActivities(ActivitySet):
    def __init__(self, services: Services) -> None:
        self.s = services
        # the stall clock starts here at the earliest: the stack's downtime before this worker is no stall
        self.serving_since = datetime.now(timezone.utc).isoformat()

    @activity.defn(name="check_vitals")
    def check_vitals(self, inp: VitalsInput) -> list[ProbeAlert]:
        return read_vitals(self.s.events.store, inp.golem_id, inp.now, inp.theta_seconds, self.serving_since)

    @activity.defn(name="deliver_alerts")
    def deliver_alerts(self, batch: AlertBatch) -> int:
        """Each alert onto the Event Fabric (the dashboard, `golem alerts`, the golem's next observe), then the
        whole batch to [alerts] webhook_url when set. Idempotent by batch id: a retry stores nothing twice and the
        webhook body carries the batch id for the receiver to deduplicate."""
        self.s.events.emit(alert_events(batch))
        post_batch(self.s.config.alerts.webhook_url, batch)
        return len(batch.alerts)


class HostMonitorActivities(ActivitySet):
    """A fleet host's monitor: the golems placed on `host` in the registry's data dir, read from their own data dirs
    (no golem's services are opened for it)."""

    def __init__(self, registry: FleetRegistry, host: str) -> None:
        self.registry, self.host = registry, host
        self.serving_since = datetime.now(timezone.utc).isoformat()

    def _config(self, golem_id: str) -> GolemConfig:
        return load_config(self.registry.home(golem_id) / "golem.toml")

    @activity.defn(name="check_host_vitals")
    def check_host_vitals(self, inp: HostVitalsInput) -> HostVitals:
        if inp.host != self.host:
            raise ApplicationError(f"host monitor of {inp.host} reached the worker of host {self.host}",
                                   type="BadInput", non_retryable=True)
        out = HostVitals()
        for placed in self.registry.all(self.host):
            if not placed.running:
                continue
            gid = placed.golem_id
            out.watched.append(gid)
            layout = self.registry.layout(gid)
            if not layout.events.exists():  # placed, no tick yet
                continue
            try:
                alerts = read_vitals(EventStore(layout), gid, inp.now, self._config(gid).clock.theta_base_seconds,
                                     self.serving_since)
            except Exception as err:  # one golem's unreadable data or config does not blind the monitor to the rest
                out.unreadable[gid] = f"{type(err).__name__}: {str(err)[:200]}"
                continue
            if alerts:
                out.alerts[gid] = alerts
        return out

    @activity.defn(name="deliver_host_alerts")
    def deliver_host_alerts(self, batch: AlertBatch) -> int:
        """One golem's batch onto its own Event Fabric, then to its [alerts] webhook_url: as a lone golem's monitor
        delivers, the golem named in the batch."""
        layout = self.registry.layout(batch.golem_id)
        EventStore(layout).append(alert_events(batch))
        post_batch(self._config(batch.golem_id).alerts.webhook_url, batch)
        return len(batch.alerts)
