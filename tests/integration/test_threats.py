"""The DeFi threat detectors on real Anvil (docs/design/safety.md#defi-threats): the sandwich figure against a sandwich
executed on the world's pair, the cage tightening a swap a front-runner could take, and a pool pushed and restored, a
feed that jumps and reverts, and a pool pushed away from its feed, each staged in consecutive blocks and caught by the
validate path reading the recent blocks; a calm market fires nothing."""

from __future__ import annotations

import pytest
from web3 import Web3

from golem.chain.contracts import Deployment, contract
from golem.chain.market_window import read_market_window
from golem.chain.simulate import simulate_actions
from golem.models.config import GolemConfig, PolicySection
from golem.models.enums import BehavioralPhase
from golem.models.tick import ProposedAction
from golem.safety.service import SafetyService
from golem.safety.threats import exposure_at
from golem.world.deploy import _receipt
from golem.world.simulator.market import MarketSimulator
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS
from tests.integration.golem_rig import golem_observation

pytestmark = pytest.mark.integration

GOLEM = ANVIL_ADDRESSES[2]
ATTACKER = ANVIL_ADDRESSES[5]
E18, E6 = 10**18, 10**6


def service(tmp_path, **policy) -> SafetyService:
    cfg = GolemConfig(policy=PolicySection(**{"max_slippage_bps": 500, "max_trade_size_usd": 50_000, **policy}))
    cfg.probes.kill_switch_path = str(tmp_path / "no-killswitch")
    return SafetyService(cfg, tmp_path)


def swap(amount: float, tin="WETH", tout="USDC", idx=0, **kw) -> ProposedAction:
    return ProposedAction(action_index=idx, tool="swap", rationale="LLM: trade it",
                          arguments={"token_in": tin, "token_out": tout, "amount_in": amount, **kw})


def sandwich(w3: Web3, world: Deployment, front_run_wei: int, victim_in_wei: int, victim_min_out: int) -> dict:
    """Front-run (the attacker buys USDC with WETH), the golem's swap with its minimum, back-run (the attacker sells the
    USDC back), each in its own block as a searcher's bundle would land them in order. Returns what each got."""
    router, weth, usdc = contract(w3, world, "UNI_ROUTER"), contract(w3, world, "WETH"), contract(w3, world, "USDC")
    path = [world.address("WETH"), world.address("USDC")]
    deadline = w3.eth.get_block("latest")["timestamp"] + 600
    weth.functions.deposit().transact({"from": ATTACKER, "value": front_run_wei})
    weth.functions.approve(router.address, 2**256 - 1).transact({"from": ATTACKER})
    usdc.functions.approve(router.address, 2**256 - 1).transact({"from": ATTACKER})
    weth.functions.approve(router.address, 2**256 - 1).transact({"from": GOLEM})
    weth0 = weth.functions.balanceOf(ATTACKER).call()
    router.functions.swapExactTokensForTokens(front_run_wei, 0, path, ATTACKER, deadline).transact({"from": ATTACKER})
    usdc_golem0 = usdc.functions.balanceOf(GOLEM).call()
    tx = router.functions.swapExactTokensForTokens(victim_in_wei, victim_min_out, path, GOLEM, deadline).build_transaction(
        {"from": GOLEM, "gas": 300_000})
    # a send the automining node left in its pool (seen under load) is waited for as the golem's own are
    status = _receipt(w3, w3.eth.send_transaction(tx), 60.0)["status"]
    got = usdc.functions.balanceOf(GOLEM).call() - usdc_golem0
    loot = usdc.functions.balanceOf(ATTACKER).call()
    router.functions.swapExactTokensForTokens(loot, 0, path[::-1], ATTACKER, deadline).transact({"from": ATTACKER})
    return {"victim_ok": status == 1, "victim_got": got, "attacker_profit_wei": weth.functions.balanceOf(ATTACKER).call() - weth0}


