"""`golem grimoire stats | search | export | import | playbook | reembed | resume | quarantine` — the golem's memory
from the command line: upkeep and quality figures and the embedding identities, what retrieval would answer (and
why), JSONL export and import, PLAYBOOK.md's revision history and rollback through the Curator's safety guard, a
full re-embed that lifts a drift pause, and the hallucination firewall's quarantine.
Every verb and flag: docs/reference/cli.md; why: docs/design/grimoire.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cli import topology
from cli.common import config


def _stats(args) -> int:
    from golem.grimoire.access import latest_tick, open_stores
    from golem.grimoire.integrity import integrity_status
    from golem.layout import DataLayout
    from golem.grimoire.upkeep import cognitive_metrics, table_stats

    episodes, semantic = open_stores(args.data, args.home, on_model_switch="ignore", reading=True)
    tick = args.tick if args.tick is not None else latest_tick(episodes)
    out = {"tick": tick,
           "episodes": table_stats(episodes.table, "summary"),
           "semantic": table_stats(semantic.table, "content"),
           "metrics": cognitive_metrics(semantic, tick),
           # {model, version, dim} of each store and of the configured embedder; the write pause
           "embeddings": integrity_status(episodes, semantic, DataLayout(args.data).grimoire)}
    print(json.dumps(out, indent=2, default=str))
    return 0


def _search(args) -> int:
    from golem.grimoire.access import configured_floor, latest_tick, open_stores, search

    if args.k < 1:
        sys.exit("golem grimoire search: --k must be >= 1")
    episodes, semantic = open_stores(args.data, args.home, reading=True)
    tick = args.tick if args.tick is not None else latest_tick(episodes)
    if args.as_of is not None and args.as_of > tick:
        tick = args.as_of  # asking about a tick after the latest episode: that tick is "now"
    try:
        res = search(episodes, semantic, args.query, regime=args.regime, tick=tick, k=args.k, budget=args.budget,
                     floor=configured_floor(args.home), as_of=args.as_of, as_known_now=args.as_known_now,
                     action=args.action)
    except ValueError as err:
        sys.exit(f"golem grimoire search: {err}")
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
    from golem.grimoire.access import latest_tick, open_stores
    from golem.grimoire.transfer import export_lines

    # vectors are not exported
    episodes, semantic = open_stores(args.data, args.home, on_model_switch="ignore", reading=True)
    golem_id = config(args).golem.id
    lines = export_lines(episodes, semantic, golem_id=golem_id, tick=latest_tick(episodes))
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
    from golem.grimoire.access import open_stores
    from golem.grimoire.transfer import import_file

    episodes, semantic = open_stores(args.data, args.home)
    try:
        counts = import_file(Path(args.file), episodes, semantic, as_is=args.as_is)
    except (OSError, ValueError) as err:
        sys.exit(f"golem grimoire import: {err}")
    print(json.dumps(counts))
    return 0


def _reembed(args) -> int:
    """`golem grimoire reembed | resume`: full re-embed, re-pin, flush the queue, lift the pause."""
    from golem.grimoire.access import open_stores
    from golem.grimoire.store.guard import WriteGuard
    from golem.grimoire.integrity import reembed_stores
    from golem.layout import DataLayout

    root = DataLayout(args.data).grimoire
    name = f"golem grimoire {args.grimoire_cmd}"
    if args.grimoire_cmd == "resume" and not WriteGuard(root).paused:
        print(json.dumps({"paused": False}) if args.json else f"{name}: writes are not paused; nothing to do")
        return 0
    episodes, semantic = open_stores(args.data, args.home, on_model_switch="ignore")  # re-embedded just below
    try:
        out = reembed_stores(episodes, semantic, root)
    except (RuntimeError, ValueError) as err:
        sys.exit(f"{name}: {err}")
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return 0
    ref = out["reference"]
    print(f"re-embedded {out['episodes']} episodes and {out['entries']} entries with {ref['model']} "
          f"{ref['version']} ({ref['dim']}-d); drift reference re-pinned; flushed {out['flushed']['episodes']} queued "
          f"episodes and {out['flushed']['semantic']} queued entries; writes "
          f"{'still paused: ' + ', '.join(out['status']['reasons']) if out['status']['paused'] else 'resumed'}")
    return 0


def _playbook_paths(args) -> tuple[Path, Path]:
    """The worker's layout: <data>/PLAYBOOK.md and <data>/grimoire/heuristics.sqlite (golem.layout)."""
    from golem.layout import DataLayout

    layout = DataLayout(args.data)
    return layout.playbook, layout.heuristics


