"""Privileged tools: what the model is offered, how its request is checked, the request's life in GolemState
(pending → approved | denied | expired → ran), and the grant check in the cage, which approval widens for one
action and never past a limit."""

from __future__ import annotations

import typing

import pytest
from pydantic import ValidationError

from golem.chain.tools.schemas import WRITE_TOOLS
from golem.inference.decision import REQUEST_PRIVILEGED, decision_tools, parse_decision
from golem.models.approvals import ApprovalDecision, ApprovalStatus, PrivilegedRequest
from golem.models.config import GolemConfig, PolicySection, WriteToolName
from golem.models.enums import ActionStatus
from golem.models.record import ActionRecord
from golem.models.state import GolemState
from golem.models.tick import ProposedAction
from golem.safety import approvals as ap
from golem.safety.cage import SafetyCage
from golem.safety.limits import SafetyLimits
from tests.unit.inference_fakes import decide, tool_use
from tests.unit.test_safety_cage import ctx, sim_for
from golem.safety.constraints import Book

ASSETS = ["WETH", "USDC"]
ASK = {"tool": "supply", "arguments": {"amount": 0.5}, "reason": "the health factor is thin; more collateral"}


def test_config_names_exactly_the_write_tools_and_refuses_others():
    assert set(typing.get_args(WriteToolName)) == set(WRITE_TOOLS)
    with pytest.raises(ValidationError, match="privileged_tools"):
        PolicySection(privileged_tools=["launch_rocket"])
    # at their defaults the new keys leave the policy (and its hash, every recorded config) as it was
    assert "privileged_tools" not in PolicySection().model_dump() and "approval_ttl_ticks" not in PolicySection().model_dump()
    assert PolicySection(privileged_tools=["supply", "supply"]).privileged_tools == ["supply"]


def test_a_privileged_tool_is_offered_only_as_a_request():
    names = [t["name"] for t in decision_tools(ASSETS, ["supply"])]
    assert "supply" not in names and REQUEST_PRIVILEGED in names and names[-1] == "decide"
    (req,) = [t for t in decision_tools(ASSETS, ["supply"]) if t["name"] == REQUEST_PRIVILEGED]
    assert req["input_schema"]["properties"]["tool"]["enum"] == ["supply"]
    assert REQUEST_PRIVILEGED not in [t["name"] for t in decision_tools(ASSETS)]  # nothing privileged: no request tool
    # a tool whose asset is not approved cannot be asked for either: approval never widens the approved assets
    assert REQUEST_PRIVILEGED not in [t["name"] for t in decision_tools(["USDC"], ["supply"])]


def test_a_request_is_checked_like_a_write_and_kept_apart_from_actions():
    p = parse_decision([tool_use(REQUEST_PRIVILEGED, ASK, 1), decide("ask first")], ASSETS, privileged=["supply"])
    assert p.requests == [("supply", {"amount": 0.5}, ASK["reason"])] and p.actions == [] and not p.rejections
    direct = parse_decision([tool_use("supply", {"amount": 0.5}, 1), decide("just do it", 0.9, True)], ASSETS,
                            privileged=["supply"])
    assert direct.actions == [] and "outside this golem's grant" in direct.rejections[0]
    bad = parse_decision([tool_use(REQUEST_PRIVILEGED, {**ASK, "arguments": {"amount": -1}}, 1), decide()], ASSETS,
                         privileged=["supply"])
    assert bad.requests == [] and "amount" in bad.rejections[0]
    granted = parse_decision([tool_use(REQUEST_PRIVILEGED, {**ASK, "tool": "swap"}, 1), decide()], ASSETS,
                             privileged=["supply"])
    assert granted.requests == [] and "cannot be requested" in granted.rejections[0]
    lone = parse_decision([tool_use(REQUEST_PRIVILEGED, ASK, 1)], ASSETS, privileged=["supply"])
    assert lone.requests == [] and any("without a `decide`" in r for r in lone.rejections)
    reasonless = parse_decision([tool_use(REQUEST_PRIVILEGED, {**ASK, "reason": " "}, 1), decide()], ASSETS,
                                privileged=["supply"])
    assert reasonless.requests == [] and "needs a reason" in reasonless.rejections[0]


def _state(tick=5) -> GolemState:
    return GolemState(golem_id="g1", tick=tick)


def _asked(tick=5, i=0) -> PrivilegedRequest:
    return PrivilegedRequest(id=f"apr-{tick}-{i}", tick=tick, tool="supply", arguments={"amount": 0.5}, reason="r")


