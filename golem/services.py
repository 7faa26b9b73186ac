"""Services: what a golem's activities may use, as a Protocol.

Activities depend on this, not on the worker's `GolemServices` (workers/services.py), which builds the real
clients once per worker from golem.toml and the environment. Keys stay inside that implementation: nothing
here hands out a signer or a key, only `execute`, which signs behind the PolicyCage's permit.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # types only: importing this module stays cheap and free of I/O libraries
    from golem.chain.contracts import Deployment
    from golem.models.observation import LiquidationEvent
    from golem.models.observation import ChainSnapshot
    from golem.cognition.decision_cache import DecisionCacheStore
    from golem.events.store import EventSink
    from golem.grimoire.episodes.store import EpisodeStore
    from golem.grimoire.playbook.heuristics import HeuristicStore
    from golem.grimoire.semantic.store import SemanticStore
    from golem.inference.deliberator import Deliberator
    from golem.inference.router import ProviderRouter
    from golem.inference.strategies import StrategySet
    from golem.inference.strategy import Strategy
    from golem.layout import DataLayout
    from golem.learning.ledger import LearningLedger
    from golem.life.cycle_store import CycleStore
    from golem.models.config import GolemConfig
    from golem.models.enums import BehavioralPhase
    from golem.models.observation import Observation
    from golem.models.record import ActionRecord, DecisionCycleRecord, OutcomeRecord
    from golem.models.tick import ProposedAction, SimulationResult, TickContext
    from golem.safety.service import SafetyService
    from golem.safety.strategy_check import StrategyValidation


class Services(Protocol):
    """One golem's clients and stores, built once per worker."""

    config: GolemConfig  # golem.toml as the worker started (a tick uses its own config version)
    config_version: str  # that config's version (golem.toml + STRATEGY.md)
    home: Path  # the golem home: golem.toml, STRATEGY.md
    data_dir: Path
    layout: DataLayout
    live: bool  # false: validated writes are deferred (dry-run), never sent
    account: str
    chain_id: int
    w3: Any  # web3.Web3 (reads only; signing is behind `execute`)
    deployment: Deployment

    # memory and records
    episodes: EpisodeStore
    semantic: SemanticStore
    heuristics: HeuristicStore
    learning: LearningLedger
    cycles: CycleStore
    decision_cache: DecisionCacheStore
    events: EventSink

    # thinking and the rails
    deliberator: Deliberator
    deliberator_reason: str  # why this deliberator (for `golem doctor`)
    router: ProviderRouter | None  # the LLM router when Claude is configured; None offline
    safety: SafetyService

    @property
    def playbook_path(self) -> Path: ...

    def playbook_text(self) -> str: ...

    def strategy_text(self) -> str: ...

    def config_for(self, version: str) -> GolemConfig: ...

    def load_strategy(self, ctx: TickContext | None = None) -> Strategy: ...

    def load_strategies(self, ctx: TickContext | None = None) -> StrategySet: ...

    def strategy_viability(self, observation: Observation, phase: BehavioralPhase,
                           ctx: TickContext | None = None) -> StrategyValidation: ...

    # the chain
    def read_snapshot(self) -> ChainSnapshot: ...

    def liquidations(self, tick: int, block: int) -> list[LiquidationEvent]: ...

    def simulate(self, actions: list[ProposedAction], observation: Observation) -> SimulationResult: ...

    def simulate_health_factor(self, actions: list[ProposedAction], observation: Observation,
                               block: int) -> float | None: ...

    def execute(self, ctx: TickContext, action: ProposedAction, permit_id: str, observation: Observation,
                run_id: str | None = None) -> ActionRecord: ...

    def verify(self, ctx: TickContext, actions: list[ProposedAction], simulation: SimulationResult | None,
               records: list[ActionRecord], observation: Observation, run_label: str = "") -> OutcomeRecord: ...

    async def evaluate(self, record: DecisionCycleRecord, actions: list[ProposedAction],
                       daily_spend: float) -> Any: ...
