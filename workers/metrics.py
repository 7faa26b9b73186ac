"""The worker's metrics: OpenTelemetry instruments read by a Prometheus endpoint, with the Temporal SDK's own
metrics served on the same /metrics.

Step latency comes from an activity interceptor; everything else is a listener on the worker's EventSink, counted
from the very events `golem events` shows (a retried activity's duplicates are not stored, so not counted twice) —
including the cognitive quality figures (docs/design/events.md#quality-figures). The list: docs/operations/metrics.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.request
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, generate_latest
from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from golem.events.models import GolemEvent
from workers.memory import memory_parts

if TYPE_CHECKING:
    from temporalio.runtime import Runtime

    from workers.services import GolemServices

log = logging.getLogger("golem.metrics")

DEFAULT_PORT = 9464  # OpenTelemetry's registered Prometheus exporter port
PREDICTION_ACCURACY_BPS = 50.0  # a verified action within 50 bps of the simulation counts as predicted
_STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def metrics_host() -> str:
    """GOLEM_METRICS_HOST (default 127.0.0.1): 0.0.0.0 in a container, so a Prometheus beside it can scrape."""
    return os.environ.get("GOLEM_METRICS_HOST", "").strip() or "127.0.0.1"


def metrics_port() -> int | None:
    """GOLEM_METRICS_PORT (default 9464); 0 turns the endpoint off."""
    port = int(os.environ.get("GOLEM_METRICS_PORT", DEFAULT_PORT))
    return port or None


class Instruments:
    """The instruments and their Prometheus registry: one per worker process, shared by the golems it serves (a
    fleet worker's golems tell themselves apart by the `golem` label; tests may build several in one process)."""

    def __init__(self, resource: dict[str, str], process_attrs: dict[str, str]) -> None:
        self.registry = CollectorRegistry()
        reader = PrometheusMetricReader(registry=self.registry)
        self.provider = MeterProvider(
            metric_readers=[reader], resource=Resource.create({"service.name": "golem", **resource}),
            views=[View(instrument_name="golem_step_latency",
                        aggregation=ExplicitBucketHistogramAggregation(_STEP_BUCKETS))],
        )
        m = self.provider.get_meter("golem")
        self.process_attrs = process_attrs  # the labels of the process-wide gauges (the worker's memory)
        self.step_latency = m.create_histogram("golem_step_latency", unit="s", description="activity duration by step")
        self.step_failures = m.create_counter("golem_step_failures", description="activity attempts that raised")
        self.ticks = m.create_counter("golem_ticks", description="recorded ticks by tier")
        self.ticks_failed = m.create_counter("golem_ticks_failed", description="ticks that failed")
        self.pe = m.create_gauge("golem_prediction_error", description="the last tick's prediction error")
        self.threshold = m.create_gauge("golem_deliberation_threshold", description="the last tick's adaptive threshold")
        self.tokens = m.create_counter("golem_inference_tokens", description="LLM tokens by direction")
        self.inference_usd = m.create_counter("golem_inference_usd", description="inference spend")
        self.gas_usd = m.create_counter("golem_gas_usd", description="gas spend")
        self.equity = m.create_gauge("golem_equity_usd", description="net value: wallet + collateral - debt + LP")
        self.hf = m.create_gauge("golem_health_factor", description="lowest Aave health factor of the golem's positions")
        self.vitality = m.create_gauge("golem_vitality", description="composite vitality (mortality)")
        self.price = m.create_gauge("golem_price", description="pool and oracle price of WETH")
        self.actions = m.create_counter("golem_actions", description="actions by outcome")
        self.events = m.create_counter("golem_events", description="Event Fabric events by kind")
        self.grimoire = m.create_gauge("golem_grimoire_size", description="active Grimoire entries")
        self.quality = m.create_gauge("golem_cognitive_quality", description="cognitive quality metrics (0..1)")
        self.trend = m.create_gauge("golem_external_trend", description="external metric trend over 30 days: "
                                    "pnl_usd, max_drawdown, sharpe (per tick), declining_days")
        m.create_observable_gauge("golem_worker_memory", callbacks=[self._memory], unit="By",
                                  description="the worker's memory by part: rss, lance_cache, malloc_in_use, "
                                  "malloc_free, malloc_released (workers/memory.py)")

    def _memory(self, options: CallbackOptions) -> Iterable[Observation]:
        for part, value in memory_parts().items():
            yield Observation(value, {**self.process_attrs, "part": part})

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def shutdown(self) -> None:
        self.provider.shutdown()


class GolemMetrics:
    """One golem's figures on the worker's instruments (its own Instruments when none are given), fed by its
    EventSink: the `golem` label, and the running counts behind the quality rates."""

    def __init__(self, golem_id: str, *, grimoire_size: Callable[[], int] | None = None,
                 grimoire_quality: Callable[[], float | None] | None = None,
                 instruments: Instruments | None = None) -> None:
        self.attrs = {"golem": golem_id}
        self.inst = instruments or Instruments({"golem.id": golem_id}, self.attrs)
        self._grimoire_size = grimoire_size  # read on each tick
        self._grimoire_quality = grimoire_quality  # read on each tick
        # running counts behind the quality rates
        self._n = {"candidates": 0, "admitted": 0, "escalated": 0, "retrieved": 0, "cached": 0,
                   "verified": 0, "accurate": 0}

    def read_grimoire_from(self, size: Callable[[], int] | None, quality: Callable[[], float | None] | None) -> None:
        """Read the Grimoire's size and quality from these (a fleet golem's services reopened after idling)."""
        self._grimoire_size, self._grimoire_quality = size, quality

    # ---- the event listener ---------------------------------------------------------------
    def on_event(self, e: GolemEvent) -> None:
        a, p = self.attrs, e.payload
        self.inst.events.add(1, {**a, "kind": e.kind})
        if e.kind == "heartbeat.tick_finished":
            self._tick(p)
        elif e.kind == "heartbeat.tick_failed":
            self.inst.ticks_failed.add(1, a)
        elif e.kind.startswith("actions.") and "status" in p:
            self.inst.actions.add(1, {**a, "status": p["status"]})
        elif e.kind == "actions.verified":
            self._n["verified"] += 1
            devs = [abs(v) for v in (p.get("deviations_bps") or {}).values()]
            self._n["accurate"] += int(p.get("verified", False) and all(d <= PREDICTION_ACCURACY_BPS for d in devs))
            self._rate("prediction_accuracy", "accurate", "verified")
        elif e.kind == "dreams.cycle_finished":
            for name in ("dream_yield", "threat_coverage"):
                if p.get(name) is not None:
                    self.inst.quality.set(float(p[name]), {**a, "metric": name})
        elif e.kind == "quality.reflection_consistency":
            if p.get("mean") is not None:
                self.inst.quality.set(float(p["mean"]), {**a, "metric": "reflection_consistency"})
        elif e.kind == "quality.heuristic_survival":
            if p.get("rate") is not None:
                self.inst.quality.set(float(p["rate"]), {**a, "metric": "heuristic_survival"})
        elif e.kind == "quality.external_trend":
            for name in ("pnl_usd", "max_drawdown", "sharpe", "declining_days"):
                if p.get(name) is not None:
                    self.inst.trend.set(float(p[name]), {**a, "metric": name})
        elif e.kind == "grimoire.admitted":
            self._n["candidates"] += int(p.get("candidates", 0))
            self._n["admitted"] += int(p.get("admitted", 0)) + int(p.get("admitted_low", 0))
            self._rate("admission_rate", "admitted", "candidates")

    def _tick(self, p: dict[str, Any]) -> None:
        a = self.attrs
        self.inst.ticks.add(1, {**a, "tier": p["tier"], "regime": p["regime"]})
        self.inst.pe.set(p["prediction_error"], a)
        self.inst.threshold.set(p["threshold"], a)
        self.inst.tokens.add(p.get("input_tokens", 0), {**a, "direction": "input"})
        self.inst.tokens.add(p.get("output_tokens", 0), {**a, "direction": "output"})
        self.inst.inference_usd.add(p.get("inference_usd", 0.0), a)
        self.inst.gas_usd.add(p.get("gas_usd", 0.0), a)
        self.inst.equity.set(p["equity_usd"], a)
        if p.get("health_factor") is not None:
            self.inst.hf.set(p["health_factor"], a)
        self.inst.vitality.set(p["vitality"], a)
        self.inst.price.set(p["pool_price"], {**a, "source": "pool"})
        self.inst.price.set(p["oracle_price"], {**a, "source": "oracle"})
        if p["tier"] != "T0":
            self._n["escalated"] += 1
            self._n["retrieved"] += int(p.get("retrieved", 0) > 0)
            self._n["cached"] += int(p.get("model") == "decision-cache")
            self._rate("retrieval_hit_rate", "retrieved", "escalated")
            self._rate("decision_cache_hit_rate", "cached", "escalated")
        self._read_grimoire()

    def _read_grimoire(self) -> None:
        a = self.attrs
        try:
            if self._grimoire_size is not None:
                self.inst.grimoire.set(self._grimoire_size(), a)
            quality = self._grimoire_quality() if self._grimoire_quality is not None else None
            if quality is not None:
                self.inst.quality.set(quality, {**a, "metric": "average_quality"})
        except Exception as err:  # a busy store: the next tick reads it again
            log.debug("grimoire size/quality not read: %s", err)

    def _rate(self, name: str, num: str, den: str) -> None:
        if self._n[den]:
            self.inst.quality.set(self._n[num] / self._n[den], {**self.attrs, "metric": name})

    # ---- exposition --------------------------------------------------------------------------
    def exposition(self) -> bytes:
        return self.inst.exposition()

    def shutdown(self) -> None:
        self.inst.shutdown()


class StepLatencyInterceptor(Interceptor):
    """Times every activity the worker runs (the step latency per activity), labelled by labels() — the one golem's
    on its own worker, the activity's golem (from its workflow id) on a fleet worker."""

    def __init__(self, instruments: Instruments, labels: Callable[[], dict[str, str]]) -> None:
        self.instruments, self.labels = instruments, labels

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Timed(next, self.instruments, self.labels)


class _Timed(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, instruments: Instruments,
                 labels: Callable[[], dict[str, str]]) -> None:
        super().__init__(next)
        self.instruments, self.labels = instruments, labels

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:  # the activity's own result
        step = activity.info().activity_type
        attrs = {**self.labels(), "step": step}
        t0 = time.perf_counter()
        try:
            return await self.next.execute_activity(input)
        except BaseException:
            self.instruments.step_failures.add(1, attrs)
            raise
        finally:
            self.instruments.step_latency.record(time.perf_counter() - t0, attrs)


def temporal_runtime(port: int) -> Runtime:
    """A Temporal Runtime whose core serves the SDK's own metrics (Prometheus text) on 127.0.0.1:port."""
    from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

    return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(
        bind_address=f"127.0.0.1:{port}", counters_total_suffix=True, durations_as_seconds=True)))


