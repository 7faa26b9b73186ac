"""abstention.py --extend: a feature that separates answerable from unanswerable questions on every tune part is
reported as keeping the figures of the model in code (docs/design/grimoire.md, "The refits not taken")."""

from __future__ import annotations

import numpy as np

from bench.memory_eval import abstention
from golem.grimoire.retrieval import ABSTAIN_FEATURES


def test_a_feature_that_separates_every_part_keeps_the_figures(capsys):
    rng = np.random.default_rng(33)
    rows = []
    for source, n in (("written", 40), ("written-extra", 20), ("lives", 60), ("lives-extra", 60)):
        for i in range(n):
            unanswerable = i % 3 == 0
            ev = {f: float(rng.random()) for f in ABSTAIN_FEATURES}  # the model in code reads noise here...
            ev["margin"] = (0.9 if unanswerable else 0.1) + 0.05 * float(rng.random())  # ...margin separates
            rows.append({"group": f"{source}-{i % 4}", "set": "written" if source.startswith("written") else "lives",
                         "source": source, "unanswerable": unanswerable, "evidence": ev})
    y = np.array([float(r["unanswerable"]) for r in rows])
    abstention.extend(rows, y, np.ones(len(rows)), np.array([r["source"] for r in rows]),
                      np.array([r["group"] for r in rows]), None)
    best = capsys.readouterr().out.splitlines()[1]
    assert best.startswith("keeps=True") and "margin" in best, best


def test_a_swapped_feature_is_read_in_place_of_the_models(capsys):
    rng = np.random.default_rng(34)
    rows = []
    for source, n in (("written", 40), ("written-extra", 20), ("lives", 60), ("lives-extra", 60)):
        for i in range(n):
            unanswerable = i % 3 == 0
            ev = {f: float(rng.random()) for f in ABSTAIN_FEATURES}  # the model's agreement is noise here...
            ev["agreement_tied"] = (0.1 if unanswerable else 0.9) + 0.05 * float(rng.random())  # ...its swap is not
            rows.append({"group": f"{source}-{i % 4}", "set": "written" if source.startswith("written") else "lives",
                         "source": source, "unanswerable": unanswerable, "evidence": ev})
    y = np.array([float(r["unanswerable"]) for r in rows])
    abstention.extend(rows, y, np.ones(len(rows)), np.array([r["source"] for r in rows]),
                      np.array([r["group"] for r in rows]), None, swap={"agreement": "agreement_tied"})
    out = capsys.readouterr().out.splitlines()
    best = out[1]
    assert best.startswith("keeps=True") and "agreement_tied" in best, best
    assert not any(" agreement " in line for line in out if line.startswith("keeps=")), out


def test_nested_checks_the_choice_on_each_path_left_out(capsys):
    rng = np.random.default_rng(35)
    rows = []
    for source, n in (("written", 40), ("written-extra", 20), ("lives", 80), ("lives-extra", 80)):
        for i in range(n):
            unanswerable = i % 3 == 0
            ev = {f: float(rng.random()) for f in ABSTAIN_FEATURES}  # the model in code reads noise...
            ev["margin"] = (0.9 if unanswerable else 0.1) + 0.05 * float(rng.random())  # ...margin separates
            group = f"written-{i % 4}" if source.startswith("written") else f"path-{i % 4}"
            rows.append({"group": group, "set": "written" if source.startswith("written") else "lives",
                         "source": source, "unanswerable": unanswerable, "evidence": ev})
    y = np.array([float(r["unanswerable"]) for r in rows])
    tot = abstention.nested(rows, y, np.array([r["set"] for r in rows]), np.array([r["source"] for r in rows]),
                            np.array([r["group"] for r in rows]), None)
    out = capsys.readouterr().out
    assert out.count(": chose (") == 4 and "margin" in out, out  # one choice per path left out
    code, chosen = tot["code"], tot["chosen"]
    assert chosen[1] == code[1] == 80 // 3 + 1 + 80 // 3 + 1  # every unanswerable lives question counted once
    assert chosen[0] == chosen[1] and chosen[2] == 0 and chosen[0] > code[0], tot
