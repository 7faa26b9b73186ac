"""Record `golem-approvals.json`: a GolemWorkflow run where the model (faked at the HTTP boundary) asks the owner for
three privileged supplies; one is approved (it runs on the next tick), one denied, one left to expire — so the
approve / deny updates, their audit activities and the expiry replay in CI.

    .venv/bin/python -m tests.histories.record_approvals
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx2

from golem.deliberators import select_deliberator
from golem.life.cycle_store import CycleStore
from golem.models.approvals import ApprovalDecision
from tests.histories import recording_server
from tests.integration.golem_rig import in_process_worker, make_rig
from tests.unit.inference_fakes import FakeMessagesAPI, decide, message, tool_use
from workflows.golem import GolemWorkflow

HERE = Path(__file__).parent


async def record() -> Path:
    env = await recording_server()
    tmp = Path(tempfile.mkdtemp(prefix="golem-approvals-"))
    rig = make_rig(tmp, "approvals", "calm", theta=0.25, inference={"provider": "anthropic"},
                   policy={"privileged_tools": ["supply"], "approval_ttl_ticks": 3})
    asked: list[bool] = []

    async def reply(body):
        tools = {t["name"] for t in body.get("tools", [])}
        if "evaluate" in tools or "reflect" in tools:
            name = "evaluate" if "evaluate" in tools else "reflect"
            args = {"verdict": "good", "score": 0.6, "rationale": "ok"} if name == "evaluate" else {"insight": "ok"}
            return message([tool_use(name, args)], model=body["model"])
        if "add collateral" in json.dumps(body["messages"]) and not asked:
            asked.append(True)
            calls = [tool_use("request_privileged", {"tool": "supply", "arguments": {"amount": a},
                                                     "reason": "more collateral"}, i) for i, a in enumerate((0.5, 0.3, 0.2))]
            return message([*calls, decide("asked the owner")], model=body["model"])
        return message([decide("nothing to do")], model=body["model"])

    services = rig.services()
    deliberator, _ = select_deliberator(
        rig.config, {"ANTHROPIC_API_KEY": "sk-test-not-a-key"}, home=rig.home, data_dir=rig.data_dir,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(FakeMessagesAPI(*([reply] * 60)).handler)))
    services.use_deliberator(deliberator, "recording")
    try:
        async with in_process_worker(env.client, rig, services=services):
            handle = await rig.start_golem(env.client, max_ticks=10)
            store = CycleStore(rig.data_dir)
            while store.count() < 1:
                await asyncio.sleep(0.1)
            await handle.signal(GolemWorkflow.steer, {"id": "rec-1", "message": "add collateral", "severity": "high"})
            while not [a for a in (await handle.query(GolemWorkflow.status)).approvals if a.status.value == "pending"]:
                await asyncio.sleep(0.1)
            ids = [a.id for a in (await handle.query(GolemWorkflow.status)).approvals]
            await handle.execute_update(GolemWorkflow.approve, ApprovalDecision(id=ids[0], source="recording"))
            await handle.execute_update(GolemWorkflow.deny, ApprovalDecision(id=ids[1], source="recording"))
            await handle.result()
        history = await env.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id).fetch_history()
        events = json.loads(history.to_json())["events"]
        kinds = {e.get("activityTaskScheduledEventAttributes", {}).get("activityType", {}).get("name") for e in events}
        assert "audit_approvals" in kinds, "the recorded run has no approval audit: nothing to replay"
        path = HERE / "golem-approvals.json"
        path.write_text(history.to_json())
        return path
    finally:
        rig.stop()
        await env.shutdown()


if __name__ == "__main__":
    t0 = time.monotonic()
    p = asyncio.run(record())
    print(f"wrote {p.relative_to(HERE.parent.parent)} ({p.stat().st_size} bytes) in {time.monotonic() - t0:.1f}s")
