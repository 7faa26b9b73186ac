"""Retrieval may not regress on the sealed part of the lives memory set (bench/memory_eval/lives.py): floors below the
figures measured when it was sealed-and-improved, above the build before. The set is refused once edited."""

from __future__ import annotations

import shutil

import pytest

from bench import eval_memory as ev

# The sealed part (253 questions, 10 held-out paths) — before: the build that generated it; after: this one
# (figures in docs/design/grimoire.md#the-lives-set). A floor sits between them.
FLOORS = {
    "recall5": 0.72,  # before 0.63, after 0.80
    "mrr10": 0.64,  # before 0.57, after 0.71
    "ku_mrr": 0.62,  # knowledge update MRR@10: before 0.56, after 0.68
    "regime1": 0.85,  # before 0.95, after 0.95
    "warn3": 0.75,  # before 0.81, after 0.81
    "abstain": 0.55,  # before 0.67, after 0.60: traded for false abstention (below); it may not fall further
}
CEILINGS = {
    "false_abst": 0.07,  # before 0.09, after 0.04
    "wrong_time": 0.25,  # before 0.67, after 0.06
    "stale": 0.05,  # before 0.00, after 0.00
}


@pytest.fixture(scope="module")
def sealed() -> dict:
    rep = ev.run_lives(("sealed",))
    return rep["splits"]["sealed"]["grimoire"]


def test_sealed_figures_hold_their_floor(sealed):
    ov, cat = sealed["overall"], sealed["categories"]
    got = {"recall5": ov["recall5"], "mrr10": ov["mrr10"], "ku_mrr": cat["knowledge_update"]["mrr10"],
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
