"""OpenTelemetry tracing for workflows and activities, exported as JSON lines under $GOLEM_DATA."""

from __future__ import annotations

import os
import threading
from datetime import datetime, timezone
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from temporalio.contrib.opentelemetry import TracingInterceptor

_installed: TracerProvider | None = None


def _utc_day(ts: float | None = None) -> str:
    return datetime.fromtimestamp(ts if ts is not None else datetime.now(timezone.utc).timestamp(),
                                  timezone.utc).strftime("%Y-%m-%d")


class DailyTraceFile:
    """traces.jsonl holds today's spans; when the UTC day changes it moves to traces/<day>.jsonl, which
    [retention] later compacts (golem.life.retention)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / "traces.jsonl"
        self.days = Path(data_dir) / "traces"
        self._lock = threading.Lock()
        self._day = _utc_day(self.path.stat().st_mtime) if self.path.exists() else _utc_day()
        self._fh = None
        self._roll_if_new_day()

    def _roll_if_new_day(self) -> None:
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

    def write(self, text: str) -> int:
        with self._lock:
            self._roll_if_new_day()
            return self._fh.write(text)

    def flush(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.flush()


def tracing_interceptor(data_dir: Path, golem_id: str) -> TracingInterceptor:
    """Spans for every workflow and activity; one JSON object per line in traces.jsonl (today's; earlier days
    in traces/<day>.jsonl, compacted by [retention])."""
    global _installed
    if _installed is None:
        out = DailyTraceFile(Path(data_dir))
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
