"""abstention.py --extend: a feature that separates answerable from unanswerable questions on every tune part is
reported as keeping the figures of the model in code (docs/design/grimoire.md, "The refits not taken")."""

from __future__ import annotations

import numpy as np

from bench.memory_eval import abstention
from golem.grimoire.retrieval import ABSTAIN_FEATURES


def _rows(seed: int, feature: str, unanswerable_value: float, lives: int = 60, by_path: bool = False) -> list[dict]:
    """Tune rows of every part whose evidence is noise but for `feature`, which separates the unanswerable ones;
    by_path: the lives rows grouped by path (path-0..3) as --nested leaves them out."""
    rng = np.random.default_rng(seed)
    rows = []
    for source, n in (("written", 40), ("written-extra", 20), ("lives", lives), ("lives-extra", lives)):
        for i in range(n):
            unanswerable = i % 3 == 0
            ev = {f: float(rng.random()) for f in ABSTAIN_FEATURES}
            ev[feature] = (unanswerable_value if unanswerable else 1.0 - unanswerable_value) + 0.05 * float(rng.random())
            group = f"{source}-{i % 4}" if not by_path else (
                f"written-{i % 4}" if source.startswith("written") else f"path-{i % 4}")
            rows.append({"group": group, "set": "written" if source.startswith("written") else "lives",
                         "source": source, "unanswerable": unanswerable, "evidence": ev})
    return rows


def test_a_feature_that_separates_every_part_keeps_the_figures(capsys):
    rows = _rows(33, "margin", 0.9)  # the model in code reads noise, margin separates
    y = np.array([float(r["unanswerable"]) for r in rows])
    abstention.extend(rows, y, np.ones(len(rows)), np.array([r["source"] for r in rows]),
                      np.array([r["group"] for r in rows]), None)
    best = capsys.readouterr().out.splitlines()[1]
    assert best.startswith("keeps=True") and "margin" in best, best


def test_a_swapped_feature_is_read_in_place_of_the_models(capsys):
    rows = _rows(34, "agreement_tied", 0.1)  # the model's agreement is noise, its swap is not
    y = np.array([float(r["unanswerable"]) for r in rows])
    abstention.extend(rows, y, np.ones(len(rows)), np.array([r["source"] for r in rows]),
                      np.array([r["group"] for r in rows]), None, swap={"agreement": "agreement_tied"})
    out = capsys.readouterr().out.splitlines()
    best = out[1]
    assert best.startswith("keeps=True") and "agreement_tied" in best, best
    assert not any(" agreement " in line for line in out if line.startswith("keeps=")), out


def test_nested_checks_the_choice_on_each_path_left_out(capsys):
    rows = _rows(35, "margin", 0.9, lives=80, by_path=True)  # the model in code reads noise, margin separates
    y = np.array([float(r["unanswerable"]) for r in rows])
    tot = abstention.nested(rows, y, np.array([r["set"] for r in rows]), np.array([r["source"] for r in rows]),
                            np.array([r["group"] for r in rows]), None)
    out = capsys.readouterr().out
    assert out.count(": chose (") == 4 and "margin" in out, out  # one choice per path left out
    code, chosen = tot["code"], tot["chosen"]
    assert chosen[1] == code[1] == 80 // 3 + 1 + 80 // 3 + 1  # every unanswerable lives question counted once
    assert chosen[0] == chosen[1] and chosen[2] == 0 and chosen[0] > code[0], tot
