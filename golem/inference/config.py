"""InferenceConfig: golem.toml's [inference] section plus what the router needs (models, prices, budgets).

`InferenceSection` (golem/models/config.py) carries provider, api_key_env, t1_model, t2_model today.
Every other key here has a default and is read from the section with getattr, so once the lead adds
the keys to `InferenceSection` they flow through with no change here (see `SECTION_KEYS`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from golem.models.config import GolemConfig
from golem.models.enums import Tier


class ModelPrice(BaseModel):
    """USD per million tokens. Anthropic bills cache writes (5-minute TTL) at 1.25x input and cache
    reads at 0.1x input; `input` is the uncached part of the prompt (usage.input_tokens)."""

    model_config = {"extra": "forbid"}
    input: float = Field(ge=0.0)
    output: float = Field(ge=0.0)
    cache_write: float | None = Field(default=None, ge=0.0)  # default 1.25 x input
    cache_read: float | None = Field(default=None, ge=0.0)  # default 0.1 x input

    @property
    def write(self) -> float:
        return self.cache_write if self.cache_write is not None else self.input * 1.25

    @property
    def read(self) -> float:
        return self.cache_read if self.cache_read is not None else self.input * 0.1


# List prices (USD / MTok) of the tiers' models (docs/design/inference.md#cost); override in golem.toml.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-haiku-4-5": ModelPrice(input=1.0, output=5.0),
    "claude-sonnet-4-5": ModelPrice(input=3.0, output=15.0),
    "claude-sonnet-4-6": ModelPrice(input=3.0, output=15.0),
    "claude-opus-4-5": ModelPrice(input=5.0, output=25.0),
    "claude-opus-4-6": ModelPrice(input=5.0, output=25.0),
    "claude-opus-4-1": ModelPrice(input=15.0, output=75.0),
}

# Token allocation per workspace category (docs/design/inference.md#the-workspace; T1 gets the reduced context of
# observation, top-5 retrieved entries, positions, critical warnings — plus the invariants and
# the strategy's rules, which a decision may never be taken without). A category absent from a tier's
# map is not shown at that tier.
DEFAULT_ALLOCATIONS: dict[Tier, dict[str, int]] = {
    Tier.T2: {
        "invariants": 400,
        "strategy": 1500,
        "standing_orders": 800,
        "playbook": 1200,
        "retrieved": 1500,
        "causal": 300,
        "observation": 500,
        # ours: the Aave market's reserves and feeds and the pair make the topology ~16 facts (≈ 450 tokens
        # of ids); 300 cut the pair's line and the model could not name it
        "positions": 600,
        "affect": 120,
        "interventions": 500,
        "conversation": 600,
    },
    Tier.T1: {
        "invariants": 400,
        "strategy": 600,
        "retrieved": 600,
        "observation": 400,
        "positions": 450,
        "warnings": 200,
        "interventions": 300,
    },
}

# Keys the lead should add to InferenceSection / golem.toml [inference] (all optional, defaults here).
SECTION_KEYS = (
    "t2_ceiling_model", "evaluator_model", "prices", "max_output_tokens_t1", "max_output_tokens_t2",
    "timeout_seconds", "allocations_t1", "allocations_t2", "conversation_tail",
    "tool_rounds_t1", "tool_rounds_t2", "tool_loop_max_tokens", "offline_speculate",
    "payment", "gateway_url", "max_payment_usd", "gateway_upstream_url", "gateway_price_markup",
)


class InferenceConfig(BaseModel):
    model_config = {"extra": "forbid"}
    provider: str = Field(default="offline", pattern=r"^(offline|anthropic)$")
    api_key_env: str = "ANTHROPIC_API_KEY"
    t1_model: str = "claude-haiku-4-5"
    t2_model: str = "claude-sonnet-4-6"
    # between the warning and soft-cap thresholds T2 may only use a Sonnet-class model.
    t2_ceiling_model: str = "claude-sonnet-4-6"
    # the evaluator uses a different model from the generator when budget allows; None = the
    # other tier's model.
    evaluator_model: str | None = None
    prices: dict[str, ModelPrice] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    max_output_tokens_t1: int = Field(default=600, ge=64, le=32_000)
    max_output_tokens_t2: int = Field(default=1500, ge=64, le=32_000)
    timeout_seconds: float = Field(default=45.0, gt=0.0)
    allocations_t1: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_ALLOCATIONS[Tier.T1]))
    allocations_t2: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_ALLOCATIONS[Tier.T2]))
    conversation_tail: int = Field(default=8, ge=0, le=200)
    # the tool loop (docs/design/inference.md#the-tool-loop): rounds of reads/speculation before the decision
    # (0 = decide in one call), and a token cap over the whole loop after which the next call must decide
    tool_rounds_t1: int = Field(default=2, ge=0, le=8)
    tool_rounds_t2: int = Field(default=4, ge=0, le=8)
    tool_loop_max_tokens: int = Field(default=60_000, ge=1_000, le=1_000_000)
    # the offline deliberator speculates each swap it proposes (record only): two simulations more a swap tick
    offline_speculate: bool = False
    # x402 (docs/design/payments.md): the golem pays each call from its wallet through the gateway at gateway_url,
    # refusing a quote above max_payment_usd; the gateway forwards to gateway_upstream_url at list price × markup
    payment: str = Field(default="none", pattern=r"^(none|x402)$")
    gateway_url: str = "http://127.0.0.1:8402"
    max_payment_usd: float = Field(default=0.25, gt=0.0)
    gateway_upstream_url: str = "https://api.anthropic.com"
    gateway_price_markup: float = Field(default=1.0, ge=1.0, le=10.0)

    @model_validator(mode="after")
    def _priced(self) -> "InferenceConfig":
        for key in ("t1_model", "t2_model", "t2_ceiling_model", "evaluator_model"):
            model = getattr(self, key)
            if model is not None and model not in self.prices:
                raise ValueError(
                    f"[inference.{key}] = {model!r} has no price; add [inference.prices.\"{model}\"] "
                    "with input and output USD per million tokens"
                )
        return self

    @classmethod
    def from_config(cls, config: GolemConfig, overrides: dict[str, Any] | None = None) -> "InferenceConfig":
        """Build from golem.toml's section (any SECTION_KEYS it carries) plus explicit overrides."""
        section = config.inference
        raw: dict[str, Any] = {k: getattr(section, k) for k in ("provider", "api_key_env", "t1_model", "t2_model")}
        for key in SECTION_KEYS:
            if hasattr(section, key) and getattr(section, key) is not None:
                raw[key] = getattr(section, key)
        raw.update(overrides or {})
        if "prices" in raw:  # golem.toml prices add to (or replace) the defaults, they do not drop them
            raw["prices"] = {**DEFAULT_PRICES, **{k: ModelPrice.model_validate(v) if isinstance(v, dict) else v
                                                  for k, v in raw["prices"].items()}}
        return cls.model_validate(raw)

    def allocations(self, tier: Tier) -> dict[str, int]:
        return self.allocations_t2 if tier == Tier.T2 else self.allocations_t1

    def tool_rounds(self, tier: Tier) -> int:
        return self.tool_rounds_t2 if tier == Tier.T2 else self.tool_rounds_t1

    def max_output_tokens(self, tier: Tier) -> int:
        return self.max_output_tokens_t2 if tier == Tier.T2 else self.max_output_tokens_t1

    def price(self, model: str) -> ModelPrice:
        try:
            return self.prices[model]
        except KeyError:
            raise ValueError(f"no price for model {model!r}; add it under [inference.prices]") from None
