"""The clade's entry exchange on real Temporal and a real Anvil world (docs/design/clade.md): a warning golem A
learned crosses the clade's bus to golem B, waits in quarantine until a second sibling says the same, is replayed on
B's own recent ticks (the oracle push B itself saw), and is adopted through B's own admission gate at 0.8× — and then
B's retrieval returns it. Nothing is sent twice; warnings go first; a dying golem's lessons reach the clade."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import pytest
import pytest_asyncio

from activities.clade import CladeBus, ledger_path
from activities.life import LifeActivities
from activities.tick import TickActivities
from golem.clade.exchange import CladeLedger
from golem.grimoire.access import search
from golem.grimoire.semantic.admission import admit
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, Provenance
from golem.life.death import DeathReflection
from golem.models.clade import ShareBatch, SharedEntry
from golem.models.config import GolemConfig
from golem.models.enums import MarketRegime, Tier
from golem.models.life import DeathCertificate
from golem.models.record import DecisionCycleRecord
from golem.models.state import GolemState
from golem.models.tick import ObserveInput, TickContext
from tests.integration.golem_rig import EXAMPLE_HOME, REPO
from tests.integration.test_pheromones import push_the_oracle
from workers.services import GolemServices
from workers.worker import build_clade_worker

pytestmark = pytest.mark.integration

WARNING = ("Avoid swapping or borrowing while the circuit breaker fires: when the pool price and the oracle price "
           "are more than 1000 bps apart the oracle is being pushed")
INSIGHT = "Rebalancing the WETH/USDC position during range bound regimes gained 2% more than holding"
QUERY = "pool price vs oracle price apart: circuit breaker, is the oracle being pushed?"


@pytest_asyncio.fixture
async def clade(temporal_client):
    """A fresh clade whose queue (pheromone field and entry bus) is served, as every member's worker serves it."""
    clade_id = f"x{uuid.uuid4().hex[:10]}"
    worker = build_clade_worker(temporal_client, GolemConfig.model_validate({"clade": {"id": clade_id}}))
    assert worker is not None
    async with worker:
        yield clade_id


def golem(tmp_path, anvil, world, client, golem_id: str, clade_id: str) -> TickActivities:
    data = tmp_path / golem_id
    data.mkdir()
    world.save(data / "deployment.json")
    raw = {"golem": {"id": golem_id, "home": str(EXAMPLE_HOME)}, "chain": {"rpc_url": anvil.rpc_url},
           "probes": {"kill_switch_path": str(tmp_path / "no-killswitch")},
           "clade": {"id": clade_id, "quarantine_ticks": 100}}
    return TickActivities(GolemServices(GolemConfig.model_validate(raw), data), client)


def learn(acts: TickActivities, content: str, category: EntryType, confidence: float, tick: int) -> str:
    """The golem's own admission gate takes what it learned (as the curator and the dream integration do)."""
    d = admit(acts.s.semantic, GrimoireEntry(category=category, content=content, confidence=confidence,
                                             created_tick=tick, valid_from=tick, market_regime="range_bound",
                                             source=EntrySource(golem_id=acts.s.config.golem.id)), tick=tick)
    assert d.entry_id is not None, d
    return d.entry_id


def recalled(acts: TickActivities, tick: int) -> list:
    result = search(acts.s.episodes, acts.s.semantic, QUERY, regime="range_bound", tick=tick, k=5)
    return [i for i in result.items if i.source == "entry" and "circuit breaker" in i.summary]


async def exchange(acts: TickActivities, tick: int):
    return await acts.exchange_entries(acts.s.config.golem.id, tick, acts.s.config)


def stages(acts: TickActivities) -> dict[str, str]:
    return {i.content[:30]: i.stage for i in CladeLedger(ledger_path(acts.s.layout.root)).inbound()}


async def b_saw_the_oracle_pushed(acts: TickActivities, w3, world) -> None:
    """B's own recent path: three recorded ticks, the last two after the oracle was pushed 15 % off the pool."""
    before = None
    for tick in range(1, 4):
        if tick == 2:
            before = push_the_oracle(w3, world)
        state = GolemState(golem_id="golem-b", regime=MarketRegime.RANGE_BOUND, last_oracle_price=before)
        ctx = TickContext(golem_id="golem-b", tick=tick, config=acts.s.config, state=state,
                          started_at="2026-11-27T00:00:00+00:00")
        obs = await asyncio.to_thread(acts.observe, ObserveInput(ctx=ctx))
        rec = DecisionCycleRecord(tick=tick, timestamp="2026-11-27T00:00:00+00:00", golem_id="golem-b",
                                  run_id=f"run-{tick}", observation=obs, regime=obs.regime, anomalies=obs.anomalies,
                                  prediction_error=0.5, deliberation_threshold=0.3, tier=Tier.T1,
                                  gating_reason="test")
        acts.s.cycles.persist(rec)
        w3.provider.make_request("evm_increaseTime", [60])  # a path's block time strictly increases
        w3.provider.make_request("evm_mine", [])


