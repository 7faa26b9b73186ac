"""The paid inference gateway for dev and tests: an Anthropic-compatible Messages endpoint that wants x402.

POST /v1/messages without a payment: 402 and a quote (list price of the model over a token estimate, in the world's
USDC, to the gateway's address, on the local chain). With PAYMENT-SIGNATURE: the x402 SDK's facilitator verifies it
in-process, the call goes upstream, and only an answered call is settled on chain (PAYMENT-RESPONSE names the tx).
A settled authorization presented again gets the stored answer, not a second charge. `golem run` starts it with
`[inference] payment = "x402"` (`python -m infra.x402_gateway`). See docs/design/payments.md.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx2

from golem.inference.config import InferenceConfig, ModelPrice
from golem.inference.router import worst_case_cost
from golem.inference.workspace import request_tokens
from golem.storage import connect, init_db

log = logging.getLogger("golem.x402_gateway")

PAYMENT_REQUIRED, PAYMENT_SIGNATURE, PAYMENT_RESPONSE = "payment-required", "payment-signature", "payment-response"
# request headers passed upstream as they came; the key is the gateway's own
_FORWARD = ("content-type", "anthropic-version", "anthropic-beta")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_STORE = """
CREATE TABLE IF NOT EXISTS settled (
    signature TEXT PRIMARY KEY,
    nonce TEXT NOT NULL,
    payer TEXT NOT NULL,
    amount INTEGER NOT NULL,
    body_sha256 TEXT NOT NULL,
    tx TEXT NOT NULL,
    status INTEGER NOT NULL,
    response TEXT NOT NULL,
    settled_at REAL NOT NULL
);
"""


@dataclass
class GatewayConfig:
    rpc_url: str
    asset: str  # the world's USDC (EIP-3009)
    pay_to: str
    facilitator_key: str = field(repr=False)  # submits transferWithAuthorization and pays its gas
    upstream_url: str
    upstream_key: str = field(default="", repr=False)  # the provider's API key: the gateway's, never the golem's
    prices: dict[str, ModelPrice] = field(default_factory=dict)
    markup: float = 1.0
    max_timeout_seconds: int = 300
    store_path: Path | None = None
    decimals: int = 6


def quote_amount(body: dict[str, Any], prices: dict[str, ModelPrice], markup: float, decimals: int = 6) -> int:
    """The price of one Messages request in base units: the worst case of the model's list price over the request's
    token estimate and its max_tokens (the golem's own pre-call bound), times the markup; at least one unit.
    ValueError naming what is missing. Pure."""
    model = body.get("model")
    if not isinstance(model, str) or model not in prices:
        raise ValueError(f"model {model!r} is not sold here (models: {', '.join(sorted(prices))})")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens <= 0:
        raise ValueError("max_tokens must be a positive integer")
    tokens = request_tokens(body.get("system") or [], body.get("messages") or [], body.get("tools") or [])
    usd = worst_case_cost(prices[model], tokens, max_tokens) * markup
    return max(1, int(math.ceil(usd * 10**decimals)))


class SettledStore:
    """Authorizations this gateway settled, with the answer it gave: the same payment presented again (the golem's
    retry) is answered from here, never charged twice."""

    def __init__(self, path: Path | None) -> None:
        self.path = init_db(path, _STORE) if path is not None else None
        self._memory: dict[str, dict[str, Any]] = {}

    def get(self, signature: str) -> dict[str, Any] | None:
        if self.path is None:
            return self._memory.get(signature)
        with closing(connect(self.path, rows=True)) as db:
            row = db.execute("SELECT * FROM settled WHERE signature = ?", (signature,)).fetchone()
        return dict(row) if row else None

    def put(self, row: dict[str, Any]) -> None:
        if self.path is None:
            self._memory[row["signature"]] = row
            return
        with closing(connect(self.path)) as db, db:
            db.execute("INSERT OR REPLACE INTO settled VALUES (:signature, :nonce, :payer, :amount, :body_sha256, :tx, "
                       ":status, :response, :settled_at)", row)

    def count(self) -> int:
        if self.path is None:
            return len(self._memory)
        with closing(connect(self.path)) as db:
            return int(db.execute("SELECT COUNT(*) FROM settled").fetchone()[0])


class Gateway:
    """The ASGI app (`await gateway(scope, receive, send)`)."""

    def __init__(self, cfg: GatewayConfig, *, upstream: httpx2.AsyncBaseTransport | None = None) -> None:
        from web3 import Web3
        from x402 import x402FacilitatorSync
        from x402.mechanisms.evm import FacilitatorWeb3Signer
        from x402.mechanisms.evm.exact import register_exact_evm_facilitator

        from golem.chain.contracts import at

        self.cfg = cfg
        w3 = Web3(Web3.HTTPProvider(cfg.rpc_url))
        self.chain_id = int(w3.eth.chain_id)
        self.network = f"eip155:{self.chain_id}"
        token = at(w3, cfg.asset, "FiatToken")  # EIP-3009 tokens (Circle's USDC) carry an EIP-712 version
        self.token_name, self.token_version = token.functions.name().call(), token.functions.version().call()
        self.signer = FacilitatorWeb3Signer(cfg.facilitator_key, cfg.rpc_url, confirmation_timeout_seconds=30)
        self.facilitator = register_exact_evm_facilitator(x402FacilitatorSync(), self.signer, networks=self.network)
        self.store = SettledStore(cfg.store_path)
        self.upstream = httpx2.AsyncClient(base_url=cfg.upstream_url, transport=upstream, timeout=120.0)
        self._lock = asyncio.Lock()  # one paid call at a time: a duplicate waits and then finds its settlement

    def requirements(self, amount: int) -> Any:
        from x402.schemas import PaymentRequirements

        return PaymentRequirements(scheme="exact", network=self.network, asset=self.cfg.asset, amount=str(amount),
                                   pay_to=self.cfg.pay_to, max_timeout_seconds=self.cfg.max_timeout_seconds,
                                   extra={"name": self.token_name, "version": self.token_version})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        status, out_headers, out = await self.handle(scope["method"], scope["path"], headers, body)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(k.encode(), v.encode()) for k, v in out_headers.items()]})
        await send({"type": "http.response.body", "body": out})

    async def handle(self, method: str, path: str, headers: dict[str, str],
                     body: bytes) -> tuple[int, dict[str, str], bytes]:
        if method == "GET" and path == "/x402/health":
            return _json(200, {"network": self.network, "asset": self.cfg.asset, "payTo": self.cfg.pay_to,
                               "settled": await asyncio.to_thread(self.store.count)})
        if method != "POST" or path != "/v1/messages":
            return _error(404, "not_found_error", f"{method} {path}: this gateway serves POST /v1/messages")
        try:
            request = json.loads(body)
            amount = quote_amount(request, self.cfg.prices, self.cfg.markup, self.cfg.decimals)
        except (ValueError, AttributeError) as err:
            return _error(400, "invalid_request_error", str(err))
        req = self.requirements(amount)
        header = headers.get(PAYMENT_SIGNATURE) or headers.get("x-payment")
        if not header:
            return self._payment_required(req, "payment required")
        async with self._lock:
            return await self._paid(req, header, headers, body)

    async def _paid(self, req: Any, header: str, headers: dict[str, str],
                    body: bytes) -> tuple[int, dict[str, str], bytes]:
        from x402.http.utils import decode_payment_signature_header, encode_payment_response_header
        from x402.schemas import PaymentPayload, SettleResponse

        try:
            payload = decode_payment_signature_header(header)
        except Exception as err:  # a malformed header, whatever the decoder raised
            return self._payment_required(req, f"unreadable payment: {err}")
        if not isinstance(payload, PaymentPayload):
            return self._payment_required(req, "x402 v1 payloads are not accepted; send v2")
        signature = str(payload.payload.get("signature") or "")
        digest = hashlib.sha256(body).hexdigest()
        done = await asyncio.to_thread(self.store.get, signature)
        if done is not None:  # paid already (the client's retry): the same answer, no second settlement
            if done["body_sha256"] != digest:
                return self._payment_required(req, "this authorization paid for another request")
            receipt = SettleResponse(success=True, transaction=done["tx"], network=self.network,
                                     payer=done["payer"], amount=str(done["amount"]))
            return (done["status"], {"content-type": "application/json",
                                     PAYMENT_RESPONSE: encode_payment_response_header(receipt)},
                    done["response"].encode())
        verdict = await asyncio.to_thread(self.facilitator.verify, payload, req)
        if not verdict.is_valid:
            log.info("x402: refused %s: %s", verdict.payer, verdict.invalid_reason)
            return self._payment_required(req, verdict.invalid_reason or "invalid payment")
        upstream = await self._forward(headers, body)
        if upstream.status_code >= 400:  # not answered: not charged
            return upstream.status_code, {"content-type": upstream.headers.get("content-type", "application/json")}, \
                upstream.content
        settled = await asyncio.to_thread(self.facilitator.settle, payload, req)
        if not settled.success:
            log.warning("x402: settlement failed for %s: %s", settled.payer, settled.error_reason)
            return self._payment_required(req, settled.error_reason or "settlement failed")
        auth = payload.payload.get("authorization") or {}
        await asyncio.to_thread(self.store.put, {
            "signature": signature, "nonce": str(auth.get("nonce")), "payer": str(settled.payer or auth.get("from")),
            "amount": int(req.amount), "body_sha256": digest, "tx": settled.transaction,
            "status": upstream.status_code, "response": upstream.text, "settled_at": time.time()})
        log.info("x402: %s paid %s units, tx %s", settled.payer, req.amount, settled.transaction)
        return upstream.status_code, {"content-type": "application/json",
                                      PAYMENT_RESPONSE: encode_payment_response_header(settled)}, upstream.content

    async def _forward(self, headers: dict[str, str], body: bytes) -> httpx2.Response:
        out = {k: v for k, v in headers.items() if k in _FORWARD}
        if self.cfg.upstream_key:
            out["x-api-key"] = self.cfg.upstream_key
        try:
            return await self.upstream.post("/v1/messages", content=body, headers=out)
        except httpx2.HTTPError as err:
            return httpx2.Response(502, json={"type": "error", "error": {
                "type": "api_error", "message": f"gateway: upstream unreachable ({type(err).__name__})"}})

    def _payment_required(self, req: Any, error: str) -> tuple[int, dict[str, str], bytes]:
        from x402.http.utils import encode_payment_required_header
        from x402.schemas import PaymentRequired, ResourceInfo

        required = PaymentRequired(error=error, accepts=[req], resource=ResourceInfo(
            url="/v1/messages", description="one Messages API call", mime_type="application/json"))
        body = required.model_dump_json(by_alias=True, exclude_none=True).encode()
        return 402, {"content-type": "application/json",
                     PAYMENT_REQUIRED: encode_payment_required_header(required)}, body


def _json(status: int, obj: Any) -> tuple[int, dict[str, str], bytes]:
    return status, {"content-type": "application/json"}, json.dumps(obj).encode()


def _error(status: int, etype: str, message: str) -> tuple[int, dict[str, str], bytes]:
    return _json(status, {"type": "error", "error": {"type": etype, "message": message}})


def gateway_config(home: Path, data_dir: Path, env: dict[str, str] | None = None) -> tuple[GatewayConfig, str, int]:
    """The gateway of this golem home on its chain: (config, host, port). On the local chain the payee and the
    facilitator are Anvil's public dev accounts 4 and 5; elsewhere GOLEM_X402_PAY_TO and GOLEM_X402_FACILITATOR_KEY
    must be set."""
    from golem.chain.contracts import Deployment
    from golem.layout import DataLayout
    from golem.models.config import load_config
    from golem.world.devchain import ANVIL_ADDRESSES, ANVIL_KEYS

    env = dict(os.environ if env is None else env)
    config = load_config(home / "golem.toml")
    inf = InferenceConfig.from_config(config)
    dep = Deployment.load(DataLayout(data_dir).deployment)
    url = urlparse(inf.gateway_url)
    cfg = GatewayConfig(
        rpc_url=config.chain.rpc_url, asset=dep.address("USDC"),
        pay_to=env.get("GOLEM_X402_PAY_TO", ANVIL_ADDRESSES[4]),
        facilitator_key=env.get("GOLEM_X402_FACILITATOR_KEY", ANVIL_KEYS[5]),
        upstream_url=inf.gateway_upstream_url, upstream_key=env.get(inf.api_key_env, ""), prices=dict(inf.prices),
        markup=inf.gateway_price_markup, store_path=DataLayout(data_dir).root / "x402_gateway.sqlite")
    return cfg, url.hostname or "127.0.0.1", url.port or 8402


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(description="The x402 paid inference gateway (dev/test).")
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cfg, host, port = gateway_config(args.home, args.data)
    gateway = Gateway(cfg)
    log.info("x402 gateway on http://%s:%d: %s on %s, pay to %s, upstream %s", host, port, cfg.asset, gateway.network,
             cfg.pay_to, cfg.upstream_url)
    uvicorn.run(gateway, host=host, port=port, log_level="warning", lifespan="on")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
