"""ProviderRouter: one door to the Anthropic Messages API.

T1 → a Haiku-class model, T2 → a Sonnet/Opus-class model; the daily budget is checked in `plan`, before a request
is built, and a reply's cost is computed from its `usage`. Errors come out as InferenceRetryable (an ordinary
activity retry) or InferenceRejected (non-retryable; `reason` says what to fix); BudgetRefusal makes the LLM
deliberator fall back to the offline one. Build the SDK client with max_retries=0 so every retry is a visible
Temporal retry. Status codes and cost rules: docs/design/inference.md#cost.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from golem.extensions.hooks import fire
from golem.extensions.registry import ExtensionRegistry
from golem.inference.budget import apply_budget, budget_fraction, sonnet_ceiling
from golem.inference.config import InferenceConfig, ModelPrice
from golem.models.config import HeartbeatSection
from golem.models.enums import Tier
from golem.models.record import PaymentRecord

if TYPE_CHECKING:  # the SDK is imported where it is used: a worker on the offline deliberator never loads it,
    import anthropic  # and a restarted worker serves again seconds sooner (the chaos run's recovery time)

class InferenceRetryable(Exception):
    """A transient provider failure; retrying later can succeed. Never carries the key."""

    def __init__(self, reason: str, *, status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.status, self.retry_after_s = reason, status, retry_after_s


class InferenceRejected(Exception):
    """The provider refused the request as malformed or unauthorised; retrying the same request cannot help."""

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.status = reason, status


class BudgetRefusal(Exception):
    """The daily budget forbids this call."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PaymentRefused(BudgetRefusal):
    """x402: the golem will not (or cannot) pay this quote (golem.inference.payment); a cheaper model may fit, else
    the deliberator falls back as for any budget refusal."""


_RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}


def is_opus_class(model: str) -> bool:
    return "opus" in model.lower()


def cost_usd(price: ModelPrice, input_tokens: int, output_tokens: int, cache_read: int = 0,
             cache_creation: int = 0) -> float:
    """USD for one reply. `input_tokens` is the uncached part (Anthropic's usage.input_tokens)."""
    return (input_tokens * price.input + output_tokens * price.output + cache_creation * price.write
            + cache_read * price.read) / 1_000_000.0


def worst_case_cost(price: ModelPrice, prompt_tokens: int, max_output_tokens: int) -> float:
    """Upper bound before sending: the whole prompt written to the cache, every output token used."""
    return (prompt_tokens * max(price.input, price.write) + max_output_tokens * price.output) / 1_000_000.0


@dataclass
class RoutePlan:
    """What the router will send, decided before the request is built."""

    tier: Tier
    model: str
    max_tokens: int
    estimate_usd: float
    notes: list[str] = field(default_factory=list)
    daily_spend: float = 0.0  # today's spend before this call (what a payment for it is checked against)


@dataclass
class Completion:
    plan: RoutePlan
    message: anthropic.types.Message
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int
    cost: float
    latency_ms: float
    payments: list[PaymentRecord] = field(default_factory=list)  # x402: what this call paid (its cost)
    before_provider_request: list[str] = field(default_factory=list)  # the hook's members that ran

    @property
    def model(self) -> str:
        return self.plan.model


@dataclass(frozen=True)
class ModelChoice:
    """The model-router's part that runs before the prompt exists (before_agent_start): tier → model under
    today's spend (the soft cap and the Sonnet ceiling, docs/design/inference.md#cost). The token-based part — the
    worst-case cost of the built request against the daily cap — is `price_route`, once the prompt is built."""

    tier: Tier
    model: str
    max_tokens: int
    daily_spend: float
    notes: tuple[str, ...] = ()


def choose_model(tier: Tier, daily_spend: float, cfg: InferenceConfig, budget: HeartbeatSection, *,
                 model: str | None = None) -> ModelChoice:
    """Pick the model for `tier` under today's spend; raises BudgetRefusal when the budget forbids the call. Pure."""
    if tier == Tier.T0:
        raise BudgetRefusal("T0 ticks make no LLM call")
    allowed, note = apply_budget(tier, daily_spend, budget)
    if allowed == Tier.T0:
        raise BudgetRefusal(note or "budget: LLM calls suppressed")
    notes = [note] if note else []
    chosen = model or (cfg.t2_model if tier == Tier.T2 else cfg.t1_model)
    if tier == Tier.T2 and model is None and is_opus_class(chosen) and sonnet_ceiling(daily_spend, budget):
        notes.append(f"budget: {chosen} suppressed, using {cfg.t2_ceiling_model} (the budget's Sonnet ceiling)")
        chosen = cfg.t2_ceiling_model
    return ModelChoice(tier=tier, model=chosen, max_tokens=cfg.max_output_tokens(tier), daily_spend=daily_spend,
                       notes=tuple(notes))


