"""A high steer that arrives while a tick is sending its actions, through the workflows (real Temporal + Anvil):
the tick's FSM shows Executing[CancelPending{reason}], the action already on its way is sent, the next one is
cancelled before it reaches the chain, and the record says why (docs/design/tick.md#steers)."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from golem.events.store import EventStore
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus
from golem.models.golem import GolemStatus
from golem.models.state import FsmState
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration

STRATEGY = """# Strategy: two small moves on the first tick

## Settings
- collateral: WETH
- debt: USDC

## Rules
- WHEN health_factor < 50 THEN repay 1% debt
- WHEN health_factor < 50 THEN supply 0.1 collateral

## Constraints
- MUST keep health_factor >= 1.3
"""
HOLD_S = 4.0  # the first execute waits this long: the window the steer lands in


class _HoldFirstExecute(ActivityInboundInterceptor):
    held = 0

    async def execute_activity(self, input: ExecuteActivityInput):
        from temporalio import activity

        if activity.info().activity_type == "execute" and _HoldFirstExecute.held == 0:
            _HoldFirstExecute.held += 1
            await asyncio.sleep(HOLD_S)
        return await self.next.execute_activity(input)


class _Hold(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _HoldFirstExecute(next)


async def test_a_high_steer_while_executing_cancels_the_next_action_through_the_workflow(temporal_client, tmp_path):
    _HoldFirstExecute.held = 0
    rig = make_rig(tmp_path, "cancel-pending", "calm", gating={"mode": "always"},
                   decision_cache={"min_consistency": 1000})
    (rig.home / "STRATEGY.md").write_text(STRATEGY)
    nonce = rig.w3.eth.get_transaction_count(rig.deployment.golem_account)
    seen: list[str] = []
    try:
        async with in_process_worker(temporal_client, rig, interceptors=[_Hold()]):
            handle = await rig.start_golem(temporal_client, max_ticks=1)

            async def fsm() -> str:
                st = await handle.query(GolemWorkflow.status, result_type=GolemStatus)
                if not st.current_tick_workflow_id:
                    return ""
                now = await temporal_client.get_workflow_handle(st.current_tick_workflow_id).query(
                    "fsm", result_type=FsmState)
                seen.append(f"{now.state.value}[{now.substate}]")
                return seen[-1]

            async def fsm_is(prefix: str) -> bool:
                return (await fsm()).startswith(prefix)

            await wait_for(lambda: fsm_is("Executing["), 60, "the tick to start sending")
            await handle.signal(GolemWorkflow.steer, {"id": "stop-1", "message": "stop everything", "severity": "high"})
            await wait_for(lambda: fsm_is("Executing[CancelPending"), HOLD_S,
                           "the FSM to show CancelPending while the first action is held")
            await asyncio.wait_for(handle.result(), timeout=120)
        assert "Executing[CancelPending{reason=stop everything}]" in seen, seen
        rec = CycleStore(rig.data_dir).load(0)
        sent, cancelled = rec.actions
        assert sent.status is ActionStatus.EXECUTED and sent.tx_hash, sent
        assert cancelled.status is ActionStatus.CANCELLED and cancelled.tx_hash is None, cancelled
        assert cancelled.block_reason == "cancelled before sending: steer stop-1: stop everything", cancelled
        with sqlite3.connect(rig.data_dir / "tx_journal.sqlite") as db:  # every transaction the tick sent
            intents = db.execute("SELECT action_index, nonce FROM tx_intents").fetchall()
        assert {i for i, _ in intents} == {sent.action_index}, intents  # the first action's calls, nothing else
        assert rig.w3.eth.get_transaction_count(rig.deployment.golem_account) == nonce + len(intents)
        # The ui-bridge's hooks, as the owner's event stream shows them: the tick's start (turn_start), the first
        # action going out, each of its transactions and where it landed (tool_execution_start / _update / _end),
        # the cancelled one only in the record's events, and the tick's end last (turn_end)
        stream = [(e.kind, e.payload.get("index")) for e in EventStore(rig.data_dir).read()
                  if e.kind.startswith(("actions.", "heartbeat.tick_"))]
        assert stream[0] == ("heartbeat.tick_started", None) and stream[-1] == ("heartbeat.tick_finished", None)
        live = [k for k, i in stream if k in ("actions.sending", "actions.tx", "actions.landed")]
        assert live == ["actions.sending"] + ["actions.tx"] * len(intents) + ["actions.landed"], stream
        assert all(i == sent.action_index for k, i in stream if k in live), stream
        assert stream.index(("actions.landed", 0)) < stream.index(("actions.executed", 0)) \
            < stream.index(("actions.failed", 1)), stream
        landed = EventStore(rig.data_dir).read(kinds=["actions.landed"])[0].payload
        assert landed["status"] == "executed" and landed["tx_hash"] == sent.tx_hash, landed
        # agent_start / agent_end (the ui-bridge): the decide session opens and closes before anything is sent
        kinds = [e.kind for e in EventStore(rig.data_dir).read()]
        assert kinds.index("heartbeat.tick_started") < kinds.index("heartbeat.deliberation_started") \
            < kinds.index("heartbeat.deliberation_ended") < kinds.index("actions.sending"), kinds
        assert (rec.deliberation.agent_start, rec.deliberation.agent_end) == (["ui-bridge"], ["ui-bridge"])
        ended = EventStore(rig.data_dir).read(kinds=["heartbeat.deliberation_ended"])[0].payload
        assert ended["outcome"] == "answered" and ended["actions"] == 2 and ended["model"] == rec.deliberation.model
    finally:
        rig.stop()