async def test_a_warning_learned_by_a_reaches_b_through_quarantine_and_consensus(
        tmp_path, anvil, w3, world_snapshot, temporal_client, clade):
    world = world_snapshot
    a = golem(tmp_path, anvil, world, temporal_client, "golem-a", clade)
    b = golem(tmp_path, anvil, world, temporal_client, "golem-b", clade)
    c = golem(tmp_path, anvil, world, temporal_client, "golem-c", clade)
    await b_saw_the_oracle_pushed(b, w3, world)
    assert recalled(b, 10) == []  # B has never heard of it

    # A learns an insight and a warning; its pass shares both, the warning first.
    learn(a, INSIGHT, EntryType.INSIGHT, 0.7, 5)
    warning_id = learn(a, WARNING, EntryType.WARNING, 0.75, 6)
    learn(a, "Holding idle USDC earned nothing over the last day", EntryType.INSIGHT, 0.4, 6)  # below 0.6: private
    step = await exchange(a, 10)
    assert step.shared == 2 and step.error is None, step
    bus = await CladeBus(temporal_client).state(clade, 10.0)
    assert [(e.entry.category, e.entry.origin) for e in bus.entries] == [("warning", "golem-a"),
                                                                         ("insight", "golem-a")]
    assert bus.entries[0].entry.entry_id == warning_id and bus.entries[0].seq < bus.entries[1].seq

    # Nothing is sent twice: A's next passes share nothing (one after its store changed: it reads it all again), and
    # a batch resent by hand adds nothing to the bus.
    assert (await exchange(a, 11)).shared == 0
    learn(a, "Gas above 40 gwei made small swaps cost more than they earned", EntryType.INSIGHT, 0.3, 11)
    assert (await exchange(a, 12)).shared == 0
    await CladeBus(temporal_client).share(clade, ShareBatch(id="by-hand", entries=[bus.entries[0].entry]), 10.0)
    assert (await CladeBus(temporal_client).state(clade, 10.0)).seq == 2

    # B takes them in: quarantined, and one sibling is not consensus. Its retrieval does not see them.
    step = await exchange(b, 12)
    assert step.received == 2, step
    assert stages(b) == {WARNING[:30]: "quarantine", INSIGHT[:30]: "quarantine"}
    step = await exchange(b, 13)
    assert stages(b)[WARNING[:30]] == "quarantine" and recalled(b, 13) == []

    # C learned the same warning on its own (other words' case and spacing) and shares it: two siblings now.
    learn(c, WARNING.upper().replace(": ", " :  "), EntryType.WARNING, 0.6, 9)
    assert (await exchange(c, 14)).shared == 1
    await exchange(b, 15)  # received: C becomes the warning's second origin; quarantine → consensus
    [item] = [i for i in CladeLedger(ledger_path(b.s.layout.root)).inbound() if i.category == "warning"]
    assert item.stage == "consensus" and item.origins == ["golem-a", "golem-c"], item
    assert "confirmed by 2 siblings" in item.reason
    assert recalled(b, 15) == []  # consensus is not adoption

    # Sandbox: replayed on B's own last ticks without acting — the two ticks after the push bear it out.
    await exchange(b, 16)
    [item] = [i for i in CladeLedger(ledger_path(b.s.layout.root)).inbound() if i.category == "warning"]
    assert item.stage == "sandbox", item
    assert item.sandbox is not None and item.sandbox.ticks == 3 and item.sandbox.supported >= 2
    assert item.sandbox.contradicted == 0 and item.sandbox.passed
    assert recalled(b, 16) == []

    # Adopt: B's own admission gate, at 0.8 × the highest confidence a sibling gave; B's retrieval changes.
    await exchange(b, 17)
    [item] = [i for i in CladeLedger(ledger_path(b.s.layout.root)).inbound() if i.category == "warning"]
    assert item.stage == "adopted" and item.adopted_entry_id, item
    adopted = b.s.semantic.get(item.adopted_entry_id)
    assert adopted.provenance == Provenance.CLADE and adopted.confidence == pytest.approx(0.75 * 0.8)
    assert {"clade", "from:golem-a", "from:golem-c"} <= set(adopted.tags)
    [hit] = recalled(b, 17)
    assert hit.id == adopted.id and hit.safety  # a warning: it takes a safety slot in the decide step's workspace
    # the insight never had a second sibling: still quarantined
    assert stages(b)[INSIGHT[:30]] == "quarantine"

    # B never sends back what it adopted (it is the clade's, not B's own).
    assert (await exchange(b, 18)).shared == 0

    # Each stage was an event on B's Event Fabric.
    store = b.s.events.store
    moved = sorted(e.payload["stage"] for e in store.read(kinds=["grimoire.clade_stage"])
                   if "circuit" in e.payload["content"].lower())
    assert moved == ["adopted", "consensus", "sandbox"]
    assert [e.payload["entries"] for e in store.read(kinds=["grimoire.clade_received"])] == [2]

    # `golem clade` shows the stages.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "cli.main", "--home", str(EXAMPLE_HOME), "--data",
                          str(b.s.layout.root), "clade", "--json"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)
    assert shown["stages"] == {"adopted": 1, "quarantine": 1}
    text = subprocess.run([sys.executable, "-m", "cli.main", "--home", str(EXAMPLE_HOME), "--data",
                           str(b.s.layout.root), "clade"], capture_output=True, text=True, env=env, timeout=120)
    assert "adopted:" in text.stdout and "confirmed" not in text.stdout and "admission gate" in text.stdout


