"""GolemServices: the clients one golem's activities use, built once per worker.

Keys enter here from the worker's environment and stay here: they are never put in a payload,
a record or a log line (history is visible in the Temporal UI).
"""

from __future__ import annotations

import hashlib
import logging
import os
from typing import Any
from pathlib import Path

from eth_account import Account
from web3 import Web3

from golem.chain.contracts import Deployment
from golem.chain.executor import Executor
from golem.chain.faults import fault_point
from golem.chain.journal import TxJournal
from golem.chain.permits import PermitStore
from golem.chain.addressbook import AddressBook, resolve_book
from golem.chain.liquidations import LiquidationLog
from golem.chain.reader import read_snapshot
from golem.chain.simulate import simulate_actions, simulate_health_factor
from golem.chain.web3client import make_web3
from golem.cognition.decision_cache import DecisionCacheStore
from golem.events.store import EventSink, EventStore
from golem.grimoire.store.embeddings import make_embedder
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.episodes.writes import write_safety_incident
from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.learning.ledger import LearningLedger
from golem.grimoire.semantic.store import SemanticStore
from golem.inference.deliberator import Deliberator
from golem.inference.evaluator import Evaluation, evaluate_outcome
from golem.deliberators import Wallet, select_deliberator
from golem.inference.strategies import StrategySet, parse_set, read_bundle, unbundle
from golem.inference.strategy import Strategy, parse_strategy
from golem.layout import DataLayout
from golem.life.cycle_store import CycleStore
from golem.extensions import RegistryError, registry_for
from golem.extensions.hooks import fire
from golem.life.owner_notes import write_outcome_file
from golem.models.config import GolemConfig
from golem.models.config_version import config_version, short, strategy_sha256
from golem.models.enums import BehavioralPhase
from golem.models.observation import ChainSnapshot, LiquidationEvent, Observation
from golem.models.record import ActionRecord, DecisionCycleRecord, OutcomeRecord
from golem.models.tick import ProposedAction, SimulationResult, TickContext
from golem.safety.service import SafetyService
from golem.safety.strategy_check import StrategyValidation, validate_strategy
from workers.config_versions import save_version, stored_config, stored_strategy, version_of

log = logging.getLogger("golem.services")

LOCAL_CHAIN_ID = 31337  # the embedded Anvil sandbox: the demo runs live on it
MAX_KEPT = 32  # config versions and strategy checks kept per golem (the oldest goes first)


def load_deployment(config: GolemConfig, w3: Web3, data: DataLayout | Path, account: str | None) -> Deployment:
    """The resolved address book: the embedded world's `<data>/deployment.json`, or the book golem.toml names
    resolved against the chain now (and written to that file, where the CLI and the execute process read it)."""
    path = DataLayout.of(data).deployment
    if config.chain.address_book == "embedded":
        return Deployment.load(path)
    book = AddressBook.load(config.chain.address_book)
    dep = resolve_book(w3, book, config.chain.rpc_url, golem_account=account)
    dep.save(path)
    log.info("address book %s resolved on chain %s: %d addresses", book.name, dep.chain_id, len(dep.addresses))
    return dep


