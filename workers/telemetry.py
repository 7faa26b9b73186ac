"""OpenTelemetry tracing for workflows and activities, exported as JSON lines under $GOLEM_DATA."""

from __future__ import annotations

from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from temporalio.contrib.opentelemetry import TracingInterceptor

_installed: TracerProvider | None = None


def tracing_interceptor(data_dir: Path, golem_id: str) -> TracingInterceptor:
    """Spans for every workflow and activity; one JSON object per line in traces.jsonl."""
    global _installed
    if _installed is None:
        out = (Path(data_dir) / "traces.jsonl").open("a", buffering=1)
        provider = TracerProvider(resource=Resource.create({"service.name": "golem", "golem.id": golem_id}))
        provider.add_span_processor(
            BatchSpanProcessor(ConsoleSpanExporter(out=out, formatter=lambda s: s.to_json(indent=None) + "\n"))
        )
        trace.set_tracer_provider(provider)
        _installed = provider
    return TracingInterceptor(trace.get_tracer("golem"), always_create_workflow_spans=True)


def shutdown_tracing() -> None:
    if _installed is not None:
        _installed.shutdown()
