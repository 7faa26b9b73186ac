"""OpenTelemetry tracing for workflows and activities: Temporal's TracingInterceptor links each tick's workflow
and activity spans in one trace. Exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, otherwise as JSON lines in $GOLEM_DATA/traces.jsonl."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from temporalio.contrib.opentelemetry import TracingInterceptor

from golem.layout import DataLayout

_installed: TracerProvider | None = None
OTLP_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def span_exporter(data: DataLayout | Path, env: Mapping[str, str] | None = None) -> SpanExporter:
    """OTLP/HTTP when an endpoint is configured (the exporter reads the standard OTEL_* variables itself),
    traces.jsonl otherwise."""
    env = os.environ if env is None else env
    if any(env.get(k) for k in OTLP_ENV):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
        return OTLPSpanExporter(endpoint=endpoint)
    return TraceFileExporter(DailyTraceFile(data))  # today's spans; earlier days in traces/<day>.jsonl ([retention])


def tracer_provider(data: DataLayout | Path, golem_id: str, env: Mapping[str, str] | None = None,
                    host: str | None = None) -> TracerProvider:
    """Spans of one golem's worker (golem.id), or of a fleet host's (golem.host; each span's workflow id names its
    golem)."""
    who = {"golem.host": host} if host is not None else {"golem.id": golem_id}
    provider = TracerProvider(resource=Resource.create({"service.name": "golem", **who}))
    provider.add_span_processor(BatchSpanProcessor(span_exporter(data, env)))
    return provider


class TraceFileExporter(SpanExporter):
    """Each span as one JSON line in the daily trace file (what the SDK's console exporter does to a stream)."""

    def __init__(self, out: DailyTraceFile) -> None:
        self.out = out

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            self.out.write(span.to_json(indent=None) + "\n")
        self.out.flush()
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _utc_day(ts: float | None = None) -> str:
    return datetime.fromtimestamp(ts if ts is not None else datetime.now(timezone.utc).timestamp(),
                                  timezone.utc).strftime("%Y-%m-%d")


class DailyTraceFile:
    """traces.jsonl holds today's spans; when the UTC day changes it moves to traces/<day>.jsonl, which
    [retention] later compacts (golem.life.retention)."""

    def __init__(self, data: DataLayout | Path) -> None:
        layout = DataLayout.of(data)
        self.path = layout.traces
        self.days = layout.trace_days
        self._lock = threading.Lock()
        self._day = _utc_day(self.path.stat().st_mtime) if self.path.exists() else _utc_day()
        self._fh: TextIO | None = None
        self._roll_if_new_day()

    def _roll_if_new_day(self) -> TextIO:
        """Today's file, open for appending (yesterday's moved aside first)."""
        today = _utc_day()
        if today != self._day and self.path.exists():
            if self._fh is not None:
                self._fh.close()
                self._fh = None
            self.days.mkdir(parents=True, exist_ok=True)
            with open(self.days / f"{self._day}.jsonl", "a", encoding="utf-8") as out:
                out.write(self.path.read_text(encoding="utf-8"))
            os.unlink(self.path)
        self._day = today
        if self._fh is None:
            self._fh = self.path.open("a", buffering=1, encoding="utf-8")
        return self._fh

    def write(self, text: str) -> int:
        with self._lock:
            fh = self._roll_if_new_day()
            return fh.write(text)

    def flush(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.flush()


def tracing_interceptor(layout: DataLayout, golem_id: str, host: str | None = None) -> TracingInterceptor:
    """Spans for every workflow and activity, installed once per process as the global tracer provider."""
    global _installed
    if _installed is None:
        _installed = tracer_provider(layout, golem_id, host=host)
        trace.set_tracer_provider(_installed)
    return TracingInterceptor(trace.get_tracer("golem"), always_create_workflow_spans=True)


def shutdown_tracing() -> None:
    if _installed is not None:
        _installed.shutdown()
