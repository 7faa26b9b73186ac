"""The deliberator's memory tools: search the Grimoire (by regime, as of a past tick), read one episode or entry, read
the topology (knowledge-graph facts, as of a past tick, and causal edges), and propose an entry or a causal edge —
both land in the quarantine for review, never in the knowledge the golem acts on (docs/design/inference.md#memory-tools).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from golem.chain.tools.schemas import ToolArgumentError
from golem.grimoire.access import search
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.semantic.graph import MAX_HOPS, CausalGraph, KnowledgeGraph
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
    {"name": "link_causal",
     "description": "Propose a causal edge between two memories (episode or entry ids from search_memory): the cause "
                    "leads to the effect. It goes to the quarantine for review like propose_entry; once admitted it "
                    "joins the causal graph that retrieval follows.",
     "input_schema": _obj({"cause": {"type": "string"}, "effect": {"type": "string"},
                           "weight": {"type": "number", "exclusiveMinimum": 0, "maximum": 1,
                                      "description": "how strongly, 0-1 (default 0.5)"},
                           "reason": {"type": "string", "minLength": 10, "maxLength": 400}},
                          ["cause", "effect", "reason"])},
    {"name": "read_topology",
     "description": "Read the golem's topology: the knowledge-graph facts about an entity (ids as in the Positions "
                    "topology, e.g. pool:…, lending_market:…) and its neighbours within `hops`, optionally as known "
                    "at a past tick; or, for a memory id, its causal edges (causes and consequences).",
     "input_schema": _obj({"entity": {"type": "string"}, "hops": {"type": "integer", "minimum": 1, "maximum": MAX_HOPS},
                           "as_of_tick": {"type": "integer", "minimum": 0}}, ["entity"])},
]


class MemoryReads:
    """One tick's memory tools over the worker's stores (`tick` is now, `regime` the tick's)."""

    def __init__(self, episodes: EpisodeStore, semantic: SemanticStore, *, golem_id: str, tick: int,
                 regime: str, block: int = 0, regime_tag: str | None = None) -> None:
        self.episodes, self.semantic = episodes, semantic
        self.golem_id, self.tick, self.regime, self.block = golem_id, tick, regime, block
        self.regime_tag = regime_tag  # the tick's regime cell, on every entry it proposes
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
        return {"search_memory": self._search, "read_memory": self._read, "propose_entry": self._propose,
                "link_causal": self._link, "read_topology": self._topology}[name](arguments)

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
        qid = self._quarantine("propose_entry", f"{a['category']}|{content}", "proposed", lambda qid: GrimoireEntry(
            id=qid, category=EntryType(a["category"]), content=content, confidence=PROPOSED_CONFIDENCE,
            market_regime=a.get("regime") or self.regime, valid_from=self.tick, regime_tag=self.regime_tag,
            parent_episode_ids=[str(e) for e in a.get("evidence") or []], tags=["proposed-by-model"],
            source=EntrySource(golem_id=self.golem_id), created_tick=self.tick))
        return {"quarantined": qid, "status": "pending review; not in force"}

    def _quarantine(self, tool: str, what: str, kind: str, entry: Callable[[str], GrimoireEntry]) -> str:
        """A model's proposal into the quarantine, never in force: one id per (golem, tick, proposal), so a retried or
        reset decide proposes the same row once; at most MAX_PROPOSALS_PER_TICK a tick."""
        if self.proposed >= MAX_PROPOSALS_PER_TICK:
            raise ToolArgumentError(f"{tool}: at most {MAX_PROPOSALS_PER_TICK} proposals per tick")
        qid = "prop-" + hashlib.sha256(f"{self.golem_id}|{self.tick}|{what}".encode()).hexdigest()[:12]
        self.proposed += 1
        if self.semantic.quarantined_one(qid) is None:
            self.semantic.quarantine(entry(qid), f"{kind} by the model at tick {self.tick}: awaits review "
                                                 "(golem grimoire quarantine release|drop)", [], self.tick)
        return qid

    def _known(self, ident: str) -> bool:
        return self.episodes.get(ident) is not None or self.semantic.get(ident) is not None

    def _link(self, a: dict[str, Any]) -> dict[str, Any]:
        cause, effect, reason = str(a["cause"]), str(a["effect"]), str(a["reason"]).strip()
        if cause == effect:
            raise ToolArgumentError("link_causal: cause and effect must be two different memories")
        unknown = [i for i in (cause, effect) if not self._known(i)]
        if unknown:
            raise ToolArgumentError(f"link_causal: no episode or entry {', '.join(unknown)}; take ids from search_memory")
        weight = a.get("weight", 0.5)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 < weight <= 1.0:
            raise ToolArgumentError(f"link_causal.weight: a number in (0, 1], got {weight!r}")
        if not 10 <= len(reason) <= 400:
            raise ToolArgumentError(f"link_causal.reason: 10 to 400 characters, got {len(reason)}")
        qid = self._quarantine("link_causal", f"{cause}|{effect}", "causal edge proposed", lambda qid: GrimoireEntry(
            id=qid, category=EntryType.CAUSAL_LINK, content=f"{cause} leads to {effect}: {reason}",
            confidence=PROPOSED_CONFIDENCE, market_regime=self.regime, valid_from=self.tick, regime_tag=self.regime_tag,
            parent_episode_ids=[i for i in (cause, effect) if self.episodes.get(i) is not None],
            tags=["proposed-by-model", *edge_tags(cause, effect, float(weight))],
            source=EntrySource(golem_id=self.golem_id), created_tick=self.tick))
        return {"quarantined": qid, "edge": f"{cause} -> {effect}", "status": "pending review; not in the graph"}

    def _topology(self, a: dict[str, Any]) -> dict[str, Any]:
        entity = str(a["entity"])
        hops = a.get("hops") or 1
        as_of = a.get("as_of_tick")
        if not isinstance(hops, int) or not 1 <= hops <= MAX_HOPS:
            raise ToolArgumentError(f"read_topology.hops: 1 to {MAX_HOPS}, got {hops!r}")
        if as_of is not None and (not isinstance(as_of, int) or as_of < 0 or as_of > self.tick):
            raise ToolArgumentError(f"read_topology.as_of_tick: a tick from 0 to now ({self.tick}), got {as_of!r}")
        if self._known(entity):  # a memory: its place in the causal graph
            graph = CausalGraph(self.semantic.db_path)
            return {"entity": entity, "kind": "memory",
                    "consequences": [{"id": i, "score": round(s, 4), "hops": h}
                                     for i, s, h in graph.bfs([entity], now_tick=self.tick, max_hops=hops)][:10],
                    "causes": [{"id": i, "score": round(s, 4), "hops": h} for i, s, h in
                               graph.bfs([entity], now_tick=self.tick, max_hops=hops, direction="backward")][:10]}
        kg = KnowledgeGraph(self.semantic.db_path)
        facts = (kg.query_as_known_at(entity, as_of) if as_of is not None
                 else kg.query_at_block(entity, self.block))
        if not facts:
            raise ToolArgumentError(f"read_topology: nothing known about {entity!r}"
                                    + (f" as of tick {as_of}" if as_of is not None else "")
                                    + "; use an entity id from the topology or a memory id from search_memory")
        near = kg.k_hop_neighbors(entity, hops, self.block) if hops > 1 else {}
        return {"entity": entity, "kind": "entity", "as_of_tick": as_of if as_of is not None else self.tick,
                "facts": [f"{f.subject} --{f.predicate}--> {f.object}" for f in facts][:20],
                "neighbours": [{"id": e, "hops": h} for e, h in sorted(near.items(), key=lambda t: (t[1], t[0]))][:20]}


def edge_tags(cause: str, effect: str, weight: float) -> list[str]:
    """A proposed causal edge, as the tags of its quarantined entry (read back by `proposed_edge` on release)."""
    return ["causal-edge", f"cause:{cause}", f"effect:{effect}", f"weight:{weight:g}"]


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
