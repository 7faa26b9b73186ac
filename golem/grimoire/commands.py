"""`golem grimoire stats | search | export | import` — the golem's memory from the command line.

stats   LanceDB upkeep figures (rows, FTS-unindexed rows, fragments, versions, bytes) and the Rev. 12
        cognitive quality metrics computed from the stores
search  what the golem would retrieve for a query in a context, with the score of every factor
        (prints nothing but the abstention reason when nothing is relevant)
export  JSONL of episodes, entries and causal edges (format: golem/grimoire/transfer.py)
import  load such a file; entries start at the inherited confidence unless --as-is
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def open_stores(data_dir: Path):
    """The worker's layout: <data>/grimoire/{episodes.lance, semantic.sqlite, semantic.lance}."""
    from golem.grimoire.embeddings import default_embedder
    from golem.grimoire.episodes import EpisodeStore
    from golem.grimoire.semantic import SemanticStore

    root = Path(data_dir) / "grimoire"
    emb = default_embedder()
    return EpisodeStore(root / "episodes.lance", emb), SemanticStore(root / "semantic.sqlite", root / "semantic.lance", emb)


def _latest_tick(episodes) -> int:
    return max((e.tick for e in episodes.all()), default=0)


def _stats(args) -> int:
    from golem.grimoire.upkeep import cognitive_metrics, table_stats

    episodes, semantic = open_stores(args.data)
    tick = args.tick if args.tick is not None else _latest_tick(episodes)
    out = {"tick": tick,
           "episodes": table_stats(episodes._table, "summary"),
           "semantic": table_stats(semantic.table, "content"),
           "metrics": cognitive_metrics(semantic, tick)}
    print(json.dumps(out, indent=2, default=str))
    return 0


def _search(args) -> int:
    from golem.grimoire.retrieval import retrieve_for_tick

    if args.k < 1:
        sys.exit("golem grimoire search: --k must be >= 1")
    episodes, semantic = open_stores(args.data)
    tick = args.tick if args.tick is not None else _latest_tick(episodes)
    res = retrieve_for_tick(episodes, semantic, args.query, regime=args.regime, tick=tick, k=args.k,
                            token_budget=args.budget, steered=True, log=False)
    if args.json:
        print(res.model_dump_json(indent=2))
        return 0
    if not res.items:
        print(f"(nothing retrieved: {res.reason})")
        return 0
    for i, item in enumerate(res.items, 1):
        factors = " ".join(f"{k}={v:.3f}" for k, v in item.scores.items())
        print(f"{i}. [{item.source}:{item.kind}] {item.id} final={item.final:.3f}\n   {factors}\n   {item.summary}")
    return 0


def _export(args) -> int:
    from golem.cli import _config
    from golem.grimoire.transfer import export_lines

    episodes, semantic = open_stores(args.data)
    golem_id = _config(args).golem.id
    lines = export_lines(episodes, semantic, golem_id=golem_id, tick=_latest_tick(episodes))
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    try:
        n = 0
        for line in lines:
            out.write(line + "\n")
            n += 1
    finally:
        if args.out:
            out.close()
    if args.out:
        print(f"wrote {args.out} ({n} lines)", file=sys.stderr)
    return 0


def _import(args) -> int:
    from golem.grimoire.transfer import import_file

    episodes, semantic = open_stores(args.data)
    try:
        counts = import_file(Path(args.file), episodes, semantic, as_is=args.as_is)
    except (OSError, ValueError) as err:
        sys.exit(f"golem grimoire import: {err}")
    print(json.dumps(counts))
    return 0


def register(command) -> None:
    p = command("grimoire", "the golem's memory: stats | search | export | import")
    sub = p.add_subparsers(dest="grimoire_cmd", required=True)
    for name, help_, fn in [("stats", "store upkeep figures and cognitive quality metrics", _stats),
                            ("search", "what the golem would retrieve, and why", _search),
                            ("export", "episodes, entries and causal edges as JSONL", _export),
                            ("import", "load a JSONL export (inheritance)", _import)]:
        sp = sub.add_parser(name, help=help_)
        sp.set_defaults(fn=fn)
        if name == "stats":
            sp.add_argument("--tick", type=int, default=None)
        elif name == "search":
            sp.add_argument("query")
            sp.add_argument("--regime", default="unknown")
            sp.add_argument("--tick", type=int, default=None)
            sp.add_argument("--as-of", dest="tick", type=int, help="alias of --tick")
            sp.add_argument("--k", type=int, default=5)
            sp.add_argument("--budget", type=int, default=500, help="token budget (default 500, rev. 9)")
            sp.add_argument("--json", action="store_true")
        elif name == "export":
            sp.add_argument("--out", help="file to write (default stdout)")
        else:
            sp.add_argument("file")
            sp.add_argument("--as-is", action="store_true", help="keep the exported confidences")
