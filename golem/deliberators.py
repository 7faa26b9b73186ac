"""Which deliberator a golem thinks with (`select_deliberator`), and the home's file-backed sources its workspace
reads (HomeContext): HEARTBEAT.md, the knowledge graph's topology, the learned token allocations, the chat
sidecar. A use case over inference, the Grimoire and learning, so it sits above them (docs/design/layers.md)."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from golem.inference.config import InferenceConfig
from golem.inference.deliberator import Deliberator
from golem.inference.llm import LLMDeliberator
from golem.inference.offline import OfflineDeliberator
from golem.inference.router import ProviderRouter, make_client
from golem.layout import DataLayout
from golem.learning.ledger import LearningLedger
from golem.models.config import GolemConfig
from golem.models.enums import Tier


class HomeContext:
    """Reads the workspace's file-backed sources: HEARTBEAT.md in the home, the chat sidecar in the data dir."""

    def __init__(self, home: Path | None, data: DataLayout | Path | None, config: GolemConfig | None = None) -> None:
        # the worker hands down its layout, a CLI or a test a path (DataLayout.of takes either); `config`: the
        # compaction of the chat's older turns reads its cage and extensions (None: the tail alone)
        self.home, self.layout = home, DataLayout.of(data) if data is not None else None
        self.config = config

    def standing_orders(self) -> str:
        p = self.home / "HEARTBEAT.md" if self.home else None
        return p.read_text() if p and p.exists() else ""

    def topology(self, block: int) -> str:
        """The knowledge graph's facts at `block`, so the model can name entities by id (empty without one)."""
        path = self.layout.semantic_db if self.layout else None
        if path is None or not path.exists():
            return ""
        from golem.grimoire.semantic.graph import KnowledgeGraph
        from golem.grimoire.semantic.topology import topology_brief

        try:
            return topology_brief(KnowledgeGraph(path), block)
        except sqlite3.Error:  # no kg_facts table yet, or locked: the workspace goes without it
            return ""

    def allocations(self, tier: Tier) -> dict[str, int] | None:
        """The cybernetics loops' learned token allocations (ContextPolicy revision > 0), else None: configured."""
        path = self.layout.learning if self.layout else None
        if path is None or not path.exists():
            return None
        policy = LearningLedger(path).context_policy({})
        return policy.allocations.get(tier.value) if policy.revision > 0 else None

    def conversation_tail(self, n: int) -> list[tuple[str, str]]:
        if self.layout is None or n <= 0:
            return []
        from golem.inference.session import SessionTree

        path = self.layout.conversation
        if self.config is None:
            return SessionTree.load(path).tail(n) if path.exists() else []
        from golem.usecases.conversation import conversation_context

        compacted, tail = conversation_context(self.layout, self.config, n)
        return ([("compaction", compacted.text())] if compacted is not None else []) + tail


@dataclass(frozen=True)
class Wallet:
    """What paying with x402 needs from the worker: the golem's key (kept in memory, never shown), its chain and
    the USDC it pays in, and where the payment journal lives."""

    private_key: str = field(repr=False)
    w3: Any
    asset: str
    journal_path: Path
    on_paid: Any = None  # (PaymentRecord, scope key) → None: the worker puts each payment on the audit trail


def select_deliberator(
    config: GolemConfig,
    env: Mapping[str, str] | None = None,
    *,
    home: Path | None = None,
    data_dir: DataLayout | Path | None = None,
    http_client: Any = None,
    inference: InferenceConfig | None = None,
    wallet: Wallet | None = None,
    transport: Any = None,
) -> tuple[Deliberator, str]:
    """(deliberator, why): the LLM deliberator when the provider is anthropic and the key is set (or, with
    `payment = "x402"`, the wallet pays the gateway), the offline deliberator otherwise. The key is read from `env`
    here and never leaves the client. `transport`: the x402 client's HTTP transport under the payer (tests)."""
    env = os.environ if env is None else env
    cfg = inference or InferenceConfig.from_config(config)
    if cfg.provider == "offline":
        return OfflineDeliberator(cfg.offline_speculate), "offline: [inference] provider = \"offline\" in golem.toml"
    if cfg.payment == "x402":
        return _paying_deliberator(config, cfg, wallet, home, data_dir, transport)
    key = env.get(cfg.api_key_env, "")
    if not key.strip():
        return OfflineDeliberator(cfg.offline_speculate), (f"offline: provider is anthropic but ${cfg.api_key_env} is not set "
                                      "(export it in the worker's environment to think with Claude)")
    router = ProviderRouter(make_client(key.strip(), http_client=http_client, timeout_s=cfg.timeout_seconds),
                            cfg, config.heartbeat)
    home = home if home is not None else Path(config.golem.home)
    return (LLMDeliberator(router, context=HomeContext(home, data_dir, config),
                           fallback=OfflineDeliberator(cfg.offline_speculate)),
            f"anthropic: T1 → {cfg.t1_model}, T2 → {cfg.t2_model} (key from ${cfg.api_key_env}); "
            "offline deliberator when the budget forbids LLM calls")


def _paying_deliberator(config: GolemConfig, cfg: InferenceConfig, wallet: Wallet | None, home: Path | None,
                        data_dir: DataLayout | Path | None, transport: Any) -> tuple[Deliberator, str]:
    """The LLM deliberator whose calls the golem's wallet pays through the gateway (golem.inference.payment)."""
    import httpx2

    from golem.extensions import registry_for
    from golem.inference.payment import PaymentJournal, X402Payer, X402Transport

    offline = OfflineDeliberator(cfg.offline_speculate)
    if wallet is None:
        return offline, (f"offline: [inference] payment = \"x402\" but the worker has no golem key to pay with "
                         f"(set ${config.chain.key_env})")
    registry = registry_for(config.extensions.disabled)
    if not registry.active("x402-payment"):
        return offline, ("offline: [inference] payment = \"x402\" but the x402-payment extension is switched off in "
                         "[extensions] disabled")
    payer = X402Payer(wallet.private_key, w3=wallet.w3, asset=wallet.asset, journal=PaymentJournal(wallet.journal_path),
                      max_payment_usd=cfg.max_payment_usd, daily_cap_usd=config.heartbeat.max_daily_cost_usd,
                      on_paid=wallet.on_paid)
    http = httpx2.AsyncClient(transport=X402Transport(payer, transport or httpx2.AsyncHTTPTransport()))
    # no API key: the wallet is the key (the gateway holds the provider's); the SDK wants some string
    client = make_client("x402-wallet-pays", http_client=http, timeout_s=cfg.timeout_seconds, base_url=cfg.gateway_url)
    router = ProviderRouter(client, cfg, config.heartbeat, payer=payer, registry=registry)
    home = home if home is not None else Path(config.golem.home)
    return (LLMDeliberator(router, context=HomeContext(home, data_dir, config), fallback=offline),
            f"anthropic via x402: T1 → {cfg.t1_model}, T2 → {cfg.t2_model}, each call paid from {payer.address} "
            f"through {cfg.gateway_url} (≤ ${cfg.max_payment_usd:g} a call); offline deliberator when a quote is "
            "refused")