def price_route(choice: ModelChoice, prompt_tokens: int, cfg: InferenceConfig, budget: HeartbeatSection) -> RoutePlan:
    """The chosen model's worst case for a `prompt_tokens` request against the daily cap; BudgetRefusal
    when it may not fit. Pure."""
    estimate = worst_case_cost(cfg.price(choice.model), prompt_tokens, choice.max_tokens)
    cap = budget.max_daily_cost_usd
    if choice.daily_spend + estimate > cap:
        raise BudgetRefusal(
            f"budget: a {choice.tier.value} call to {choice.model} may cost up to ${estimate:.4f}; daily spend "
            f"${choice.daily_spend:.4f} + that exceeds the ${cap:.2f} cap"
        )
    return RoutePlan(tier=choice.tier, model=choice.model, max_tokens=choice.max_tokens, estimate_usd=estimate,
                     notes=list(choice.notes), daily_spend=choice.daily_spend)


def plan_route(tier: Tier, daily_spend: float, prompt_tokens: int, cfg: InferenceConfig,
               budget: HeartbeatSection, *, model: str | None = None) -> RoutePlan:
    """Pick the model for `tier` under today's spend and price the request; raises BudgetRefusal when the budget forbids
    the call. Pure."""
    return price_route(choose_model(tier, daily_spend, cfg, budget, model=model), prompt_tokens, cfg, budget)


def _reason(err: anthropic.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error")
        if isinstance(inner, dict) and inner.get("message"):
            return f"{inner.get('type', 'error')}: {inner['message']}"
    return str(err.message)


def _retry_after(err: anthropic.APIStatusError) -> float | None:
    raw = err.response.headers.get("retry-after") if err.response is not None else None
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def _budget_cause(err: BaseException) -> BudgetRefusal | None:
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, BudgetRefusal):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def classify(err: Exception) -> Exception:
    """Map an SDK exception onto InferenceRetryable / InferenceRejected."""
    import anthropic

    if isinstance(err, anthropic.APITimeoutError):
        return InferenceRetryable("provider request timed out")
    if isinstance(err, anthropic.APIConnectionError):
        return InferenceRetryable(f"connection to the provider failed: {err.message}")
    if isinstance(err, anthropic.APIStatusError):
        status = err.status_code
        what = f"HTTP {status} {_reason(err)}"
        if status in _RETRYABLE_STATUS or status >= 500:
            return InferenceRetryable(what, status=status, retry_after_s=_retry_after(err))
        hint = {
            401: " — check the API key in the environment variable named by [inference.api_key_env]",
            402: " — the endpoint wants payment: set [inference] payment = \"x402\" and gateway_url",
            403: " — the key may not access this model",
            404: " — check [inference] t1_model/t2_model",
            413: " — the workspace is too large; lower the [inference] allocations",
        }.get(status, "")
        return InferenceRejected(what + hint, status=status)
    return InferenceRejected(f"{type(err).__name__}: {err}")


class PaysForCalls(Protocol):
    """The x402-payment member (golem.inference.payment.X402Payer): readies the next request to be paid for."""

    def before_provider_request(self, model: str, daily_spend: float) -> Any: ...


