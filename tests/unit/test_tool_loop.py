"""The deliberator's tool loop over the real anthropic SDK (HTTP faked): reads and speculation for a few rounds, then a
decision; every call priced and paid for; the result-filter between the tools and the model."""

from __future__ import annotations

import json

import pytest

from golem.chain.tools.schemas import ToolArgumentError
from golem.inference.llm import LLMDeliberator
from golem.inference.offline import OfflineDeliberator
from golem.inference.result_filter import MAX_RESULT_CHARS, filter_result
from golem.models.config import HeartbeatSection
from golem.models.enums import Tier
from tests.unit.inference_fakes import FakeMessagesAPI, decide, message, router, tool_use
from tests.unit.test_offline_deliberator import EXAMPLE, decide_input

SWAP = {"token_in": "WETH", "token_out": "USDC", "amount_in": 4.0}
SMALLER = {"token_in": "WETH", "token_out": "USDC", "amount_in": 1.0}


class Reads:
    """What a tick may read: two tools and speculate, answering from a table (the chain's part is tested on Anvil in
    tests/integration/test_tool_loop_chain.py)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def schemas(self) -> list[dict]:
        obj = {"type": "object", "properties": {}, "additionalProperties": False}
        return [{"name": "get_pool_state", "description": "pool", "input_schema": obj},
                {"name": "speculate", "description": "try a write", "input_schema": {
                    "type": "object", "properties": {"tool": {"type": "string"}, "arguments": {"type": "object"}},
                    "required": ["tool", "arguments"]}}]

    def run(self, name: str, arguments: dict) -> dict:
        self.calls.append((name, arguments))
        if name == "get_pool_state":
            return {"reserve_weth": 100.123456789123, "reserve_usdc": 200000.0, "owner_private_key": "0xabc"}
        if name == "speculate":
            amount = arguments["arguments"]["amount_in"]
            if amount > 2:
                return {"tool": "swap", "ok": True, "expected": {"amount_out": amount * 1900.0},
                        "price_impact_bps": 390.0}
            return {"tool": "swap", "ok": True, "expected": {"amount_out": amount * 1990.0}}
        raise ToolArgumentError(f"{name} is not a read tool here")


def deliberator(api: FakeMessagesAPI, **kw) -> LLMDeliberator:
    return LLMDeliberator(router(api, **kw))


def names(body: dict) -> set[str]:
    return {t["name"] for t in body["tools"]}


async def test_reads_depth_speculates_then_decides_a_smaller_swap():
    api = FakeMessagesAPI(
        message([tool_use("get_pool_state", {}, 1)], input_tokens=1000, output_tokens=30),
        message([tool_use("speculate", {"tool": "swap", "arguments": SWAP}, 2)], input_tokens=1100, output_tokens=40),
        message([tool_use("swap", SMALLER, 3), decide("4 WETH moves the pool 390 bps; 1 WETH does not", 0.7, True)],
                input_tokens=1200, output_tokens=90),
    )
    reads = Reads()
    delib = await deliberator(api).decide(decide_input(price=1800, prev=2000), EXAMPLE, "", reads=reads)
    assert [a.arguments for a in delib.actions] == [SMALLER]
    r = delib.record
    assert [x.tool_name for x in r.reads] == ["get_pool_state", "speculate"] and r.tool_rounds == 3
    assert (r.input_tokens, r.output_tokens) == (3300, 160)  # every call of the loop is paid for
    assert r.cost == pytest.approx((3300 * 3 + 160 * 15) / 1e6)
    first, second, third = api.requests
    assert {"get_pool_state", "speculate", "swap", "decide"} <= names(first)
    # the model sees its own call and the filtered answer: the key withheld, the number rounded
    assistant, result = second["messages"][-2], second["messages"][-1]
    assert assistant["role"] == "assistant" and assistant["content"][0]["name"] == "get_pool_state"
    (block,) = result["content"]
    assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_0001"
    seen = json.loads(block["content"])
    assert "owner_private_key" not in seen and seen["reserve_weth"] == 100.12346  # 8 significant digits
    assert seen["filtered"] == ["owner_private_key withheld"]
    assert json.loads(third["messages"][-1]["content"][0]["content"])["price_impact_bps"] == 390.0
    assert reads.calls[1] == ("speculate", {"tool": "swap", "arguments": SWAP})


async def test_past_its_rounds_the_model_is_offered_only_the_decision():
    api = FakeMessagesAPI(*[message([tool_use("get_pool_state", {}, i)]) for i in range(2)],
                          message([decide("enough reading")]))
    delib = await deliberator(api, tool_rounds_t2=2).decide(decide_input(), EXAMPLE, "", reads=Reads())
    assert [names(b) >= {"get_pool_state"} for b in api.requests] == [True, True, False]
    assert "decide" in names(api.requests[-1]) and delib.record.tool_rounds == 3 and len(delib.record.reads) == 2


async def test_t1_has_its_own_rounds_and_zero_rounds_is_one_call():
    api = FakeMessagesAPI(message([decide()], model="claude-haiku-4-5"))
    delib = await deliberator(api, tool_rounds_t1=0).decide(decide_input(tier=Tier.T1), EXAMPLE, "", reads=Reads())
    assert "get_pool_state" not in names(api.requests[0]) and delib.record.tool_rounds == 1


async def test_the_token_cap_makes_the_next_call_decide():
    api = FakeMessagesAPI(message([tool_use("get_pool_state", {}, 1)], input_tokens=5000, output_tokens=100),
                          message([decide()]))
    delib = await deliberator(api, tool_loop_max_tokens=5000).decide(decide_input(), EXAMPLE, "", reads=Reads())
    assert "get_pool_state" not in names(api.requests[1])
    assert "tool_loop_max_tokens" in delib.record.reasoning_summary


async def test_a_refused_read_is_told_to_the_model_and_recorded():
    api = FakeMessagesAPI(message([tool_use("get_everything", {}, 1)]), message([decide()]))
    reads = Reads()
    api_reads = type("R", (), {"schemas": lambda s: reads.schemas() + [
        {"name": "get_everything", "description": "x", "input_schema": {"type": "object"}}],
        "run": lambda s, n, a: reads.run(n, a)})()
    delib = await deliberator(api).decide(decide_input(), EXAMPLE, "", reads=api_reads)
    (block,) = api.requests[1]["messages"][-1]["content"]
    assert block["is_error"] is True and "not a read tool" in block["content"]
    assert delib.record.reads[0].error and "not a read tool" in delib.record.reads[0].error


async def test_the_budget_cuts_the_loop_short_and_the_spend_stays_on_the_record():
    # a $2.50 day: the first call's worst case (cents) fits; it costs $3.00, so the second may not be sent
    budget = HeartbeatSection(max_daily_cost_usd=2.5)
    api = FakeMessagesAPI(message([tool_use("get_pool_state", {}, 1)], input_tokens=1_000_000, output_tokens=0))
    d = LLMDeliberator(router(api, budget=budget), fallback=OfflineDeliberator())
    delib = await d.decide(decide_input(price=1800, prev=2000), EXAMPLE, "", reads=Reads())
    r = delib.record
    assert len(api.requests) == 1 and r.model == "offline-deliberator"
    assert r.reasoning_summary.startswith("LLM stopped before deciding (tool loop cut short after 1 call")
    assert r.cost == pytest.approx(3.0) and r.tool_rounds == 1 and r.input_tokens == 1_000_000
    assert [x.tool_name for x in r.reads][:1] == ["get_pool_state"]


async def test_reads_beside_the_decision_are_not_run():
    api = FakeMessagesAPI(message([tool_use("get_pool_state", {}, 1), decide("hold")]))
    reads = Reads()
    delib = await deliberator(api).decide(decide_input(), EXAMPLE, "", reads=reads)
    assert reads.calls == [] and delib.record.rejections == []
    assert "not run (the decision came in the same reply): get_pool_state" in delib.record.reasoning_summary


def test_the_result_filter_cuts_and_says_so():
    text, cuts = filter_result({"rows": list(range(50)), "note": "x" * 1000, "api_key": "sk", "f": float("nan")})
    out = json.loads(text)
    assert out["rows"] == list(range(20)) and len(out["note"]) == 301 and "api_key" not in out and out["f"] == "nan"
    assert cuts == ["rows: first 20 of 50 items", "note cut to 300 characters", "api_key withheld"]
    big, cuts = filter_result({f"k{i}": "y" * 200 for i in range(40)})
    assert len(big) < MAX_RESULT_CHARS + 80 and cuts[-1] == f"result cut to {MAX_RESULT_CHARS} characters"


async def test_the_offline_deliberator_speculates_each_swap_it_proposes_and_decides_the_same():
    reads = Reads()
    inp = decide_input(price=1800, prev=2000)
    plain = await OfflineDeliberator().decide(inp, EXAMPLE, "")
    tried = await OfflineDeliberator(speculate=True).decide(inp, EXAMPLE, "", reads=reads)
    unasked = await OfflineDeliberator().decide(inp, EXAMPLE, "", reads=Reads())  # off by default
    assert unasked.record.reads == []
    swaps = [a for a in plain.actions if a.tool == "swap"]
    assert swaps and tried.actions == plain.actions  # the rules decide; speculation only informs the record
    assert [(n, a["tool"]) for n, a in reads.calls] == [("speculate", "swap")] * len(swaps)
    assert [r.tool_name for r in tried.record.reads] == ["speculate"] * len(swaps)
    assert json.loads(tried.record.reads[0].result)["ok"] is True and plain.record.reads == []


async def test_t2_prompts_carry_the_core_mental_models_and_the_record_keeps_the_ones_named():
    from golem.inference.mental_models import CORE_MODELS

    api = FakeMessagesAPI(message([decide("buffer first", mental_models=["mm-margin-of-safety", "mm-made-up"])]),
                          message([decide()], model="claude-haiku-4-5"))
    delib = await deliberator(api).decide(decide_input(), EXAMPLE, "")
    t1 = await deliberator(api).decide(decide_input(tier=Tier.T1), EXAMPLE, "")
    cached = "".join(b["text"] for b in api.requests[0]["system"])  # the system blocks end at the cache breakpoint
    assert len(CORE_MODELS) == 13 and all(mid in cached for mid in CORE_MODELS)
    assert "mm-kelly" not in json.dumps(api.requests[1]["system"])  # T1's reduced context goes without
    assert delib.record.mental_models == ["mm-margin-of-safety"] and t1.record.mental_models == []
    assert any("mm-made-up not offered this tick" in r for r in delib.record.rejections)


async def test_what_the_allocation_held_back_stays_on_call_through_the_workspace_read():
    """turn-context (the context hook): memory past its allocation is not cut away but listed at the end of the first
    turn and read whole with `workspace`; switched off, the first turn carries the cut text and no such tool."""
    from golem.models.config import ExtensionsSection
    from golem.models.record import RetrievedEntrySummary
    from golem.models.tick import RetrievedKnowledge

    def inp(**cfg):
        i = decide_input()
        i.retrieved = RetrievedKnowledge(entries=[RetrievedEntrySummary(
            id=f"e{k}", kind="warning", score=0.9 - k / 100,
            summary=f"warning {k}: a repay at 120 gwei in a flash crash cost $52 and changed nothing") for k in range(40)])
        i.ctx.config = i.ctx.config.model_copy(update=cfg)
        return i

    api = FakeMessagesAPI(message([tool_use("workspace", {"section": "retrieved", "page": 3}, 1)]),
                          message([decide("read the whole memory first")]))
    small = {**LLMDeliberator(router(api)).config.allocations_t2, "retrieved": 120}
    delib = await deliberator(api, allocations_t2=small).decide(inp(), EXAMPLE, "", reads=Reads())
    first, second = api.requests
    text = first["messages"][0]["content"][0]["text"]
    assert "## Held back (call `workspace`" in text and "- retrieved: retrieved memory (Grimoire), ~" in text
    assert "tokens in 4 page(s)" in text
    assert "warning 39:" not in text and "workspace" in names(first)
    page = json.loads(second["messages"][-1]["content"][0]["content"])
    assert (page["page"], page["pages"]) == (3, 4) and "filtered" not in page  # a page passes the filter uncut
    assert page["lines"][-1].startswith("- [warning e39 score 0.51] warning 39: a repay at 120 gwei")
    r = delib.record
    assert r.context == ["turn-context"] and "retrieved" in r.held_back
    assert [x.tool_name for x in r.reads] == ["workspace"] and not r.reads[0].error
    # switched off in golem.toml: the cut text alone, no workspace read
    api = FakeMessagesAPI(message([decide()]))
    off = inp(extensions=ExtensionsSection(disabled=["turn-context"]))
    delib = await deliberator(api, allocations_t2=small).decide(off, EXAMPLE, "", reads=Reads())
    assert "Held back" not in api.requests[0]["messages"][0]["content"][0]["text"]
    assert "workspace" not in names(api.requests[0]) and delib.record.context == []
