"""Privileged tools on real parts: a golem whose grant leaves out `supply` ([policy] privileged_tools). On a steered tick
Claude (the real anthropic SDK, faked at the HTTP boundary) asks the owner three times through request_privileged; the
owner approves one with `golem approve` (it is supplied on the real Anvil chain on a later tick, through the whole
validate chain), denies one with the dashboard's Deny button (a real headless Chromium), and leaves one to expire.
The requests show in `status`, the dashboard, the Temporal UI's current details and the audit trail."""

from __future__ import annotations

import json
from argparse import Namespace

import httpx2
import pytest
from temporalio.client import WorkflowUpdateFailedError

from cli.control import _answer
from golem.events.store import EventStore
from golem.life.cycle_store import CycleStore
from golem.models.approvals import ApprovalAnswer, ApprovalDecision, ApprovalStatus
from golem.models.enums import ActionStatus
from golem.models.golem import GolemStatus
from golem.safety.audit import AuditLog
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for, wait_for_record
from tests.integration.test_dashboard import CHROMIUM, _browser
from tests.unit.inference_fakes import FakeMessagesAPI, decide, message, tool_use
from workers.dashboard.server import Dashboard, bound_port, start_dashboard
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration

ASKS = [("apr", 0.5, "the loan would be safer with more collateral"),
        ("apr", 0.3, "a second, smaller top-up"),
        ("apr", 0.2, "a third one, if the owner wants it")]


async def _status(handle) -> GolemStatus:
    return await handle.query(GolemWorkflow.status)


