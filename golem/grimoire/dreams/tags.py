"""The curator's `dream_priority: high` tags: episodes whose evidence is contradictory (the chain did not verify
what the simulation expected, or the situation's outcomes disagree: the minority side is tagged) or thin (fewer
than MIN_SUPPORT (5) episodes of that situation). Tags live in `<data>/grimoire/dream-staging.sqlite`
(`dream_priority`); their open count is the DreamScheduler's tag term and the next NREM replays them first.
An episode is tagged once. Why: docs/design/dreams.md#what-a-dream-replays.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel

from golem.grimoire.episodes.model import Episode, EpisodeOutcome

DREAM_PRIORITY_HIGH = "high"
TAG_WINDOW_TICKS = 200  # ours: the acted episodes a delta cycle looks at (the default dream interval)
THIN_SUPPORT = 5  # golem.learning.curator.MIN_SUPPORT (not imported: grimoire sits below learning)
MAX_TAGS_PER_CYCLE = 20  # ours: the newest first; a dream replays `replay_count` (10) of them anyway


class DreamTag(BaseModel):
    episode: str
    tick: int  # the episode's tick
    priority: str = DREAM_PRIORITY_HIGH
    reason: str
    tagged_at: int  # the delta cycle's tick
    dreamed_at: int | None = None  # the dream that replayed it


def _situation(e: Episode) -> tuple[str, str]:
    return e.regime.value, (e.action_tools[0] if e.action_tools else e.tool or "unknown")


def dream_priority(episodes: list[Episode], now_tick: int, window: int = TAG_WINDOW_TICKS) -> dict[str, str]:
    """Episode id → why it deserves a dream (contradictory or thin evidence), for the acted episodes of the window."""
    acted = [e for e in episodes if e.acted and e.tick > now_tick - window]
    groups: dict[tuple[str, str], list[Episode]] = defaultdict(list)
    for e in acted:
        groups[_situation(e)].append(e)
    out: dict[str, str] = {}
    for (regime, tool), eps in groups.items():
        pos = [e for e in eps if e.outcome == EpisodeOutcome.POSITIVE]
        neg = [e for e in eps if e.outcome == EpisodeOutcome.NEGATIVE]
        if pos and neg:
            minority = pos if len(pos) < len(neg) else neg if len(neg) < len(pos) else pos + neg
            for e in minority:
                out[e.id] = (f"contradictory: {tool} in {regime} turned out {len(pos)} positive and {len(neg)} "
                             "negative")
        for e in eps:
            if e.outcome_verified is False and e.id not in out:
                out[e.id] = f"contradictory: the {tool} of tick {e.tick} did not verify on chain"
        if len(eps) < THIN_SUPPORT:
            for e in eps:
                out.setdefault(e.id, f"thin: {len(eps)} episode(s) of {tool} in {regime}, fewer than "
                                     f"{THIN_SUPPORT} to learn from")
    ticks = {e.id: e.tick for e in acted}
    newest = sorted(out, key=lambda i: (-ticks[i], i))[:MAX_TAGS_PER_CYCLE]
    return {i: out[i] for i in newest}


class DreamTags:
    """The `dream_priority` table: one row per tagged episode."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS dream_priority (episode TEXT PRIMARY KEY, dreamed_at INTEGER, "
                       "body TEXT NOT NULL)")

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def tag(self, episodes: list[Episode], now_tick: int) -> list[DreamTag]:
        """Tag what `dream_priority` finds (an episode already tagged keeps its row); returns the open tags."""
        ticks = {e.id: e.tick for e in episodes}
        with self._db() as db:
            for ep_id, reason in dream_priority(episodes, now_tick).items():
                tag = DreamTag(episode=ep_id, tick=ticks[ep_id], reason=reason, tagged_at=now_tick)
                db.execute("INSERT OR IGNORE INTO dream_priority (episode, dreamed_at, body) VALUES (?, NULL, ?)",
                           (ep_id, tag.model_dump_json()))
        return self.open()

    def open(self) -> list[DreamTag]:
        with self._db() as db:
            rows = db.execute("SELECT body FROM dream_priority WHERE dreamed_at IS NULL").fetchall()
        return sorted((DreamTag.model_validate_json(r[0]) for r in rows), key=lambda t: (-t.tick, t.episode))

    def all(self) -> list[DreamTag]:
        with self._db() as db:
            rows = db.execute("SELECT body, dreamed_at FROM dream_priority").fetchall()
        return [DreamTag.model_validate_json(b).model_copy(update={"dreamed_at": d}) for b, d in rows]

    def dreamed(self, episode_ids: list[str], tick: int) -> None:
        with self._db() as db:
            db.executemany("UPDATE dream_priority SET dreamed_at = ? WHERE episode = ? AND dreamed_at IS NULL",
                           [(tick, i) for i in episode_ids])
