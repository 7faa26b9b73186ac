"""ProviderRouter over the real anthropic SDK, faked only at the HTTP boundary (httpx2 MockTransport)."""

from __future__ import annotations

import asyncio

import pytest

from golem.inference.config import InferenceConfig, ModelPrice
from golem.inference.router import (
    BudgetRefusal,
    InferenceRejected,
    InferenceRetryable,
    cost_usd,
    plan_route,
)
from golem.models.config import HeartbeatSection
from golem.models.enums import Tier
from tests.unit.inference_fakes import FakeMessagesAPI, decide, error, message, router

SYSTEM = [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}]
MSGS = [{"role": "user", "content": "hello"}]


async def test_routes_t1_to_haiku_and_t2_to_sonnet():
    api = FakeMessagesAPI(message([decide()], model="claude-haiku-4-5"), message([decide()]))
    r = router(api)
    c1 = await r.complete(r.plan(Tier.T1, 0.0, 500), system=SYSTEM, messages=MSGS)
    c2 = await r.complete(r.plan(Tier.T2, 0.0, 500), system=SYSTEM, messages=MSGS)
    assert [b["model"] for b in api.requests] == ["claude-haiku-4-5", "claude-sonnet-4-6"]
    assert [b["max_tokens"] for b in api.requests] == [600, 1500]
    assert (c1.model, c2.model) == ("claude-haiku-4-5", "claude-sonnet-4-6")
    assert "sk-test-not-a-key" in str(api.headers[0])  # the key went in a header, not the body
    assert "sk-test" not in str(api.requests)


async def test_cost_from_usage_with_cache_tokens():
    api = FakeMessagesAPI(message([decide()], input_tokens=400, output_tokens=250, cache_read=3000, cache_creation=1000))
    r = router(api)
    c = await r.complete(r.plan(Tier.T2, 0.0, 4000), system=SYSTEM, messages=MSGS)
    # Sonnet: $3 in, $15 out, cache write 1.25 × 3, cache read 0.1 × 3 (per MTok)
    expected = (400 * 3 + 250 * 15 + 1000 * 3.75 + 3000 * 0.3) / 1e6
    assert c.cost == pytest.approx(expected)
    assert (c.input_tokens, c.output_tokens, c.cache_read_tokens, c.cache_creation_tokens) == (400, 250, 3000, 1000)


async def test_rate_limit_is_retryable_then_succeeds():
    api = FakeMessagesAPI(error(429, "rate_limit_error", "slow down", {"retry-after": "7"}), message([decide()]))
    r = router(api)
    plan = r.plan(Tier.T2, 0.0, 500)
    with pytest.raises(InferenceRetryable) as exc:
        await r.complete(plan, system=SYSTEM, messages=MSGS)
    assert exc.value.status == 429 and exc.value.retry_after_s == 7.0 and "slow down" in exc.value.reason
    c = await r.complete(plan, system=SYSTEM, messages=MSGS)  # what the Temporal retry does
    assert c.output_tokens == 180 and len(api.requests) == 2


async def test_overload_is_retryable():
    api = FakeMessagesAPI(error(529, "overloaded_error", "Overloaded"))
    r = router(api)
    with pytest.raises(InferenceRetryable) as exc:
        await r.complete(r.plan(Tier.T1, 0.0, 100), system=SYSTEM, messages=MSGS)
    assert exc.value.status == 529


async def test_bad_request_is_not_retryable_and_says_why():
    api = FakeMessagesAPI(error(400, "invalid_request_error", "tools.0.input_schema: bad"))
    r = router(api)
    with pytest.raises(InferenceRejected) as exc:
        await r.complete(r.plan(Tier.T2, 0.0, 100), system=SYSTEM, messages=MSGS)
    assert exc.value.status == 400 and "tools.0.input_schema: bad" in exc.value.reason
    assert "sk-test" not in str(exc.value)


async def test_auth_error_names_the_fix():
    api = FakeMessagesAPI(error(401, "authentication_error", "invalid x-api-key"))
    r = router(api)
    with pytest.raises(InferenceRejected, match="api_key_env"):
        await r.complete(r.plan(Tier.T2, 0.0, 100), system=SYSTEM, messages=MSGS)


def test_budget_refuses_before_any_request():
    budget = HeartbeatSection(max_daily_cost_usd=10.0)
    cfg = InferenceConfig(provider="anthropic")
    with pytest.raises(BudgetRefusal, match="soft cap 90%\\): LLM calls suppressed"):
        plan_route(Tier.T2, 9.5, 1000, cfg, budget)  # 95 % ≥ soft cap 90 %
    with pytest.raises(BudgetRefusal, match="may cost up to"):
        plan_route(Tier.T2, 0.0, 100_000, cfg, HeartbeatSection(max_daily_cost_usd=0.05))
    assert plan_route(Tier.T1, 6.0, 1000, cfg, budget).model == "claude-haiku-4-5"


def test_opus_capped_to_sonnet_in_warning_band():
    cfg = InferenceConfig(provider="anthropic", t2_model="claude-opus-4-6")
    budget = HeartbeatSection(max_daily_cost_usd=10.0)
    assert plan_route(Tier.T2, 1.0, 1000, cfg, budget).model == "claude-opus-4-6"
    plan = plan_route(Tier.T2, 7.5, 1000, cfg, budget)
    assert plan.model == "claude-sonnet-4-6" and any("Sonnet ceiling" in n for n in plan.notes)


def test_unpriced_model_is_a_config_error():
    with pytest.raises(ValueError, match=r"inference.prices"):
        InferenceConfig(t2_model="claude-mystery-9")
    cfg = InferenceConfig(t2_model="claude-mystery-9", prices={"claude-mystery-9": ModelPrice(input=1, output=2),
                                                               "claude-haiku-4-5": ModelPrice(input=1, output=5),
                                                               "claude-sonnet-4-6": ModelPrice(input=3, output=15)})
    assert cfg.price("claude-mystery-9").write == pytest.approx(1.25)


def test_cost_is_linear_and_zero_for_no_tokens():
    p = ModelPrice(input=3, output=15)
    assert cost_usd(p, 0, 0) == 0
    assert cost_usd(p, 2_000_000, 0) == pytest.approx(2 * cost_usd(p, 1_000_000, 0))


async def test_cancel_reaches_the_http_call():
    gate = asyncio.Event()

    async def hang(body):
        await gate.wait()
        return message([decide()])

    api = FakeMessagesAPI(hang)
    r = router(api)
    task = asyncio.create_task(r.complete(r.plan(Tier.T2, 0.0, 100), system=SYSTEM, messages=MSGS))
    await asyncio.wait_for(api.started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(api.cancelled.wait(), 1)  # the in-flight request itself was cancelled


async def test_timeout_is_retryable():
    async def hang(body):
        await asyncio.sleep(30)

    api = FakeMessagesAPI(hang)
    r = router(api, timeout_seconds=0.05)
    with pytest.raises(InferenceRetryable, match="timed out|no reply"):
        await r.complete(r.plan(Tier.T1, 0.0, 100), system=SYSTEM, messages=MSGS)
