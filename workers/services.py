"""GolemServices: the clients one golem's activities use, built once per worker.

Keys enter here from the worker's environment and stay here: they are never put in a payload,
a record or a log line (history is visible in the Temporal UI).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

from eth_account import Account
from temporalio import activity

from golem.chain.contracts import Deployment
from golem.chain.executor import Executor
from golem.chain.faults import fault_point
from golem.chain.journal import TxJournal
from golem.chain.permits import PermitStore
from golem.chain.addressbook import AddressBook, resolve_book
from golem.chain.liquidations import LiquidationLog
from golem.chain.reader import read_snapshot
from golem.chain.simulate import simulate_actions
from golem.chain.web3client import make_web3
from golem.cognition.decision_cache import DecisionCacheStore
from golem.events.store import EventSink, EventStore
from golem.grimoire.embeddings import make_embedder
from golem.grimoire.episodes import (
    Episode,
    EpisodeOutcome,
    EpisodeStore,
    EpisodeType,
    Importance,
    episode_from_record,
)
from golem.grimoire.heuristics import HeuristicStore
from golem.grimoire.semantic import SemanticStore
from golem.inference.evaluator import evaluate_outcome
from golem.inference.llm import select_deliberator
from golem.inference.strategy import Strategy, parse_strategy
from golem.life.cycle_store import CycleStore
from golem.life.runs import labelled
from golem.models.config import GolemConfig
from golem.models.config_version import config_version, short, strategy_sha256
from golem.models.enums import BehavioralPhase
from golem.models.record import ActionRecord, DecisionCycleRecord, OutcomeRecord
from golem.models.tick import ProposedAction, SimulationResult, TickContext
from golem.safety.service import SafetyService
from golem.safety.strategy_check import StrategyValidation, validate_strategy
from workers.config_versions import save_version, stored_config, stored_strategy, version_of

log = logging.getLogger("golem.services")

LOCAL_CHAIN_ID = 31337  # the embedded Anvil sandbox: the demo runs live on it


def load_deployment(config: GolemConfig, w3, data_dir: Path, account: str | None) -> Deployment:
    """The resolved address book: the embedded world's `<data>/deployment.json`, or the book golem.toml names
    resolved against the chain now (and written to that file, where the CLI and the execute process read it)."""
    path = Path(data_dir) / "deployment.json"
    if config.chain.address_book == "embedded":
        return Deployment.load(path)
    book = AddressBook.load(config.chain.address_book)
    dep = resolve_book(w3, book, config.chain.rpc_url, golem_account=account)
    dep.save(path)
    log.info("address book %s resolved on chain %s: %d addresses", book.name, dep.chain_id, len(dep.addresses))
    return dep


class GolemServices:
    def __init__(
        self,
        config: GolemConfig,
        data_dir: Path,
        *,
        private_key: str | None = None,
        live: bool | None = None,
    ) -> None:
        self.config = config
        self.home = Path(config.golem.home)
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.w3 = make_web3(config.chain.rpc_url)
        key = private_key or os.environ.get(config.chain.key_env)
        self._signer = Account.from_key(key) if key else None
        self.deployment = load_deployment(config, self.w3, self.data_dir, self._signer.address if self._signer else None)
        self.account = self._signer.address if self._signer else self.deployment.golem_account
        chain_id = self.chain_id = self.w3.eth.chain_id
        # Against an external RPC the golem dry-runs unless started live (ARCHITECTURE "The world").
        self.live = bool(self._signer) and (live if live is not None else (config.chain.live or chain_id == LOCAL_CHAIN_ID))
        # [grimoire] embedder (EmbedderUnavailable says what to install); a model switch re-embeds in full (rev. 8)
        embedder = make_embedder(config)
        self.decision_cache = DecisionCacheStore(self.data_dir / "decision-cache.json")  # §S11, issue 12
        self.episodes = EpisodeStore(self.data_dir / "grimoire" / "episodes.lance", embedder)
        self.semantic = SemanticStore(
            self.data_dir / "grimoire" / "semantic.sqlite", self.data_dir / "grimoire" / "semantic.lance", embedder
        )
        self.heuristics = HeuristicStore(self.data_dir / "grimoire" / "heuristics.sqlite")
        self.cycles = CycleStore(self.data_dir)
        self.permits = PermitStore(self.data_dir / "permits.sqlite")
        self.journal = TxJournal(self.data_dir / "tx_journal.sqlite")
        self.liquidation_log = LiquidationLog(self.data_dir / "liquidations.sqlite")
        self.safety = SafetyService(config, self.data_dir, permits=self.permits, journal=self.journal)
        # The Event Fabric (issue 19): activities emit here; the worker adds its metrics as a listener.
        self.events = EventSink(EventStore(self.data_dir))
        self._strategy_checks: dict[str, StrategyValidation] = {}
        self._configs: dict[str, GolemConfig] = {}  # config version → its golem.toml, for lean tick contexts
        # The version this worker was started with (golem.toml + STRATEGY.md), kept on disk so ticks that
        # carry it resolve its STRATEGY.md even after the file is edited (issue 12).
        self.config_version = save_version(self.data_dir, version_of(config))
        log.info("config version %s (golem.toml + STRATEGY.md)", short(self.config_version))
        # The LLM deliberator when [inference] provider = "anthropic" and its key is in the environment;
        # the offline deliberator otherwise. activity.heartbeat keeps a waiting decide activity alive.
        self.deliberator, self.deliberator_reason = select_deliberator(
            config, os.environ, home=self.home, data_dir=self.data_dir, heartbeat=activity.heartbeat
        )
        log.info("deliberator: %s", self.deliberator_reason)
        self._executor = (
            Executor(self.w3, self.deployment, self._signer, self.journal, self.permits, on_event=fault_point)
            if self._signer else None
        )
        log.info("golem %s services ready: account %s, live=%s", config.golem.id, self.account, self.live)

    # ---- paths ----------------------------------------------------------------------------
    @property
    def strategy_path(self) -> Path:
        return self.home / "STRATEGY.md"

    @property
    def playbook_path(self) -> Path:
        return self.data_dir / "PLAYBOOK.md"

    def strategy_text(self) -> str:
        try:
            return self.strategy_path.read_text()
        except FileNotFoundError:
            raise ValueError(f"{self.strategy_path}: not found. Create it (see examples/golem-home/STRATEGY.md).") from None

    def strategy_text_for(self, ctx: TickContext | None) -> str:
        """STRATEGY.md of the config version the tick runs on: from `<data>/config-versions/`, or the file
        when it is that version (then kept). A tick without a version (a golem started before versions
        existed) reads the file, as before."""
        version = ctx.config_version if ctx is not None else ""
        if not version:
            return self.strategy_text()
        text = stored_strategy(self.data_dir, version)
        if text is not None:
            return text
        text = self.strategy_text()
        if config_version(ctx.config, strategy_sha256(text)) != version:
            raise ValueError(f"config version {short(version)} is not on this worker's disk and STRATEGY.md has "
                             f"changed since; apply the current files with `golem config apply`")
        save_version(self.data_dir, version_of(ctx.config))
        return text

    def config_for(self, version: str) -> GolemConfig:
        """The config of a version, for a lean tick context (issue 12): activity inputs name the version, the
        worker reads `<data>/config-versions/<version>.json` once and keeps it."""
        config = self._configs.get(version)
        if config is None:
            config = self.config if version == self.config_version else stored_config(self.data_dir, version)
            if config is None:
                raise ValueError(f"config version {short(version)} is not on this worker's disk "
                                 f"({self.data_dir / 'config-versions'}); apply the current files with "
                                 f"`golem config apply`")
            self._configs[version] = config
        return config

    def load_strategy(self, ctx: TickContext | None = None) -> Strategy:
        """STRATEGY.md of the tick's config version, read on every decision."""
        return parse_strategy(self.strategy_text_for(ctx))

    def strategy_viability(self, observation, phase: BehavioralPhase, ctx: TickContext | None = None) -> StrategyValidation:
        """rev. 10 pipeline (schema, consistency, range, risk, dry-run), once per version of the file and of
        the limits (the tick's config version's, not the worker's file)."""
        text = self.strategy_text_for(ctx)
        limits = self.safety.limits_for(ctx.config if ctx is not None else None)
        key = f"{hashlib.sha256(text.encode()).hexdigest()}:{limits.policy_hash()}:{phase.value}"
        if key not in self._strategy_checks:
            self._strategy_checks[key] = validate_strategy(
                text, limits, observation=observation, simulate=self.simulate,
                phase=phase,
            )
        return self._strategy_checks[key]

    def playbook_text(self) -> str:
        return self.playbook_path.read_text() if self.playbook_path.exists() else ""

    # ---- chain ----------------------------------------------------------------------------
    def read_snapshot(self):
        return read_snapshot(self.w3, self.deployment, self.account)

    def liquidations(self, tick: int, block: int):
        """Aave liquidations of the golem's position first seen by this tick (LiquidationCall logs up to `block`)."""
        return self.liquidation_log.for_tick(self.w3, self.deployment, self.account, tick, block)

    def simulate(self, actions: list[ProposedAction], observation) -> SimulationResult:
        return simulate_actions(self.w3, self.deployment, self.account, actions, observation)

    def execute(self, ctx: TickContext, action: ProposedAction, permit_id: str, observation,
                run_id: str | None = None) -> ActionRecord:
        if self._executor is None:
            raise RuntimeError("no signing key configured; cannot execute")
        return self.safety.execute(self._executor, ctx.golem_id, ctx.tick, action, permit_id, observation, run_id)

    def verify(self, ctx: TickContext, actions, simulation, records, observation, run_label: str = "") -> OutcomeRecord:
        """OutcomeVerification (logs, invariants) kept on disk; the record carries its outcome and path."""
        ov = self.safety.verify(
            self.w3, self.deployment, ctx.golem_id, ctx.tick, self.account, actions, simulation, records, observation,
            # Wait for confirmations only briefly inside the tick; later ticks confirm (observe).
            timeout_s=min(5.0, ctx.config.heartbeat.step_timeout_seconds / 3), now=ctx.started_ts, config=ctx.config,
        )
        # One file per run of the tick (a reset or rerun writes beside the first run's evidence).
        path = self.data_dir / "outcomes" / f"{labelled(f'tick-{ctx.tick:06d}', run_label)}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(ov.model_dump_json(indent=2))
        if ov.safety_incident:
            self.write_safety_incident(ctx, ov.safety_incident)
        return ov.outcome.model_copy(update={
            "invariant_violations": [str(v) for v in ov.invariant_violations], "verification_path": str(path),
        })

    def deliver_followups(self, followups, window: str, tick: int) -> list[str]:
        """Owner notes for the curator or the dream cycle, appended to owner-notes.jsonl (idempotent by id)."""
        path = self.data_dir / "owner-notes.jsonl"
        seen = set()
        if path.exists():
            seen = {json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()}
        with path.open("a") as out:
            for f in followups:
                if f.id not in seen:
                    out.write(json.dumps({"id": f.id, "window": window, "tick": tick, "message": f.message}) + "\n")
        return [f.id for f in followups]

    async def evaluate(self, record: DecisionCycleRecord, actions: list[ProposedAction], daily_spend: float):
        """rev. 2: judge an acted tick's outcome in a fresh context (a different model where budget allows)."""
        if record.outcome is None or record.deliberation is None:
            return None
        return await evaluate_outcome(
            record.outcome, actions, record.deliberation,
            router=getattr(self.deliberator, "router", None), daily_spend=daily_spend, heartbeat=activity.heartbeat,
        )

    # ---- memory ---------------------------------------------------------------------------
    def write_safety_incident(self, ctx: TickContext, incident: dict) -> str:
        """An invariant violated after execution is remembered at confidence 1.0 (issue 4)."""
        ep_id = f"{ctx.golem_id}:incident:tick:{ctx.tick}"
        self.episodes.upsert(Episode(
            id=ep_id, golem_id=ctx.golem_id, tick=ctx.tick, created_at=ctx.started_at, regime=ctx.state.regime,
            tier="T2", summary=f"SAFETY INCIDENT at tick {ctx.tick}: {json.dumps(incident, default=str)}",
            prediction_error=1.0, utility=1.0, confidence=1.0, quality=1.0,
            episode_type=EpisodeType.ACTION, tool="verify_outcome", outcome=EpisodeOutcome.NEGATIVE,
            importance=Importance.EMERGENCY, chain=str(self.chain_id),
        ))
        return ep_id

    def mark_reorged(self, tick: int) -> None:
        """A reorg removed this tick's transactions: its episode no longer counts as verified."""
        ep = self.episodes.get(f"{self.config.golem.id}:tick:{tick}")
        if ep is not None and "REORGED" not in ep.summary:
            self.episodes.upsert(ep.model_copy(update={
                "outcome_verified": False, "outcome": EpisodeOutcome.NEGATIVE, "importance": Importance.CRITICAL,
                "summary": ep.summary + " REORGED: its transactions left the chain.",
            }))

    def write_episode(self, record: DecisionCycleRecord) -> str:
        """Keyed by golem, tick and run, so a retried reflect overwrites instead of duplicating, and another
        run of the tick (a reset, a rerun) is remembered beside the first run's episode."""
        episode = episode_from_record(record)
        if record.run_label:
            episode = episode.model_copy(update={"id": f"{episode.id}:{record.run_label}"})
        self.episodes.upsert(episode)
        return episode.id
