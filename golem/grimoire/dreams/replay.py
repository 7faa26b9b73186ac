"""NREM replay: which episodes a dream replays, and what replay does to them.

Selection is U(e) = gain(e) × need(e) (after Mattar & Daw): gain is |P&L| normalised to [0, 1] combined with the
tick's prediction error (`decay.replay_gain`, stored when the episode is written); need is the episode's current
retention, so fresh high-impact episodes win and old ones gradually yield. Replay strengthens an episode by +0.5
only when the dream finds a validated pattern in it. Why: docs/design/dreams.md#what-a-dream-replays.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import BaseModel, Field

from golem.grimoire.decay import (
    DEFAULT_TICK_SECONDS,
    DREAM_STRENGTH_INCREMENT,
    EntryKind,
    replay_gain,
    retention_at_tick,
)
from golem.grimoire.episodes.model import Episode
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.playbook.heuristics import MIN_PATTERN_SUPPORT, HeuristicStore, derive_heuristics_from_episodes


def replay_need(ep: Episode, now_tick: int | None = None, tick_seconds: float = DEFAULT_TICK_SECONDS) -> float:
    """need ∈ [0.05, 1]: the episode's retention now (stored retention when now_tick is None)."""
    if now_tick is None:
        return ep.retention
    return retention_at_tick(
        now_tick,
        ep.last_accessed_tick if ep.last_accessed_tick is not None else ep.tick,
        kind=EntryKind.EPISODE,
        decay_class=ep.decay_class,
        strength=ep.strength,
        quality=ep.quality,
        tick_seconds=tick_seconds,
        dream_validated=ep.dream_validated,
    )


def replay_utility(ep: Episode, now_tick: int | None = None, tick_seconds: float = DEFAULT_TICK_SECONDS) -> float:
    return replay_gain(ep.pnl_impact, ep.prediction_error) * replay_need(ep, now_tick, tick_seconds)


def select_replay(
    episodes: list[Episode],
    n: int,
    now_tick: int | None = None,
    tick_seconds: float = DEFAULT_TICK_SECONDS,
) -> list[Episode]:
    """The n episodes of highest utility (ties: newer first). Episodes with zero gain teach nothing and are skipped."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    scored = [(replay_utility(ep, now_tick, tick_seconds), ep) for ep in episodes]
    scored = [(u, ep) for u, ep in scored if u > 0.0]
    scored.sort(key=lambda ue: (-ue[0], -ue[1].tick, ue[1].id))
    return [ep for _, ep in scored[:n]]


class DreamReport(BaseModel):
    tick: int
    replayed: list[str] = Field(default_factory=list)  # episode ids, highest utility first
    strengthened: list[str] = Field(default_factory=list)  # replayed AND part of a validated pattern
    heuristics_touched: list[str] = Field(default_factory=list)  # heuristic ids reinforced or created
    patterns_validated: int = 0


def run_dream_replay(
    store: EpisodeStore,
    heuristics: HeuristicStore,
    n: int,
    tick: int,
    tick_seconds: float = DEFAULT_TICK_SECONDS,
    min_support: int = MIN_PATTERN_SUPPORT,
    first: list[str] | None = None,
) -> DreamReport:
    """Replay the top-n episodes: strengthen those in a recurring pattern, reinforce that pattern's heuristic.

    Idempotent per dream tick: an episode already replayed at `tick` is not strengthened again, and
    heuristic evidence is counted once per episode, so a retried dream activity changes nothing more.
    """
    episodes = store.all()
    # `first`: the curator's dream_priority: high episodes (golem.grimoire.dreams.tags), replayed before the
    # utility ranking fills the rest of the n
    by_id = {ep.id: ep for ep in episodes}
    tagged = [by_id[i] for i in (first or []) if i in by_id][:n]
    chosen = tagged + [ep for ep in select_replay(episodes, n, now_tick=tick, tick_seconds=tick_seconds)
                       if ep.id not in {t.id for t in tagged}][: n - len(tagged)]
    report = DreamReport(tick=tick, replayed=[ep.id for ep in chosen])
    if not chosen:
        return report

    # Patterns are judged over the whole store: a replayed episode is "validated" when it belongs
    # to a (regime, tier, acted) pattern that recurs at least min_support times.
    rules: dict[tuple[str, str], list[str]] = defaultdict(list)
    for text, scope, ep_id in derive_heuristics_from_episodes(episodes, min_support):
        rules[(text, scope)].append(ep_id)
    chosen_ids = {ep.id for ep in chosen}
    validated_ids: set[str] = set()
    touched: list[str] = []
    for (text, scope), supporters in rules.items():
        replayed_here = [i for i in supporters if i in chosen_ids]
        if not replayed_here:
            continue
        report.patterns_validated += 1
        validated_ids.update(replayed_here)
        h = None
        for ep_id in supporters:
            h = heuristics.add_or_reinforce(text, scope, ep_id)
        if h is not None and h.id not in touched:
            touched.append(h.id)
    report.heuristics_touched = touched

    updated: list[Episode] = []
    for ep in chosen:
        if ep.id not in validated_ids:
            continue
        report.strengthened.append(ep.id)
        if ep.last_replayed_tick == tick:
            continue  # this dream already strengthened it (activity retry)
        strength = ep.strength + DREAM_STRENGTH_INCREMENT  # dream +0.5
        fresh = ep.model_copy(update={"strength": strength, "dream_validated": True, "last_replayed_tick": tick})
        fresh.utility = min(1.0, replay_utility(fresh, tick, tick_seconds))
        updated.append(fresh)
    store.upsert_many(updated)
    return report
