"""The pheromone field's arithmetic: decay, reinforcement, pruning, reading. Pure; the field workflow and the
observe activity call it with their own clocks. Formulas: docs/design/pheromones.md#decay-and-reinforcement.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from golem.models.pheromones import (Deposit, DepositBatch, FieldState, PheromoneReading, PheromoneReadings,
                                     Trail)

FLOOR = 0.01  # a trail below this intensity is gone (dropped at the next deposit or continue-as-new)
MAX_TRAILS = 2000  # the field keeps at most this many trails (the weakest go first)
MAX_RECENT_BATCHES = 512  # batch ids remembered to drop a retried send


def intensity_at(trail: Trail, now: float) -> float:
    """I(t) = I₀ · 2^(−(t − t₀)/h); a clock behind the deposit reads I₀ (never more)."""
    age = max(now - trail.laid_at, 0.0)
    return float(trail.intensity * 0.5 ** (age / trail.half_life_s))


def lay(trails: list[Trail], deposit: Deposit, now: float) -> list[Trail]:
    """The field after one deposit: a depositor's trail on the same (entity, kind) is reinforced — what is left
    of it plus the new intensity, capped at 1, its clock restarted with the new half-life; else a new trail."""
    out: list[Trail] = []
    reinforced = False
    for t in trails:
        if (t.entity, t.kind, t.depositor) == (deposit.entity, deposit.kind, deposit.depositor):
            out.append(Trail(entity=t.entity, kind=t.kind, depositor=t.depositor,
                             intensity=min(intensity_at(t, now) + deposit.intensity, 1.0),
                             half_life_s=deposit.half_life_s, laid_at=now, deposits=t.deposits + 1,
                             reason=deposit.reason))
            reinforced = True
        else:
            out.append(t)
    if not reinforced:
        out.append(Trail(entity=deposit.entity, kind=deposit.kind, depositor=deposit.depositor,
                         intensity=deposit.intensity, half_life_s=deposit.half_life_s, laid_at=now,
                         reason=deposit.reason))
    return out


def pruned(trails: list[Trail], now: float) -> list[Trail]:
    """Trails still above the floor, at most MAX_TRAILS (the strongest now)."""
    alive = [t for t in trails if intensity_at(t, now) >= FLOOR]
    if len(alive) > MAX_TRAILS:
        alive = sorted(alive, key=lambda t: intensity_at(t, now), reverse=True)[:MAX_TRAILS]
    return alive


def apply_batch(state: FieldState, batch: DepositBatch, now: float) -> tuple[FieldState, int]:
    """The field after a batch (and how many deposits it applied: 0 when its id was already in)."""
    if batch.id in state.recent_batches:
        return state, 0
    trails = state.trails
    for d in batch.deposits:
        trails = lay(trails, d, now)
    recent = [*state.recent_batches, batch.id][-MAX_RECENT_BATCHES:]
    return FieldState(clade=state.clade, trails=pruned(trails, now), recent_batches=recent), len(batch.deposits)


def parse_batch(raw: Any) -> DepositBatch:
    """A deposit batch from the wire, or ValueError saying which deposit and field is wrong and what is allowed."""
    try:
        return DepositBatch.model_validate(raw)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            where = ".".join(str(x) for x in err["loc"]) or "batch"
            problems.append(f"{where}: {err['msg']}")
        raise ValueError("malformed pheromone deposit (nothing was laid): " + "; ".join(problems) +
                         ". A deposit is {entity: 'pool|oracle|lending_market|feed|token:0x<40 hex>' or "
                         "'chain:<id>', kind: threat|opportunity|congestion, intensity in (0, 1], "
                         "half_life_s > 0, depositor: a golem id}") from None


def read(state: FieldState, entities: list[str], me: str, now: float) -> PheromoneReadings:
    """What golem `me` reads on its entities: every other depositor's trail there, at its intensity now."""
    wanted = set(entities)
    readings = [PheromoneReading(entity=t.entity, kind=t.kind, intensity=round(intensity_at(t, now), 6),
                                 half_life_s=t.half_life_s, depositor=t.depositor,
                                 age_s=round(max(now - t.laid_at, 0.0), 3))
                for t in state.trails if t.entity in wanted and t.depositor != me and intensity_at(t, now) >= FLOOR]
    return PheromoneReadings(clade=state.clade, entities=sorted(wanted), readings=readings)


def everything(state: FieldState, now: float) -> list[PheromoneReading]:
    """The whole field now, strongest first (`golem pheromones`)."""
    out = [PheromoneReading(entity=t.entity, kind=t.kind, intensity=round(intensity_at(t, now), 6),
                            half_life_s=t.half_life_s, depositor=t.depositor, age_s=round(max(now - t.laid_at, 0.0), 3))
           for t in state.trails]
    return sorted(out, key=lambda r: (-r.intensity, r.entity, r.kind, r.depositor))
