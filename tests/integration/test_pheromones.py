"""The clade's pheromone field on real Temporal and a real Anvil world (docs/design/pheromones.md): what golem A sees
on chain it lays on the field; golem B reads it at observe and its prediction error rises by the term, which fades
with the half-life; A does not read its own marks; a lone golem reads nothing; a malformed deposit is refused and
loses nothing; the field survives continue-as-new; `golem pheromones` shows it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import pytest
import pytest_asyncio
from temporalio.client import WorkflowUpdateFailedError

from activities.tick import TickActivities
from golem import ids
from golem.chain.contracts import contract
from golem.models.config import GolemConfig
from golem.models.enums import MarketRegime, Tier
from golem.models.pheromones import Deposit, DepositBatch, FieldInput, FieldState
from golem.models.record import DecisionCycleRecord
from golem.models.state import GolemState
from golem.models.tick import AnalyzeInput, ObserveInput, TickContext
from golem.world.deploy import TxSender, wait_all
from infra.anvil import ANVIL_KEYS
from tests.integration.golem_rig import EXAMPLE_HOME, REPO
from workers.services import GolemServices
from workers.worker import build_clade_worker
from workflows.pheromones import PheromoneFieldWorkflow

pytestmark = pytest.mark.integration

HALF_LIFE = 3.0  # seconds: the test watches a mark fade


@pytest_asyncio.fixture
async def clade(temporal_client):
    """A fresh clade id with its queue served, as every member's worker serves it."""
    clade_id = f"c{uuid.uuid4().hex[:10]}"
    worker = build_clade_worker(temporal_client, GolemConfig.model_validate({"clade": {"id": clade_id}}))
    assert worker is not None
    async with worker:
        yield clade_id


def golem(tmp_path, anvil, world, client, golem_id: str, clade_id: str | None, **sections) -> TickActivities:
    data = tmp_path / golem_id
    data.mkdir()
    world.save(data / "deployment.json")
    raw = {"golem": {"id": golem_id, "home": str(EXAMPLE_HOME)}, "chain": {"rpc_url": anvil.rpc_url},
           "probes": {"kill_switch_path": str(tmp_path / "no-killswitch")}}
    if clade_id:
        raw["clade"] = {"id": clade_id, "threat_half_life_s": HALF_LIFE}
    raw.update(sections)
    return TickActivities(GolemServices(GolemConfig.model_validate(raw), data), client)


def ctx_for(acts: TickActivities, tick: int, state: GolemState) -> TickContext:
    return TickContext(golem_id=acts.s.config.golem.id, tick=tick, config=acts.s.config, state=state,
                       started_at="2026-11-27T00:00:00+00:00")


async def observe(acts: TickActivities, tick: int, state: GolemState):
    # on a thread, as the worker runs a sync activity: the field is read on this (the worker's) event loop
    ctx = ctx_for(acts, tick, state)
    obs = await asyncio.to_thread(acts.observe, ObserveInput(ctx=ctx))
    return ctx, obs


def record_of(acts: TickActivities, tick: int, obs, run_id: str) -> DecisionCycleRecord:
    return DecisionCycleRecord(tick=tick, timestamp="2026-11-27T00:00:00+00:00", golem_id=acts.s.config.golem.id,
                               run_id=run_id, observation=obs, regime=obs.regime, anomalies=obs.anomalies,
                               prediction_error=0.5, deliberation_threshold=0.3, tier=Tier.T1, gating_reason="test")


