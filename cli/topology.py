"""`golem grimoire topology [--block N] [--json]` — the golem's DeFi topology in the knowledge graph.

Prints the facts true at a block (default: the newest block the graph has seen), the golem's positions, and
every entity within 3 hops of them with its hop distance and topology curiosity modifier
(docs/design/grimoire.md#knowledge-graph). Reads <data>/grimoire/semantic.sqlite only (no embedder, no chain);
names contract addresses from <data>/deployment.json when it is there.
The report itself: golem.grimoire.semantic.topology.topology_report.
"""

from __future__ import annotations

import json
import sys

from cli.common import config


def _named(entity: str, label: str) -> str:
    return f"{entity} ({label})" if label else entity


def _topology(args) -> int:
    from golem.grimoire.semantic.topology import address_labels, topology_report
    from golem.layout import DataLayout

    golem_id = config(args).golem.id
    try:
        report = topology_report(DataLayout(args.data).semantic_db, golem_id, args.block,
                                 address_labels(args.data))
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
