"""Size to fit on real parts (docs/design/spending.md): a proposal over a limit is clipped by the cage, sent at the
clipped size under a permit bound to it, and the clip is on the record and the audit trail; a clip below the
minimum worth doing is refused with the reason.

The Temporal test uses a limit only the cage knows (max_price_impact_bps against the pair's reserves): the offline
deliberator sizes the owner's "reduce exposure" swap within max_trade_size_usd, the cage clips it further."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest
from eth_account import Account
from web3 import Web3

from golem.chain.contracts import Deployment
from golem.chain.executor import Executor
from golem.chain.permits import PermitError
from golem.chain.simulate import simulate_actions
from golem.life.cycle_store import CycleStore
from golem.models.config import GolemConfig, PolicySection
from golem.models.enums import ActionStatus, BehavioralPhase
from golem.models.tick import ProposedAction
from golem.safety.service import SafetyService
from golem.safety.sizing import impact_cap_amount
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS
from tests.integration.golem_rig import golem_observation, in_process_worker, make_rig, wait_for_record
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration

GOLEM = ANVIL_ADDRESSES[2]


def service(tmp_path, **policy) -> SafetyService:
    cfg = GolemConfig(policy=PolicySection(**policy))
    cfg.probes.kill_switch_path = str(tmp_path / "no-killswitch")
    return SafetyService(cfg, tmp_path)


def swap(amount: float, idx: int = 0) -> ProposedAction:
    return ProposedAction(action_index=idx, tool="swap", rationale="LLM: sell it all, it is protective",
                          arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": amount})


def test_an_oversized_swap_is_sent_at_the_clipped_size_and_a_tiny_clip_is_refused(
        w3: Web3, world_snapshot: Deployment, tmp_path):
    world = world_snapshot
    svc = service(tmp_path)  # max_trade_size_usd 5000
    obs = golem_observation(w3, world)

    def resimulate(actions):
        return simulate_actions(w3, world, GOLEM, actions, obs)

    big = swap(5.0)  # ~$10,000 at ~$2,000
    sim = resimulate([big])
    val, decisions = svc.validate("g1", 1, BehavioralPhase.THRIVING, [big], sim, obs, resimulate=resimulate)
    v = val.actions[0]
    assert v.approved, v.reason
    sized = v.action
    assert sized is not None and v.clipped and "max_trade_size_usd" in v.clipped
    amount = sized.arguments["amount_in"]
    assert amount * obs.snapshot.oracle_price <= 5000.0 and amount * obs.snapshot.oracle_price > 4999.0
    assert val.simulation is not None and val.simulation.actions[0].ok
    permit = svc.permits.get(v.permit_id)
    assert permit.value_limit_usd <= 5000.0 + 1e-6
    clipped = [e for e in svc.audit.entries(kind_prefix="tool_call.clipped")]
    assert clipped and clipped[-1].payload["limit"] == "max_trade_size_usd"

    executor = Executor(w3, world, Account.from_key(ANVIL_KEYS[2]), svc.journal, svc.permits)
    with pytest.raises(PermitError, match="allows"):  # the proposal at its own size: the permit refuses it
        svc.execute(executor, "g1", 1, big, v.permit_id, obs)
    weth_before = golem_observation(w3, world).snapshot.balances["WETH"]
    rec = svc.execute(executor, "g1", 1, sized, v.permit_id, obs)
    assert rec.status is ActionStatus.EXECUTED, rec.block_reason
    assert weth_before - golem_observation(w3, world).snapshot.balances["WETH"] == pytest.approx(amount, abs=1e-9)

    # a clip below the minimum worth doing: a price-impact limit that leaves ~$10 of the swap
    tight = service(tmp_path / "tight", max_price_impact_bps=30.1)
    obs = golem_observation(w3, world)
    small = swap(1.0, idx=0)
    sim = simulate_actions(w3, world, GOLEM, [small], obs)
    val, _ = tight.validate("g1", 2, BehavioralPhase.THRIVING, [small], sim, obs, resimulate=resimulate)
    assert not val.actions[0].approved
    assert "size to fit" in val.actions[0].reason and "below the minimum worth doing" in val.actions[0].reason
    assert "max_price_impact_bps" in val.actions[0].reason
    entry = tight.audit.entries(kind_prefix="tool_call.clipped")[-1]
    assert entry.payload["refusal"] and entry.payload["sized"] is None


@pytest.fixture
def rig(tmp_path):
    # A price-impact limit the offline deliberator does not size for: ~1 WETH against the pair's 500.
    rig = make_rig(tmp_path, "clipper", "calm", theta=0.3, policy={"max_price_impact_bps": 50.0})
    yield rig
    rig.stop()


async def test_a_steered_swap_is_clipped_by_the_cage_sent_at_that_size_and_verified(temporal_client, rig):
    client = temporal_client
    store = CycleStore(rig.data_dir)
    async with in_process_worker(client, rig):
        handle = await rig.start_golem(client, max_ticks=None)
        await wait_for_record(store, lambda r: True, "a first tick")
        await handle.signal(GolemWorkflow.steer, {
            "id": f"steer-{uuid.uuid4().hex[:8]}", "message": "reduce exposure now", "severity": "high",
            "created_at": datetime.now(timezone.utc).isoformat()})
        rec = await wait_for_record(store, lambda r: bool(r.deliberation and r.deliberation.steers_considered),
                                    "the steered tick", timeout=90)
        await handle.terminate("test done")
    proposed = next(c for c in rec.deliberation.tool_calls if c.tool_name == "swap")
    swaps = [a for a in rec.actions if a.tool_name == "swap"]
    assert swaps and swaps[0].status is ActionStatus.EXECUTED, [(a.status, a.block_reason) for a in rec.actions]
    assert swaps[0].clipped and "max_price_impact_bps" in swaps[0].clipped
    cap = impact_cap_amount(50.0 / 1e4, rec.observation.snapshot.pool.reserve0)
    assert proposed.arguments["amount_in"] > cap  # the deliberator proposed more than the cage allows
    # what left the wallet is the clipped size: verify compared the receipts with the simulation at that size
    # (against the deliberator's size the WETH and USDC deltas would be off by more than half)
    assert rec.outcome is not None and rec.outcome.deviations_bps, rec.outcome
    assert all(abs(bps) < 1.0 for bps in rec.outcome.deviations_bps.values()), rec.outcome.deviations_bps
    sent = float(swaps[0].clipped.split(" to ", 1)[1].split(" ", 1)[0].replace(",", ""))
    assert 0.9 * cap < sent <= cap + 1e-6