class GolemServices:
    """The worker's implementation of golem.services.Services."""

    # the session hook's grimoire member opens these (open_grimoire in __init__)
    decision_cache: DecisionCacheStore
    episodes: EpisodeStore
    semantic: SemanticStore
    heuristics: HeuristicStore
    learning: LearningLedger

    def __init__(
        self,
        config: GolemConfig,
        data: DataLayout | Path,
        *,
        private_key: str | None = None,
        live: bool | None = None,
        w3: Web3 | None = None,
    ) -> None:
        """`w3`: a fleet worker's connection pool for the RPC URL, shared by its golems (docs/design/fleet.md); a
        single-golem worker builds its own. The embedder is one per process already (embedder_by_name)."""
        self.config = config
        self.home = Path(config.golem.home)
        # One layout per golem, built by the edge that started the worker and handed to every store below.
        self.layout = layout = DataLayout.of(data)
        self.data_dir = layout.root
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.w3 = w3 if w3 is not None else make_web3(config.chain.rpc_url)
        key = private_key or os.environ.get(config.chain.key_env)
        self._signer = Account.from_key(key) if key else None
        self.deployment = load_deployment(config, self.w3, layout, self._signer.address if self._signer else None)
        account = self._signer.address if self._signer else self.deployment.golem_account
        if account is None:  # every chain read is of the golem's own position
            raise ValueError(f"no golem account: set the golem's key in ${config.chain.key_env}, or use an address "
                             f"book whose deployment names its golem_account ({layout.deployment})")
        self.account: str = account
        chain_id = self.chain_id = self.w3.eth.chain_id
        # Against an external RPC the golem dry-runs unless started live (docs/concepts/world.md).
        self.live = bool(self._signer) and (live if live is not None else (config.chain.live or chain_id == LOCAL_CHAIN_ID))

        def open_grimoire() -> None:
            # [grimoire] embedder (EmbedderUnavailable says what to install); a model switch re-embeds in full
            embedder = make_embedder(config)
            self.decision_cache = DecisionCacheStore(layout.decision_cache)  # docs/design/gate.md#decision-cache
            self.episodes = EpisodeStore(layout.episodes, embedder)
            self.semantic = SemanticStore(layout.semantic_db, layout.semantic_vectors, embedder)
            self.heuristics = HeuristicStore(layout.heuristics)
            self.learning = LearningLedger(layout.learning)  # docs/design/learning.md#credit-assignment

        # session(start) (grimoire → heartbeat): the grimoire member opens or creates the
        # stores here; heartbeat's member starts the heartbeat in GolemWorkflow.run. The registry's start-up check
        # runs here too (a violation names both sides).
        self.session, _ = fire(registry_for(config.extensions.disabled), "session", {"grimoire": open_grimoire})
        if "grimoire" not in self.session:
            raise RegistryError("session: the grimoire member did not run, so the golem has no memory stores")
        self.cycles = CycleStore(layout)
        self.permits = PermitStore(layout.permits)
        self.journal = TxJournal(layout.tx_journal)
        self.liquidation_log = LiquidationLog(layout.liquidations)
        self.safety = SafetyService(config, layout, permits=self.permits, journal=self.journal)
        # The Event Fabric: activities emit here; the worker adds its metrics as a listener.
        self.events = EventSink(EventStore(layout))
        self._strategy_checks: dict[str, StrategyValidation] = {}
        self._configs: dict[str, GolemConfig] = {}  # config version → its golem.toml, for lean tick contexts
        # The version this worker was started with (golem.toml + STRATEGY.md), kept on disk so ticks that
        # carry it resolve its STRATEGY.md even after the file is edited.
        self.config_version = save_version(layout, version_of(config))
        log.info("config version %s (golem.toml + STRATEGY.md)", short(self.config_version))
        # The LLM deliberator when [inference] provider = "anthropic" and its key is in the environment;
        # the offline deliberator otherwise.
        self.use_deliberator(*select_deliberator(
            config, os.environ, home=self.home, data_dir=layout, wallet=self.wallet(key)
        ))
        self._executor = (
            Executor(self.w3, self.deployment, self._signer, self.journal, self.permits, on_event=fault_point)
            if self._signer else None
        )
        log.info("golem %s services ready: account %s, live=%s", config.golem.id, self.account, self.live)

    def wallet(self, key: str | None) -> Wallet | None:
        """What x402 payments need (golem.deliberators.Wallet): None without a key or a USDC in the address book."""
        if not key or not self.deployment.has("USDC"):
            return None
        golem_id = self.config.golem.id

        def audited(record: Any, scope: str | None) -> None:  # the signature and the key never go on the trail
            self.safety.audit.append(golem_id, "x402.payment", {**record.model_dump(mode="json"), "scope": scope})

        return Wallet(private_key=key, w3=self.w3, asset=self.deployment.address("USDC"),
                      journal_path=self.layout.root / "x402_payments.sqlite", on_paid=audited)

    def use_deliberator(self, deliberator: Deliberator, reason: str) -> None:
        """The deliberator and its LLM router (when Claude is configured; the evaluator, Reflexion's wording and
        future-utility scoring use the router too), None with the offline deliberator."""
        self.deliberator, self.deliberator_reason = deliberator, reason
        self.router = getattr(deliberator, "router", None)
        log.info("deliberator: %s", reason)

    # ---- paths ----------------------------------------------------------------------------
    @property
    def strategy_path(self) -> Path:
        return self.home / "STRATEGY.md"

    @property
    def playbook_path(self) -> Path:
        return self.layout.playbook

    def strategy_text(self) -> str:
        """STRATEGY.md and the files under strategies/, as one text (golem.inference.strategies.bundle)."""
        if not self.strategy_path.exists():
            raise ValueError(f"{self.strategy_path}: not found. Create it (see examples/golem-home/STRATEGY.md).")
        return read_bundle(self.home)

    def strategy_text_for(self, ctx: TickContext | None) -> str:
        """STRATEGY.md of the config version the tick runs on: from `<data>/config-versions/`, or the file
        when it is that version (then kept). A tick without a version (a golem started before versions
        existed) reads the file, as before."""
        version = ctx.config_version if ctx is not None else ""
        if not version:
            return self.strategy_text()
        text = stored_strategy(self.layout, version)
        if text is not None:
            return text
        text = self.strategy_text()
        if ctx is None or ctx.config is None:  # a lean context: nothing to check the file against
            raise ValueError(f"config version {short(version)} is not on this worker's disk and the tick does not "
                             f"carry its config; apply the current files with `golem config apply`")
        if config_version(ctx.config, strategy_sha256(text)) != version:
            raise ValueError(f"config version {short(version)} is not on this worker's disk and STRATEGY.md has "
                             f"changed since; apply the current files with `golem config apply`")
        save_version(self.layout, version_of(ctx.config))
        return text

    def config_for(self, version: str) -> GolemConfig:
        """The config of a version, for a lean tick context: activity inputs name the version, the
        worker reads `<data>/config-versions/<version>.json` once and keeps it."""
        config = self._configs.get(version)
        if config is None:
            config = self.config if version == self.config_version else stored_config(self.layout, version)
            if config is None:
                raise ValueError(f"config version {short(version)} is not on this worker's disk "
                                 f"({self.layout.config_versions}); apply the current files with "
                                 f"`golem config apply`")
            if len(self._configs) >= MAX_KEPT:  # bounded: a fleet worker keeps many golems' services
                self._configs.pop(next(iter(self._configs)))
            self._configs[version] = config
        return config

    def load_strategy(self, ctx: TickContext | None = None) -> Strategy:
        """STRATEGY.md of the tick's config version, read on every decision."""
        return parse_strategy(unbundle(self.strategy_text_for(ctx))[0])

    def load_strategies(self, ctx: TickContext | None = None) -> StrategySet:
        """Every strategy file of the tick's config version, each parsed on its own (a bad one is an error beside
        the others, never a stop)."""
        return parse_set(self.strategy_text_for(ctx))

    def strategy_viability(self, observation: Observation, phase: BehavioralPhase,
                           ctx: TickContext | None = None) -> StrategyValidation:
        """The strategy validation pipeline (schema, consistency, range, risk, dry-run), once per version of the
        file and of the limits (the tick's config version's, not the worker's file)."""
        text = unbundle(self.strategy_text_for(ctx))[0]  # STRATEGY.md: the other files are checked by strategy-check
        limits = self.safety.limits_for(ctx.config if ctx is not None else None)
        key = f"{hashlib.sha256(text.encode()).hexdigest()}:{limits.policy_hash()}:{phase.value}"
        if key not in self._strategy_checks:
            if len(self._strategy_checks) >= MAX_KEPT:  # bounded, as _configs
                self._strategy_checks.pop(next(iter(self._strategy_checks)))
            self._strategy_checks[key] = validate_strategy(
                text, limits, observation=observation, simulate=self.simulate,
                phase=phase,
            )
        return self._strategy_checks[key]

    def playbook_text(self) -> str:
        return self.playbook_path.read_text() if self.playbook_path.exists() else ""

    # ---- chain ----------------------------------------------------------------------------
    def read_snapshot(self) -> ChainSnapshot:
        return read_snapshot(self.w3, self.deployment, self.account)

    def liquidations(self, tick: int, block: int) -> list[LiquidationEvent]:
        """Aave liquidations of the golem's position first seen by this tick (LiquidationCall logs up to `block`)."""
        return self.liquidation_log.for_tick(self.w3, self.deployment, self.account, tick, block)

    def simulate(self, actions: list[ProposedAction], observation: Observation) -> SimulationResult:
        return simulate_actions(self.w3, self.deployment, self.account, actions, observation)

    def simulate_health_factor(self, actions: list[ProposedAction], observation: Observation,
                               block: int) -> float | None:
        """Counterfactual: the health factor `actions` would have left, simulated at `block`."""
        return simulate_health_factor(self.w3, self.deployment, self.account, actions, observation, block)

    def execute(self, ctx: TickContext, action: ProposedAction, permit_id: str, observation: Observation,
                run_id: str | None = None) -> ActionRecord:
        if self._executor is None:
            raise RuntimeError("no signing key configured; cannot execute")
        return self.safety.execute(self._executor, ctx.golem_id, ctx.tick, action, permit_id, observation, run_id)

    def verify(self, ctx: TickContext, actions: list[ProposedAction], simulation: SimulationResult | None,
               records: list[ActionRecord], observation: Observation, run_label: str = "") -> OutcomeRecord:
        """OutcomeVerification (logs, invariants) kept on disk; the record carries its outcome and path."""
        config = ctx.config if ctx.config is not None else self.config_for(ctx.config_version)
        if simulation is None:  # the chain's verification compares each executed action with its simulation
            raise ValueError(f"tick {ctx.tick}: verify was given no simulation of the executed actions")
        ov = self.safety.verify(
            self.w3, self.deployment, ctx.golem_id, ctx.tick, self.account, actions, simulation, records, observation,
            # Wait for confirmations only briefly inside the tick; later ticks confirm (observe).
            timeout_s=min(5.0, config.heartbeat.step_timeout_seconds / 3), now=ctx.started_ts, config=config,
        )
        # One file per run of the tick (a reset or rerun writes beside the first run's evidence).
        path = write_outcome_file(self.layout, ctx.tick, run_label, ov.model_dump_json(indent=2))
        if ov.safety_incident:
            write_safety_incident(self.episodes, ctx, ov.safety_incident, self.chain_id)
        return ov.outcome.model_copy(update={
            "invariant_violations": [str(v) for v in ov.invariant_violations], "verification_path": str(path),
        })

    async def evaluate(self, record: DecisionCycleRecord, actions: list[ProposedAction],
                       daily_spend: float) -> Evaluation | None:
        """Judge an acted tick's outcome in a fresh context (a different model where budget allows)."""
        if record.outcome is None or record.deliberation is None:
            return None
        return await evaluate_outcome(
            record.outcome, actions, record.deliberation,
            router=self.router, daily_spend=daily_spend,
            should=[s for a in record.actions for s in a.should],  # SHOULD lines the proposals went past
        )
