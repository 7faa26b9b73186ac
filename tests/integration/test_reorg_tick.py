"""A reorg that removes a tick's transactions, seen by the living golem: the episode is re-marked and
the next tick is forced to T2."""

from __future__ import annotations

import pytest

from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, Tier
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for, wait_for_record
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration


@pytest.fixture
def rig(tmp_path):
    rig = make_rig(tmp_path, "reorg-golem", "calm", theta=0.25)
    yield rig
    rig.stop()


async def test_reorg_re_marks_the_episode_and_forces_t2(temporal_client, rig):
    store = CycleStore(rig.data_dir)
    w3 = rig.w3
    services = rig.services()
    async with in_process_worker(temporal_client, rig, services=services):
        handle = await rig.start_golem(temporal_client, max_ticks=None)
        await wait_for(lambda: store.count() >= 3, 60, "three ticks")
        await handle.signal(GolemWorkflow.steer, {"id": "r-1", "message": "reduce exposure", "severity": "high"})

        rec = await wait_for_record(
            store, lambda rec: any(a.status == ActionStatus.EXECUTED for a in rec.actions), "a tick that acted"
        )
        acted_tick = rec.tick
        first_block = min(a.block_number for a in rec.actions if a.block_number)
        depth = w3.eth.block_number - first_block + 1
        assert "error" not in w3.provider.make_request("anvil_reorg", [depth, []])

        later = await wait_for_record(
            store, lambda rec: rec.tick > acted_tick and "reorg" in rec.gating_reason, "a tick forced to T2 by the reorg"
        )
        await handle.terminate("test done")
    assert later.tier == Tier.T2 and rec.tick in later.observation.reorged_ticks
    episode = services.episodes.get(f"reorg-golem:tick:{rec.tick}")
    assert "REORGED" in episode.summary and episode.outcome_verified is False