async def test_privileged_requests_approved_denied_and_expired(temporal_client, tmp_path):
    rig = make_rig(tmp_path, "priv-golem", "calm", theta=0.25, inference={"provider": "anthropic"},
                   policy={"privileged_tools": ["supply"], "approval_ttl_ticks": 8})
    seen: dict[str, object] = {}

    async def reply(body):
        tools = {t["name"] for t in body.get("tools", [])}
        if "evaluate" in tools:
            return message([tool_use("evaluate", {"verdict": "good", "score": 0.6, "rationale": "ok"})],
                           model=body["model"], input_tokens=300, output_tokens=40)
        if "reflect" in tools:
            return message([tool_use("reflect", {"insight": "Collateral helps."})], model=body["model"],
                           input_tokens=300, output_tokens=40)
        if "add collateral" in json.dumps(body["messages"]) and "asked" not in seen:
            seen["asked"], seen["offered"] = True, tools
            calls = [tool_use("request_privileged", {"tool": "supply", "arguments": {"amount": amount},
                                                     "reason": why}, i) for i, (_, amount, why) in enumerate(ASKS)]
            return message([*calls, decide("asked the owner for collateral top-ups")], model=body["model"])
        return message([decide("nothing to do")], model=body["model"])

    api = FakeMessagesAPI(*([reply] * 60))
    services, _ = rig.claude_services(api.handler)
    store = CycleStore(rig.data_dir)
    runner = await start_dashboard(Dashboard(rig.data_dir, rig.golem_id, client=temporal_client), port=0)
    browser = pw = None
    try:
        async with in_process_worker(temporal_client, rig, services=services):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            await wait_for(lambda: store.count() >= 1, 60, "a first tick")
            await handle.signal(GolemWorkflow.steer, {"id": "prv-1", "message": "add collateral", "severity": "high"})
            asked = await wait_for_record(store, lambda r: bool(r.deliberation and r.deliberation.privileged_requests),
                                          "the tick that asked")
            ids = [r.id for r in asked.deliberation.privileged_requests]
            st = await wait_for(lambda: _pending(handle, 3), 30, "three pending requests in status")
            details = (await handle.query("__temporal_workflow_metadata")).current_details
            # a wrong id and an answer to an answered request are refused before they enter history
            with pytest.raises(WorkflowUpdateFailedError) as unknown:
                await handle.execute_update("approve", ApprovalDecision(id="apr-999-0"), result_type=ApprovalAnswer)
            assert "no privileged request 'apr-999-0'" in str(unknown.value.cause)
            # the owner approves one from the command line ...
            cli_args = Namespace(cmd="approve", request_id=ids[0], note="fine", home=str(rig.home),
                                 data=str(rig.data_dir), address=temporal_client.service_client.config.target_host)
            assert await _answer(cli_args) == 0
            # ... and denies another with the dashboard's button
            url = f"http://127.0.0.1:{bound_port(runner)}/"
            if CHROMIUM is not None:
                pw, browser = await _browser()
                page = await browser.new_page()
                await page.goto(url)
                await page.wait_for_selector(f"#approval-{ids[1]} button[data-answer=deny]", timeout=20_000)
                await page.click(f"#approval-{ids[1]} button[data-answer=deny]")
                await page.wait_for_function(
                    f"document.getElementById('control-msg').textContent.includes('request {ids[1]} denied')",
                    timeout=20_000)
            else:  # no browser on this machine: the same request the button sends
                async with httpx2.AsyncClient() as http:
                    r = await http.post(f"{url}api/approvals/{ids[1]}/deny", json={})
                    assert r.status_code == 200, r.text
            with pytest.raises(WorkflowUpdateFailedError) as again:
                await handle.execute_update(GolemWorkflow.approve, ApprovalDecision(id=ids[1]))
            assert "already denied" in str(again.value.cause)
            ran = await wait_for_record(store, lambda r: any(a.tool_name == "supply" for a in r.actions),
                                        "the tick that ran the approved supply", timeout=90)
            after = await wait_for_record(store, lambda r: r.tick > ran.tick, "a tick after it")
            final = await wait_for(lambda: _expired(handle, ids[2]), 90, "the third request to expire")
            await handle.terminate("test done")
    finally:
        if browser is not None:
            await browser.close()
            await pw.stop()
        await runner.cleanup()
        rig.stop()
    # the model was offered the request tool, not supply itself; the requests were the tick's, with their reasons
    assert "request_privileged" in seen["offered"] and "supply" not in seen["offered"]
    assert ids == [f"apr-{asked.tick}-{i}" for i in range(3)] and not asked.actions
    assert [a.arguments["amount"] for a in st.approvals] == [0.5, 0.3, 0.2]
    assert all(a.status == ApprovalStatus.PENDING and a.expires_at_tick == asked.tick + 9 for a in st.approvals)
    assert ids[0] in details and f"golem approve {ids[0]}" in details  # the Temporal UI shows what to type
    # approved: supplied on chain on a later tick, through the cage (a permit, an executed tx), collateral up by 0.5
    (action,) = [a for a in ran.actions if a.tool_name == "supply"]
    assert ran.tick > asked.tick and action.status == ActionStatus.EXECUTED and action.tx_hash and action.permit_id
    before = ran.observation.snapshot.positions[0].collateral
    assert after.observation.snapshot.positions[0].collateral == pytest.approx(before + 0.5, rel=1e-3)
    by_id = {a.id: a for a in final.approvals}
    assert by_id[ids[0]].status == ApprovalStatus.RAN and by_id[ids[0]].ran_on_tick == ran.tick
    assert by_id[ids[0]].outcome.startswith("executed tx ")
    assert by_id[ids[0]].decided_by == "cli" and by_id[ids[0]].note == "fine"
    assert by_id[ids[1]].status == ApprovalStatus.DENIED and by_id[ids[1]].decided_by == "dashboard"
    assert by_id[ids[2]].status == ApprovalStatus.EXPIRED and final.tick >= asked.tick + 9
    # every answer on the audit trail, and the approved write's verdict names its approval
    (audit_path,) = list(rig.data_dir.rglob("audit.sqlite"))
    entries = AuditLog(audit_path).entries()
    kinds = {(e.kind, e.payload.get("id")) for e in entries if e.kind.startswith("approval.")}
    assert {("approval.approved", ids[0]), ("approval.denied", ids[1]), ("approval.expired", ids[2])} <= kinds
    assert any(e.kind == "tool_call.allowed" and e.payload.get("approval_id") == ids[0] for e in entries)
    assert AuditLog(audit_path).verify().ok
    # ... and on the Event Fabric (the dashboard refreshes on them; `golem events` lists them)
    fabric = EventStore(rig.data_dir)
    assert [p["id"] for kind in ("approved", "denied", "expired")
            for *_, p in fabric.payloads(f"control.approval_{kind}")] == ids


async def _pending(handle, n: int) -> GolemStatus | None:
    st = await _status(handle)
    return st if sum(a.status == ApprovalStatus.PENDING for a in st.approvals) >= n else None


async def _expired(handle, rid: str) -> GolemStatus | None:
    st = await _status(handle)
    return st if any(a.id == rid and a.status == ApprovalStatus.EXPIRED for a in st.approvals) else None
