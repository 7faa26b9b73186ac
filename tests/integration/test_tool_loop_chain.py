"""The tool loop on real parts: a steered T2 tick inside the Temporal workflow where Claude (the real anthropic SDK,
faked at the HTTP boundary) reads the pool's depth and speculates a swap on the real Anvil chain, sees it would move
the pool too far, and decides a smaller one — which the cage lets through and the chain executes."""

from __future__ import annotations

import json

import pytest

from golem.events.store import EventStore
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, Tier
from tests.integration.golem_rig import in_process_worker, make_rig, tool_results, wait_for, wait_for_record
from tests.unit.inference_fakes import FakeMessagesAPI, decide, message, tool_use
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration

BIG = {"token_in": "WETH", "token_out": "USDC", "amount_in": 8.0}
PROPOSAL = "When the owner asks to reduce exposure, size the sale to the pool's depth first."


async def test_claude_reads_depth_speculates_and_decides_a_smaller_swap(temporal_client, tmp_path):
    rig = make_rig(tmp_path, "loop-golem", "calm", theta=0.25, inference={"provider": "anthropic"})
    seen: dict[str, dict] = {}

    async def reply(body):
        tools = {t["name"] for t in body.get("tools", [])}
        if "evaluate" in tools:
            return message([tool_use("evaluate", {"verdict": "good", "score": 0.7, "rationale": "sized to depth"})],
                           model=body["model"], input_tokens=400, output_tokens=60)
        if "reflect" in tools:
            return message([tool_use("reflect", {"insight": "A smaller sale moved the pool less."})],
                           model=body["model"], input_tokens=300, output_tokens=40)
        steered = "reduce exposure" in json.dumps(body["messages"])
        results = tool_results(body)
        if not steered:
            return message([decide("nothing to do")], model=body["model"])
        if not results:  # round 1: how deep is the pool? (and a thought worth keeping, for review)
            seen["offered"] = tools
            return message([tool_use("get_pool_state", {}, 1),
                            tool_use("propose_entry", {"category": "insight", "content": PROPOSAL}, 4)],
                           model=body["model"], input_tokens=2000)
        answer = json.loads(results[0]["content"])
        if "reserve0" in answer:  # round 2: try the big sale
            seen["pool"] = answer
            return message([tool_use("speculate", {"tool": "swap", "arguments": BIG}, 2)], model=body["model"])
        seen["speculation"] = answer  # round 3: it would work, but sell a quarter of it
        smaller = {**BIG, "amount_in": 2.0}
        return message([tool_use("swap", smaller, 3),
                        decide("8 WETH would move the pool; 2 WETH is enough for the owner's ask", 0.7, True)],
                       model=body["model"], input_tokens=2600, output_tokens=120)

    api = FakeMessagesAPI(*([reply] * 30))
    services, _ = rig.claude_services(api.handler)
    store = CycleStore(rig.data_dir)
    try:
        async with in_process_worker(temporal_client, rig, services=services):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            await wait_for(lambda: store.count() >= 2, 60, "two ticks")
            await handle.signal(GolemWorkflow.steer, {"id": "loop-1", "message": "reduce exposure", "severity": "high"})
            rec = await wait_for_record(store, lambda r: any(i.id == "loop-1" for i in r.active_interventions),
                                        "the steered tick")
            await handle.terminate("test done")
    finally:
        rig.stop()
    d = rec.deliberation
    assert rec.tier == Tier.T2 and d.tool_rounds == 3
    assert {"get_pool_state", "speculate", "search_memory", "read_memory", "propose_entry"} <= seen["offered"]
    assert [r.tool_name for r in d.reads] == ["get_pool_state", "propose_entry", "speculate"]
    assert not any(r.error for r in d.reads)
    # the model's proposal waits in the quarantine; it is not knowledge the golem acts on
    from golem.grimoire.access import open_stores

    _, semantic = open_stores(rig.data_dir, rig.home)
    (row,) = [r for r in semantic.quarantined("pending") if r["entry"].content == PROPOSAL]
    assert semantic.get(row["id"]) is None and f"tick {rec.tick}" in row["reason"]
    # the reads were the chain's: the pool the tick observed, and a real eth_simulateV1 of the big sale
    pool = rec.observation.snapshot.pool
    assert seen["pool"]["reserve0"] == pytest.approx(pool.reserve0, rel=1e-3)
    spec = seen["speculation"]
    assert spec["ok"] is True and spec["expected"]["amount_in"] == 8.0
    assert 8.0 * pool.price * 0.9 < spec["expected"]["amount_out"] < 8.0 * pool.price
    assert spec["health_factor_after"] == pytest.approx(spec["health_factor_now"], rel=1e-6)  # a swap leaves Aave alone
    # what was decided is the smaller sale, executed on chain; every call of the loop is paid for
    assert [(a.tool_name, a.status) for a in rec.actions] == [("swap", ActionStatus.EXECUTED)]
    assert [c.arguments["amount_in"] for c in d.tool_calls] == [2.0]
    assert d.input_tokens >= 2000 + 2600 and d.cost > 0 and rec.inference_cost >= d.cost
    reads = [p for _, tick, _, p in EventStore(rig.data_dir).payloads("actions.read") if tick == rec.tick]
    assert [p["tool"] for p in reads] == ["get_pool_state", "propose_entry", "speculate"]
