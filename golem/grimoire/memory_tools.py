"""The deliberator's memory tools: search the Grimoire (by regime, as of a past tick), read one episode or entry, and
propose an entry — which lands in the quarantine for review, never in the knowledge the golem acts on
(docs/design/inference.md#memory-tools).
"""

from __future__ import annotations

import hashlib
from typing import Any

from golem.chain.tools.schemas import ToolArgumentError
from golem.grimoire.access import search
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore

MAX_PROPOSALS_PER_TICK = 2
PROPOSED_CONFIDENCE = 0.3  # a model's unverified claim starts low; review decides
_PROPOSABLE = [EntryType.INSIGHT.value, EntryType.HEURISTIC.value, EntryType.WARNING.value]
_REGIMES = ["trending_up", "trending_down", "range_bound", "volatile", "unknown"]


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


SCHEMAS: list[dict[str, Any]] = [
    {"name": "search_memory",
     "description": "Search the golem's Grimoire (episodes and knowledge entries) by meaning. Optionally as of a past "
                    "tick (what was in force then) and for a market regime (its variants rank first). Returns ids, "
                    "kinds, summaries and scores; `abstained` when nothing relevant exists.",
     "input_schema": _obj({"query": {"type": "string"}, "regime": {"type": "string", "enum": _REGIMES},
                           "as_of_tick": {"type": "integer", "minimum": 0},
                           "k": {"type": "integer", "minimum": 1, "maximum": 10}}, ["query"])},
    {"name": "read_memory",
     "description": "Read one episode (id ep-…) or knowledge entry by id, whole.",
     "input_schema": _obj({"id": {"type": "string"}}, ["id"])},
    {"name": "propose_entry",
     "description": "Propose a knowledge entry (an insight, heuristic or warning you believe the golem should keep). "
                    "It goes to the quarantine for review; it does not change what the golem knows now.",
     "input_schema": _obj({"category": {"type": "string", "enum": _PROPOSABLE},
                           "content": {"type": "string", "minLength": 10, "maxLength": 600},
                           "regime": {"type": "string", "enum": _REGIMES},
                           "evidence": {"type": "array", "items": {"type": "string"}, "maxItems": 5}},
                          ["category", "content"])},
]