class MetricsServer:
    """GET /metrics on host:port (GOLEM_METRICS_HOST, default 127.0.0.1): the golem's instruments, then the Temporal
    SDK's (read from its core, which stays on 127.0.0.1)."""

    def __init__(self, metrics: Instruments | GolemMetrics, port: int, temporal_port: int | None = None,
                 host: str | None = None) -> None:
        self.metrics, self.temporal_port = metrics, temporal_port
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404, "only /metrics here")
                    return
                body = outer.metrics.exposition() + outer._temporal()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # scrapes are not worth a log line
                pass

        self.host = host or metrics_host()
        self.httpd = ThreadingHTTPServer((self.host, port), Handler)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="metrics", daemon=True)

    def _temporal(self) -> bytes:
        if not self.temporal_port:
            return b""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.temporal_port}/metrics", timeout=2) as r:
                body: bytes = r.read()  # an HTTPResponse (typeshed types urlopen's result as Any)
                return body
        except OSError as err:
            return f"# temporal SDK metrics unavailable: {err}\n".encode()

    def start(self) -> "MetricsServer":
        self._thread.start()
        log.info("metrics on http://%s:%s/metrics", self.host, self.port)
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        host, port = s.getsockname()  # an AF_INET address: (host, port)
        return int(port)


def install_metrics(services: GolemServices, port: int, temporal_port: int | None = None
                    ) -> tuple[GolemMetrics, MetricsServer | None, StepLatencyInterceptor]:
    """The worker's metrics: instruments fed by its EventSink, the step-latency interceptor, the /metrics server.
    Returns (metrics, server, interceptor)."""
    metrics = GolemMetrics(services.config.golem.id, grimoire_size=services.semantic.count,
                           grimoire_quality=services.semantic.mean_quality)
    services.events.listeners.append(metrics.on_event)
    server = serve_metrics(metrics.inst, port, temporal_port)
    return metrics, server, StepLatencyInterceptor(metrics.inst, lambda: metrics.attrs)


