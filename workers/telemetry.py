"""OpenTelemetry tracing for workflows and activities: Temporal's TracingInterceptor links each tick's workflow
and activity spans in one trace. Exported over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, otherwise as JSON lines in $GOLEM_DATA/traces.jsonl."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from temporalio.contrib.opentelemetry import TracingInterceptor

_installed: TracerProvider | None = None
OTLP_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def span_exporter(data_dir: Path, env: Mapping[str, str] | None = None) -> SpanExporter:
    """OTLP/HTTP when an endpoint is configured (the exporter reads the standard OTEL_* variables itself),
    traces.jsonl otherwise."""
    env = os.environ if env is None else env
    if any(env.get(k) for k in OTLP_ENV):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
        return OTLPSpanExporter(endpoint=endpoint)
    out = (Path(data_dir) / "traces.jsonl").open("a", buffering=1)
    return ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\n")


def tracer_provider(data_dir: Path, golem_id: str, env: Mapping[str, str] | None = None) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "golem", "golem.id": golem_id}))
    provider.add_span_processor(BatchSpanProcessor(span_exporter(data_dir, env)))
    return provider


def tracing_interceptor(data_dir: Path, golem_id: str) -> TracingInterceptor:
    """Spans for every workflow and activity, installed once per process as the global tracer provider."""
    global _installed
    if _installed is None:
        _installed = tracer_provider(data_dir, golem_id)
        trace.set_tracer_provider(_installed)
    return TracingInterceptor(trace.get_tracer("golem"), always_create_workflow_spans=True)


def shutdown_tracing() -> None:
    if _installed is not None:
        _installed.shutdown()
