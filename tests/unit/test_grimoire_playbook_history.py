"""PLAYBOOK.md revision history: every revision recorded, diff, rollback as a new revision through the guard."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.grimoire.playbook.compile import (
    PlaybookHistory,
    PlaybookRefused,
    diff_texts,
    read_revision,
    rewrite_playbook,
    rollback,
)


def promote(hs: HeuristicStore, text: str, scope: str = "global", start: int = 0) -> None:
    for i in range(3):  # 0.5 → 0.7: promoted
        hs.add_or_reinforce(text, scope, f"g:tick:{start + i}")


def test_every_revision_recorded_with_text_sha_and_tick(tmp_path):
    hs = HeuristicStore(tmp_path / "h.sqlite")
    path = tmp_path / "PLAYBOOK.md"
    promote(hs, "Avoid swaps when gas is above 50 gwei")
    r1 = rewrite_playbook(hs, path, tick=10)
    assert rewrite_playbook(hs, path, tick=11).changed is False  # unchanged: no new history row
    promote(hs, "Buy the dip after a 5% drop", "eth-dca", start=10)
    r2 = rewrite_playbook(hs, path, tick=20)
    log = PlaybookHistory.for_store(hs).log()
    assert [(r.revision, r.tick, r.reason) for r in log] == [(1, 10, "compile"), (2, 20, "compile")]
    assert log[1].text == path.read_text() and log[1].sha256 == r2.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert log[0].sha256 == r1.sha256 and log[0].heuristics == 1 and log[1].heuristics == 2
    d = PlaybookHistory.for_store(hs).diff(1, 2)
    assert d.startswith("--- PLAYBOOK.md@1\n+++ PLAYBOOK.md@2\n")
    assert "+## Strategy: eth-dca" in d and "-<!-- golem PLAYBOOK revision: 1 -->" in d
    assert PlaybookHistory.for_store(hs).diff(2, 2) == ""
    with pytest.raises(KeyError, match="no PLAYBOOK revision 7"):
        PlaybookHistory.for_store(hs).diff(1, 7)


def test_rollback_is_a_new_revision_and_survives_an_unchanged_curator(tmp_path):
    hs = HeuristicStore(tmp_path / "h.sqlite")
    path = tmp_path / "PLAYBOOK.md"
    hist = PlaybookHistory.for_store(hs)
    promote(hs, "Avoid swaps when gas is above 50 gwei")
    rewrite_playbook(hs, path, tick=1)
    v1_body = path.read_text().split("\n", 1)[1]
    promote(hs, "Lever up in every rally", start=10)
    rewrite_playbook(hs, path, tick=2)
    r3 = rollback(path, 1, history=hist, tick=3)
    assert r3.revision == 3 and read_revision(path) == 3
    assert path.read_text().split("\n", 1)[1] == v1_body
    assert [(r.revision, r.reason) for r in hist.log()] == [(1, "compile"), (2, "compile"), (3, "rollback:1")]
    assert hist.get(2).text.startswith("<!-- golem PLAYBOOK revision: 2 -->")  # history untouched
    # Same heuristics as revision 2: the Curator does not undo the rollback ...
    assert rewrite_playbook(hs, path, tick=4).changed is False and read_revision(path) == 3
    # ... until what it knows changes.
    promote(hs, "Repay when health factor is below 1.5", start=20)
    r4 = rewrite_playbook(hs, path, tick=5)
    assert r4.revision == 4 and "Repay when health factor" in path.read_text()


def test_rollback_goes_through_the_guard(tmp_path):
    hs = HeuristicStore(tmp_path / "h.sqlite")
    path = tmp_path / "PLAYBOOK.md"
    hist = PlaybookHistory.for_store(hs)
    promote(hs, "Avoid swaps when gas is above 50 gwei")
    rewrite_playbook(hs, path)
    promote(hs, "MUST keep health_factor >= 1.5", start=10)
    rewrite_playbook(hs, path)
    before = path.read_text()

    def guard(old: str, new: str) -> list[str]:
        return ["drops `MUST keep health_factor >= 1.5`"] if "MUST keep" in old and "MUST keep" not in new else []

    with pytest.raises(PlaybookRefused, match="rollback to revision 1 refused: drops"):
        rollback(path, 1, history=hist, guard=guard)
    assert path.read_text() == before and [r.revision for r in hist.log()] == [1, 2]
    with pytest.raises(KeyError, match="no PLAYBOOK revision 9"):
        rollback(path, 9, history=hist)


def test_file_written_before_history_existed_is_backfilled(tmp_path):
    hs = HeuristicStore(tmp_path / "h.sqlite")
    path = tmp_path / "PLAYBOOK.md"
    promote(hs, "Avoid swaps when gas is above 50 gwei")
    rewrite_playbook(hs, path, history=False)  # an old golem: no history
    assert PlaybookHistory.for_store(hs).log() == []
    promote(hs, "Buy the dip after a 5% drop", start=10)
    assert rewrite_playbook(hs, path, tick=9).revision == 2
    assert [(r.revision, r.reason) for r in PlaybookHistory.for_store(hs).log()] == [(1, "found-on-disk"), (2, "compile")]
    path.unlink()  # a deleted file never makes a revision number reused
    assert rewrite_playbook(hs, path).revision == 3


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(alphabet="abc \n", max_size=30), min_size=2, max_size=2))
def test_diff_texts_empty_iff_equal(pair):
    a, b = pair
    d = diff_texts(a, b)
    assert (d == "") == (a.splitlines(keepends=True) == b.splitlines(keepends=True))