def test_a_request_lives_pending_until_answered_or_expired():
    s = ap.add_requests(_state(6), [_asked(5, 0), _asked(5, 1)], ttl_ticks=3)
    assert [(a.status, a.expires_at_tick) for a in s.approvals] == [(ApprovalStatus.PENDING, 9)] * 2
    assert ap.add_requests(s, [_asked(5, 0)], 3) is s  # another run of tick 5 asks the same: kept once
    s, answer = ap.decide(s, ApprovalDecision(id="apr-5-0", note="go", source="cli"), True, "2026-01-01T00:00:00")
    assert answer.request.status == ApprovalStatus.APPROVED and answer.request.decided_by == "cli"
    with pytest.raises(ValueError, match="already approved"):
        ap.check_decision(s, ApprovalDecision(id="apr-5-0"))
    with pytest.raises(ValueError, match="no privileged request 'apr-9-9'; pending: apr-5-1"):
        ap.check_decision(s, ApprovalDecision(id="apr-9-9"))
    assert ap.expire(s.model_copy(update={"tick": 8}))[1] == []  # ticks 6, 7, 8 may still answer it
    s, expired = ap.expire(s.model_copy(update={"tick": 9}))
    assert [a.id for a in expired] == ["apr-5-1"] and expired[0].status == ApprovalStatus.EXPIRED
    assert [a.status for a in s.approvals] == [ApprovalStatus.APPROVED, ApprovalStatus.EXPIRED]  # approved waits on
    with pytest.raises(ValueError, match="already expired"):
        ap.check_decision(s, ApprovalDecision(id="apr-5-1"))


def test_an_approved_request_becomes_an_action_and_its_outcome_is_kept():
    s = ap.add_requests(_state(6), [_asked()], 3)
    s, _ = ap.decide(s, ApprovalDecision(id="apr-5-0"), True, "t")
    actions = ap.with_approved([ProposedAction(action_index=0, tool="swap", arguments={})], ap.approved(s))
    assert [(a.action_index, a.tool, a.approval_id) for a in actions] == [(0, "swap", None), (1, "supply", "apr-5-0")]
    records = [ActionRecord(action_index=1, action_type="supply", tool_name="supply", status=ActionStatus.EXECUTED,
                            tx_hash="0xabc")]
    ran = ap.approvals_ran(actions, records)
    assert ran == {"apr-5-0": "executed tx 0xabc"}
    s = ap.mark_ran(s, ran, 7)
    assert s.approvals[0].status == ApprovalStatus.RAN and s.approvals[0].ran_on_tick == 7 and not ap.approved(s)


def test_decided_requests_are_trimmed_open_ones_never():
    s = ap.add_requests(_state(6), [_asked(5, i) for i in range(14)], 3)
    s, _ = ap.decide(s, ApprovalDecision(id="apr-5-13"), True, "t")
    s, expired = ap.expire(s.model_copy(update={"tick": 20}))
    assert len(expired) == 13 and len(s.approvals) == ap.KEEP_DECIDED + 1
    assert any(a.id == "apr-5-13" and a.status == ApprovalStatus.APPROVED for a in s.approvals)


CAGE = SafetyCage(SafetyLimits(policy=PolicySection(approved_assets=ASSETS, max_trade_size_usd=5_000,
                                                    privileged_tools=["supply"]),
                               kill_switch_path="/nonexistent/killswitch"))


def _cage(action: ProposedAction, approvals: dict[str, str]):
    c = ctx().model_copy(update={"approvals": approvals})
    decision, _ = CAGE.tool_call(action, c, sim_for(action), Book.of(c.observation.snapshot))
    return decision


def test_the_cage_lets_a_privileged_tool_through_only_as_an_approved_request():
    plain = ProposedAction(action_index=0, tool="supply", arguments={"amount": 0.5})
    refused = _cage(plain, {})
    assert not refused.allowed and refused.blocked_by == "safety" and "privileged" in refused.reason
    forged = plain.model_copy(update={"approval_id": "apr-5-0"})
    assert not _cage(forged, {}).allowed  # an id the owner never approved
    assert not _cage(forged, {"apr-5-0": "withdraw"}).allowed  # approved for another tool
    assert _cage(forged, {"apr-5-0": "supply"}).allowed
    # approval widens the grant, never a limit: an approved supply over the trade size is still refused
    big = ProposedAction(action_index=0, tool="supply", arguments={"amount": 50.0}, approval_id="apr-5-0")
    over = _cage(big, {"apr-5-0": "supply"})
    assert not over.allowed and "privileged" not in over.reason
    # tools in the grant need no approval
    assert _cage(ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC",
                                                                        "amount_in": 0.5}), {}).allowed


def test_status_and_config_carry_the_keys():
    cfg = GolemConfig.model_validate({"policy": {"privileged_tools": ["supply"], "approval_ttl_ticks": 4}})
    assert cfg.policy.privileged_tools == ["supply"] and cfg.policy.approval_ttl_ticks == 4


def test_a_limit_proposal_may_take_tools_back_from_the_grant_never_hand_them_out():
    from golem.safety.limits import check_limit_change

    current = SafetyLimits(policy=PolicySection(privileged_tools=["borrow"]))
    assert check_limit_change(current, {"privileged_tools": ["borrow", "withdraw"]}).applied == {
        "privileged_tools": ["borrow", "withdraw"]}
    shrink = check_limit_change(current, {"privileged_tools": []})
    assert not shrink.ok and "may not shrink (would grant borrow without approval)" in shrink.refused[0]
    assert not check_limit_change(current, {"approval_ttl_ticks": 40}).ok  # a longer wait is wider
