"""Dreams that rehearse, on a real Temporal dev server, real Anvil (and real Anvil forks), real
LanceDB/SQLite: a near-liquidation position is rehearsed on forks, a broken response leaves a concrete warning that
is staged and admitted at 0.3, the real chain is untouched, a critical steer wakes a dreaming golem, and forks
left by a killed worker are stopped."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from temporalio.client import Client

from golem.chain.contracts import contract
from cli.main import main as golem_main
from golem.grimoire.semantic.store import Provenance
from golem.life.cycle_store import CycleStore
from golem.models.enums import MarketRegime
from golem.cognition.fold import schedule_dream
from golem.grimoire.dreams.tags import DreamTags
from golem.grimoire.dreams.staging import StageKind, StagingBuffer, journals
from golem.models.golem import DreamInput, DreamResult, GolemStatus
from golem.models.interventions import Steer
from infra.anvil import ANVIL_ADDRESSES
from infra.forks import ForkRegistry
from golem.grimoire.retrieval import retrieve_for_tick
from golem.cognition.reflect import retrieval_query
from tests.integration.golem_rig import GolemRig, golem_observation, in_process_worker, make_rig, record_where, wait_for
from workflows.consolidation import DreamCycleWorkflow
from workflows.golem import GolemWorkflow

GOLEM = ANVIL_ADDRESSES[2]


def near_liquidation(rig: GolemRig, price: float = 1150.0, usdc_left: float = 600.0) -> None:
    """The golem's loan close to liquidation (HF ≈ 1.19 at $1,150) and little dry powder: the owner moved most
    of its USDC away, so its repay rule can barely act."""
    w3 = rig.w3
    usdc = contract(w3, rig.deployment, "USDC")
    keep = int(usdc_left * 10**6)
    bal = usdc.functions.balanceOf(GOLEM).call()
    h = usdc.functions.transfer(ANVIL_ADDRESSES[1], bal - keep).transact({"from": GOLEM})
    assert w3.eth.wait_for_transaction_receipt(h)["status"] == 1
    rig.simulator(liquidate=False).move_to(oracle_price=price, pool_price=price)


def chain_fingerprint(rig: GolemRig) -> dict:
    """What dreaming must not change on the real chain: the golem's nonce, the head, balances, reserves, the feed."""
    w3, dep = rig.w3, rig.deployment
    pair = contract(w3, dep, "PAIR_WETH_USDC")
    return {
        "nonce": w3.eth.get_transaction_count(GOLEM),
        "block": w3.eth.block_number,
        "eth": w3.eth.get_balance(GOLEM),
        "usdc": contract(w3, dep, "USDC").functions.balanceOf(GOLEM).call(),
        "weth": contract(w3, dep, "WETH").functions.balanceOf(GOLEM).call(),
        "debt": contract(w3, dep, "VDEBT_USDC").functions.balanceOf(GOLEM).call(),
        "reserves": pair.functions.getReserves().call()[:2],
        "feed": contract(w3, dep, "FEED_WETH").functions.latestAnswer().call(),
    }


