"""Grimoire export / import as JSONL, and the inheritance path.

One header line (the exporter's embedder identity), then episodes, entries and causal edges. Vectors are not
exported: the importer re-embeds with its own model. Unless `as_is`, imports start at confidence min(c, 0.3), edges
are capped at 0.3 and the source golem is kept; importing a file twice changes nothing more.
The format, field by field: docs/reference/grimoire-export.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from golem.grimoire.store.embeddings import identity_of
from golem.grimoire.episodes.model import Episode
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.semantic.graph import CausalGraph, edge_id
from golem.grimoire.semantic.store import GrimoireEntry, Provenance, SemanticStore

FORMAT = "golem-grimoire"
VERSION = 1
INHERITED_CONFIDENCE = 0.3


def export_lines(episodes: EpisodeStore, semantic: SemanticStore, *, golem_id: str, tick: int) -> Iterator[str]:
    yield json.dumps({"kind": "header", "format": FORMAT, "version": VERSION, "golem_id": golem_id, "tick": tick,
                      "embedder": identity_of(semantic.embedder).as_dict()})
    for ep in episodes.all():
        yield json.dumps({"kind": "episode", **ep.model_dump(mode="json")})
    for e in semantic.all(include_inactive=True):
        yield json.dumps({"kind": "entry", **e.model_dump(mode="json")})
    for edge in CausalGraph(semantic.db_path).edges():
        yield json.dumps({"kind": "causal_edge", **edge})


def _edge_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """A causal_edge line's fields, checked before anything is written (fuzzing found a string weight, a null
    source and a list tick passing validation and failing half-way through the writes)."""
    edge = {k: obj[k] for k in ("source_id", "target_id", "weight", "updated_at")}
    for k in ("source_id", "target_id"):
        if not isinstance(edge[k], str) or not edge[k].strip():
            raise ValueError(f"causal_edge {k} must be a non-empty string, got {edge[k]!r}")
    if edge["source_id"] == edge["target_id"]:
        raise ValueError("a causal edge needs two different entries (source_id == target_id)")
    w = edge["weight"]
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 < w <= 1.0:
        raise ValueError(f"causal_edge weight must be a number in (0, 1], got {w!r}")
    t = edge["updated_at"]
    if isinstance(t, bool) or not isinstance(t, int) or t < 0:
        raise ValueError(f"causal_edge updated_at must be a tick (a whole number >= 0), got {t!r}")
    return edge


def import_file(path: Path, episodes: EpisodeStore, semantic: SemanticStore, *, as_is: bool = False) -> dict[str, int]:
    """Validate every line first (a bad line names its number and nothing is written), then write."""
    eps: list[Episode] = []
    entries: list[GrimoireEntry] = []
    edges: list[dict[str, Any]] = []
    origin = ""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):  # found by fuzzing: `null`, `[]`, `5` are lines too
                    raise ValueError(f"expected a JSON object with a kind, got {type(obj).__name__}")
                kind = obj.pop("kind")
                if n == 1 and kind != "header":
                    raise ValueError("the first line must be the header")
                if kind == "header":
                    if obj.get("format") != FORMAT or obj.get("version") != VERSION:
                        raise ValueError(f"not a {FORMAT} v{VERSION} file")
                    origin = str(obj.get("golem_id") or "")
                elif kind == "episode":
                    eps.append(Episode.model_validate(obj))
                elif kind == "entry":
                    entries.append(GrimoireEntry.model_validate(obj))
                elif kind == "causal_edge":
                    edge = _edge_fields(obj)
                    expected = edge_id(edge["source_id"], edge["target_id"])
                    if obj.get("edge_id", expected) != expected:
                        raise ValueError(f"edge_id {obj['edge_id']!r} does not match its source_id/target_id")
                    edges.append({**edge, "edge_id": expected})
                else:
                    raise ValueError(f"unknown kind {kind!r} (header, episode, entry, causal_edge)")
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{path}:{n}: {err}") from err
    if not as_is:
        eps = [e.model_copy(update={"confidence": min(e.confidence, INHERITED_CONFIDENCE)}) for e in eps]
        entries = [e.model_copy(update={
            "confidence": min(e.confidence, INHERITED_CONFIDENCE),
            "provenance": Provenance.PREDECESSOR if e.provenance == Provenance.SELF_LEARNED else e.provenance,
        }) for e in entries]
    for i in range(0, len(eps), 1024):
        episodes.upsert_many(eps[i:i + 1024])
    for i in range(0, len(entries), 1024):
        semantic.put_many(entries[i:i + 1024])
    graph = CausalGraph(semantic.db_path)
    for e in edges:
        w = e["weight"] if as_is else min(e["weight"], INHERITED_CONFIDENCE)
        graph.import_edge(e["source_id"], e["target_id"], weight=w, tick=e["updated_at"],
                          origin=origin or "unknown", eid=e["edge_id"])
    return {"episodes": len(eps), "entries": len(entries), "causal_edges": len(edges)}
