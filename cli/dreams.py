"""`golem dreams [--json] [--tick N]` — the dream cycles from their DreamJournals on the data dir:
what each replayed, imagined, rehearsed, staged and promoted, with the dream yield and threat coverage."""

from __future__ import annotations

import json
from pathlib import Path

from golem.errors import UserError


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def _dreams(args) -> int:
    from golem.grimoire.dreams.staging import DREAM_YIELD_HEALTHY, StagingBuffer, journals
    from golem.layout import DataLayout

    data = Path(args.data)
    if not data.is_dir():
        raise UserError(f"no data directory at {data}: point --data (or GOLEM_DATA) at the golem's data dir")
    cycles = journals(data)
    if args.tick is not None:
        cycles = [j for j in cycles if j.tick == args.tick]
        if not cycles:
            raise UserError(f"no dream cycle at tick {args.tick}; `golem dreams` lists the cycles")
    if args.json:
        print(json.dumps([j.model_dump(mode="json") for j in cycles], indent=2))
        return 0
    if not cycles:
        print("no dream cycles yet (the DreamScheduler starts one when urgency reaches 1.0; see `golem status`)")
        return 0
    for j in cycles[-args.n:]:
        where = f"stopped before {j.stopped_at}: {j.stop_reason}" if j.stopped_at else "complete"
        print(f"dream at tick {j.tick} ({j.started_at[:19].replace('T', ' ')} UTC): {where}; urgency "
              f"{j.urgency if j.urgency is not None else 'n/a'} ({', '.join(j.reasons) or 'fixed schedule'})")
        print(f"  phases:     {', '.join(j.phases_done)}   forks: {j.forks}")
        if j.focus:
            print(f"  focus:      {j.focus}")
        strengthened = sum(r.get("strengthened", False) for r in j.replayed)
        print(f"  replayed:   {len(j.replayed)} episodes ({strengthened} strengthened), "
              f"{len(j.merged)} near-duplicate groups, {sum(len(c['merged']) for c in j.compressed)} rows merged "
              f"into {len(j.compressed)}")
        for kind, rows in (("imagined", j.imagined), ("rehearsed", j.rehearsed)):
            broken = [r for r in rows if not r["ok"]]
            print(f"  {kind}:  {len(rows)} scenarios, {len(broken)} broken")
            for r in rows if args.tick is not None else broken:
                mark = "ok " if r["ok"] else "BROKEN"
                src = f" [from episode {r['source_episode']}]" if r.get("source_episode") else ""
                print(f"    {mark} {r['scenario']}{src}: {r['crisis']}")
                for p in r.get("problems", []):
                    print(f"         - {p}")
                for n in r.get("notes", []):
                    print(f"         note: {n}")
                if r.get("guard"):
                    print(f"         guard candidate: {r['guard']}")
        print(f"  threats:    {', '.join(j.threats_rehearsed) or 'none'} of {', '.join(j.threats_due) or 'none due'}")
        print(f"  staged:     {len(j.staged)}   promoted: {len(j.promoted)}   dream yield {_pct(j.dream_yield)} "
              f"(healthy {_pct(DREAM_YIELD_HEALTHY[0])}–{_pct(DREAM_YIELD_HEALTHY[1])})   threat coverage "
              f"{_pct(j.threat_coverage)} (target 100%)")
    staged = StagingBuffer(DataLayout(data).dream_staging).all()
    by = {}
    for i in staged:
        by[i.status.value] = by.get(i.status.value, 0) + 1
    print(f"staging buffer: {len(staged)} items " + (", ".join(f"{v} {k}" for k, v in sorted(by.items())) or ""))
    return 0


def register(command) -> None:
    p = command("dreams", "dream cycles from their journals: replayed, imagined, rehearsed, staged, promoted")
    p.add_argument("-n", type=int, default=10, help="the newest N cycles (default 10)")
    p.add_argument("--tick", type=int, default=None, help="one cycle in full (every scenario, ok or broken)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_dreams)
