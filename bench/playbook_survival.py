"""Heuristic survival (healthy: 40–70 % of new PLAYBOOK heuristics surviving 100 ticks; docs/design/events.md).

Reads a golem's PLAYBOOK revision history (`playbook_revisions` in <data>/grimoire/heuristics.sqlite): a heuristic
is *new* when it first appears in a compiled revision during the run (ids already in the first revision a run
found on disk are inherited, not new); it *survives* when the revision in force `horizon` ticks after its entry
still lists it. Heuristics that entered fewer than `horizon` ticks before the last recorded tick are not judged.

Run: python bench/playbook_survival.py DATA_DIR [DATA_DIR ...] [--horizon 100] [--last-tick N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from golem.grimoire.playbook.survival import revisions, survival  # noqa: E402


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="+")
    ap.add_argument("--horizon", type=int, default=100)
    ap.add_argument("--last-tick", type=int, default=None, help="default: the newest cycle record's tick")
    args = ap.parse_args(argv)
    for d in args.data:
        db = Path(d) / "grimoire" / "heuristics.sqlite"
        if not db.exists():
            print(f"{d}: no heuristics.sqlite")
            continue
        revs = revisions(db)
        cycles = sorted(int(p.stem.split("-")[1]) for p in (Path(d) / "cycles").glob("cycle-*.json"))
        last = args.last_tick if args.last_tick is not None else (cycles[-1] if cycles else max((t for t, _ in revs), default=0))
        print(f"{d}: {survival(revs, last, args.horizon)} over ticks up to {last}, {len(revs)} revisions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
