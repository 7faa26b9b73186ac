"""The episode writes a tick makes beyond its own episode (domain logic out of the worker layer).

A safety incident is remembered at confidence 1.0; a reorg re-marks the episode of the tick whose
transactions left the chain; a tick's episode is keyed by golem, tick and run, so a retried reflect
overwrites instead of duplicating, and another run of the tick (a reset, a rerun) is kept beside the first.
"""

from __future__ import annotations

import json
from typing import Any

from golem.grimoire.episodes.model import Episode, EpisodeOutcome, EpisodeType, Importance, episode_from_record
from golem.grimoire.episodes.store import EpisodeStore
from golem.models.enums import Tier
from golem.models.record import DecisionCycleRecord
from golem.models.tick import TickContext


def write_safety_incident(episodes: EpisodeStore, ctx: TickContext, incident: dict[str, Any], chain_id: int) -> str:
    """An invariant violated after execution, remembered at confidence 1.0 as an emergency."""
    ep_id = f"{ctx.golem_id}:incident:tick:{ctx.tick}"
    episodes.upsert(Episode(
        id=ep_id, golem_id=ctx.golem_id, tick=ctx.tick, created_at=ctx.started_at, regime=ctx.state.regime,
        tier=Tier.T2, summary=f"SAFETY INCIDENT at tick {ctx.tick}: {json.dumps(incident, default=str)}",
        prediction_error=1.0, utility=1.0, confidence=1.0, quality=1.0,
        episode_type=EpisodeType.ACTION, tool="verify_outcome", outcome=EpisodeOutcome.NEGATIVE,
        importance=Importance.EMERGENCY, chain=str(chain_id),
    ))
    return ep_id


def mark_reorged(episodes: EpisodeStore, golem_id: str, tick: int) -> None:
    """A reorg removed this tick's transactions: its episode no longer counts as verified."""
    ep = episodes.get(f"{golem_id}:tick:{tick}")
    if ep is not None and "REORGED" not in ep.summary:
        episodes.upsert(ep.model_copy(update={
            "outcome_verified": False, "outcome": EpisodeOutcome.NEGATIVE, "importance": Importance.CRITICAL,
            "summary": ep.summary + " REORGED: its transactions left the chain.",
        }))


def write_episode(episodes: EpisodeStore, record: DecisionCycleRecord) -> str:
    """The tick's episode, keyed by golem, tick and run."""
    episode = episode_from_record(record)
    if record.run_label:
        episode = episode.model_copy(update={"id": f"{episode.id}:{record.run_label}"})
    episodes.upsert(episode)
    return episode.id
