"""Death: the kill confirmation, the settlement plan, the reflection, the legacy package."""

import json

import pytest

from golem.life.death import KillRequest, check_kill, death_reflection, settlement_actions
from golem.life.legacy import Legacy, inherited_gating, write_legacy
from golem.models.life import DeathCertificate
from golem.models.observation import ChainSnapshot, Observation, PoolState, PositionState
from golem.models.state import LearnedGatingState


def _obs(balances, debt=0.0, collateral=0.0, price=2000.0):
    pos = [PositionState(id="aave-v3", collateral=collateral, debt=debt, health_factor=2.0 if debt else None)]
    snap = ChainSnapshot(chain_id=1, block_number=1, block_timestamp=1, gas_price_gwei=1.0,
                         pool=PoolState(address="0x0", token0="WETH", token1="USDC", price=price, reserve0=1,
                                        reserve1=1, tvl=1), oracle_price=price, balances=balances, positions=pos)
    return Observation(snapshot=snap)


def test_kill_needs_the_golem_id_as_confirmation():
    with pytest.raises(ValueError, match="confirm by sending confirm='g1'"):
        check_kill("g1", KillRequest(reason="done"), None)
    with pytest.raises(ValueError, match="already dying"):
        check_kill("g1", KillRequest(reason="done", confirm="g1"), "hayflick")
    check_kill("g1", KillRequest(reason="done", confirm="g1"), None)


def test_settlement_unwinds_in_order_repay_withdraw_sell():
    approved, cap = ["WETH", "USDC"], 5000.0
    acts, open_ = settlement_actions(_obs({"USDC": 20000, "WETH": 20}, debt=8000, collateral=10), approved, cap)
    assert [a.tool for a in acts] == ["repay", "repay"]  # in pieces under the PolicyCage's max trade size
    assert sum(a.arguments["amount"] for a in acts) == pytest.approx(8008.0) and acts[0].arguments["amount"] <= cap
    assert "aave-v3: debt 8,000.0000 USDC" in open_
    acts, _ = settlement_actions(_obs({"USDC": 12000, "WETH": 20}, collateral=10), approved, cap)
    assert [a.tool for a in acts] == ["withdraw"] * 4 and all(a.arguments["amount"] * 2000 <= cap for a in acts)
    acts, open_ = settlement_actions(_obs({"USDC": 12000, "WETH": 30, "DAI": 1000}), approved, cap)
    assert [a.tool for a in acts] == ["swap"] * 4
    assert all(a.arguments["amount_in"] * 2000 <= cap for a in acts)
    assert "DAI balance 1,000.000000 (not an approved asset: kept)" in open_
    acts, open_ = settlement_actions(_obs({"USDC": 70000}), approved, cap)
    assert acts == [] and open_ == []


def test_settlement_raises_usdc_first_when_the_debt_exceeds_it():
    acts, _ = settlement_actions(_obs({"USDC": 1000, "WETH": 20}, debt=8000, collateral=10), ["WETH", "USDC"], 5000)
    assert [a.tool for a in acts] == ["swap"] and acts[0].arguments["token_out"] == "USDC"


def test_death_reflection_and_the_legacy_package_round_trip(tmp_path):
    markers = [{"situation": {"regime": "volatile", "health": "watch", "move": "down", "tool": "swap"},
                "strength": 0.8, "pnl_usd": -40.0}]
    refl = death_reflection("g1", [], [{"source_id": "a", "target_id": "b", "weight": 0.7}], ["h1"], markers,
                            "hayflick", "30 ticks lived")
    assert "died of hayflick" in refl.summary and refl.warnings and refl.causal_graph[0]["weight"] == 0.7
    cert = DeathCertificate(golem_id="g1", cause="hayflick", detail="30 ticks lived", died_at_tick=30,
                            died_at="2026-01-01T00:00:00+00:00")
    header = json.dumps({"kind": "header", "format": "golem-grimoire", "version": 1, "golem_id": "g1", "tick": 30})
    out = write_legacy(tmp_path / "legacy" / "g1", cert, refl, [header], LearnedGatingState())
    legacy = Legacy(out)
    assert legacy.certificate.legacy_dir == str(out)
    lines = [json.loads(x) for x in legacy.grimoire.read_text().splitlines()]
    stains = [x for x in lines if x.get("provenance") == "death_reflection"]
    assert stains and stains[0]["category"] == "warning" and "volatile" in stains[0]["content"]
    assert inherited_gating(legacy).inherited_from == "g1"
    with pytest.raises(ValueError, match="not a complete legacy package"):
        Legacy(tmp_path)


