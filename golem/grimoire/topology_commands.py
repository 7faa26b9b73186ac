"""`golem grimoire topology [--block N] [--json]` — the golem's DeFi topology in the knowledge graph.

Prints the facts true at a block (default: the newest block the graph has seen), the golem's positions, and
every entity within 3 hops of them with its hop distance and topology curiosity modifier (grimoire "Feeding
the Curiosity Scorer"). Reads <data>/grimoire/semantic.sqlite only (no embedder, no chain); names contract
addresses from <data>/deployment.json when it is there.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path


def _labels(data_dir: Path) -> dict[str, str]:
    """address (lower case) → address-book key, e.g. AAVE_POOL, WETH."""
    from golem.chain.contracts import Deployment, DeploymentError

    path = Path(data_dir) / "deployment.json"
    if not path.is_file():
        return {}
    try:
        dep = Deployment.load(path)
    except DeploymentError:
        return {}
    return {addr.lower(): key for key, addr in dep.addresses.items()}


def _label(entity: str, labels: dict[str, str]) -> str:
    return labels.get(entity.partition(":")[2].lower(), "")


def topology_report(db_path: Path, golem_id: str, block: int | None, labels: dict[str, str]) -> dict:
    """The report as a dict (what --json prints). Raises ValueError with the fix when there is nothing to read."""
    from golem.grimoire.graph import TOPOLOGY_MAX_HOPS, KnowledgeGraph, modifier_for_hops
    from golem.grimoire.topology import golem_positions

    db_path = Path(db_path)
    if not db_path.is_file():
        raise ValueError(f"{db_path} does not exist: no knowledge graph yet (start the golem, or pass --data)")
    try:
        with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
            seen = [b for b in db.execute("SELECT MAX(valid_from), MAX(valid_until) FROM kg_facts").fetchone()
                    if b is not None]
    except sqlite3.OperationalError as err:
        raise ValueError(f"{db_path} has no knowledge graph table ({err}): let the golem run a tick first") from None
    if block is None:
        if not seen:
            raise ValueError(f"the knowledge graph in {db_path} is empty: let the golem observe a tick first")
        block = int(max(seen))
    if block < 0:
        raise ValueError(f"--block must be >= 0, got {block}")
    kg = KnowledgeGraph(db_path)
    positions = golem_positions(kg, golem_id, block)
    hops = kg.distances_from(positions, TOPOLOGY_MAX_HOPS, block) if positions else {}
    return {
        "golem_id": golem_id,
        "block": block,
        "positions": [{"entity": p, "label": _label(p, labels)} for p in positions],
        "facts": [f.model_dump() | {"subject_label": _label(f.subject, labels),
                                    "object_label": _label(f.object, labels)} for f in kg.facts_at_block(block)],
        "reachable": [{"entity": e, "label": _label(e, labels), "hops": h, "modifier": modifier_for_hops(h)}
                      for e, h in sorted(hops.items(), key=lambda kv: (kv[1], kv[0]))],
    }


def _named(entity: str, label: str) -> str:
    return f"{entity} ({label})" if label else entity


def _topology(args) -> int:
    from golem.cli import _config

    golem_id = _config(args).golem.id
    try:
        report = topology_report(Path(args.data) / "grimoire" / "semantic.sqlite", golem_id, args.block,
                                 _labels(args.data))
    except ValueError as err:
        sys.exit(f"golem grimoire topology: {err}")
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"knowledge graph of golem {golem_id} at block {report['block']}")
    print("positions: " + (", ".join(_named(p["entity"], p["label"]) for p in report["positions"]) or "(none)"))
    print("facts:")
    for f in report["facts"]:
        print(f"  {_named(f['subject'], f['subject_label'])} --{f['predicate']}--> "
              f"{_named(f['object'], f['object_label'])}  [valid from block {f['valid_from']}]")
    if not report["facts"]:
        print("  (none at this block)")
    print("hops from the golem's positions (topology curiosity modifier):")
    for r in report["reachable"]:
        print(f"  {r['hops']}  {r['modifier']:.2f}  {_named(r['entity'], r['label'])}")
    if not report["reachable"]:
        print("  (no positions at this block)")
    return 0


def register(grimoire_sub) -> None:
    """Add `topology` to the `golem grimoire` subcommands (`grimoire_sub` is its add_subparsers() action)."""
    sp = grimoire_sub.add_parser("topology", help="the golem's DeFi topology and each entity's hops from its positions")
    sp.add_argument("--block", type=int, default=None, help="the block to read the graph at (default: the newest)")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(fn=_topology)
