"""DataLayout: where each of a golem's files lives under its data directory.

One place names every path, so the worker, the CLI, the stack, retention and the soak/chaos tools agree on
them (README "The golem home and its data" lists the same tree). Paths only: nothing is created here.
"""

from __future__ import annotations

from collections.abc import MutableMapping

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DataLayout:
    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def of(cls, where: DataLayout | str | Path) -> DataLayout:
        """The layout handed down from the edge that built it (one per golem), or one built here for an edge that
        holds only a path (a CLI command, a test)."""
        return where if isinstance(where, DataLayout) else cls(Path(where))

    # ---- the world and the stack ----------------------------------------------------------------
    @property
    def deployment(self) -> Path:
        """The resolved address book (the embedded world's contracts, or golem.toml's book resolved on chain)."""
        return self.root / "deployment.json"

    @property
    def temporal_db(self) -> Path:
        return self.root / "temporal.sqlite"

    @property
    def anvil_state(self) -> Path:
        return self.root / "anvil-state.json"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def config_versions(self) -> Path:
        """Every config version the golem may run on (golem.toml + STRATEGY.md), by hash."""
        return self.root / "config-versions"

    @property
    def dream_forks(self) -> Path:
        return self.root / "dream-forks"

    # ---- records and evidence ---------------------------------------------------------------------
    @property
    def cycles(self) -> Path:
        return self.root / "cycles"

    @property
    def cycle_index(self) -> Path:
        return self.cycles / "index.sqlite"

    @property
    def outcomes(self) -> Path:
        return self.root / "outcomes"

    def outcome_file(self, name: str) -> Path:
        return self.outcomes / f"{name}.json"

    @property
    def traces(self) -> Path:
        return self.root / "traces.jsonl"

    @property
    def trace_days(self) -> Path:
        return self.root / "traces"

    @property
    def events(self) -> Path:
        return self.root / "events.sqlite"

    @property
    def owner_notes(self) -> Path:
        return self.root / "owner-notes.jsonl"

    @property
    def conversation(self) -> Path:
        return self.root / "conversations" / "session.jsonl"

    @property
    def decision_cache(self) -> Path:
        return self.root / "decision-cache.json"

    @property
    def playbook(self) -> Path:
        return self.root / "PLAYBOOK.md"

    @property
    def inherited(self) -> Path:
        return self.root / "inherited.jsonl"

    @property
    def dreams(self) -> Path:
        return self.root / "dreams"

    # ---- death and succession ------------------------------------------------------------
    def legacy(self, golem_id: str) -> Path:
        """A dead golem's legacy package (golem.life.legacy): certificate, reflection, grimoire.jsonl, gating."""
        return self.root / "legacy" / golem_id

    @property
    def succession(self) -> Path:
        """A successor's birth papers (golem spawn): its generation and predecessor."""
        return self.root / "succession.json"

    # ---- the write path ----------------------------------------------------------------------------
    @property
    def tx_journal(self) -> Path:
        return self.root / "tx_journal.sqlite"

    @property
    def permits(self) -> Path:
        return self.root / "permits.sqlite"

    @property
    def audit(self) -> Path:
        return self.root / "audit.sqlite"

    @property
    def risk(self) -> Path:
        return self.root / "risk.sqlite"

    @property
    def viability(self) -> Path:
        """The strategy judged by experience at each delta cycle, and the owner's acknowledgments."""
        return self.root / "viability.json"

    @property
    def run_actions(self) -> Path:
        return self.root / "run_actions.sqlite"

    @property
    def liquidations(self) -> Path:
        return self.root / "liquidations.sqlite"

    # ---- the Grimoire ------------------------------------------------------------------------------
    @property
    def grimoire(self) -> Path:
        return self.root / "grimoire"

    @property
    def episodes(self) -> Path:
        return self.grimoire / "episodes.lance"

    @property
    def semantic_db(self) -> Path:
        return self.grimoire / "semantic.sqlite"

    @property
    def semantic_vectors(self) -> Path:
        return self.grimoire / "semantic.lance"

    @property
    def heuristics(self) -> Path:
        return self.grimoire / "heuristics.sqlite"

    @property
    def learning(self) -> Path:
        return self.grimoire / "learning.sqlite"

    @property
    def dream_staging(self) -> Path:
        return self.grimoire / "dream-staging.sqlite"


def drop_under(cache: MutableMapping[str, Any], root: str | Path) -> int:
    """Drop a process-wide cache's entries keyed by a store path that is `root` or inside it (a closed golem's data
    dir); the caller holds the cache's lock. Returns how many went."""
    prefix = str(Path(root)).rstrip("/")
    gone = [k for k in cache if k == prefix or k.startswith(prefix + "/")]
    for k in gone:
        del cache[k]
    return len(gone)

