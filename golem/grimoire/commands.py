"""`golem grimoire stats | search | export | import` — the golem's memory from the command line.

stats   LanceDB upkeep figures (rows, FTS-unindexed rows, fragments, versions, bytes) and the Rev. 12
        cognitive quality metrics computed from the stores
search  what the golem would retrieve for a query in a context, with the score of every factor
        (prints nothing but the abstention reason when nothing is relevant)
export  JSONL of episodes, entries and causal edges (format: golem/grimoire/transfer.py)
import  load such a file; entries start at the inherited confidence unless --as-is
playbook log | diff A B | rollback N
        PLAYBOOK.md revision history (golem/grimoire/playbook.py); rollback writes revision N back as a
        new revision through the same safety guard as the Curator (check_playbook_delta vs golem.toml limits)
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
           "episodes": table_stats(episodes.table, "summary"),
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


def _playbook_paths(args) -> tuple[Path, Path]:
    """The worker's layout: <data>/PLAYBOOK.md and <data>/grimoire/heuristics.sqlite (workers/services.py)."""
    data = Path(args.data)
    return data / "PLAYBOOK.md", data / "grimoire" / "heuristics.sqlite"


def _playbook(args) -> int:
    from golem.grimoire.playbook import PlaybookHistory, PlaybookRefused, rollback

    path, db = _playbook_paths(args)
    if not db.exists():
        sys.exit(f"golem grimoire playbook: no heuristics store at {db}; is --data the golem's data directory?")
    history = PlaybookHistory(db)
    try:
        if args.playbook_cmd == "log":
            rows = history.log()
            if not rows:
                print("(no PLAYBOOK revisions recorded yet)")
            for r in rows:
                if args.json:
                    print(json.dumps(r.model_dump(exclude={"text"})))
                else:
                    tick = "-" if r.tick is None else r.tick
                    n = "" if r.heuristics is None else f" {r.heuristics} heuristics"
                    print(f"r{r.revision}  tick {tick}  {r.created_at}  {r.reason}{n}  sha256 {r.sha256[:12]}")
        elif args.playbook_cmd == "diff":
            print(history.diff(args.rev_a, args.rev_b), end="")
        else:
            from golem.cli import _config
            from golem.safety.limits import SafetyLimits, check_playbook_delta

            limits = SafetyLimits.from_config(_config(args))
            rev = rollback(path, args.revision, history=history,
                           guard=lambda old, new: check_playbook_delta(old, new, limits).refused)
            print(f"{path}: revision {rev.revision} = revision {args.revision} (sha256 {rev.sha256[:12]})")
    except KeyError as err:
        sys.exit(f"golem grimoire playbook: {err.args[0]}")
    except PlaybookRefused as err:
        sys.exit(f"golem grimoire playbook: {err}")
    except ValueError as err:
        sys.exit(f"golem grimoire playbook: {err}")
    return 0


def register(command) -> None:
    p = command("grimoire", "the golem's memory: stats | search | export | import | playbook")
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
    pb = sub.add_parser("playbook", help="PLAYBOOK.md revisions: log | diff A B | rollback N")
    pb.set_defaults(fn=_playbook)
    pbs = pb.add_subparsers(dest="playbook_cmd", required=True)
    lg = pbs.add_parser("log", help="every recorded revision, oldest first")
    lg.add_argument("--json", action="store_true")
    df = pbs.add_parser("diff", help="unified diff between two revisions")
    df.add_argument("rev_a", type=int)
    df.add_argument("rev_b", type=int)
    rb = pbs.add_parser("rollback", help="write revision N back as a new revision (safety guard applies)")
    rb.add_argument("revision", type=int)