def _playbook(args) -> int:
    from golem.grimoire.playbook.compile import PlaybookHistory, PlaybookRefused, rollback

    path, db = _playbook_paths(args)
    if not db.exists():
        sys.exit(f"golem grimoire playbook: no heuristics store at {db}; is --data the golem's data directory?")
    history = PlaybookHistory(db)
    try:
        if args.playbook_cmd == "effects":
            return _effects(args)
        if args.playbook_cmd == "log":
            from golem.grimoire.playbook.heuristics import HeuristicStore

            rows = history.log()
            trials = HeuristicStore(db).trials()  # the verdicts each compile followed (docs/how-to/learned-rules.md)
            if not rows:
                print("(no PLAYBOOK revisions recorded yet)")
            for r in rows:
                judged = [t for t in trials if t["tick"] == r.tick]
                if args.json:
                    print(json.dumps({**r.model_dump(exclude={"text"}), "trials": [
                        {k: t[k] for k in ("heuristic_id", "occasion", "verdict")} for t in judged]}))
                else:
                    tick = "-" if r.tick is None else r.tick
                    n = "" if r.heuristics is None else f" {r.heuristics} heuristics"
                    print(f"r{r.revision}  tick {tick}  {r.created_at}  {r.reason}{n}  sha256 {r.sha256[:12]}")
                    for t in judged:
                        print(f"    trial {t['heuristic_id']} ({t['occasion']}): {t['verdict']}")
        elif args.playbook_cmd == "diff":
            print(history.diff(args.rev_a, args.rev_b), end="")
        else:
            from golem.safety.limits import SafetyLimits, check_playbook_delta

            limits = SafetyLimits.from_config(config(args))
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


def _effects(args) -> int:
    """`golem grimoire playbook effects`: every learned rule a trial measured — its standing and each trial's
    verdict with the figures with and without it (docs/how-to/learned-rules.md)."""
    from golem.grimoire.playbook.heuristics import HeuristicStore
    from golem.learning.trial import TrialResult

    _, db = _playbook_paths(args)
    if not db.exists():
        sys.exit(f"golem grimoire playbook: no heuristics store at {db}; is --data the golem's data directory?")
    store = HeuristicStore(db)
    trials = store.trials()
    if not trials and not args.json:
        print("(no learned rule has been trialled yet)")
    for h in store.list():
        mine = [t for t in trials if t["heuristic_id"] == h.id]
        if not mine:
            continue
        if args.json:
            print(json.dumps({"id": h.id, "text": h.text, "status": h.status, "confidence": h.confidence,
                              "trial_verdict": h.trial_verdict, "trials": mine}))
            continue
        print(f"{h.id}  {h.status}  confidence {h.confidence:.2f}  standing: {h.trial_verdict or 'unmeasured'}")
        print(f"  {h.text}")
        for t in mine:
            print(f"  tick {t['tick']} {t['occasion']}: {TrialResult.model_validate(t['result']).summary()}")
    return 0


def _quarantine(args) -> int:
    """`golem grimoire quarantine list | release ID | drop ID`: the hallucination firewall's hold."""
    from golem.grimoire.access import latest_tick, open_stores
    from golem.grimoire.semantic.admission import owner_drop, owner_release

    episodes, semantic = open_stores(args.data, args.home)
    if args.quarantine_cmd == "list":
        rows = semantic.quarantined(None if args.all else "pending")
        if args.json:
            print(json.dumps([{**{k: v for k, v in q.items() if k != "entry"}, "entry": q["entry"].model_dump(mode="json")}
                              for q in rows], indent=2))
            return 0
        if not rows:
            print("(nothing in quarantine)" if args.all else "(nothing pending in quarantine; --all shows resolved rows)")
        for q in rows:
            e = q["entry"]
            print(f"{q['id']}  {q['status']}  tick {q['tick']}  reviews {q['review_cycles']}  {e.category.value}  "
                  f"evidence {len(e.parent_episode_ids)}  conflicts {','.join(q['conflicts_with']) or '-'}\n"
                  f"   {e.content}\n   {q['resolution'] or q['reason']}")
        return 0
    tick = args.tick if args.tick is not None else latest_tick(episodes)
    try:
        if args.quarantine_cmd == "release":
            d = owner_release(semantic, args.id, tick)
            out = {"id": args.id, "released": True, "tick": tick, "action": d.action.value, "entry_id": d.entry_id,
                   "score": round(d.score, 4), "factors": d.factors, "superseded": d.superseded, "flags": d.flags}
            text = (f"{args.id}: released at tick {tick}; the admission gate {d.action.value} it "
                    f"(score {d.score:.3f}{', entry ' + d.entry_id if d.entry_id else ''})")
        else:
            owner_drop(semantic, args.id, tick, args.reason)
            out = {"id": args.id, "dropped": True, "tick": tick, "reason": args.reason}
            text = f"{args.id}: dropped at tick {tick} (kept in quarantined_entries for the audit)"
    except (KeyError, ValueError) as err:
        sys.exit(f"golem grimoire quarantine: {err.args[0]}")
    print(json.dumps(out) if args.json else text)
    return 0