def serve_metrics(instruments: Instruments, port: int, temporal_port: int | None = None) -> MetricsServer | None:
    """The /metrics server, or None (and a warning saying what to change) when the port cannot be bound."""
    try:
        return MetricsServer(instruments, port, temporal_port).start()
    except OSError as err:  # telemetry never stops the golem: it ticks on without the endpoint, and says why
        log.warning("metrics endpoint off: cannot serve on 127.0.0.1:%s (%s); set GOLEM_METRICS_PORT to a free port "
                    "(0 turns it off) and restart the worker", port, err.strerror or err)
        return None


class HostMetrics:
    """A fleet worker's figures: one Instruments for the process, one GolemMetrics per golem it has opened (kept when
    its services close idle and reopen, so its counters go on), step latency labelled by the activity's golem."""

    def __init__(self, host: str) -> None:
        self.inst = Instruments({"golem.host": host}, {"host": host})
        self._golems: dict[str, GolemMetrics] = {}
        self._lock = threading.Lock()

    def attach(self, services: GolemServices) -> None:
        """Feed a golem's figures from its freshly opened services' EventSink."""
        gid = services.config.golem.id
        with self._lock:
            metrics = self._golems.setdefault(gid, GolemMetrics(gid, instruments=self.inst))
        metrics.read_grimoire_from(services.semantic.count, services.semantic.mean_quality)
        services.events.listeners.append(metrics.on_event)

    def interceptor(self) -> StepLatencyInterceptor:
        from golem.ids import golem_of

        return StepLatencyInterceptor(self.inst, lambda: {"golem": golem_of(activity.info().workflow_id or "") or "-"})

