"""With the payload codec on, the stored history holds no plaintext of a tick's record or the config,
and `golem codec-server` (the Temporal codec-server protocol, with CORS for the UI) decodes it."""

from __future__ import annotations

import base64
import hashlib
import json
import os

import aiohttp
import pytest

from tests.integration.golem_rig import in_process_worker, make_rig
from workers.client import connect
from workers.codec import EncryptionCodec, parse_keys
from workers.codec_server import serve_codec

pytestmark = pytest.mark.integration

SECRETS = (b"prediction_error", b"record_path", b"rpc_url", b"cycle-", b"deliberation_threshold")


async def test_history_is_sealed_and_the_codec_server_opens_it(temporal_env, temporal_client, tmp_path, request):
    rig = make_rig(tmp_path, "codec-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8], "calm", theta=0.2)
    codec = EncryptionCodec(parse_keys(f"k1:{base64.b64encode(os.urandom(32)).decode()}"))
    address = temporal_env.client.service_client.config.target_host
    sealed_client = await connect(address, codec=codec)
    rig.start_market(interval=0.3)
    try:
        async with in_process_worker(sealed_client, rig):
            handle = await rig.start_golem(sealed_client, max_ticks=3)
            state = await handle.result()  # the sealed client reads its own results
        assert state.tick == 3
    finally:
        rig.stop()

    # What Temporal stores, read with a client that has no key: no record field, no config value in clear.
    raw = b""
    for wid in (f"golem-{rig.golem_id}", f"golem-{rig.golem_id}-tick-1"):
        history = await temporal_client.get_workflow_handle(wid).fetch_history()
        raw += b"".join(e.SerializeToString() for e in history.events)
    assert len(raw) > 1000
    leaked = [s for s in SECRETS if s in raw]
    assert not leaked, f"plaintext in the stored history: {leaked}"

    # The codec server decodes a payload from that history (the tick's result: its TickResult) for the UI.
    history = await temporal_client.get_workflow_handle(f"golem-{rig.golem_id}-tick-1").fetch_history()
    done = next(e for e in history.events if e.HasField("workflow_execution_completed_event_attributes"))
    payload = done.workflow_execution_completed_event_attributes.result.payloads[0]
    body = {"payloads": [{"metadata": {k: base64.b64encode(v).decode() for k, v in payload.metadata.items()},
                          "data": base64.b64encode(payload.data).decode()}]}
    runner = await serve_codec(codec, 0)
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as http:
            origin = {"Origin": "http://127.0.0.1:8233"}
            async with http.options(f"http://127.0.0.1:{port}/decode", headers={
                    **origin, "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type,x-namespace"}) as pre:
                assert pre.status == 200
                assert pre.headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:8233"
                assert "X-Namespace" in pre.headers["Access-Control-Allow-Headers"]
            async with http.post(f"http://127.0.0.1:{port}/decode", json=body,
                                 headers={**origin, "X-Namespace": "default"}) as r:
                assert r.status == 200, await r.text()
                assert r.headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:8233"
                out = await r.json()
            async with http.post(f"http://127.0.0.1:{port}/decode", data="not json") as bad:
                assert bad.status == 400 and "Payloads" in (await bad.json())["error"]
    finally:
        await runner.cleanup()
    decoded = base64.b64decode(out["payloads"][0]["data"])
    result = json.loads(decoded)
    assert result["tick"] == 1 and "prediction_error" in result and result["regime"]