async def test_dream_rehearses_on_forks_stages_warning_and_leaves_chain_untouched(tmp_path, temporal_client: Client,
                                                                                   capsys):
    gid = "dream-rehearse"
    rig = make_rig(tmp_path, gid, dream={"forks": True, "rem_scenarios": 0})
    try:
        near_liquidation(rig)
        before = chain_fingerprint(rig)
        services = rig.services()
        orphan_fork(rig.data_dir, rig.anvil.rpc_url)  # a previous worker of this golem died mid-dream
        async with in_process_worker(temporal_client, rig, services):
            assert ForkRegistry(rig.data_dir).live() == [], "the worker stopped the orphan fork when it started"
            result = await temporal_client.execute_workflow(
                DreamCycleWorkflow.run, DreamInput(golem_id=gid, tick=7, config=rig.config),
                id=f"golem-{gid}-dream-7", task_queue=f"golem-{gid}", result_type=DreamResult)
        assert chain_fingerprint(rig) == before, "dreaming changed the real chain"
        assert ForkRegistry(rig.data_dir).entries() == [] and ForkRegistry(rig.data_dir).live() == []

        assert result.phases_done == ["nrem", "threats", "integrate"] or result.phases_done == [
            "nrem", "rem", "threats", "integrate"]
        assert result.stopped_at is None and result.forks >= 5
        assert result.threat_coverage == 1.0, "every Tier 1 threat for a loan with WETH exposure was rehearsed"
        journal = journals(rig.data_dir)[-1]
        by_threat = {r["threat"]: r for r in journal.rehearsed}
        assert set(by_threat) == {"liquidation_cascade", "oracle_stale", "gas_spike", "pool_drained", "reverting_exit"}

        # The liquidation cascade: the golem's repay is checked on the live chain (simulates, gas vs the partition)
        # and on a fork with the crash injected, where $600 of USDC cannot save the loan.
        cascade = by_threat["liquidation_cascade"]
        live, fork = cascade["live"], cascade["fork"]
        assert live["simulates"] and live["gas_units"] > 0 and live["gas_allowance_usd"] > 0
        assert any(a.startswith("repay") for a in fork["actions"]), fork
        assert fork["executed"] is True and fork["health_before"] < 1.1
        assert not cascade["ok"] and fork["health_after"] < 1.0
        assert "health factor" in cascade["warning"] and "WHEN health_factor <" in cascade["guard"]

        # A thin pool: the exit cannot be carried at the policy's slippage — a concrete warning with the figures.
        drained = by_threat["pool_drained"]
        assert not drained["ok"]
        assert any("bps below spot" in p and "policy max 100 bps" in p for p in drained["problems"]), drained["problems"]
        # The "reduce exposure" exit, two swaps in one decision, simulates on the live chain and is sent on the fork:
        # each swap is quoted on the reserves the one before leaves (quoted on the pre-trade reserves, the second
        # reverted with INSUFFICIENT_OUTPUT_AMOUNT, live and on the fork).
        exit_ = by_threat["reverting_exit"]
        assert sum(a.startswith("swap") for a in exit_["live"]["actions"]) >= 2, exit_["live"]["actions"]
        assert exit_["live"]["simulates"] and exit_["fork"]["simulates"] and exit_["fork"]["executed"], exit_
        assert not any("revert" in p or "failed when sent" in p for p in exit_["problems"]), exit_["problems"]

        # Staged, then admitted through the gate at 0.3 with provenance Dream.
        staged = StagingBuffer(rig.data_dir / "grimoire" / "dream-staging.sqlite").all()
        warnings = [i for i in staged if i.kind == StageKind.THREAT_WARNING]
        assert {i.scenario for i in warnings} >= {"liquidation cascade", "pool drained"}
        assert all(i.status.value == "partially_validated" and i.entry_id for i in warnings)
        entry = services.semantic.get(next(i.entry_id for i in warnings if i.scenario == "liquidation cascade"))
        assert entry.confidence == 0.3 and entry.provenance == Provenance.DREAM and entry.dream_validated
        assert entry.category.value == "warning" and "health factor" in entry.content

        # A later, similar situation (the loan near liquidation again, as the retrieve step asks): it surfaces.
        obs = golem_observation(rig.w3, rig.deployment).model_copy(update={"regime": MarketRegime.TRENDING_DOWN})
        found = retrieve_for_tick(services.episodes, services.semantic, retrieval_query(obs), regime="trending_down",
                                  tick=9, action=True, tier="T2")
        assert entry.id in found.ids, [(i.id, i.summary[:60]) for i in found.items]

        # `golem dreams` lists the cycle with its journal.
        capsys.readouterr()
        assert golem_main(["dreams", "--data", str(rig.data_dir)]) == 0
        out = capsys.readouterr().out
        assert "dream at tick 7" in out and "BROKEN pool drained" in out and "threat coverage 100%" in out
    finally:
        rig.stop()


