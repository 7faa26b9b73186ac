"""The memory-consolidator kind on real Temporal (docs/design/clade.md#the-memory-consolidator): a Temporal
Schedule starts MemoryConsolidatorWorkflow on the clade's queue; its run reads three golems' episodes, keeps the
curator's pattern that recurs across two of them (not the one only one golem saw, nor one under 5 episodes), and
offers it to each golem's inbox once; each golem's own admission gate decides at its next exchange pass."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import pytest
import pytest_asyncio

from activities.clade import ledger_path
from activities.tick import TickActivities
from golem.clade.proposals import ProposalInbox
from golem.grimoire.episodes.model import Episode
from golem.grimoire.semantic.admission import admit
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, Provenance
from golem.models.clade import ConsolidatorReport, consolidator_id
from golem.models.config import GolemConfig
from golem.models.enums import MarketRegime, Tier
from tests.integration.golem_rig import EXAMPLE_HOME, REPO
from workers.services import GolemServices
from workers.worker import build_clade_worker

pytestmark = pytest.mark.integration

LOST = "acting has lost money"


@pytest_asyncio.fixture
async def clade(temporal_client):
    clade_id = f"m{uuid.uuid4().hex[:10]}"
    worker = build_clade_worker(temporal_client, GolemConfig.model_validate({"clade": {"id": clade_id}}))
    assert worker is not None
    async with worker:
        yield clade_id


def golem(tmp_path, anvil, world, client, golem_id: str, clade_id: str) -> TickActivities:
    data = tmp_path / golem_id
    data.mkdir()
    world.save(data / "deployment.json")
    raw = {"golem": {"id": golem_id, "home": str(EXAMPLE_HOME)}, "chain": {"rpc_url": anvil.rpc_url},
           "probes": {"kill_switch_path": str(tmp_path / "no-killswitch")}, "clade": {"id": clade_id}}
    return TickActivities(GolemServices(GolemConfig.model_validate(raw), data), client)


def episodes(acts: TickActivities, n: int, regime: MarketRegime, pnl: float, start: int = 1) -> None:
    gid = acts.s.config.golem.id
    acts.s.episodes.upsert_many([Episode(
        id=f"{gid}-ep-{regime.value}-{t}", golem_id=gid, tick=t, created_at="2026-11-27T00:00:00+00:00",
        regime=regime, tier=Tier.T1, summary=f"tick {t}: swapped in a {regime.value} market", actions=1,
        pnl_impact=pnl, outcome_verified=True) for t in range(start, start + n)])


async def run_once(client, sid: str, seen: int) -> ConsolidatorReport:
    """Trigger the Schedule and wait for the run it starts; its result (the consolidator's report)."""
    handle = client.get_schedule_handle(sid)
    await handle.trigger()
    for _ in range(200):
        desc = await handle.describe()
        if len(desc.info.recent_actions) > seen:
            break
        await asyncio.sleep(0.2)
    action = desc.info.recent_actions[-1].action
    run = client.get_workflow_handle(action.workflow_id, run_id=action.first_execution_run_id,
                                     result_type=ConsolidatorReport)
    return await asyncio.wait_for(run.result(), timeout=120)


async def test_a_scheduled_consolidator_proposes_what_recurs_across_golems_and_each_gate_decides(
        tmp_path, anvil, world_snapshot, temporal_client, temporal_env, clade):
    a = golem(tmp_path, anvil, world_snapshot, temporal_client, "golem-a", clade)
    b = golem(tmp_path, anvil, world_snapshot, temporal_client, "golem-b", clade)
    c = golem(tmp_path, anvil, world_snapshot, temporal_client, "golem-c", clade)
    episodes(a, 3, MarketRegime.RANGE_BOUND, -4.0)
    episodes(b, 3, MarketRegime.RANGE_BOUND, -6.0)  # 6 across two golems: a pattern neither has 5 of alone
    episodes(a, 6, MarketRegime.TRENDING_UP, 3.0, start=10)  # only A saw it: its own delta cycle's, not ours
    episodes(c, 2, MarketRegime.VOLATILE, -1.0)  # too few anywhere

    # The Schedule, created by `golem consolidator` (wallet-less: it names golems' data, never a key).
    name = f"mc-{uuid.uuid4().hex[:6]}"
    spec = [f"{x.s.config.golem.id}={x.s.layout.root}" for x in (a, b, c)]
    out = await asyncio.to_thread(subprocess.run, [
        sys.executable, "-m", "cli.main", "--home", str(EXAMPLE_HOME), "consolidator", name, "--clade", clade,
        "--every", "1h", *(arg for s in spec for arg in ("--member", s))], capture_output=True, text=True, cwd=REPO,
        timeout=120, env={**os.environ, "PYTHONPATH": str(REPO),
                          "GOLEM_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host})
    assert out.returncode == 0, out.stdout + out.stderr
    sid = consolidator_id(name)
    assert sid in out.stdout

    report = await run_once(temporal_client, sid, 0)
    assert report.golems_read == ["golem-a", "golem-b", "golem-c"] and report.episodes == 14
    [pattern] = report.patterns
    assert "range bound" in pattern and LOST in pattern and "6 measured actions" in pattern
    assert report.offered == {"golem-a": 1, "golem-b": 1, "golem-c": 1}
    [offer] = ProposalInbox(ledger_path(a.s.layout.root)).all()
    assert offer.status == "pending" and offer.proposal.golems == ["golem-a", "golem-b"]
    assert len(offer.proposal.parent_episode_ids) == 3  # A's own supporting episodes are its evidence
    assert a.s.semantic.all() == []  # a proposal writes no Grimoire: the golem's gate has not decided yet

    # The next run proposes nothing twice.
    again = await run_once(temporal_client, sid, 1)
    assert again.offered == {"golem-a": 0, "golem-b": 0, "golem-c": 0}

    # C already learned the same words itself: its gate merges, where A's admits.
    admit(c.s.semantic, GrimoireEntry(category=EntryType.INSIGHT, content=pattern, confidence=0.6,
                                      source=EntrySource(golem_id="golem-c")), tick=1)
    for x in (a, c):
        await x.exchange_entries(x.s.config.golem.id, 20, x.s.config)
    [da] = ProposalInbox(ledger_path(a.s.layout.root)).all()
    [dc] = ProposalInbox(ledger_path(c.s.layout.root)).all()
    assert da.status in ("admitted", "admitted_low") and da.decided_tick == 20 and da.score is not None
    entry = a.s.semantic.get(da.entry_id)
    assert entry.provenance == Provenance.CLADE and "consolidator" in entry.tags
    assert dc.status in ("skipped", "merged") and len(c.s.semantic.all()) == 1
    decided = a.s.events.store.read(kinds=["grimoire.proposal_decided"])
    assert [e.payload["status"] for e in decided] == [da.status]
    shown = await asyncio.to_thread(subprocess.run, [
        sys.executable, "-m", "cli.main", "--home", str(EXAMPLE_HOME), "--data", str(a.s.layout.root), "clade",
        "--json"], capture_output=True, text=True, cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert [p["status"] for p in json.loads(shown.stdout)["proposals"]] == [da.status], shown.stderr
    # B has not ticked: its proposal still waits
    assert [d.status for d in ProposalInbox(ledger_path(b.s.layout.root)).all()] == ["pending"]
    await temporal_client.get_schedule_handle(sid).delete()