def test_the_sandwich_figure_is_what_a_sandwich_on_anvil_takes_and_the_cage_tightens_the_swap_out_of_reach(
        w3: Web3, world_snapshot: Deployment, tmp_path):
    world = world_snapshot
    obs = golem_observation(w3, world)
    pool = obs.snapshot.pool
    amount, slip = 5.0, 300.0  # $10,000 against the pair's 500 WETH, accepting 3 % less than the quote
    router = contract(w3, world, "UNI_ROUTER")
    path = [world.address("WETH"), world.address("USDC")]
    quote = router.functions.getAmountsOut(int(amount * E18), path).call()[-1]
    min_out = quote * (10_000 - int(slip)) // 10_000
    e = exposure_at(amount, pool.reserve0, pool.reserve1, slip, None, 0.0)
    assert e.quote == pytest.approx(quote / E6, rel=1e-6) and e.front_run > 0
    snap = w3.provider.make_request("evm_snapshot", [])["result"]
    done = sandwich(w3, world, int(e.front_run * E18), int(amount * E18), min_out)
    w3.provider.make_request("evm_revert", [snap])
    assert done["victim_ok"]
    # the figure is the chain's: what the attacker made, what the golem lost against its quote
    assert done["attacker_profit_wei"] / E18 == pytest.approx(e.attacker_profit, rel=1e-3)
    assert (quote - done["victim_got"]) / E6 == pytest.approx(e.victim_loss, rel=1e-3)
    assert e.loss_bps == pytest.approx(slip, abs=0.5)  # the front-run takes the golem right down to its minimum

    svc = service(tmp_path)  # max_sandwich_loss_bps 30

    def resimulate(actions):
        return simulate_actions(w3, world, GOLEM, actions, obs)

    proposed = swap(amount, max_slippage_bps=slip)
    val, _ = svc.validate("g1", 1, BehavioralPhase.THRIVING, [proposed], resimulate([proposed]), obs,
                          resimulate=resimulate)
    v = val.actions[0]
    assert v.approved and v.action is not None, v.reason
    tight = v.action.arguments["max_slippage_bps"]
    assert tight < slip and v.threats and "tightened" in v.threats[0]
    assert val.simulation is not None and val.simulation.actions[0].ok
    entry = svc.audit.entries(kind_prefix="threat.sandwich")[-1]
    assert entry.payload["fired"] and entry.payload["response"] == "tightened"
    # the same front-run against the tightened minimum: the golem's swap reverts and the attacker is left paying fees
    tight_min = quote * (10_000 - tight) // 10_000
    snap = w3.provider.make_request("evm_snapshot", [])["result"]
    done = sandwich(w3, world, int(e.front_run * E18), int(amount * E18), int(tight_min))
    w3.provider.make_request("evm_revert", [snap])
    assert not done["victim_ok"] and done["attacker_profit_wei"] < 0
    # and the best sandwich the tightened bound still allows takes no more than the bound
    assert exposure_at(amount, pool.reserve0, pool.reserve1, tight, None, 0.0).loss_bps <= 30.0 + 1e-9


def market(w3: Web3, world: Deployment) -> MarketSimulator:
    return MarketSimulator(w3, world, ANVIL_KEYS[1], ANVIL_KEYS[0], "calm", seed=7)


def move(w3: Web3, sim: MarketSimulator, feed: float, pool: float):
    """The feed posted and the pair arbitraged to `pool`, in one block (as the replay driver mines a row)."""
    state = sim.begin_row(control=[("evm_setAutomine", [False])])
    try:
        with sim.one_block():
            return sim.move_to(feed, pool, state=state)
    finally:
        w3.provider.make_request("evm_setAutomine", [True])


def validate_now(w3: Web3, world: Deployment, svc: SafetyService, actions: list[ProposedAction], tick: int = 1):
    obs = golem_observation(w3, world)
    window = read_market_window(w3, world, obs.snapshot.block_number, 5)
    val, decisions = svc.validate("g1", tick, BehavioralPhase.THRIVING, actions,
                                  simulate_actions(w3, world, GOLEM, actions, obs), obs, market=window,
                                  resimulate=lambda a: simulate_actions(w3, world, GOLEM, a, obs))
    return val, window


def fired(val, detector: str):
    return next(v for v in val.threats if v.detector == detector)


def test_a_pool_pushed_far_and_restored_in_the_next_block_holds_pool_priced_writes(
        w3: Web3, world_snapshot: Deployment, tmp_path):
    world = world_snapshot
    sim = market(w3, world)
    obs = golem_observation(w3, world)
    feed, price = obs.snapshot.oracle_price, obs.snapshot.pool.price
    sell, repay = swap(0.5), ProposedAction(action_index=1, tool="repay", arguments={"amount": 50.0})
    svc = service(tmp_path)

    # a calm market first: small moves of pool and feed together fire nothing
    move(w3, sim, feed * 1.002, price * 1.002)
    move(w3, sim, feed * 1.001, price * 0.999)
    val, _ = validate_now(w3, world, svc, [sell, repay])
    assert all(v.approved for v in val.actions), [v.reason for v in val.actions]
    assert not any(v.fired for v in val.threats), [v.detail for v in val.threats]

    pushed = move(w3, sim, feed * 1.001, price * 1.08)  # +8 % in one block, the feed standing still
    move(w3, sim, feed * 1.001, price * 0.999)  # and back in the next
    val, window = validate_now(w3, world, svc, [sell, repay], tick=2)
    assert pushed.pool_price == pytest.approx(price * 1.08, rel=1e-3)
    fl = fired(val, "flash_loan")
    assert fl.fired and fl.response == "held" and fl.figures["move_bps"] > 700
    assert fl.figures["revert_block"] == fl.figures["block"] + 1 <= window.marks[-1].block
    swap_v, repay_v = val.actions
    assert not swap_v.approved and swap_v.deferred and "flash-loan-shaped" in swap_v.reason
    assert repay_v.approved  # not priced off the pool
    assert any(t.startswith("flash_loan:") for t in swap_v.threats)
    entry = svc.audit.entries(kind_prefix="threat.flash_loan")[-1]
    assert entry.payload["fired"] and entry.payload["tick"] == 2


