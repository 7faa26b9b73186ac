"""On the wall clock the delta cycle runs beside the ticks (real Temporal + Anvil): its first step is held for seconds,
as a learned rule's trial holds it for minutes, and the golem keeps ticking meanwhile; when the cycle ends its result is
folded into the state (docs/design/tick.md#consolidation-beside-the-ticks)."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from golem.life.cycle_store import CycleStore
from tests.integration.golem_rig import in_process_worker, make_rig

pytestmark = pytest.mark.integration
HOLD_S = 6.0


class _Slow(ActivityInboundInterceptor):
    held: list[tuple[float, float]] = []  # (start, end) of the held step, wall clock

    async def execute_activity(self, input: ExecuteActivityInput):
        if activity.info().activity_type == "delta_decay":
            start = datetime.now().timestamp()
            await asyncio.sleep(HOLD_S)
            _Slow.held.append((start, datetime.now().timestamp()))
        return await self.next.execute_activity(input)


class _Hook(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Slow(next)


async def test_the_golem_ticks_while_its_delta_cycle_runs(temporal_client, tmp_path):
    _Slow.held = []
    # a delta cycle every 10 ticks; no continue-as-new in the run (it waits for a running cycle: the child would close)
    rig = make_rig(tmp_path, "delta-beside", "calm", theta=0.3, clock={"continue_as_new_ticks": 100})
    try:
        async with in_process_worker(temporal_client, rig, interceptors=[_Hook()]):
            handle = await rig.start_golem(temporal_client, max_ticks=14)
            state = await asyncio.wait_for(handle.result(), timeout=180)
            delta = temporal_client.get_workflow_handle(f"golem-{rig.golem_id}-delta-10")
            desc = await delta.describe()
            history = await handle.fetch_history()
        (start, end), = _Slow.held
        store = CycleStore(rig.data_dir)
        during = [t for t in range(10, 14)
                  if start <= datetime.fromisoformat(store.load(t).timestamp).timestamp() <= end]
        assert len(during) >= 2, f"ticks while the delta step was held {start}–{end}: {during}"
        assert desc.status.name == "COMPLETED" and state.last_delta_tick == 10 and state.tick == 14
        markers = [e.marker_recorded_event_attributes for e in history.events
                   if e.HasField("marker_recorded_event_attributes")]
        assert any("delta-background" in str(m.details) for m in markers), "the change is patch-guarded"
    finally:
        rig.stop()


async def test_a_cycle_that_ends_while_the_golem_is_paused_is_folded_and_the_golem_comes_to_rest(temporal_client,
                                                                                                  tmp_path):
    """`golem pause` (and `golem stop`, which pauses and waits for rest) while a delta cycle runs beside the ticks:
    the cycle's end is folded in during the pause, so the golem shows at rest without a next tick to fold it."""
    from golem.models.golem import ControlRequest, ControlState
    from workflows.golem import GolemWorkflow

    _Slow.held = []
    rig = make_rig(tmp_path, "delta-paused", "calm", theta=0.3, clock={"continue_as_new_ticks": 100})
    try:
        async with in_process_worker(temporal_client, rig, interceptors=[_Hook()]):
            handle = await rig.start_golem(temporal_client, max_ticks=40)
            for _ in range(600):  # until the cycle of tick 10 runs beside the ticks
                status = await handle.query(GolemWorkflow.status)
                if "delta cycle of tick 10" in status.activity:
                    break
                await asyncio.sleep(0.05)
            else:
                pytest.fail(f"no delta cycle running beside the ticks: {status.activity}")
            await handle.execute_update("pause", ControlRequest(reason="test", source="test"), result_type=ControlState)
            for _ in range(int((HOLD_S + 30) / 0.2)):
                status = await handle.query(GolemWorkflow.status)
                if status.activity == "paused" and status.current_tick_workflow_id is None:
                    break
                await asyncio.sleep(0.2)
            assert status.activity == "paused", f"the golem never came to rest: {status.activity}"
            assert _Slow.held, "the cycle's held step ended"
            await handle.terminate("test over")
    finally:
        rig.stop()
