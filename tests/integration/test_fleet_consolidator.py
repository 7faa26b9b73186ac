"""A memory-consolidator over fleet golems on real Temporal: `golem consolidator NAME --member ID ...` on a fleet's
data dir schedules its runs on the queue of the host holding the members' data (golem-host-<name>), and that host's
worker runs them — no clade worker, no other worker (docs/how-to/clade.md#a-consolidator-over-a-fleet)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import pytest

from activities.clade import ledger_path
from golem.clade.proposals import ProposalInbox
from golem.grimoire.episodes.model import Episode
from golem.models.clade import consolidator_id
from golem.models.enums import MarketRegime, Tier
from tests.integration.golem_rig import REPO
from tests.integration.test_clade_consolidator import LOST, run_once
from tests.integration.test_fleet import make_fleet
from workers.fleet import serving

pytestmark = pytest.mark.integration

HOST = "cons"


def _seed(fleet, gid: str, n: int, pnl: float) -> None:
    """n range-bound episodes that lost money, in the golem's own Grimoire (its services, as the host opens them)."""
    with fleet.using(gid) as hosted:
        hosted.services.episodes.upsert_many([Episode(
            id=f"{gid}-ep-{t}", golem_id=gid, tick=t, created_at="2026-12-01T00:00:00+00:00",
            regime=MarketRegime.RANGE_BOUND, tier=Tier.T1, summary=f"tick {t}: swapped in a range bound market",
            actions=1, pnl_impact=pnl, outcome_verified=True) for t in range(1, n + 1)])


def _golem(*argv: str, address: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), "GOLEM_TEMPORAL_ADDRESS": address})


async def test_a_consolidator_over_fleet_golems_runs_on_their_host_queue(temporal_client, temporal_env, anvil, w3,
                                                                         world_snapshot, tmp_path, monkeypatch):
    address = temporal_env.client.service_client.config.target_host
    registry = make_fleet(tmp_path, anvil.rpc_url, world_snapshot, ["k1", "k2"], HOST, monkeypatch, w3)
    name = f"fc-{uuid.uuid4().hex[:6]}"
    sid = consolidator_id(name)
    # no [clade] in the golems' homes: the host's own worker is the only one serving anything here
    async with serving(temporal_client, registry.root, HOST) as fleet:
        _seed(fleet, "k1", 3, -4.0)
        _seed(fleet, "k2", 3, -6.0)  # 6 across two golems: a pattern neither has 5 of alone
        # one member by its id in the fleet, one by its data dir: both are found on host cons
        out = await asyncio.to_thread(_golem, "--data", str(registry.root), "consolidator", name, "--every", "1h",
                                      "--member", "k1", "--member", f"k2={registry.layout('k2').root}",
                                      address=address)
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"on host {HOST}'s queue golem-host-{HOST}" in out.stdout, out.stdout
        desc = await temporal_client.get_schedule_handle(sid).describe()
        assert desc.schedule.action.task_queue == f"golem-host-{HOST}"
        try:
            report = await run_once(temporal_client, sid, 0)
            assert report.golems_read == ["k1", "k2"] and report.episodes == 6, report
            [pattern] = report.patterns
            assert "range bound" in pattern and LOST in pattern, pattern
            assert report.offered == {"k1": 1, "k2": 1}
            [offer] = ProposalInbox(ledger_path(registry.layout("k1").root)).all()
            assert offer.status == "pending" and offer.proposal.golems == ["k1", "k2"]
            action = (await temporal_client.get_schedule_handle(sid).describe()).info.recent_actions[-1].action
            run = await temporal_client.get_workflow_handle(action.workflow_id).describe()
            assert run.task_queue == f"golem-host-{HOST}", run.task_queue
        finally:
            await temporal_client.get_schedule_handle(sid).delete()

    # members on two hosts: refused, naming where each is and what to do (nothing is scheduled)
    registry.place("k3", "elsewhere")
    out = await asyncio.to_thread(_golem, "--data", str(registry.root), "consolidator", f"{name}x",
                                  "--member", "k1", "--member", "k3", address=address)
    assert out.returncode != 0 and "k1 on cons, k3 on elsewhere" in out.stderr and "--clade" in out.stderr, \
        out.stdout + out.stderr
