"""Session sidecar (Merkle conversation tree), evaluator separation, workspace and decision properties."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.chain.tools.arguments import parse_arguments
from golem.inference.decision import parse_decision
from golem.inference.evaluator import evaluate_outcome, external_assessment
from golem.inference.session import SessionError, SessionTree
from golem.inference.workspace import approx_tokens, fit
from golem.models.enums import Tier
from golem.models.record import DeliberationRecord, OutcomeRecord
from golem.models.tick import ProposedAction
from tests.unit.inference_fakes import FakeMessagesAPI, message, router, tool_use


# ---- session tree ---------------------------------------------------------------------------
def test_tree_persists_branches_navigates_and_detects_edits(tmp_path):
    path = SessionTree.default_path(tmp_path)
    t = SessionTree(path)
    a = t.append("user", "hello")
    b = t.append("golem", "hi, holding")
    c = t.append("user", "sell everything?")
    br = t.branch(b.id, "pre_steer", "reduce exposure", "user", "what if I steer 'reduce exposure'?")
    assert br.parent_id == b.id and br.branch == "pre_steer:reduce exposure"
    assert [n.id for n in t.current_path()] == [a.id, b.id, br.id]
    with pytest.raises(SessionError, match="trunk only"):
        t.branch(br.id, "sim", "nested", "user", "x")
    with pytest.raises(SessionError, match="branch kind"):
        t.branch(a.id, "daydream", "x", "user", "x")
    assert t.navigate(c.id) == [a.id, b.id, c.id]
    assert t.tail(2) == [("golem", "hi, holding"), ("user", "sell everything?")]

    loaded = SessionTree.load(path)
    assert loaded.head == c.id and loaded.verify_integrity() == (True, [])
    assert loaded.find_by_hash(b.content_hash).id == b.id

    lines = path.read_text().splitlines()
    node = json.loads(lines[1])
    node["text"] = "hi, I sold everything"  # a compromised golem rewriting history
    lines[1] = json.dumps(node)
    path.write_text("\n".join(lines) + "\n")
    ok, problems = SessionTree.load(path).verify_integrity()
    assert not ok and b.id in problems[0] and "edited" in problems[0]


# ---- evaluator -------------------------------------------------------------------------------
GEN = DeliberationRecord(model="claude-sonnet-4-6", tier=Tier.T2, reasoning_summary="sell into the crash",
                         decision="swap 1 WETH", confidence=0.8, recommends_action=True)
ACTS = [ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 1})]


async def test_evaluator_uses_other_model_fresh_context_and_metrics_win():
    api = FakeMessagesAPI(message([tool_use("evaluate", {"verdict": "good", "score": 0.9, "rationale": "sound"})],
                                  model="claude-haiku-4-5", input_tokens=300, output_tokens=40))
    loss = OutcomeRecord(verified=True, pnl_impact=-12.5, deviations_bps={"USDC": -40})
    ev = await evaluate_outcome(loss, ACTS, GEN, router=router(api))
    body = api.requests[0]
    assert body["model"] == "claude-haiku-4-5" and ev.evaluator_model == "claude-haiku-4-5"
    user = body["messages"][0]["content"][0]["text"]
    assert "sell into the crash" in user and "pnl_impact" in user and "STRATEGY.md" not in user
    assert len(body["messages"]) == 1 and body["tool_choice"] == {"type": "tool", "name": "evaluate"}
    assert (ev.evaluator_verdict, ev.external_verdict, ev.final_verdict) == ("good", "bad", "bad")
    assert ev.overridden_by_metrics and ev.cost == pytest.approx((300 * 1 + 40 * 5) / 1e6)


async def test_evaluator_opinion_stands_when_metrics_are_silent_and_offline_is_metrics_only():
    api = FakeMessagesAPI(message([tool_use("evaluate", {"verdict": "bad", "score": 0.2, "rationale": "too big"})]))
    neutral = OutcomeRecord(verified=True)
    ev = await evaluate_outcome(neutral, ACTS, GEN.model_copy(update={"model": "claude-haiku-4-5"}), router=router(api))
    assert api.requests[0]["model"] == "claude-sonnet-4-6"  # generator was Haiku → evaluator is the other model
    assert ev.final_verdict == "bad" and not ev.overridden_by_metrics
    off = await evaluate_outcome(OutcomeRecord(verified=False), ACTS, GEN)
    assert off.evaluator_model is None and off.final_verdict == "bad"


@given(st.booleans(), st.one_of(st.none(), st.floats(-1e6, 1e6)), st.dictionaries(st.text(max_size=4), st.floats(-1e4, 1e4), max_size=3))
def test_external_assessment_never_calls_a_loss_good(verified, pnl, devs):
    verdict, _ = external_assessment(OutcomeRecord(verified=verified, pnl_impact=pnl, deviations_bps=devs))
    if not verified or (pnl is not None and pnl < 0):
        assert verdict == "bad"


# ---- workspace and decision properties ------------------------------------------------------
@given(st.text(max_size=5000), st.integers(20, 800))
def test_fit_respects_the_allocation(text, tokens):
    out, cut = fit(text, tokens)
    assert approx_tokens(out) <= tokens
    assert cut == (out != text)


_args = st.dictionaries(st.sampled_from(["token_in", "token_out", "amount_in", "amount", "max_slippage_bps", "to"]),
                        st.one_of(st.sampled_from(["WETH", "USDC", "DAI", "weth", "ETH"]), st.floats(allow_nan=True),
                                  st.integers(-5, 10), st.text(max_size=5), st.none()), max_size=5)


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(["swap", "repay", "borrow", "supply", "withdraw", "transfer", "decide"]), _args),
                max_size=6), st.booleans())
def test_parse_decision_only_yields_valid_approved_actions(calls, recommends):
    content = [tool_use(n, a, i) for i, (n, a) in enumerate(calls) if n != "decide"]
    content.append(tool_use("decide", {"reasoning_summary": "r", "confidence": 0.5, "recommends_action": recommends}))
    out = parse_decision(content, ["WETH", "USDC"])
    for i, a in enumerate(out.actions):
        assert a.action_index == i
        parsed = parse_arguments(a.tool, a.arguments)
        assert set(v for k, v in parsed.items() if k in ("token_in", "token_out")) <= {"WETH", "USDC"}
    if not recommends:
        assert out.actions == []
    assert out.recommends_action == bool(out.actions)