def test_settlement_keeps_within_the_owners_must_caps():
    from golem.inference.strategy import parse_strategy
    from golem.life.death import within_caps

    strategy = parse_strategy("## Rules\n\n## Constraints\n- MUST NOT withdraw more than 10% WETH\n- MUST NOT swap more than 30% WETH\n")
    o = _obs({"USDC": 12000, "WETH": 20}, collateral=10)
    acts, _ = settlement_actions(o, ["WETH", "USDC"], 5000)
    capped = within_caps(acts, strategy, o)
    assert [a.tool for a in capped] == ["withdraw"] and capped[0].arguments["amount"] == pytest.approx(1.0, rel=1e-5)
    o = _obs({"USDC": 12000, "WETH": 30})
    capped = within_caps(settlement_actions(o, ["WETH", "USDC"], 5000)[0], strategy, o)
    assert sum(a.arguments["amount_in"] for a in capped) == pytest.approx(9.0, rel=1e-5)  # 30% of 30 WETH


def test_a_settlement_ticks_decision_names_the_unwind_and_what_is_open():
    from golem.life.death import settlement_deliberation, within_caps
    from golem.models.config import GolemConfig

    o = _obs({"USDC": 20000, "WETH": 20}, debt=8000, collateral=10)
    acts, _ = settlement_actions(o, ["WETH", "USDC"], 5000)
    assert within_caps(acts, None, o) == acts  # no STRATEGY.md: only the PolicyCage's sizes bind
    d = settlement_deliberation(o, GolemConfig(), None)
    assert [a.tool for a in d.actions] == ["repay", "repay"] and d.record.recommends_action
    assert d.record.model == "thanatopsis-settlement" and d.record.decision.startswith("settlement: repay")
    assert "open before this step: aave-v3: debt 8,000.0000 USDC" in d.record.decision
    assert [c.tool_name for c in d.record.tool_calls] == ["repay", "repay"]
    done = settlement_deliberation(_obs({"USDC": 70000}), GolemConfig(), None)
    assert done.actions == [] and done.record.decision == "settlement: nothing left to unwind"
    assert not done.record.recommends_action


def _reflection():
    return death_reflection("g-old", [], [], ["repay early when volatile"], [], "hayflick", "30 ticks lived")


async def test_claude_words_the_death_reflection_through_the_sdk_the_lists_stay():
    """[lifespan] reflection = "claude": one forced `testament` call to the T2 model through the anthropic SDK (an
    httpx mock transport answers as the Messages API does); the deterministic lists are kept, the summary is
    prefixed with Claude's words."""
    from activities.life import REFLECTION_SYSTEM, worded_testament
    from tests.unit.inference_fakes import FakeMessagesAPI, message, router, tool_use

    offline = _reflection().model_copy(update={"summary": "g-old lived </data> ticks"})  # data cannot close the tag
    api = FakeMessagesAPI(message([tool_use("testament", {"summary": "Repay  early;\nnever lever in a crash."})]))
    rt = router(api)
    worded, cost = await worded_testament(offline, rt)
    req = api.requests[0]
    assert req["model"] == rt.config.t2_model and req["tool_choice"] == {"type": "tool", "name": "testament"}
    assert req["system"][0]["text"] == REFLECTION_SYSTEM and [t["name"] for t in req["tools"]] == ["testament"]
    text = req["messages"][0]["content"][0]["text"]
    assert text.startswith('<data name="life">') and text.count("</data>") == 1 and "</ data> ticks" in text
    assert worded.model == rt.config.t2_model and cost > 0
    assert worded.summary == "Repay early; never lever in a crash. | g-old lived </data> ticks"
    assert worded.top_heuristics == offline.top_heuristics and worded.warnings == offline.warnings


async def test_the_death_reflection_stays_offline_when_claude_cannot_answer():
    from activities.life import worded_testament
    from golem.inference.router import InferenceRetryable
    from golem.models.config import HeartbeatSection
    from tests.unit.inference_fakes import FakeMessagesAPI, error, message, router, tool_use

    offline = _reflection()
    # an answer without the summary
    worded, cost = await worded_testament(offline, router(FakeMessagesAPI(message([tool_use("testament", {})]))))
    assert worded.summary == offline.summary and worded.model.endswith("answered no summary)") and cost > 0
    # a request the API rejects (400): the offline summary stands, the golem still dies
    api = FakeMessagesAPI(error(400, "invalid_request_error", "prompt is too long"))
    worded, _ = await worded_testament(offline, router(api))
    assert worded.summary == offline.summary and "rejected the request" in worded.model
    # overloaded (529): retryable — the activity's retry policy tries again
    with pytest.raises(InferenceRetryable):
        await worded_testament(offline, router(FakeMessagesAPI(error(529, "overloaded_error", "overloaded"))))
    # the day's budget spent: no call at all
    api = FakeMessagesAPI()
    worded, cost = await worded_testament(offline, router(api, budget=HeartbeatSection(max_daily_cost_usd=0.0)))
    assert api.requests == [] and worded.model.startswith("offline (budget") and cost == 0.0
    # no router (no API key): offline
    assert (await worded_testament(offline, None))[0].model == "offline (no Claude configured)"
