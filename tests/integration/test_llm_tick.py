"""A steered tick deliberates with Claude through the real anthropic SDK (faked at the HTTP boundary),
inside the real Temporal workflow, and acts on the real chain."""

from __future__ import annotations

import asyncio
import json
import re

import httpx2
import pytest

from golem.grimoire.semantic.graph import KnowledgeGraph
from golem.deliberators import select_deliberator
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, Tier
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for, wait_for_record
from tests.unit.inference_fakes import FakeMessagesAPI, decide, message, tool_use
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration


@pytest.fixture
def rig(tmp_path):
    rig = make_rig(tmp_path, "llm-golem", "calm", theta=0.25, inference={"provider": "anthropic"})
    yield rig
    rig.stop()


async def test_steered_tick_thinks_with_claude_and_acts(temporal_client, rig):
    async def reply(body):
        tools = {t["name"] for t in body.get("tools", [])}
        if "evaluate" in tools:  # the evaluator, fresh context
            return message([tool_use("evaluate", {"verdict": "good", "score": 0.7, "rationale": "hedged as asked"})],
                           model=body["model"], input_tokens=400, output_tokens=60)
        if "reflect" in tools:  # Reflexion worded by Claude over the chain's numbers
            return message([tool_use("reflect", {"insight": "Hedging on the owner's word cost only the swap fee."})],
                           model=body["model"], input_tokens=300, output_tokens=40)
        assert "decide" in tools and "swap" in tools, tools
        # The workspace lists the knowledge graph's entities; the model names two of them in a relation
        # (docs/design/grimoire.md#knowledge-graph) and makes one up, which must be refused.
        text = json.dumps(body["messages"])
        oracle, pool = (re.search(rf"({kind}:0x[0-9a-fA-F]{{40}})", text) for kind in ("oracle", "pool"))
        facts = [] if not (oracle and pool) else [
            {"subject": oracle.group(1), "predicate": "price_source", "object": pool.group(1)},
            {"subject": "pool:0xdead", "predicate": "token_flow", "object": pool.group(1)}]
        return message(
            [tool_use("swap", {"token_in": "WETH", "token_out": "USDC", "amount_in": 1.0}, 1),
             decide("owner asked to reduce exposure", 0.8, True, decision="swap 1 WETH to USDC", facts=facts)],
            model=body["model"], input_tokens=2900, output_tokens=220, cache_read=2400,
        )

    api = FakeMessagesAPI(*([reply] * 9))
    services = rig.services()
    deliberator, why = select_deliberator(
        rig.config, {"ANTHROPIC_API_KEY": "sk-test-not-a-key"}, home=rig.home, data_dir=rig.data_dir,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api.handler)),
    )
    services.use_deliberator(deliberator, why)
    assert why.startswith("anthropic")
    store = CycleStore(rig.data_dir)
    rig.start_market(interval=0.25)
    async with in_process_worker(temporal_client, rig, services=services):
        handle = await rig.start_golem(temporal_client, max_ticks=None)
        await wait_for(lambda: store.count() >= 4, 60, "four ticks")
        await handle.signal(GolemWorkflow.steer, {"id": "llm-1", "message": "reduce exposure", "severity": "high"})

        rec = await wait_for_record(
            store, lambda rec: any(i.id == "llm-1" for i in rec.active_interventions), "the steered tick"
        )
        await handle.terminate("test done")

    assert rec.tier == Tier.T2
    d = rec.deliberation
    assert d.model == "claude-sonnet-4-6" and d.input_tokens == 2900 and d.cache_read_tokens == 2400
    assert d.cost > 0 and rec.inference_cost >= d.cost
    assert [a.tool_name for a in rec.actions] == ["swap"] and rec.actions[0].status == ActionStatus.EXECUTED
    assert rec.context_bundle_summary.total_tokens > 0, "the workspace's categories reach the record"
    assert rec.evaluation and rec.evaluation["evaluator_model"] and rec.evaluation["evaluator_model"] != d.model
    rx = rec.reflexion  # predict-then-compare, worded by Claude, the numbers kept after the model's sentence
    assert rx.model.startswith("claude-") and rx.insight.startswith("Hedging on the owner's word cost only the swap fee.")
    assert "Numbers: In a " in rx.insight and f"{rx.expected.value_change_usd:+.2f}" in rx.insight
    first = api.requests[0]
    assert first["model"] == "claude-sonnet-4-6"
    assert any("cache_control" in block for block in first["system"]), "prompt-cache breakpoints are sent"
    assert "sk-test-not-a-key" not in (rig.data_dir / "cycles" / f"cycle-{rec.tick:06d}.json").read_text()
    # the model's relation is in the knowledge graph (and on the record); the made-up entity is not
    assert len(d.kg_facts) == 1 and " price_source pool:0x" in d.kg_facts[0] and d.kg_facts[0].startswith("oracle:")
    assert any("unknown entity pool:0xdead" in r for r in d.rejections)
    subject = d.kg_facts[0].split()[0]
    facts = KnowledgeGraph(rig.data_dir / "grimoire" / "semantic.sqlite").current_facts([subject])
    assert [(f.predicate, f.confidence) for f in facts if f.predicate == "price_source"] == [("price_source", 0.4)]


async def test_steer_while_deciding_cancels_the_request_and_re_prompts(temporal_client, tmp_path):
    rig = make_rig(tmp_path, "llm-steer", "calm", theta=0.25,
                   inference={"provider": "anthropic"})
    try:
        async def slow(body):  # the model thinks for a long time: the steer must cancel this request
            await asyncio.sleep(60)

        async def answer(body):
            return message([decide("owner changed course", 0.7, False, decision="hold")],
                           model=body["model"], input_tokens=2500, output_tokens=90)

        api = FakeMessagesAPI(slow, answer, answer, answer)
        services = rig.services()
        deliberator, _ = select_deliberator(
            rig.config, {"ANTHROPIC_API_KEY": "sk-test-not-a-key"}, home=rig.home, data_dir=rig.data_dir,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api.handler)),
        )
        services.use_deliberator(deliberator, _)
        store = CycleStore(rig.data_dir)
        async with in_process_worker(temporal_client, rig, services=services):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            await wait_for(lambda: store.count() >= 2, 60, "two ticks")
            await handle.signal(GolemWorkflow.steer, {"id": "d-1", "message": "hold on", "severity": "high"})
            await asyncio.wait_for(api.started.wait(), 30)  # the first request is in flight: Deciding
            await handle.signal(GolemWorkflow.steer, {"id": "d-2", "message": "actually, stay put", "severity": "high"})

            rec = await wait_for_record(
                store, lambda rec: any(i.id == "d-2" for i in rec.active_interventions), "the re-prompted tick"
            )
            await handle.terminate("test done")
        assert api.cancelled.is_set(), "the in-flight request was cancelled"
        assert rec.deliberation.interrupted_by == ["d-2"] and rec.deliberation.model == "claude-sonnet-4-6"
        assert "INTERRUPT" in json.dumps(api.requests[1]).upper()
        history = await temporal_client.get_workflow_handle(rec.workflow_id).fetch_history()
        assert any(e.HasField("activity_task_cancel_requested_event_attributes") for e in history.events)
    finally:
        rig.stop()
