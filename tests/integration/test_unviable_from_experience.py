"""A strategy made unviable by experience, on real Temporal + Anvil: the delta cycle reads a window whose swaps the pool
was too thin for, judges the strategy unviable, tells the operator's webhook once; the next tick is restricted (the
supply that opens exposure is refused, the repay runs, no paid model); the owner acknowledges with
`golem strategy-check --ack`, and the tick after that supplies (docs/how-to/strategies.md#unviable-from-experience)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from activities.tick import TickActivities
from golem.events.store import EventStore
from golem.ids import task_queue
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, MarketRegime, Tier
from golem.models.golem import ConsolidationInput, ConsolidationResult
from golem.models.record import ActionRecord, DecisionCycleRecord, OutcomeRecord
from golem.models.state import GolemState
from golem.inference.llm import LLMDeliberator
from golem.inference.offline import OfflineDeliberator
from golem.models.tick import DecideInput, ObserveInput, TickContext
from tests.integration.golem_rig import in_process_worker, make_rig
from tests.unit.inference_fakes import FakeMessagesAPI, router
from workflows.consolidation import DeltaConsolidationWorkflow

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

STRATEGY = """# Strategy: repay a little, supply a little

## Settings
- collateral: WETH
- debt: USDC

## Rules
- WHEN health_factor < 50 THEN repay 1% debt
- WHEN health_factor < 50 THEN supply 0.1 collateral

## Constraints
- MUST keep health_factor >= 1.3
"""
THIN = "clipped from 30 to 12 by max_price_impact_bps: price impact ≤ 100 bps against the pair's reserve"


class _Hook(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        _Hook.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _thin_swap_tick(obs, tick: int, golem_id: str) -> DecisionCycleRecord:
    swap = ActionRecord(action_index=0, action_type="write", tool_name="swap", status=ActionStatus.EXECUTED,
                        gas_cost=0.4, clipped=THIN)
    return DecisionCycleRecord(
        tick=tick, timestamp="2026-11-27T00:00:00+00:00", golem_id=golem_id, observation=obs,
        regime=MarketRegime.RANGE_BOUND, tier=Tier.T1, prediction_error=0.1, deliberation_threshold=0.3,
        gating_reason="test", actions=[swap], outcome=OutcomeRecord(verified=True, pnl_impact=-0.5))


async def test_a_strategy_unviable_from_experience_restricts_the_golem_until_the_owner_acknowledges(
        temporal_env, temporal_client, tmp_path):
    hook = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    _Hook.bodies = []
    rig = make_rig(tmp_path, "unviable", "calm", gating={"mode": "always"}, decision_cache={"min_consistency": 1000},
                   alerts={"webhook_url": f"http://127.0.0.1:{hook.server_address[1]}/ops"})
    (rig.home / "STRATEGY.md").write_text(STRATEGY)
    env = dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir),
                               *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=60)

    try:
        services = rig.services()
        ctx = TickContext(golem_id=rig.golem_id, tick=0, config=rig.config, state=GolemState(golem_id=rig.golem_id),
                          started_at="2026-11-27T00:00:00+00:00")
        obs = TickActivities(services).observe(ObserveInput(ctx=ctx))
        for t in range(4):  # a window of swaps the pair was too thin for
            services.cycles.persist(_thin_swap_tick(obs, t, rig.golem_id))
        store = CycleStore(rig.data_dir)
        async with in_process_worker(temporal_client, rig, services=services):
            delta = await temporal_client.execute_workflow(
                DeltaConsolidationWorkflow.run, ConsolidationInput(golem_id=rig.golem_id, tick=4, config=rig.config),
                id=f"golem-{rig.golem_id}-delta-4", task_queue=task_queue(rig.golem_id),
                result_type=ConsolidationResult)
            assert delta.viability is not None and delta.viability["status"] == "STRATEGY_UNVIABLE", delta.viability
            assert delta.viability["restricted"].startswith("thin_liquidity: 4 of 4 swaps"), delta.viability
            assert [b["id"] for b in _Hook.bodies] == ["viability-4"]
            assert _Hook.bodies[0]["findings"][0]["kind"] == "thin_liquidity"
            # the decide step's model-router: no paid call while restricted (a Claude deliberator on a fake Messages API)
            claude = TickActivities(services)
            services.use_deliberator(LLMDeliberator(router(FakeMessagesAPI())), "anthropic (test)")
            asked = DecideInput(ctx=ctx, observation=obs, tier=Tier.T2, prediction_error=1.0)
            route = claude._route(asked)
            assert route.choice is None and route.why.startswith("restricted (strategy unviable from experience)")
            services.use_deliberator(OfflineDeliberator(), "offline (test)")  # the ticks below: the rule engine
            handle = await rig.start_golem(temporal_client, max_ticks=1)
            await asyncio.wait_for(handle.result(), timeout=120)
            status = await asyncio.to_thread(cli, "status")
            assert "RESTRICTED: strategy unviable from experience" in status.stdout, status.stdout + status.stderr
            rec = store.load(store.recent(1)[0]["tick"])
            by_tool = {a.tool_name: a for a in rec.actions}
            assert by_tool["repay"].status is ActionStatus.EXECUTED, rec.actions
            assert by_tool["supply"].status is ActionStatus.BLOCKED, rec.actions
            assert by_tool["supply"].block_reason.startswith("safety: restricted: the strategy is unviable from experience")

            ack = await asyncio.to_thread(cli, "strategy-check", "--ack", "--note", "a thin test pair, known")
            assert ack.returncode == 0 and "acknowledged [critical] thin_liquidity" in ack.stdout, ack.stdout + ack.stderr
            services.use_deliberator(LLMDeliberator(router(FakeMessagesAPI())), "anthropic (test)")
            assert claude._route(asked).choice is not None  # acknowledged: the model-router answers again
            services.use_deliberator(OfflineDeliberator(), "offline (test)")
            status = await asyncio.to_thread(cli, "status")
            assert "RESTRICTED" not in status.stdout and "(acknowledged)" in status.stdout, status.stdout

            handle = await rig.start_golem(temporal_client, max_ticks=1)
            await asyncio.wait_for(handle.result(), timeout=120)
            after = store.load(store.recent(1)[0]["tick"])
            assert after.timestamp > rec.timestamp  # the run after the acknowledgment
            assert {a.tool_name: a.status for a in after.actions}["supply"] is ActionStatus.EXECUTED, after.actions
        kinds = [e.kind for e in EventStore(rig.data_dir).read(kinds=[
            "safety.strategy_unviable", "safety.strategy_acknowledged"], limit=10)]
        assert kinds == ["safety.strategy_unviable", "safety.strategy_acknowledged"]
    finally:
        hook.shutdown()
        rig.stop()
