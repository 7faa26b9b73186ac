"""Retrieval may not regress on the sealed part of the lives memory set (bench/memory_eval/lives.py): floors below the
figures measured when it was sealed-and-improved, above the build before. The set is refused once edited. Nor on the
hand-written set (bench/memory_eval/dataset.py), whose figures may not fall below the best any build reached."""

from __future__ import annotations

import shutil

import pytest

from bench import eval_memory as ev

# The sealed part (253 questions, 10 held-out paths). A floor sits between the previous build and this one
# (figures in docs/design/grimoire.md#the-lives-set): the first build of the set → the build that sealed it → now.
FLOORS = {
    "recall5": 0.86,  # 0.63 → 0.80 → 0.93
    "mrr10": 0.80,  # 0.57 → 0.71 → 0.89
    "ku_mrr": 0.78,  # knowledge update MRR@10: 0.56 → 0.68 → 0.88
    "asof_recall": 0.77,  # as-of recall@5 (numbers compared, not read as text): 0.59 → 0.94
    "regime1": 0.90,  # 0.95 → 0.95 → 0.95
    "warn3": 1.0,  # 0.81 → 0.81 → 0.95 → 1.00 (warnings for actions judged against the best entry; an action on a
    # hazard a warning names is answered with it). Was 0.952 under some hash seeds (one action question whose
    # warning holds exactly half the known idf mass, summed in set order); terms are now summed in one order
    "abstain": 0.70,  # 0.67 → 0.60 → 0.80 (the calibrated decision)
}
CEILINGS = {
    "false_abst": 0.05,  # 0.09 → 0.04 → 0.02 → 0.02: the acceptance line
    "wrong_time": 0.05,  # 0.67 → 0.06 → 0.02
    "stale": 0.05,  # 0.00 throughout
}


@pytest.fixture(scope="module")
def sealed() -> dict:
    rep = ev.run_lives(("sealed",))
    return rep["splits"]["sealed"]["grimoire"]


def test_sealed_figures_hold_their_floor(sealed):
    ov, cat = sealed["overall"], sealed["categories"]
    got = {"recall5": ov["recall5"], "mrr10": ov["mrr10"], "ku_mrr": cat["knowledge_update"]["mrr10"],
           "asof_recall": cat["as_of"]["recall5"],
           "regime1": cat["regime"]["regime1"], "warn3": ov["warn3"],
           "abstain": cat["abstention"]["abstain"],
           "false_abst": ov["false_abst"], "wrong_time": cat["as_of"]["wrong_time"],
           "stale": cat["knowledge_update"]["stale"]}
    low = {k: round(got[k], 3) for k, f in FLOORS.items() if got[k] < f}
    high = {k: round(got[k], 3) for k, c in CEILINGS.items() if got[k] > c}
    assert not low and not high, f"sealed lives set regressed: below floor {low}, above ceiling {high} (got {got})"


def test_a_changed_sealed_file_is_refused(tmp_path, monkeypatch):
    shutil.copytree(ev.lives_set.HERE, tmp_path / "lives")
    q = tmp_path / "lives" / "sealed" / "questions.jsonl"
    q.write_text(q.read_text().replace('"abstention"', '"single_hop"', 1))
    monkeypatch.setattr(ev.lives_set, "HERE", tmp_path / "lives")
    with pytest.raises(SystemExit, match="was changed"):
        ev.lives_questions("sealed")
    ev.lives_questions("tune")  # the tune part is not sealed


# The hand-written set (deterministic: the same bits in every process), tune and held-out parts: what this build
# measures, each figure at least the best an earlier build reached except the held-out abstention, which fell to
# 0.75 when the fixed line gave way (docs/design/grimoire.md, "The fifth round").
WRITTEN_FLOORS = {
    "tune": {"recall5": 0.885, "mrr10": 0.7935, "regime1": 1.0, "warn3": 1.0, "abstain": 1.0},
    "held_out": {"recall5": 0.916, "mrr10": 0.854, "regime1": 1.0, "warn3": 1.0, "abstain": 0.75},
}


def test_hand_written_figures_hold_their_floor() -> None:
    rep = ev.run()["splits"]
    got = {part: {k: rep[part]["grimoire"]["overall"][k] for k in floors} for part, floors in WRITTEN_FLOORS.items()}
    low = {f"{part}.{k}": round(got[part][k], 4) for part, floors in WRITTEN_FLOORS.items()
           for k, f in floors.items() if got[part][k] < f}
    high = {f"{part}.{k}": rep[part]["grimoire"]["overall"][k] for part in WRITTEN_FLOORS
            for k in ("false_abst", "stale", "wrong_time") if rep[part]["grimoire"]["overall"][k] > 0}
    assert not low and not high, f"hand-written set regressed: below floor {low}, above zero {high} (got {got})"