async def test_critical_steer_wakes_a_dreaming_golem(tmp_path, temporal_client: Client):
    gid = "dream-wake"
    # A budget far beyond the test: only the steer can end this dream early. Forks make the threat phase long
    # enough (a fork per scenario, doubled rehearsal in a crash) to be caught mid-phase.
    rig = make_rig(tmp_path, gid, clock={"dream_every_ticks": 2}, dream={"forks": True, "budget_seconds": 3600})
    try:
        near_liquidation(rig)
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=4)

            async def dreaming():
                st: GolemStatus = await handle.query(GolemWorkflow.status)
                return st.activity == "dreaming"

            await wait_for(dreaming, 90, "the golem to fall asleep")
            await handle.signal(GolemWorkflow.steer, Steer(id="wake-1", message="repay now", severity="critical"))
            dream = await temporal_client.get_workflow_handle(f"golem-{gid}-dream-2",
                                                              result_type=DreamResult).result()
            assert dream.stopped_at is not None and "critical steer wake-1" in (dream.stop_reason or "")
            assert "integrate" in dream.phases_done and dream.stopped_at not in dream.phases_done
            await handle.result()
            status: GolemStatus = await handle.query(GolemWorkflow.status)
        assert status.tick == 4, "ticking resumed after the dream"
        assert "stopped before" in status.last_dream
        assert status.threat_coverage is not None or dream.stopped_at in ("nrem", "rem", "threats")
        assert ForkRegistry(rig.data_dir).live() == [], "the cancelled phase stopped its fork"
        journal = journals(rig.data_dir)[-1]
        assert journal.stopped_at == dream.stopped_at and journal.stop_reason == dream.stop_reason
    finally:
        rig.stop()


async def test_curator_tags_reach_the_scheduler_and_the_next_dream_replays_them(tmp_path, temporal_client: Client):
    """The delta cycle tags the acted episodes on thin evidence `dream_priority: high`; the count reaches
    GolemWorkflow's state (the DreamScheduler's tag term), and the next dream's NREM replays them first."""
    gid = "dream-tags"
    rig = make_rig(tmp_path, gid, clock={"delta_theta_ticks": 3, "dream_every_ticks": 1000},
                   dream={"forks": True, "rehearse_threats": False, "rem_scenarios": 1})
    try:
        near_liquidation(rig)
        services = rig.services()
        async with in_process_worker(temporal_client, rig, services):
            handle = await rig.start_golem(temporal_client, max_ticks=8)  # quiet ticks after the exit, for NREM to compress
            # the owner's steer makes the golem act (its "reduce exposure" exit: swaps and a repay)
            await handle.signal(GolemWorkflow.steer, Steer(id="exit-1", message="reduce exposure", severity="high"))
            await handle.result()
            state = await handle.query(GolemWorkflow.state)
            # the exit ran in the real loop: several actions in one decision, each built on the state the one
            # before leaves, simulated, validated and executed
            acted = record_where(CycleStore(rig.data_dir), lambda r: len(r.actions) >= 2)
            assert acted is not None and "swap" in [a.tool_name for a in acted.actions], acted
            assert all(a.status.value == "executed" for a in acted.actions), [(a.tool_name, a.status, a.block_reason)
                                                                              for a in acted.actions]
            tags = DreamTags(rig.data_dir / "grimoire" / "dream-staging.sqlite").open()
            assert tags and state.dream_tags == len(tags), (state.dream_tags, tags)
            assert all(t.reason.startswith(("thin:", "contradictory:")) for t in tags)
            assert schedule_dream(state, rig.config).terms["tags"] > 0
            dream = await temporal_client.execute_workflow(
                DreamCycleWorkflow.run, DreamInput(golem_id=gid, tick=6, config=rig.config, replay_count=5),
                id=f"golem-{gid}-dream-6", task_queue=f"golem-{gid}", result_type=DreamResult)
        newest = [t.episode for t in tags][:2]
        assert dream.replayed[:len(newest)] == newest
        journal = journals(rig.data_dir)[-1]
        assert [r["dream_priority"] for r in journal.replayed[:len(newest)]] == [t.reason for t in tags[:2]]
        left = DreamTags(rig.data_dir / "grimoire" / "dream-staging.sqlite").open()
        # a replayed tag is consumed, one not replayed waits (near liquidation the golem wakes and acts from tick 0,
        # so how many tags there are depends on the strategy's lines; replay_count 5 may take them all)
        assert {t.episode for t in left} == {t.episode for t in tags} - set(dream.replayed)
        # REM: each counterfactual's fork starts at its source episode's block (that episode's position and market)
        assert journal.imagined, "REM imagined the worst-health episode's variations"
        store = CycleStore(rig.data_dir)
        for r in journal.imagined:
            src = next(e for e in services.episodes.all() if e.id == r["source_episode"])
            block = store.load(src.tick).observation.snapshot.block_number
            assert r["fork_block"] == block < rig.w3.eth.block_number, (r["fork_block"], block)
        # NREM compression: the replayed quiet ticks that are near-duplicates became one row; the audit keeps them
        assert journal.compressed and journal.compressed[0]["merged"], journal.merged
        stored = {e.id for e in services.episodes.all()}
        for c in journal.compressed:
            assert c["kept"] in stored and not set(c["merged"]) & stored
        with sqlite3.connect(rig.data_dir / "grimoire" / "dream-staging.sqlite") as db:
            audit = dict(db.execute("SELECT merged_id, kept_id FROM merged_episodes").fetchall())
        assert audit == {m: c["kept"] for c in journal.compressed for m in c["merged"]}
    finally:
        rig.stop()


