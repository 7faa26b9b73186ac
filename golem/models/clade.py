"""The clade's entry exchange in shapes: an entry a golem shares, the bus that carries them, what a sibling keeps of
one it received (its stage: quarantine → consensus → sandbox → adopted, or rejected). Rules: docs/design/clade.md.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import BaseModel, Field, model_validator

Stage = Literal["quarantine", "consensus", "sandbox", "adopted", "rejected"]
STAGES: tuple[str, ...] = ("quarantine", "consensus", "sandbox", "adopted", "rejected")
SHAREABLE = ("warning", "insight", "heuristic", "causal_link")
GOLEM_ID = r"^[a-z0-9][a-z0-9-]{0,40}$"
MEMBER_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"  # a golem's id, a fleet golem's included (golem.fleet.ID_PATTERN)


def content_key(content: str) -> str:
    """Two siblings' entries are "the same" when their words are: case, punctuation and spacing ignored."""
    words = re.sub(r"[^a-z0-9.%]+", " ", content.lower()).split()
    return hashlib.sha256(" ".join(words).encode()).hexdigest()[:24]


class SharedEntry(BaseModel):
    """One Grimoire entry as the clade sees it: what it says and who learned it (no episodes, no vectors)."""

    model_config = {"extra": "forbid"}
    origin: str = Field(pattern=GOLEM_ID)  # the golem that learned it
    entry_id: str = Field(min_length=1, max_length=200)
    category: Literal["warning", "insight", "heuristic", "causal_link"]
    content: str = Field(min_length=1, max_length=2000)
    confidence: float = Field(ge=0.0, le=1.0)
    market_regime: str | None = None
    tags: list[str] = Field(default_factory=list, max_length=20)
    created_tick: int = Field(default=0, ge=0)
    legacy: bool = False  # a lesson of the origin's death (its bloodstain warnings)

    @property
    def key(self) -> str:
        """What the bus sends once: the origin's entry id."""
        return f"{self.origin}:{self.entry_id}"


class ShareBatch(BaseModel):
    model_config = {"extra": "forbid"}
    id: str = Field(min_length=1, max_length=200)  # a retried send is dropped by it
    entries: list[SharedEntry] = Field(min_length=1, max_length=256)


class BusEntry(BaseModel):
    seq: int
    entry: SharedEntry


class BusState(BaseModel):
    """CladeExchangeWorkflow's state: the entries still offered (bounded) and the keys ever carried (bounded)."""

    clade: str
    seq: int = 0  # the last sequence number handed out
    entries: list[BusEntry] = Field(default_factory=list)
    keys: list[str] = Field(default_factory=list)  # origin:entry_id carried, newest last
    batches: list[str] = Field(default_factory=list)  # batch ids applied, newest last


class BusInput(BaseModel):
    state: BusState
    continue_after_events: int = Field(default=2000, ge=10)


class SinceQuery(BaseModel):
    """A sibling's read of the bus: what came after its cursor, from golems other than itself."""

    after: int = Field(default=0, ge=0)
    me: str = ""
    limit: int = Field(default=256, ge=1, le=2000)


class SandboxResult(BaseModel):
    """The entry replayed over the receiver's own recent ticks without acting: on how many it would have been
    recalled, and whether what happened on those ticks bears it out."""

    ticks: int = 0  # recent ticks replayed
    recalled: int = 0  # ticks whose situation it matches (it would have been in the workspace)
    supported: int = 0  # of those, ticks whose outcome agrees with it
    contradicted: int = 0  # of those, ticks whose outcome goes against it
    passed: bool = False
    reason: str = ""


class Inbound(BaseModel):
    """One piece of knowledge a sibling received, keyed by its content (the same words from two siblings are one
    inbound entry with two origins)."""

    content_key: str
    category: str
    content: str
    confidence: float  # the highest a sender gave it
    market_regime: str | None = None
    tags: list[str] = Field(default_factory=list)
    origins: list[str] = Field(default_factory=list)
    entry_ids: list[str] = Field(default_factory=list)
    legacy: bool = False
    stage: Stage = "quarantine"
    reason: str = ""  # why it is where it is
    received_tick: int = 0
    updated_tick: int = 0
    sandbox: SandboxResult | None = None
    adopted_entry_id: str | None = None
    adopted_confidence: float | None = None


class ExchangeStep(BaseModel):
    """What one pass of the exchange did (on the tick record's clade line and in the events)."""

    shared: int = 0  # entries this golem sent
    received: int = 0  # new inbound entries (quarantined)
    moved: list[str] = Field(default_factory=list)  # "quarantine→consensus: <content>" …
    error: str | None = None


def exchange_id(clade: str) -> str:
    """CladeExchangeWorkflow: one per clade (beside its pheromone field, on the same clade queue)."""
    return f"clade-{clade}-exchange"


class ConsolidatedGolem(BaseModel):
    """One golem whose Grimoire a memory-consolidator reads: its id, data dir and home (for its embedder)."""

    id: str = Field(pattern=MEMBER_ID)
    data: str
    home: str = ""


class ConsolidatorInput(BaseModel):
    """MemoryConsolidatorWorkflow's input: the consolidator's name, where it runs — the fleet host that holds its
    golems' data (host), else a clade's queue (clade) — and the golems."""

    name: str = Field(pattern=GOLEM_ID)
    clade: str = Field(default="", pattern=f"^$|{GOLEM_ID}")
    host: str = ""  # a fleet host's name: its runs go to golem-host-<host>, served by that host's worker
    golems: list[ConsolidatedGolem] = Field(min_length=2)
    min_support: int = Field(default=5, ge=5)  # the consolidator refuses fewer
    min_golems: int = Field(default=2, ge=2)

    @model_validator(mode="after")
    def _runs_somewhere(self) -> ConsolidatorInput:
        if not self.host and not self.clade:
            raise ValueError("a consolidator runs on its golems' fleet host or on a clade's queue: "
                             "neither a host nor a clade given")
        return self


class ConsolidatorReport(BaseModel):
    golems_read: list[str] = Field(default_factory=list)
    unreadable: dict[str, str] = Field(default_factory=dict)  # golem id → why its Grimoire was not read
    episodes: int = 0
    patterns: list[str] = Field(default_factory=list)
    offered: dict[str, int] = Field(default_factory=dict)  # golem id → new proposals written to its inbox


def consolidator_id(name: str) -> str:
    """A memory-consolidator's Schedule and the workflow runs it starts."""
    return f"consolidator-{name}"