def _regime_arg(label: str) -> str:
    from golem.grimoire.regimes import normalise_regime

    try:
        return normalise_regime(label) or "unknown"
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def register(command) -> None:
    p = command("grimoire", "the golem's memory: stats | search | export | import | reembed | resume | playbook | "
                            "quarantine | topology")
    sub = p.add_subparsers(dest="grimoire_cmd", required=True)
    topology.register(sub)  # golem grimoire topology
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
            sp.add_argument("--regime", default="unknown", type=_regime_arg,
                            help="the tick's regime: trending_up | trending_down | volatile | range_bound | unknown")
            sp.add_argument("--tick", type=int, default=None, help="now (default: the latest episode's tick)")
            sp.add_argument("--as-of", dest="as_of", type=int, default=None,
                            help="valid time: what was in force at this tick, as recorded by then (default: --tick)")
            sp.add_argument("--as-known-now", action="store_true",
                            help="with --as-of: include entries recorded after it (what we now know held then)")
            act = sp.add_mutually_exclusive_group()
            act.add_argument("--action", dest="action", action="store_true", default=None,
                             help="a question about acting: warnings and MUST constraints get top-3 slots "
                                  "(default: read from the question)")
            act.add_argument("--no-action", dest="action", action="store_false")
            sp.add_argument("--k", type=int, default=5)
            sp.add_argument("--budget", type=int, default=500, help="token budget (default 500)")
            sp.add_argument("--json", action="store_true")
        elif name == "export":
            sp.add_argument("--out", help="file to write (default stdout)")
        else:
            sp.add_argument("file")
            sp.add_argument("--as-is", action="store_true", help="keep the exported confidences")
    for name, help_ in [("reembed", "re-embed everything with the configured model, re-pin drift, resume writes"),
                        ("resume", "after a critical drift pause: the same full re-embed, then writes flow again")]:
        sp = sub.add_parser(name, help=help_)
        sp.set_defaults(fn=_reembed)
        sp.add_argument("--json", action="store_true")
    pb = sub.add_parser("playbook", help="PLAYBOOK.md revisions: log | diff A B | rollback N | effects")
    pb.set_defaults(fn=_playbook)
    pbs = pb.add_subparsers(dest="playbook_cmd", required=True)
    lg = pbs.add_parser("log", help="every recorded revision, oldest first")
    lg.add_argument("--json", action="store_true")
    ef = pbs.add_parser("effects", help="each learned rule's measured effect: trials with and without it")
    ef.add_argument("--json", action="store_true")
    df = pbs.add_parser("diff", help="unified diff between two revisions")
    df.add_argument("rev_a", type=int)
    df.add_argument("rev_b", type=int)
    rb = pbs.add_parser("rollback", help="write revision N back as a new revision (safety guard applies)")
    rb.add_argument("revision", type=int)
    qp = sub.add_parser("quarantine", help="held-back contradictions: list | release ID | drop ID")
    qp.set_defaults(fn=_quarantine)
    qps = qp.add_subparsers(dest="quarantine_cmd", required=True)
    ql = qps.add_parser("list", help="pending quarantined entries (--all: released and dropped too)")
    ql.add_argument("--all", action="store_true")
    qr = qps.add_parser("release", help="let one in on your word (firewall skipped; at least confidence 0.3)")
    qd = qps.add_parser("drop", help="drop one (its row and the reason stay for the audit)")
    qd.add_argument("--reason", default="")
    for q in (qr, qd):
        q.add_argument("id")
        q.add_argument("--tick", type=int, default=None, help="the tick to record (default: the latest episode's)")
    for q in (ql, qr, qd):
        q.add_argument("--json", action="store_true")
