"""The memory-consolidator's work, pure: the curator's episode distillation run over several golems'
episodes at once, keeping only the patterns that recur across golems (a golem's own delta cycle already finds the
ones it sees alone), each turned into one proposal per golem. Proposals never write a Grimoire: each golem's own
admission gate decides on them at its next tick (golem.clade.proposals). Rules and why: docs/design/clade.md.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

from pydantic import BaseModel, Field

from golem.grimoire.episodes.model import Episode
from golem.grimoire.playbook.heuristics import derive_heuristics_from_episodes

MIN_SUPPORT = 5  # the consolidator refuses a pattern with fewer supporting episodes
MIN_GOLEMS = 2  # ... or one that only one golem saw


class Pattern(BaseModel):
    text: str
    scope: str
    support: dict[str, list[str]]  # golem id → its supporting episode ids

    @property
    def episodes(self) -> int:
        return sum(len(v) for v in self.support.values())


class Proposal(BaseModel):
    """What a consolidator offers one golem: an insight, with the golem's own supporting episodes as evidence."""

    id: str  # the same consolidator and words make the same id: nothing is proposed twice
    consolidator: str
    content: str
    scope: str
    golems: list[str]  # every golem whose episodes support it
    episodes: int  # supporting episodes across them
    parent_episode_ids: list[str] = Field(default_factory=list)  # this golem's own


def patterns(episodes: dict[str, list[Episode]], *, min_support: int = MIN_SUPPORT,
             min_golems: int = MIN_GOLEMS) -> list[Pattern]:
    """The curator's distillation over the union of the golems' episodes; a pattern is kept when ≥ `min_support`
    episodes from ≥ `min_golems` golems support it. Deterministic for the same episodes."""
    owner: dict[str, str] = {}
    union: list[Episode] = []
    for golem, eps in sorted(episodes.items()):
        for e in eps:
            owner[e.id] = golem
            union.append(e)
    support: dict[tuple[str, str], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for text, scope, episode_id in derive_heuristics_from_episodes(union, min_support=max(1, min_support)):
        support[(text, scope)][owner[episode_id]].append(episode_id)
    return [Pattern(text=text, scope=scope, support={g: ids for g, ids in sorted(by.items())})
            for (text, scope), by in sorted(support.items()) if len(by) >= min_golems]


def proposals(found: list[Pattern], golems: list[str], consolidator: str) -> dict[str, list[Proposal]]:
    """One proposal per pattern for every golem of the set (one that saw none of it may still take it: its gate
    decides)."""
    out: dict[str, list[Proposal]] = {g: [] for g in golems}
    for p in found:
        pid = hashlib.sha256(f"{consolidator}\n{p.scope}\n{p.text}".encode()).hexdigest()[:20]
        for g in golems:
            out[g].append(Proposal(id=pid, consolidator=consolidator, content=p.text, scope=p.scope,
                                   golems=sorted(p.support), episodes=p.episodes,
                                   parent_episode_ids=p.support.get(g, [])))
    return out
