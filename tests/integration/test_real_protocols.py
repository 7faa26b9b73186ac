"""Real protocols on real parts: the golem acts on Uniswap V2 and Aave V3 deployed from their published
bytecode, reads Chainlink-style feeds, and its records carry what the protocols themselves say."""

from __future__ import annotations

import asyncio

import pytest
from eth_utils import event_abi_to_log_topic
from web3 import Web3

from golem.chain.contracts import MAIN_PAIR, contract, load_abi
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, ProbeSeverity, Tier
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for, wait_for_record
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration

GOLEM = ANVIL_ADDRESSES[2]


def _topic(abi_name: str, event: str) -> bytes:
    return next(event_abi_to_log_topic(e) for e in load_abi(abi_name) if e.get("type") == "event" and e["name"] == event)


@pytest.fixture
def rig(tmp_path, request):
    # a golem (and task queue) per test: a tick child left running by an earlier test must not land here
    rig = make_rig(tmp_path, f"proto-{abs(hash(request.node.name)) % 10**6}", "calm", theta=0.25)
    yield rig
    rig.stop()


async def test_steered_t2_tick_swaps_through_router02_and_repays_on_the_aave_pool(temporal_client, rig):
    w3 = rig.w3
    dep = rig.deployment
    aave = contract(w3, dep, "AAVE_POOL")
    debt_before = contract(w3, dep, "VDEBT_USDC").functions.balanceOf(GOLEM).call()
    nonce_before = w3.eth.get_transaction_count(GOLEM)
    rig.start_market(interval=0.25)  # the market mines the blocks that confirm the golem's transactions
    async with in_process_worker(temporal_client, rig):
        handle = await rig.start_golem(temporal_client, max_ticks=None)
        store = CycleStore(rig.data_dir)
        await wait_for(lambda: store.count() >= 2, 60, "two ticks")
        await handle.signal(GolemWorkflow.steer, {"id": "s-real", "message": "reduce exposure", "severity": "high"})
        rec = await wait_for_record(store, lambda r: any(i.id == "s-real" for i in r.active_interventions),
                                    "the steered tick", timeout=90, n=30)
        await handle.terminate("test done")

    assert rec.tier == Tier.T2
    executed = {a.tool_name: a for a in rec.actions if a.status is ActionStatus.EXECUTED}
    assert {"swap", "repay"} <= set(executed), [(a.tool_name, a.status, a.block_reason) for a in rec.actions]
    assert rec.outcome is not None and rec.outcome.verified, rec.outcome.actual

    # The swap went through Uniswap V2's Router02 and the pair emitted Swap and Sync.
    swap_rcpt = w3.eth.get_transaction_receipt(executed["swap"].tx_hash)
    assert swap_rcpt["status"] == 1 and swap_rcpt["to"] == dep.address("UNI_ROUTER")
    pair_logs = [lg for lg in swap_rcpt["logs"] if lg["address"] == dep.address(MAIN_PAIR)]
    assert {bytes(lg["topics"][0]) for lg in pair_logs} >= {_topic("UniswapV2Pair", "Swap"), _topic("UniswapV2Pair", "Sync")}
    swap = contract(w3, dep, MAIN_PAIR).events.Swap().process_log(
        next(lg for lg in pair_logs if bytes(lg["topics"][0]) == _topic("UniswapV2Pair", "Swap")))
    assert swap["args"]["to"] == GOLEM

    # The repay went to the Aave Pool, which logged Repay for the golem, and the variable debt fell by it.
    repay_rcpt = w3.eth.get_transaction_receipt(executed["repay"].tx_hash)
    assert repay_rcpt["status"] == 1 and repay_rcpt["to"] == dep.address("AAVE_POOL")
    repay_log = next(lg for lg in repay_rcpt["logs"]
                     if lg["address"] == dep.address("AAVE_POOL") and bytes(lg["topics"][0]) == _topic("AavePool", "Repay"))
    repaid = aave.events.Repay().process_log(repay_log)["args"]
    assert repaid["user"] == GOLEM and repaid["reserve"] == dep.address("USDC") and repaid["amount"] > 0
    debt_after = contract(w3, dep, "VDEBT_USDC").functions.balanceOf(GOLEM).call()
    assert debt_after < debt_before - repaid["amount"] * 0.99

    # Exactly once: the account's nonce moved by the journaled transactions (approvals included), no more.
    import sqlite3

    with sqlite3.connect(rig.data_dir / "tx_journal.sqlite") as db:
        journaled = db.execute("SELECT COUNT(*) FROM tx_intents").fetchone()[0]
    assert journaled >= 2 and w3.eth.get_transaction_count(GOLEM) - nonce_before == journaled

    # The health factor the golem recorded is Aave's own, at the block it observed.
    snap = rec.observation.snapshot
    aave_hf = aave.functions.getUserAccountData(GOLEM).call(block_identifier=snap.block_number)[5] / 1e18
    recorded = next(p for p in snap.positions if p.kind == "lending")
    assert recorded.health_factor == pytest.approx(aave_hf, rel=1e-12)
    assert recorded.id == f"lending:{dep.address('AAVE_POOL')}"