FORK_AND_HANG = """
import sys, time
from infra.forks import ForkRegistry
reg = ForkRegistry(sys.argv[1])
with reg.fork(sys.argv[2], label="orphan") as proc:
    print(proc.pid, flush=True)
    time.sleep(600)
"""


def orphan_fork(data_dir: Path, rpc_url: str) -> int:
    """A process that starts a dream fork is SIGKILLed mid-scenario (a worker dying): its fork lives on."""
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", FORK_AND_HANG, str(data_dir), rpc_url], stdout=subprocess.PIPE,
                            cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)))
    try:
        fork_pid = int(proc.stdout.readline())
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [e["pid"] for e in ForkRegistry(data_dir).live()] == [fork_pid], "the orphan fork is still running"
    return fork_pid


def test_forks_left_by_a_killed_worker_are_swept(tmp_path, anvil, world):
    data = tmp_path / "data"
    fork_pid = orphan_fork(data, anvil.rpc_url)
    registry = ForkRegistry(data)
    assert registry.sweep() == [fork_pid]
    assert registry.live() == [] and registry.entries() == []
    # A pid that is not our fork (here: this test process) is never killed, even if the file names it.
    (data / "dream-forks.json").write_text(json.dumps([{"pid": os.getpid(), "port": 1, "fork_url": anvil.rpc_url}]))
    assert registry.sweep() == []


def test_a_fork_is_registered_before_it_answers(tmp_path):
    """A worker killed while its fork is still starting (anvil waits on the forked node) leaves a registered fork:
    the entry is written the moment the process exists, and the sweep stops it."""
    import socket
    import threading

    silent = socket.socket()  # a "node" that accepts and never answers: the fork hangs in its start-up
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    conns = []
    threading.Thread(target=lambda: [conns.append(silent.accept()) for _ in range(8)], daemon=True).start()
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    data = tmp_path / "data"
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", FORK_AND_HANG, str(data), url], stdout=subprocess.PIPE,
                            cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)))
    registry = ForkRegistry(data)
    try:
        deadline = time.monotonic() + 20
        while not registry.live() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the starter is still inside AnvilProcess.start()"
        (entry,) = registry.live()
        proc.send_signal(signal.SIGKILL)  # the worker dies before its fork ever answered
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        silent.close()
    assert registry.sweep() == [entry["pid"]]
    assert registry.live() == [] and registry.entries() == []