def test_a_feed_that_jumps_and_reverts_refuses_borrowing_and_a_pool_run_from_its_feed_refuses_buying(
        w3: Web3, world_snapshot: Deployment, tmp_path):
    world = world_snapshot
    sim = market(w3, world)
    obs = golem_observation(w3, world)
    feed, price = obs.snapshot.oracle_price, obs.snapshot.pool.price
    borrow = ProposedAction(action_index=0, tool="borrow", arguments={"amount": 20.0})
    buy = swap(500.0, "USDC", "WETH", idx=1)
    svc = service(tmp_path)

    move(w3, sim, feed * 1.10, price)  # the feed jumps 10 %, the pool does not follow
    move(w3, sim, feed, price)  # and the next round takes it back
    val, _ = validate_now(w3, world, svc, [borrow, buy])
    om = fired(val, "oracle_manipulation")
    assert om.fired and om.source == "feed" and om.response == "refused", om.detail
    assert not val.actions[0].approved and "oracle manipulation" in val.actions[0].reason
    assert val.actions[1].approved  # the pool is sound

    for _ in range(6):  # the jump leaves the window
        move(w3, sim, feed, price)
    # now the pool runs 4 % from a feed that stands still, and stays there: under the deviation breaker's 5 %
    move(w3, sim, feed, price * 0.96)
    val, _ = validate_now(w3, world, svc, [borrow, buy], tick=2)
    om = fired(val, "oracle_manipulation")
    assert om.fired and om.source == "pool", om.detail
    assert val.actions[0].approved and not val.actions[1].approved
    assert "oracle manipulation" in val.actions[1].reason


# ── through the golem: the validate activity reads the recent blocks itself ──────────────────────────────────


@pytest.fixture
def rig(tmp_path):
    from tests.integration.golem_rig import make_rig

    rig = make_rig(tmp_path, "threats", "calm", theta=0.3)
    yield rig
    rig.stop()


async def test_a_steered_swap_after_a_flash_loan_shaped_move_is_held_on_the_record(temporal_client, rig):
    import uuid
    from datetime import datetime, timezone

    from golem.life.cycle_store import CycleStore
    from golem.models.enums import ActionStatus
    from tests.integration.golem_rig import in_process_worker, wait_for_record
    from workflows.golem import GolemWorkflow

    store = CycleStore(rig.data_dir)
    w3 = rig.w3
    async with in_process_worker(temporal_client, rig):
        handle = await rig.start_golem(temporal_client, max_ticks=None)
        first = await wait_for_record(store, lambda r: True, "a first tick")
        sim = rig.simulator()
        feed, price = first.observation.snapshot.oracle_price, first.observation.snapshot.pool.price
        move(w3, sim, feed, price * 1.08)  # a flash-loan-shaped push of the pool, restored in the next block
        move(w3, sim, feed, price)
        await handle.signal(GolemWorkflow.steer, {
            "id": f"steer-{uuid.uuid4().hex[:8]}", "message": "reduce exposure now", "severity": "medium",
            "created_at": datetime.now(timezone.utc).isoformat()})
        rec = await wait_for_record(store, lambda r: bool(r.deliberation and r.deliberation.steers_considered),
                                    "the steered tick", timeout=90)
        await handle.terminate("test done")
    swaps = [a for a in rec.actions if a.tool_name == "swap"]
    assert swaps, [(a.tool_name, a.status, a.block_reason) for a in rec.actions]
    held = swaps[0]
    assert held.status is ActionStatus.DEFERRED and "flash-loan-shaped" in (held.block_reason or ""), held
    assert any(t.startswith("flash_loan:") for t in held.threats)
    from golem.safety.audit import AuditLog
    from golem.layout import DataLayout

    audit = AuditLog(DataLayout.of(rig.data_dir).audit)
    entries = [e for e in audit.entries(kind_prefix="threat.flash_loan") if e.payload["tick"] == rec.tick]
    assert entries and entries[-1].payload["fired"] and entries[-1].payload["response"] == "held"
    # the ui-bridge's event and alert, and `golem status`'s line, read the record
    from argparse import Namespace

    from cli.status import threats_line
    from golem.events.store import EventStore

    events = EventStore(rig.data_dir)
    threat_events = [e for e in events.read(kinds=["safety.threat"]) if e.tick == rec.tick]
    assert threat_events and threat_events[0].payload["detector"] == "flash_loan"
    assert any(e.payload.get("alert") == "flash_loan" for e in events.read(kinds=["alerts.raised"]) if e.tick == rec.tick)
    line = threats_line(Namespace(data=str(rig.data_dir)), rec.tick + 1)
    assert line is not None and f"tick {rec.tick}: flash_loan: the pool moved +" in line
