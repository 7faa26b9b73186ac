"""The pheromone field's shapes: a deposit a golem lays, the trail the field keeps, what a golem reads back.

Kinds, intensities, half-lives and the decay formula: docs/design/pheromones.md.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field, field_validator

PheromoneKind = Literal["threat", "opportunity", "congestion"]
KINDS: tuple[str, ...] = ("threat", "opportunity", "congestion")
# the entity kinds of the shared topology (the knowledge graph's node ids, `kind:address`) and the chain itself
ENTITY_KINDS: tuple[str, ...] = ("pool", "oracle", "lending_market", "feed", "token", "chain")
ENTITY_PATTERN = r"^(pool|oracle|lending_market|feed|token):0x[0-9a-fA-F]{40}$|^chain:[0-9]{1,12}$"


class Deposit(BaseModel):
    """One pheromone laid by one golem on one entity."""

    model_config = {"extra": "forbid"}
    entity: str = Field(pattern=ENTITY_PATTERN)
    kind: PheromoneKind
    intensity: float = Field(gt=0.0, le=1.0)
    half_life_s: float = Field(gt=0.0, le=30 * 86400.0)
    depositor: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,40}$")  # the golem id
    reason: str = Field(default="", max_length=300)

    @field_validator("intensity", "half_life_s")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v


class DepositBatch(BaseModel):
    """What one tick lays, in one update; `id` makes a retried send a no-op."""

    model_config = {"extra": "forbid"}
    id: str = Field(min_length=1, max_length=200)
    deposits: list[Deposit] = Field(min_length=1, max_length=64)


class Trail(BaseModel):
    """The field's memory of one (entity, kind, depositor): intensity as of `laid_at`, decaying from there."""

    entity: str
    kind: PheromoneKind
    depositor: str
    intensity: float  # at laid_at
    half_life_s: float
    laid_at: float  # unix seconds of the last deposit (the field's clock)
    deposits: int = 1
    reason: str = ""


class FieldState(BaseModel):
    """The field workflow's whole state (its query answer and what continue-as-new carries)."""

    clade: str
    trails: list[Trail] = Field(default_factory=list)
    recent_batches: list[str] = Field(default_factory=list)  # ids already applied, newest last (bounded)


class FieldInput(BaseModel):
    """PheromoneFieldWorkflow's input: the field it starts from, and how long its history may grow before it
    continues as new."""

    state: FieldState
    continue_after_events: int = Field(default=2000, ge=10)


class DepositReceipt(BaseModel):
    applied: int = 0  # deposits applied (0: the batch was already in)
    duplicate: bool = False
    trails: int = 0  # trails in the field after it


class PheromoneReading(BaseModel):
    """One trail as a golem read it: intensity now."""

    entity: str
    kind: PheromoneKind
    intensity: float
    half_life_s: float
    depositor: str
    age_s: float


class PheromoneReadings(BaseModel):
    """The field on the entities this golem touches, at observe (its own trails are not counted: the golem saw
    those itself). `error` says why the field could not be read; the readings are then empty."""

    clade: str
    entities: list[str] = Field(default_factory=list)
    readings: list[PheromoneReading] = Field(default_factory=list)
    error: str | None = None

    def intensity(self, kind: str, entity: str | None = None) -> float:
        """The combined intensity of a kind (on one entity, or the highest over the entities)."""
        by_entity: dict[str, float] = {}
        for r in self.readings:
            if r.kind == kind and (entity is None or r.entity == entity):
                # independent peers' signals combine as 1 − Π(1 − Iᵢ): never above 1, more peers never lower it
                by_entity[r.entity] = 1.0 - (1.0 - by_entity.get(r.entity, 0.0)) * (1.0 - r.intensity)
        return max(by_entity.values(), default=0.0)

    def max_threat_intensity(self) -> float:
        return self.intensity("threat")
