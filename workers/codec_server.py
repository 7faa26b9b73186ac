"""`golem codec-server`: the Temporal codec-server protocol over the golem's payload codec, so an operator's
Web UI (or `temporal` CLI) shows encrypted histories decoded — for the one who holds the keys.

POST /decode and POST /encode take and return {"payloads": [{"metadata": {k: base64}, "data": base64}]};
CORS answers the UI's origin (Temporal UI: Settings → Codec Server → http://127.0.0.1:8234, or the dev
server's `--ui-codec-endpoint`). Bound to 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from workers.codec import EncryptionCodec

DEFAULT_PORT = 8234
DEFAULT_ORIGINS = ("http://127.0.0.1:8233", "http://localhost:8233")  # the dev server's Web UI


def codec_app(codec: EncryptionCodec, origins: Iterable[str] = DEFAULT_ORIGINS) -> web.Application:
    allowed = set(origins)

    def cors(request: web.Request, resp: web.StreamResponse) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin and (origin in allowed or "*" in allowed):
            resp.headers["Access-Control-Allow-Origin"] = origin
            resp.headers["Access-Control-Allow-Credentials"] = "true"
            resp.headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            resp.headers["Access-Control-Allow-Headers"] = "Content-Type, X-Namespace, Authorization"
            resp.headers["Vary"] = "Origin"
        return resp

    async def preflight(request: web.Request) -> web.StreamResponse:
        return cors(request, web.Response(status=200))

    def handler(direction: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                payloads = json_format.Parse(await request.text(), Payloads())
            except (json_format.ParseError, UnicodeDecodeError) as err:
                return cors(request, web.json_response({"error": f"not a Payloads JSON object: {err}"}, status=400))
            try:
                fn = codec.decode if direction == "decode" else codec.encode
                out = Payloads(payloads=await fn(list(payloads.payloads)))
            except Exception as err:  # a wrong key, a tampered payload: say which, never the key
                return cors(request, web.json_response({"error": f"{direction} failed: {type(err).__name__}: {err}"},
                                                       status=400))
            body = json.dumps(json_format.MessageToDict(out))
            return cors(request, web.Response(text=body, content_type="application/json"))

        return handle

    app = web.Application()
    for direction in ("decode", "encode"):
        app.router.add_post(f"/{direction}", handler(direction))
        app.router.add_route("OPTIONS", f"/{direction}", preflight)
    return app


async def serve_codec(codec: EncryptionCodec, port: int = DEFAULT_PORT,
                      origins: Iterable[str] = DEFAULT_ORIGINS) -> web.AppRunner:
    runner = web.AppRunner(codec_app(codec, origins), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner
