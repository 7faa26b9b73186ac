"""A Messages API at the HTTP boundary: the real anthropic SDK talks to an httpx2 MockTransport that
answers with API-shaped JSON. (anthropic 2.x uses the `httpx2` package; `httpx` clients are refused.)"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

import anthropic
import httpx2

from golem.inference.config import InferenceConfig
from golem.inference.router import ProviderRouter
from golem.models.config import HeartbeatSection


def message(content: list[dict[str, Any]], *, model: str = "claude-sonnet-4-6", input_tokens: int = 1200,
            output_tokens: int = 180, cache_read: int = 0, cache_creation: int = 0,
            stop_reason: str = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_creation},
    }


def tool_use(name: str, args: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{i:04d}", "name": name, "input": args}


def decide(reasoning="health factor is fine", confidence=0.8, recommends=False, i=99, **kw) -> dict[str, Any]:
    return tool_use("decide", {"reasoning_summary": reasoning, "confidence": confidence,
                               "recommends_action": recommends, **kw}, i)


def error(status: int, etype: str, msg: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(status, json={"type": "error", "error": {"type": etype, "message": msg}},
                           headers=headers or {})


Reply = dict[str, Any] | httpx2.Response | Callable[[dict[str, Any]], Any]


class FakeMessagesAPI:
    """Answers POST /v1/messages from a queue of replies; records every request body."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path == "/v1/messages", request.url
        body = json.loads(request.content)
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        self.started.set()
        if not self.replies:
            raise AssertionError("FakeMessagesAPI: more requests than replies")
        reply = self.replies.pop(0)
        if callable(reply):
            try:
                reply = await reply(body)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        if isinstance(reply, httpx2.Response):
            return reply
        return httpx2.Response(200, json=reply)

    def client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(api_key="sk-test-not-a-key", max_retries=0,
                                        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler)))


def router(api: FakeMessagesAPI, *, budget: HeartbeatSection | None = None, **cfg: Any) -> ProviderRouter:
    return ProviderRouter(api.client(), InferenceConfig(provider="anthropic", **cfg), budget or HeartbeatSection())