class ProviderRouter:
    """Routes a tier to a model and sends one Messages request through the async SDK client. With a payer (and the
    registry that orders before_provider_request) each request fires the hook: x402-payment pays a 402 from the
    wallet (docs/design/payments.md)."""

    def __init__(self, client: anthropic.AsyncAnthropic, config: InferenceConfig, budget: HeartbeatSection, *,
                 payer: PaysForCalls | None = None, registry: ExtensionRegistry | None = None) -> None:
        self.client, self.config, self.budget = client, config, budget
        self.payer, self.registry = payer, registry

    def plan(self, tier: Tier, daily_spend: float, prompt_tokens: int, *, model: str | None = None) -> RoutePlan:
        return plan_route(tier, daily_spend, prompt_tokens, self.config, self.budget, model=model)

    def choose(self, tier: Tier, daily_spend: float) -> ModelChoice:
        return choose_model(tier, daily_spend, self.config, self.budget)

    def price(self, choice: ModelChoice, prompt_tokens: int) -> RoutePlan:
        return price_route(choice, prompt_tokens, self.config, self.budget)

    def budget_ok(self, tier: Tier, daily_spend: float) -> bool:
        return tier != Tier.T0 and apply_budget(tier, daily_spend, self.budget)[0] != Tier.T0

    def budget_fraction(self, daily_spend: float) -> float:
        return budget_fraction(daily_spend, self.budget)

    async def complete(
        self,
        plan: RoutePlan,
        *,
        system: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: dict[str, Any] | None = None,
    ) -> Completion:
        """Send the request. Cancelling the caller's task cancels the HTTP request (asyncio cancellation
        propagates into the SDK call); the activity that waits heartbeats at its boundary (activities/heartbeat.py),
        which is how a Temporal cancel reaches it."""
        import anthropic

        kwargs: dict[str, Any] = {"model": plan.model, "max_tokens": plan.max_tokens, "system": system,
                                  "messages": messages, "timeout": self.config.timeout_seconds}
        if tools:
            kwargs["tools"] = tools
        if tool_choice:
            kwargs["tool_choice"] = tool_choice
        call: Any = None
        fired: list[str] = []
        if self.payer is not None and self.registry is not None:
            payer = self.payer
            fired, results = fire(self.registry, "before_provider_request", {
                "x402-payment": lambda: payer.before_provider_request(plan.model, plan.daily_spend)})
            call = results[0][1] if results else None
        started = time.perf_counter()
        try:
            # The SDK enforces `timeout` per attempt; the outer bound also covers a stuck transport.
            async with asyncio.timeout(self.config.timeout_seconds + min(5.0, self.config.timeout_seconds)):
                message = await self.client.messages.create(**kwargs)
        except TimeoutError:
            raise InferenceRetryable(f"no reply from {plan.model} within {self.config.timeout_seconds:g}s") from None
        except anthropic.AnthropicError as err:
            refusal = _budget_cause(err)  # the payer refused inside the transport: the SDK wrapped it
            raise (refusal or classify(err)) from None
        latency = (time.perf_counter() - started) * 1000.0
        u = message.usage
        cache_read = u.cache_read_input_tokens or 0
        cache_creation = u.cache_creation_input_tokens or 0
        cost = cost_usd(self.config.price(plan.model), u.input_tokens, u.output_tokens, cache_read, cache_creation)
        payments = list(getattr(call, "payments", []))
        if payments:  # paid per call: what left the wallet is the cost
            cost = sum(p.price_usd for p in payments)
        return Completion(plan=plan, message=message, input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                          cache_read_tokens=cache_read, cache_creation_tokens=cache_creation, cost=cost,
                          latency_ms=round(latency, 3), payments=payments, before_provider_request=fired)


async def tool_text(router: ProviderRouter, plan: RoutePlan, system: str, context: str, tool: dict[str, Any],
                    field: str) -> tuple[str | None, float]:
    """One forced call of `tool` with `context` as the user's turn: the string the model put in its `field`
    (None when it left it out or empty) and what the call cost. Reflexion's wording and the death reflection."""
    completion = await router.complete(
        plan, system=[{"type": "text", "text": system}],
        messages=[{"role": "user", "content": [{"type": "text", "text": context}]}],
        tools=[tool], tool_choice={"type": "tool", "name": tool["name"]})
    call = next((b for b in completion.message.content if b.type == "tool_use" and b.name == tool["name"]), None)
    text = call.input.get(field) if call is not None and isinstance(call.input, dict) else None
    return (text if isinstance(text, str) and text.strip() else None), completion.cost


def make_client(api_key: str, *, http_client: Any = None, timeout_s: float = 45.0,
                base_url: str | None = None) -> anthropic.AsyncAnthropic:
    """The async client as the router wants it: no SDK-internal retries (Temporal retries instead)."""
    import anthropic

    kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": 0, "timeout": timeout_s}
    if base_url:
        kwargs["base_url"] = base_url
    if http_client is not None:
        kwargs["http_client"] = http_client
    return anthropic.AsyncAnthropic(**kwargs)
