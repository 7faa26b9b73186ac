"""Pure helpers the activities use: the MUST gate applied to a decision, the PLAYBOOK safety guard."""

from __future__ import annotations

import pytest

from golem.cognition.decide import apply_must_gate
from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.grimoire.playbook.compile import PlaybookRefused, rewrite_playbook
from golem.models.enums import Tier
from golem.models.record import DeliberationRecord
from golem.models.tick import Deliberation, ProposedAction
from golem.safety.constraints import MustGate


def _delib(*tools: str) -> Deliberation:
    return Deliberation(
        record=DeliberationRecord(model="m", tier=Tier.T2, recommends_action=True, reasoning_summary="r"),
        actions=[ProposedAction(action_index=i, tool=t, arguments={}) for i, t in enumerate(tools)],
    )


def test_must_gate_drops_forbidden_tools_and_says_why():
    out = apply_must_gate(_delib("borrow", "repay"), MustGate(forbidden_tools=["borrow"]))
    assert [a.tool for a in out.actions] == ["repay"]
    assert out.record.rejections == ["borrow: STRATEGY.md says MUST NOT borrow"]
    assert out.record.recommends_action


def test_must_gate_with_only_forbidden_actions_recommends_nothing_and_notes_breaches():
    out = apply_must_gate(_delib("borrow"), MustGate(forbidden_tools=["borrow"], breached=["line 3 `MUST keep x`"]))
    assert out.actions == [] and not out.record.recommends_action
    assert "MUST breached: line 3" in out.record.reasoning_summary


def test_must_gate_leaves_a_clean_decision_alone():
    d = _delib("swap")
    assert apply_must_gate(d, MustGate()) is d


def test_playbook_guard_refusal_keeps_the_file(tmp_path):
    store = HeuristicStore(tmp_path / "h.sqlite")
    for ep in ("e1", "e2", "e3"):
        store.add_or_reinforce("In volatile markets, repay debt early", "global", ep)
    path = tmp_path / "PLAYBOOK.md"
    with pytest.raises(PlaybookRefused, match="weakens"):
        rewrite_playbook(store, path, guard=lambda old, new: ["weakens MUST keep health_factor >= 1.3"])
    assert not path.exists()
    rev = rewrite_playbook(store, path, guard=lambda old, new: [])
    assert rev.revision == 1 and path.exists()