async def test_a_feed_that_missed_its_heartbeat_is_detected_by_a_probe(temporal_client, rig):
    w3 = rig.w3
    heartbeat = rig.deployment.heartbeat_s("WETH")
    assert heartbeat == 3600
    # No round for longer than the heartbeat: chain time moves on, nobody posts.
    w3.provider.make_request("evm_increaseTime", [heartbeat + 120])
    w3.provider.make_request("evm_mine", [])
    async with in_process_worker(temporal_client, rig):
        handle = await rig.start_golem(temporal_client, max_ticks=1)
        store = CycleStore(rig.data_dir)
        await wait_for(lambda: store.count() >= 1, 60, "one tick")
        await handle.result()
    rec = store.load(store.recent(1)[0]["tick"])  # the one tick (its number may skip dropped queued triggers)
    probe = next(p for p in rec.observation.probes if p.probe == "feed_staleness")
    assert probe.severity is ProbeSeverity.HIGH and "STALE" in probe.detail, probe
    feed = next(f for f in rec.observation.snapshot.feeds if f.symbol == "WETH")
    assert feed.age_s > heartbeat and feed.round_id == 1
    assert any(a.probe == "feed_staleness" for a in rec.observation.anomalies)

    # a fresh round clears it
    owner = w3.eth.account.from_key(ANVIL_KEYS[0])
    feed_c = contract(w3, rig.deployment, "FEED_WETH")
    tx = feed_c.functions.post_round(2000 * 10**8).build_transaction({
        "from": owner.address, "nonce": w3.eth.get_transaction_count(owner.address), "chainId": w3.eth.chain_id,
    })  # fmt: skip
    w3.eth.wait_for_transaction_receipt(w3.eth.send_raw_transaction(owner.sign_transaction(tx).raw_transaction))
    from golem.chain.reader import read_snapshot
    from golem.cognition.probes import probe_feed_staleness

    fresh = read_snapshot(w3, rig.deployment, GOLEM)
    assert next(f for f in fresh.feeds if f.symbol == "WETH").round_id == 2
    assert probe_feed_staleness(fresh).severity is ProbeSeverity.NONE
    assert Web3.is_address(feed.address)


async def test_a_liquidation_by_the_simulator_shows_in_the_golems_record_and_forces_t2(temporal_client, rig):
    sim = rig.simulator()
    async with in_process_worker(temporal_client, rig):
        handle = await rig.start_golem(temporal_client, max_ticks=None)
        store = CycleStore(rig.data_dir)
        await wait_for(lambda: store.count() >= 2, 60, "two calm ticks")
        assert all(not store.load(r["tick"]).observation.liquidations for r in store.recent(5))
        # A crash the golem cannot outrun: the WETH feed and the pair to $900 in one step; the liquidator acts.
        step = await asyncio.to_thread(sim.move_to, 900.0, 900.0)
        [liq] = step.liquidations
        rec = await wait_for_record(store, lambda r: bool(r.observation.liquidations), "a record with the liquidation",
                                    timeout=60, n=30)
        await wait_for(lambda: sum(r["tick"] > rec.tick for r in store.recent(30)) >= 2, 60, "two more ticks")
        await handle.terminate("test done")
    [seen] = rec.observation.liquidations
    assert seen.tx_hash == liq.tx_hash and seen.liquidator == ANVIL_ADDRESSES[1]
    assert (seen.collateral_asset, seen.debt_asset) == ("WETH", "USDC") and seen.debt_covered > 7_900
    assert rec.tier == Tier.T2 and "position liquidated" in (rec.observation.force_t2_reason or "")
    # reported once: the ticks after it do not list it again
    later = sorted((store.load(r["tick"]) for r in store.recent(30) if r["tick"] > rec.tick), key=lambda r: r.tick)
    assert later and all(not r.observation.liquidations for r in later)
    lending = next(p for p in later[-1].observation.snapshot.positions if p.kind == "lending")
    assert lending.debt < 1.0 and lending.health_factor is None  # Aave closed the whole debt under HF 0.95