def push_the_oracle(w3, world) -> float:
    """The feed's owner posts a round 15 % above the pool: the circuit breaker (pool vs oracle) fires."""
    feed = contract(w3, world, "FEED_WETH")
    before = feed.functions.latestAnswer().call()
    wait_all(w3, [("post_round", TxSender.for_key(w3, ANVIL_KEYS[0]).call_fn(feed, "post_round", before * 115 // 100))])
    return before / 1e8


async def test_a_threat_laid_by_a_raises_b_prediction_error_and_fades(tmp_path, anvil, w3, world_snapshot,
                                                                     temporal_client, clade):
    world = world_snapshot
    a = golem(tmp_path, anvil, world, temporal_client, "golem-a", clade)
    b = golem(tmp_path, anvil, world, temporal_client, "golem-b", clade)
    lone = golem(tmp_path, anvil, world, temporal_client, "golem-lone", None)
    oracle = f"oracle:{world.addresses['AAVE_ORACLE']}"

    # Before anybody lays anything the clade has no field: B reads nothing, with no error.
    _, obs_b = await observe(b, 0, GolemState(golem_id="golem-b"))
    assert obs_b.pheromones is not None and obs_b.pheromones.readings == [] and obs_b.pheromones.error is None
    assert oracle in obs_b.pheromones.entities and f"chain:{obs_b.snapshot.chain_id}" in obs_b.pheromones.entities
    assert f"pool:{world.addresses['PAIR_WETH_USDC']}" in obs_b.pheromones.entities

    # A sees the pool leave the oracle on chain and lays a threat on the oracle (the reflect activity's clade member).
    before = push_the_oracle(w3, world)
    _, obs_a = await observe(a, 1, GolemState(golem_id="golem-a", regime=MarketRegime.RANGE_BOUND,
                                                 last_oracle_price=before))
    assert any(x.probe == "circuit_breaker" for x in obs_a.anomalies), obs_a.anomalies
    rec = record_of(a, 1, obs_a, "run-1")
    laid = await a.lay_pheromones(rec, a.s.config)
    assert laid == [f"threat 0.80 on {oracle}"]

    # B reads A's threat on the oracle at observe; its prediction error rises by 0.15 x the threat now.
    state_b = GolemState(golem_id="golem-b", regime=MarketRegime.RANGE_BOUND, last_oracle_price=before)
    ctx_b, obs_b = await observe(b, 1, state_b)
    [reading] = obs_b.pheromones.readings
    assert (reading.entity, reading.kind, reading.depositor, reading.half_life_s) == (oracle, "threat", "golem-a",
                                                                                      HALF_LIFE)
    assert reading.intensity == pytest.approx(0.8 * 0.5 ** (reading.age_s / HALF_LIFE), rel=1e-3)
    with_field = await asyncio.to_thread(b.analyze, AnalyzeInput(ctx=ctx_b, observation=obs_b))
    without = await asyncio.to_thread(b.analyze, AnalyzeInput(ctx=ctx_b, observation=obs_b.model_copy(
        update={"pheromones": None})))
    assert with_field.sources["pheromone_threat"] == pytest.approx(0.15 * reading.intensity, abs=1e-6)
    assert with_field.sources["pheromone_threat"] > 0.1
    assert with_field.prediction_error == pytest.approx(min(without.prediction_error + 0.15 * reading.intensity, 1.0))

    # A does not read its own mark: it saw the oracle itself.
    ctx_a, obs_a2 = await observe(a, 2, GolemState(golem_id="golem-a", regime=MarketRegime.RANGE_BOUND,
                                                      last_oracle_price=before))
    assert obs_a2.pheromones.readings == []
    assert (await asyncio.to_thread(a.analyze, AnalyzeInput(ctx=ctx_a, observation=obs_a2))).sources[
        "pheromone_threat"] == 0.0

    # A lone golem on the same chain reads no field: the term stays 0.
    ctx_l, obs_l = await observe(lone, 1, GolemState(golem_id="golem-lone", regime=MarketRegime.RANGE_BOUND,
                                                        last_oracle_price=before))
    assert obs_l.pheromones is None
    assert (await asyncio.to_thread(lone.analyze, AnalyzeInput(ctx=ctx_l, observation=obs_l))).sources[
        "pheromone_threat"] == 0.0

    # A member that switched the clade extension off reads nothing either.
    off = golem(tmp_path, anvil, world, temporal_client, "golem-off", clade, extensions={"disabled": ["clade"]})
    _, obs_off = await observe(off, 1, GolemState(golem_id="golem-off"))
    assert obs_off.pheromones is None

    # A retried reflect lays the same batch again: the field drops it.
    assert await a.lay_pheromones(rec, a.s.config) == laid
    field = await temporal_client.get_workflow_handle(ids.pheromone_field_id(clade)).query(
        "field", result_type=FieldState)
    assert [(t.depositor, t.deposits) for t in field.trails] == [("golem-a", 1)]

    # The mark fades: after more than one half-life B reads less than half of what it read.
    await asyncio.sleep(HALF_LIFE * 1.2)
    ctx_b, later = await observe(b, 2, state_b)
    [faded] = later.pheromones.readings
    assert faded.age_s > reading.age_s + HALF_LIFE
    assert faded.intensity == pytest.approx(0.8 * 0.5 ** (faded.age_s / HALF_LIFE), rel=1e-3)
    assert faded.intensity < reading.intensity / 2
    term = (await asyncio.to_thread(b.analyze, AnalyzeInput(ctx=ctx_b, observation=later))).sources["pheromone_threat"]
    assert term == pytest.approx(0.15 * faded.intensity, abs=1e-6)
    assert term < with_field.sources["pheromone_threat"] / 2


async def test_a_malformed_deposit_is_refused_with_the_reason_and_nothing_is_lost(temporal_client, clade):
    from activities.pheromones import PheromoneLink

    link = PheromoneLink(temporal_client)
    pool = "pool:0x" + "ab" * 20
    good = Deposit(entity=pool, kind="threat", intensity=0.6, half_life_s=600, depositor="golem-a")
    await link.deposit(clade, DepositBatch(id="a/1/r", deposits=[good]))
    handle = temporal_client.get_workflow_handle(ids.pheromone_field_id(clade))
    before = await handle.query("field", result_type=FieldState)

    bad = {"id": "x/1/r", "deposits": [good.model_dump(), {**good.model_dump(), "kind": "panic", "intensity": 4}]}
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update("deposit", bad)
    message = str(err.value.cause)
    assert "malformed pheromone deposit (nothing was laid)" in message
    assert "deposits.1.kind" in message and "deposits.1.intensity" in message and "threat|opportunity|congestion" in message

    after = await handle.query("field", result_type=FieldState)
    assert after == before  # the good deposit of the refused batch was not laid either, and nothing else changed
    history = [e async for e in handle.fetch_history_events()]
    assert not any("panic" in str(e) for e in history), "a refused update never reaches the history"
    # a malformed batch signalled by hand cannot be refused: the field logs and drops it, and nothing changes
    await handle.signal("lay", bad)
    assert await handle.query("field", result_type=FieldState) == before
    assert (await handle.describe()).status.name == "RUNNING"
    # the field still takes deposits
    receipt = await link.deposit(clade, DepositBatch(id="b/1/r", deposits=[good.model_copy(update={"depositor": "golem-b"})]))
    assert receipt.applied == 1 and receipt.trails == 2


async def test_the_field_continues_as_new_with_its_trails(temporal_client, clade):
    field_id = ids.pheromone_field_id(clade)
    handle = await temporal_client.start_workflow(
        PheromoneFieldWorkflow.run, FieldInput(state=FieldState(clade=clade), continue_after_events=12), id=field_id,
        task_queue=ids.clade_queue(clade))
    first_run = handle.result_run_id
    from activities.pheromones import PheromoneLink

    link = PheromoneLink(temporal_client)
    for i in range(6):
        await link.deposit(clade, DepositBatch(id=f"g/{i}", deposits=[Deposit(
            entity=f"chain:{i + 1}", kind="congestion", intensity=0.5, half_life_s=3600, depositor="golem-a")]))
    desc = await temporal_client.get_workflow_handle(field_id).describe()
    assert desc.run_id != first_run, "the field continued as new"
    state = await temporal_client.get_workflow_handle(field_id).query("field", result_type=FieldState)
    assert sorted(t.entity for t in state.trails) == [f"chain:{i + 1}" for i in range(6)]
    assert state.recent_batches[-1] == "g/5"


async def test_golem_pheromones_shows_the_field(temporal_env, temporal_client, clade, tmp_path):
    from activities.pheromones import PheromoneLink

    oracle = "oracle:0x" + "cd" * 20
    await PheromoneLink(temporal_client).deposit(clade, DepositBatch(id="a/1/r", deposits=[
        Deposit(entity=oracle, kind="threat", intensity=0.8, half_life_s=3600, depositor="golem-a")]))
    home = tmp_path / "home"
    home.mkdir()
    (home / "golem.toml").write_text(f'[golem]\nid = "golem-b"\n\n[clade]\nid = "{clade}"\n')
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "golem.toml").write_text('[golem]\nid = "golem-c"\n')
    env = dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host)

    def golem_cmd(h, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cli", "--home", str(h), "--data", str(tmp_path), "pheromones",
                               *args], capture_output=True, text=True, cwd=REPO, timeout=120, env=env)

    table, as_json, alone = await asyncio.gather(*(asyncio.to_thread(golem_cmd, h, *a) for h, a in
                                                   ((home, ()), (home, ("--json",)), (lone, ()))))
    assert table.returncode == 0, table.stderr
    assert f"clade {clade}: 1 trail(s)" in table.stdout
    row = table.stdout.splitlines()[-1].split()
    assert row[1:3] == ["threat", "60m"] and row[4] == "golem-a" and row[5] == oracle and 0.79 < float(row[0]) <= 0.8
    [trail] = json.loads(as_json.stdout)["trails"]
    assert (trail["entity"], trail["kind"], trail["depositor"], trail["half_life_s"]) == (oracle, "threat", "golem-a",
                                                                                          3600)
    assert alone.returncode == 0 and "golem golem-c is in no clade" in alone.stdout


async def test_a_running_golem_lays_from_its_ticks_and_its_worker_serves_the_field(temporal_env, temporal_client,
                                                                                    tmp_path):
    """The whole path: golem A runs in a real `golem worker` process (which also serves its clade's queue); its
    ticks see the oracle pushed away on chain and their reflect lays a threat; golem B, another member, reads it
    from the field that A's worker serves (no other worker of the clade is up)."""
    from golem.life.cycle_store import CycleStore
    from tests.integration.golem_rig import make_rig, wait_for

    clade_id = f"c{uuid.uuid4().hex[:10]}"
    rig = make_rig(tmp_path / "a", "golem-a", "calm", theta=0.3, clade={"id": clade_id, "threat_half_life_s": 600})
    worker = None
    try:
        before = push_the_oracle(rig.w3, rig.deployment)
        worker = rig.worker_subprocess(temporal_env.client.service_client.config.target_host)
        handle = await rig.start_golem(temporal_client, max_ticks=2)
        await asyncio.wait_for(handle.result(), timeout=180)
        store = CycleStore(rig.data_dir)
        records = [store.load(r["tick"]) for r in store.recent(10)]
        oracle = f"oracle:{rig.deployment.addresses['AAVE_ORACLE']}"
        assert records and all(f"threat 0.80 on {oracle}" in r.pheromones_laid for r in records), \
            [(r.tick, r.pheromones_laid) for r in records]
        assert all(r.after_turn[-2:] == ["clade", "telemetry"] for r in records)
        assert all(r.observation.pheromones is not None and r.observation.pheromones.readings == [] for r in records)
        # `golem status` of a clade member: what the last tick read and laid
        status = await asyncio.to_thread(subprocess.run, [
            sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir), "status"],
            capture_output=True, text=True, cwd=REPO, timeout=120,
            env=dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host))
        assert f"clade:      {clade_id}; tick 1 read nothing (prediction error +0.000); laid threat 0.80 on {oracle}" \
            in status.stdout, status.stdout + status.stderr

        (tmp_path / "b").mkdir()
        b = golem(tmp_path / "b", rig.anvil, rig.deployment, temporal_client, "golem-b", clade_id)
        ctx_b, obs_b = await observe(b, 0, GolemState(golem_id="golem-b", regime=MarketRegime.RANGE_BOUND,
                                                         last_oracle_price=before))
        [reading] = obs_b.pheromones.readings
        assert (reading.entity, reading.kind, reading.depositor) == (oracle, "threat", "golem-a")
        assert reading.intensity > 0.8  # reinforced by A's second tick (what was left + 0.8, capped at 1)
        pe = await asyncio.to_thread(b.analyze, AnalyzeInput(ctx=ctx_b, observation=obs_b))
        assert pe.sources["pheromone_threat"] == pytest.approx(0.15 * reading.intensity, abs=1e-6)
    finally:
        if worker is not None:
            worker.send_signal(2)
            try:
                worker.wait(timeout=15)
            except subprocess.TimeoutExpired:
                worker.kill()
        rig.stop()


