"""Restricted{constraint} through the workflows (real Temporal + Anvil): the first action of a two-action batch fails on
chain, so the second, sized for a state that did not happen, is not sent; the FSM shows Executing[Restricted{…}] and
the record says why (docs/design/tick.md#steers)."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from golem.chain.contracts import contract
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus
from golem.models.golem import GolemStatus
from golem.models.state import FsmState
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration

STRATEGY = """# Strategy: a repay, then a supply sized after it

## Settings
- collateral: WETH
- debt: USDC

## Rules
- WHEN health_factor < 50 THEN repay 1% debt
- WHEN health_factor < 50 THEN supply 0.1 collateral

## Constraints
- MUST keep health_factor >= 1.3
"""
HOLD_S = 4.0  # the second execute waits this long: the window the FSM is read in


class _Interfere(ActivityInboundInterceptor):
    """Before the first execute, the golem's USDC leaves its wallet (as another signer of a shared key might move
    it): validated against a funded wallet, the repay then fails on chain. The second execute is held a while."""
    rig = None
    calls = 0

    async def execute_activity(self, input: ExecuteActivityInput):
        from temporalio import activity

        if activity.info().activity_type == "execute":
            _Interfere.calls += 1
            if _Interfere.calls == 1:
                await asyncio.to_thread(_drain_usdc, _Interfere.rig)
            elif _Interfere.calls == 2:
                await asyncio.sleep(HOLD_S)
        return await self.next.execute_activity(input)


class _Hook(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Interfere(next)


def _drain_usdc(rig) -> None:
    w3, golem = rig.w3, rig.deployment.golem_account
    usdc = contract(w3, rig.deployment, "USDC")
    w3.provider.make_request("anvil_impersonateAccount", [golem])
    try:
        balance = usdc.functions.balanceOf(golem).call()
        tx = usdc.functions.transfer(rig.deployment.deployer, balance).transact({"from": golem})
        w3.eth.wait_for_transaction_receipt(tx)
    finally:
        w3.provider.make_request("anvil_stopImpersonatingAccount", [golem])


async def test_a_failed_action_restricts_the_rest_of_its_batch_through_the_workflow(temporal_client, tmp_path):
    _Interfere.calls = 0
    rig = make_rig(tmp_path, "restricted", "calm", gating={"mode": "always"},
                   decision_cache={"min_consistency": 1000})
    _Interfere.rig = rig
    (rig.home / "STRATEGY.md").write_text(STRATEGY)
    seen: list[str] = []
    try:
        async with in_process_worker(temporal_client, rig, interceptors=[_Hook()]):
            handle = await rig.start_golem(temporal_client, max_ticks=1)

            async def fsm_is(prefix: str) -> bool:
                st = await handle.query(GolemWorkflow.status, result_type=GolemStatus)
                if not st.current_tick_workflow_id:
                    return False
                now = await temporal_client.get_workflow_handle(st.current_tick_workflow_id).query(
                    "fsm", result_type=FsmState)
                seen.append(f"{now.state.value}[{now.substate}]")
                return seen[-1].startswith(prefix)

            await wait_for(lambda: fsm_is("Executing[Restricted"), 90, "the FSM to show Restricted")
            await asyncio.wait_for(handle.result(), timeout=120)
        rec = CycleStore(rig.data_dir).load(0)
        failed, blocked = rec.actions
        assert failed.status is ActionStatus.FAILED and failed.tool_name == "repay", failed
        assert blocked.status is ActionStatus.BLOCKED and blocked.tx_hash is None, blocked
        assert blocked.block_reason.startswith("restricted, not sent: action 0 (repay) failed"), blocked
        assert any(s.startswith("Restricted{constraint=action 0 (repay) failed") for s in rec.fsm_trace), rec.fsm_trace
        assert any(s.startswith("Executing[Restricted{constraint=action 0 (repay) failed") for s in seen), seen
        with sqlite3.connect(rig.data_dir / "tx_journal.sqlite") as db:  # nothing of the supply was sent
            assert {i for (i,) in db.execute("SELECT action_index FROM tx_intents")} <= {0}
    finally:
        rig.stop()