async def test_a_death_reaches_the_clade_first(tmp_path, anvil, w3, world_snapshot, temporal_client, clade):
    world = world_snapshot
    a = golem(tmp_path, anvil, world, temporal_client, "golem-a", clade)
    b = golem(tmp_path, anvil, world, temporal_client, "golem-b", clade)
    learn(a, INSIGHT, EntryType.INSIGHT, 0.9, 5)
    await exchange(a, 6)
    life = LifeActivities(a.s)
    reflection = DeathReflection(golem_id="golem-a", ticks=40,
                                 warnings=["Never hold a loan below health factor 1.3 through a depeg"])
    cert = DeathCertificate(golem_id="golem-a", cause="economic", detail="credit ran out", died_at_tick=40,
                            died_at="2026-11-27T00:00:00+00:00")
    await life._legacy_to_clade(cert, reflection, temporal_client)
    await life._legacy_to_clade(cert, reflection, temporal_client)  # a retried activity sends nothing twice
    bus = await CladeBus(temporal_client).state(clade, 10.0)
    assert [e.entry.legacy for e in bus.entries] == [False, True]
    step = await exchange(b, 7)
    assert step.received == 2
    first = CladeLedger(ledger_path(b.s.layout.root)).inbound()[0]
    assert first.legacy and first.category == "warning" and first.origins == ["golem-a"]
    assert "health factor 1.3" in first.content


async def test_a_running_golem_shares_from_its_ticks_through_its_worker(temporal_env, temporal_client, tmp_path):
    """The whole path: golem A runs in a real `golem worker` process, which also serves its clade's queue; a warning
    in its Grimoire reaches the clade's bus from its tick's after_turn (the clade member), once however many ticks."""
    from golem.grimoire.semantic.store import SemanticStore
    from golem.grimoire.store.embeddings import make_embedder
    from golem.layout import DataLayout
    from tests.integration.golem_rig import make_rig

    clade_id = f"x{uuid.uuid4().hex[:10]}"
    rig = make_rig(tmp_path / "a", "golem-a", "calm", theta=0.3, clade={"id": clade_id})
    layout = DataLayout(rig.data_dir)
    semantic = SemanticStore(layout.semantic_db, layout.semantic_vectors, make_embedder(rig.config))
    d = admit(semantic, GrimoireEntry(category=EntryType.WARNING, content=WARNING, confidence=0.7,
                                      source=EntrySource(golem_id="golem-a")), tick=0)
    worker = None
    try:
        worker = rig.worker_subprocess(temporal_env.client.service_client.config.target_host)
        handle = await rig.start_golem(temporal_client, max_ticks=2)
        await asyncio.wait_for(handle.result(), timeout=180)
        bus = await CladeBus(temporal_client).state(clade_id, 10.0)  # A's worker is the only one serving it
        assert bus is not None and [(e.entry.origin, e.entry.entry_id) for e in bus.entries] == [("golem-a", d.entry_id)]
        assert CladeLedger(ledger_path(rig.data_dir)).sent_count() == 1
        shared_events = rig.services().events.store.read(kinds=["grimoire.clade_shared"])
        assert [e.payload["entries"] for e in shared_events] == [1]
    finally:
        if worker is not None:
            worker.send_signal(2)
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                worker.kill()
        rig.stop()