async def test_a_field_nobody_serves_costs_a_tick_its_timeout_and_keeps_what_it_laid(tmp_path, anvil, w3,
                                                                                     world_snapshot, temporal_client):
    """The field exists but no worker of the clade is up: observe waits read_timeout_s, then goes on with no readings
    and the reason (the term adds nothing); reflect's deposits are kept by the server and reach the field when a
    member's worker is back."""
    import time

    from activities.pheromones import PheromoneLink

    clade_id = f"c{uuid.uuid4().hex[:10]}"
    oracle = f"oracle:{world_snapshot.addresses['AAVE_ORACLE']}"
    worker = build_clade_worker(temporal_client, GolemConfig.model_validate({"clade": {"id": clade_id}}))
    assert worker is not None
    async with worker:  # the field starts, then its only worker goes away
        await PheromoneLink(temporal_client).deposit(clade_id, DepositBatch(id="x/0/r", deposits=[Deposit(
            entity=oracle, kind="threat", intensity=0.9, half_life_s=600, depositor="golem-x")]))
    a = golem(tmp_path, anvil, world_snapshot, temporal_client, "golem-a", clade_id)
    b = golem(tmp_path, anvil, world_snapshot, temporal_client, "golem-b", clade_id)
    b.s.config.clade.read_timeout_s = 1.0
    t0 = time.monotonic()
    ctx_b, obs_b = await observe(b, 0, GolemState(golem_id="golem-b"))
    assert time.monotonic() - t0 < 10
    assert obs_b.pheromones is not None and obs_b.pheromones.readings == []
    assert obs_b.pheromones.error and f"pheromone field of clade {clade_id!r} not read" in obs_b.pheromones.error
    assert (await asyncio.to_thread(b.analyze, AnalyzeInput(ctx=ctx_b, observation=obs_b))).sources[
        "pheromone_threat"] == 0.0

    # B's tick sees the oracle pushed and lays its threat at once, though nobody serves the field
    before = push_the_oracle(w3, world_snapshot)
    _, seen = await observe(b, 1, GolemState(golem_id="golem-b", regime=MarketRegime.RANGE_BOUND,
                                              last_oracle_price=before))
    t0 = time.monotonic()
    assert await b.lay_pheromones(record_of(b, 1, seen, "run-1"), b.s.config) == [f"threat 0.80 on {oracle}"]
    assert time.monotonic() - t0 < 3

    # a member's worker comes back: the field takes what was laid meanwhile, and A reads B's mark (and X's)
    worker = build_clade_worker(temporal_client, GolemConfig.model_validate({"clade": {"id": clade_id}}))
    assert worker is not None
    async with worker:
        _, obs_a = await observe(a, 0, GolemState(golem_id="golem-a"))
    assert sorted((r.depositor, r.entity) for r in obs_a.pheromones.readings) == [("golem-b", oracle),
                                                                                    ("golem-x", oracle)]
    x, bb = sorted(obs_a.pheromones.readings, key=lambda r: r.depositor != "golem-x")
    assert bb.intensity == pytest.approx(0.8 * 0.5 ** (bb.age_s / HALF_LIFE), rel=1e-3)  # B lays with 3 s half-lives
    assert obs_a.pheromones.intensity("threat", oracle) == pytest.approx(1 - (1 - x.intensity) * (1 - bb.intensity))
