"""Choose retrieval's ranking constants on the *tune* part of the memory set only ("learn the weights on
your labelled set"); the held-out part is never scored here. Prints the best settings by the objective below;
the chosen values are then written into golem/grimoire/retrieval.py by hand, with this run cited.

    python bench/memory_eval/tune.py
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import eval_memory as ev  # noqa: E402

from golem.grimoire import retrieval as R  # noqa: E402

GRID = {
    # first session: DENSE_WEIGHT 0.55/0.65/0.75, TIE_MARGIN 0.05/0.1, SAFETY_MIN_SHARE 0.4/0.5/0.6 → 0.65, 0.1, 0.5
    # (kept); second session: REGIME_BAND 0.45, SAFETY_MIN_LEXICAL 0.14 (kept; the abstention line and the entity line
    # it also searched are now the calibrated decision, fitted by abstention.py). Not yet searched: the item line
    # and the bonus of a number the question states (0.19 and 0.15, set by hand, measured on the lives tune part)
    "REGIME_BAND": [0.4, 0.45, 0.5],
    "SAFETY_MIN_LEXICAL": [0.12, 0.14],
    "ITEM_RELEVANCE": [0.17, 0.19, 0.21],
    "NUMERIC_BONUS": [0.10, 0.15, 0.20],
}


def objective(o: dict) -> float:
    ov, cat = o["overall"], o["categories"]
    fa = ov["false_abst"] or 0.0
    return (ov["recall5"] + ov["mrr10"] + (1 - cat["as_of"]["wrong_time"]) + (1 - cat["knowledge_update"]["stale"])
            + cat["regime"]["regime1"] + ov["warn3"] + cat["abstention"]["abstain"] - 4 * max(0.0, fa - 0.05))


def main() -> None:
    env = ev.load()
    tune = [q for q in env["data"]["questions"] if q["split"] == "tune"]
    results = []
    keys = list(GRID)
    for k in keys:
        if not hasattr(R, k):
            raise SystemExit(f"retrieval has no constant {k}: update GRID")
    for values in itertools.product(*(GRID[k] for k in keys)):
        for k, v in zip(keys, values):
            setattr(R, k, v)
        rows, _ = ev.ask_grimoire(env, tune)
        o = ev.aggregate(rows, "tune")
        results.append((objective(o), dict(zip(keys, values)), o))
    results.sort(key=lambda t: -t[0])
    for score, cfg, o in results[:8]:
        ov, cat = o["overall"], o["categories"]
        print(f"{score:.3f} {cfg}  r5 {ov['recall5']:.2f} mrr {ov['mrr10']:.2f} reg {cat['regime']['regime1']:.2f} "
              f"warn {ov['warn3']:.2f} abst {cat['abstention']['abstain']:.2f} fa {ov['false_abst']:.2f} "
              f"asof {cat['as_of']['wrong_time']:.2f}")


if __name__ == "__main__":
    main()