class MemoryReads:
    """One tick's memory tools over the worker's stores (`tick` is now, `regime` the tick's)."""

    def __init__(self, episodes: EpisodeStore, semantic: SemanticStore, *, golem_id: str, tick: int,
                 regime: str) -> None:
        self.episodes, self.semantic = episodes, semantic
        self.golem_id, self.tick, self.regime = golem_id, tick, regime
        self.proposed = 0

    def schemas(self) -> list[dict[str, Any]]:
        return [dict(s) for s in SCHEMAS]

    def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        allowed = {s["name"]: s["input_schema"] for s in SCHEMAS}
        if name not in allowed:
            raise ToolArgumentError(f"{name} is not a memory tool; memory tools: {', '.join(allowed)}")
        props, required = allowed[name]["properties"], allowed[name]["required"]
        extra = sorted(set(arguments) - set(props))
        missing = [k for k in required if arguments.get(k) in (None, "")]
        if extra or missing:
            raise ToolArgumentError(f"{name}: " + "; ".join(
                ([f"unexpected argument(s) {', '.join(extra)}"] if extra else [])
                + ([f"missing {', '.join(missing)}"] if missing else [])) + f"; allowed: {', '.join(props)}")
        return {"search_memory": self._search, "read_memory": self._read, "propose_entry": self._propose}[name](arguments)

    def _search(self, a: dict[str, Any]) -> dict[str, Any]:
        as_of = a.get("as_of_tick")
        if as_of is not None and (not isinstance(as_of, int) or as_of < 0 or as_of > self.tick):
            raise ToolArgumentError(f"search_memory.as_of_tick: a tick from 0 to now ({self.tick}), got {as_of!r}")
        k = int(a.get("k") or 5)
        res = search(self.episodes, self.semantic, str(a["query"]), regime=str(a.get("regime") or self.regime),
                     tick=self.tick, k=max(1, min(k, 10)), as_of=as_of)
        return {"as_of_tick": res.as_of if res.as_of is not None else self.tick, "abstained": res.abstained,
                "items": [{"id": i.id, "source": i.source, "kind": i.kind, "summary": i.summary,
                           "score": i.final, "warning": i.safety} for i in res.items]}

    def _read(self, a: dict[str, Any]) -> dict[str, Any]:
        ident = str(a["id"])
        ep = self.episodes.get(ident)
        if ep is not None:
            return {"id": ep.id, "source": "episode", "tick": ep.tick, "regime": ep.regime.value, "tier": ep.tier.value,
                    "summary": ep.summary, "actions": ep.actions, "pnl_impact": ep.pnl_impact,
                    "outcome_verified": ep.outcome_verified}
        entry = self.semantic.get(ident)
        if entry is None:
            raise ToolArgumentError(f"read_memory: no episode or entry {ident!r}; take ids from search_memory")
        return {"id": entry.id, "source": "entry", "category": entry.category.value, "content": entry.content,
                "confidence": entry.confidence, "regime": entry.market_regime, "valid_from_tick": entry.valid_from,
                "valid_until_tick": entry.valid_until, "tags": entry.tags}

    def _propose(self, a: dict[str, Any]) -> dict[str, Any]:
        if a["category"] not in _PROPOSABLE:
            raise ToolArgumentError(f"propose_entry.category: one of {', '.join(_PROPOSABLE)}, got {a['category']!r}")
        content = str(a["content"]).strip()
        if not 10 <= len(content) <= 600:
            raise ToolArgumentError(f"propose_entry.content: 10 to 600 characters, got {len(content)}")
        if self.proposed >= MAX_PROPOSALS_PER_TICK:
            raise ToolArgumentError(f"propose_entry: at most {MAX_PROPOSALS_PER_TICK} proposals per tick")
        # one id per (golem, tick, proposal): a retried or reset decide proposes the same row once
        key = hashlib.sha256(f"{self.golem_id}|{self.tick}|{a['category']}|{content}".encode()).hexdigest()[:12]
        qid = f"prop-{key}"
        self.proposed += 1
        if self.semantic.quarantined_one(qid) is None:
            entry = GrimoireEntry(id=qid, category=EntryType(a["category"]), content=content,
                                  confidence=PROPOSED_CONFIDENCE, market_regime=a.get("regime") or self.regime,
                                  valid_from=self.tick, parent_episode_ids=[str(e) for e in a.get("evidence") or []],
                                  tags=["proposed-by-model"], source=EntrySource(golem_id=self.golem_id),
                                  created_tick=self.tick)
            self.semantic.quarantine(entry, f"proposed by the model at tick {self.tick}: awaits review "
                                            "(golem grimoire quarantine release|drop)", [], self.tick)
        return {"quarantined": qid, "status": "pending review; not in force"}


class CombinedReads:
    """Several tool sets as one (chain reads and speculate, memory tools): names must not clash."""

    def __init__(self, *parts: Any) -> None:
        self.parts = [p for p in parts if p is not None]
        self._owner: dict[str, Any] = {}
        for p in self.parts:
            for s in p.schemas():
                if s["name"] in self._owner:
                    raise ValueError(f"tool {s['name']} offered twice")
                self._owner[s["name"]] = p

    def schemas(self) -> list[dict[str, Any]]:
        return [s for p in self.parts for s in p.schemas()]

    def run(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        part = self._owner.get(name)
        if part is None:
            raise ToolArgumentError(f"{name} is not a tool offered here; tools: {', '.join(sorted(self._owner))}")
        result: dict[str, Any] = part.run(name, arguments)
        return result
