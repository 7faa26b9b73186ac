"""With OTEL_EXPORTER_OTLP_ENDPOINT set, the worker's spans go over OTLP/HTTP (to a local receiver here),
and a tick's workflow and activity spans are linked in one trace by Temporal's TracingInterceptor."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from temporalio.contrib.opentelemetry import TracingInterceptor

from tests.integration.golem_rig import in_process_worker, make_rig
from workers.metrics import free_port
from workers.telemetry import tracer_provider

pytestmark = pytest.mark.integration


async def test_tick_spans_reach_an_otlp_endpoint_linked_in_one_trace(temporal_client, tmp_path, request):
    spans = []

    async def collect(req: web.Request) -> web.Response:
        msg = ExportTraceServiceRequest()
        msg.ParseFromString(await req.read())
        for rs in msg.resource_spans:
            for ss in rs.scope_spans:
                spans.extend(ss.spans)
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/v1/traces", collect)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()

    rig = make_rig(tmp_path, "otlp-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8], "calm", theta=0.2)
    provider = tracer_provider(rig.data_dir, rig.golem_id, {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"})
    interceptor = TracingInterceptor(provider.get_tracer("golem"), always_create_workflow_spans=True)
    try:
        async with in_process_worker(temporal_client, rig, interceptors=[interceptor]):
            handle = await rig.start_golem(temporal_client, max_ticks=2)
            await handle.result()
        # off the event loop: the receiver answers on this loop while the exporter waits for it
        await asyncio.to_thread(provider.force_flush)
    finally:
        await asyncio.to_thread(provider.shutdown)
        rig.stop()
        await runner.cleanup()
    assert not (rig.data_dir / "traces.jsonl").exists()  # OTLP instead of the file
    names = {s.name for s in spans}
    assert "RunWorkflow:ThetaTickWorkflow" in names and "RunActivity:observe" in names, sorted(names)
    tick = next(s for s in spans if s.name == "RunWorkflow:ThetaTickWorkflow")
    same_trace = {s.name for s in spans if s.trace_id == tick.trace_id}
    assert {"RunActivity:observe", "RunActivity:reflect"} <= same_trace, sorted(same_trace)
