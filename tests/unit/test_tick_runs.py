"""Runs of a tick: who a run is, how its files are named, and the run-action ledger that keeps
exactly-once across runs (SQLite is real: a temporary file)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golem.life.runs import check_label, labelled, tick_run
from golem.models.tick import ProposedAction
from golem.safety.run_actions import RunActionLedger, SlotTaken, renumbered, same_action

WID = "golem-demo-tick-8"


def test_first_run_is_original_with_the_bare_name():
    run = tick_run(WID, "run-a", "run-a")
    assert (run.kind, run.label, run.original_run_id) == ("original", "", "run-a")
    assert labelled("cycle-000008", run.label) == "cycle-000008"


def test_reset_run_is_labelled_by_its_run_id():
    run = tick_run(WID, "3C4D5E6F-aaaa", "run-a")
    assert (run.kind, run.label, run.original_run_id) == ("reset", "reset-3c4d5e6f", "run-a")
    assert labelled("cycle-000008", run.label) == "cycle-000008-reset-3c4d5e6f"


def test_retry_of_the_whole_workflow():
    run = tick_run(WID, "run-b", "run-a", attempt=2, continued_run_id="run-a")
    assert (run.kind, run.label, run.reset_from_run_id) == ("retry", "retry-run-b", "run-a")


def test_rerun_and_a_reset_of_a_rerun():
    first = tick_run(f"{WID}-rerun-2", "run-r", "run-r", rerun_of=WID)
    assert (first.kind, first.label) == ("rerun", "rerun-2")
    reset = tick_run(f"{WID}-rerun-2", "abcdef0123", "run-r", rerun_of=WID)
    assert (reset.kind, reset.label) == ("reset", "rerun-2-reset-abcdef01")


@given(st.text(min_size=1, max_size=12))
def test_a_label_is_safe_in_a_file_name_or_refused(label):
    try:
        check_label(label)
    except ValueError as err:
        assert "\n" not in str(err) and "rerun-1" in str(err)
    else:
        assert "/" not in label and "." not in label and label == label.lower()


def swap(index: int, amount: float) -> ProposedAction:
    return ProposedAction(action_index=index, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC",
                                                                       "amount_in": amount})


def test_ledger_claims_slots_per_run(tmp_path):
    ledger = RunActionLedger(tmp_path / "run_actions.sqlite")
    assert ledger.first_free_index("g", 8, "run-a") == 0
    claim = ledger.claim("g", 8, swap(0, 0.5), "run-a")
    assert ledger.claim("g", 8, swap(0, 0.5), "run-a") == claim  # a retried execute finds its own claim
    with pytest.raises(SlotTaken, match="claimed by run run-a"):
        ledger.claim("g", 8, swap(0, 0.25), "run-b")  # another run may not send under it
    # The first run numbers from 0 (its own claims do not move it); a later run after every other slot.
    assert ledger.first_free_index("g", 8, "run-a") == 0
    assert ledger.first_free_index("g", 8, "run-b") == 1
    assert ledger.first_free_index("g", 9, "run-b") == 0
    assert same_action(claim, swap(3, 0.5)) and not same_action(claim, swap(0, 0.25))
    assert [a.action_index for a in renumbered([swap(0, 1), swap(1, 2)], 1)] == [1, 2]
