"""The write path on a real Anvil: simulate → validate (PolicyCage, permits) → execute → verify."""

from __future__ import annotations

import pytest
from eth_account import Account
from web3 import Web3

from golem.chain.contracts import Deployment, contract
from golem.chain.executor import Executor
from golem.chain.journal import IntentStatus, TxJournal
from golem.chain.permits import PermitError, PermitStatus, PermitStore
from golem.chain.reader import read_snapshot
from golem.chain.simulate import SimulationError, simulate_actions, simulate_calls
from golem.chain.tools import build_calls
from golem.chain.verify import verify_actions
from golem.models.config import GolemConfig, PolicySection
from golem.models.enums import ActionStatus, BehavioralPhase
from golem.models.observation import Observation
from golem.models.tick import ProposedAction
from golem.safety.service import SafetyService
from golem.world.deploy import TxSender
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS

pytestmark = pytest.mark.integration

GOLEM = ANVIL_ADDRESSES[2]
GOLEM_KEY = ANVIL_KEYS[2]
POLICY = PolicySection(approved_assets=["WETH", "USDC"], max_trade_size_usd=5_000, max_slippage_bps=100)


@pytest.fixture
def stores(tmp_path):
    return TxJournal(tmp_path / "journal.sqlite"), PermitStore(tmp_path / "permits.sqlite")


@pytest.fixture
def safety(tmp_path, stores) -> SafetyService:
    """Step 6 as the validate activity runs it (the layered cage), over the test's own journal and permits."""
    journal, permits = stores
    cfg = GolemConfig(policy=POLICY)
    cfg.probes.kill_switch_path = str(tmp_path / "no-killswitch")
    return SafetyService(cfg, tmp_path, permits=permits, journal=journal)


def observe(w3: Web3, world: Deployment) -> Observation:
    return Observation(snapshot=read_snapshot(w3, world, GOLEM))


def nonce(w3: Web3) -> int:
    return w3.eth.get_transaction_count(GOLEM)


def mine(w3: Web3, blocks: int = 1) -> None:
    for _ in range(blocks):
        assert "result" in w3.provider.make_request("evm_mine", [])


def swap_1_weth(idx: int = 0, **extra) -> ProposedAction:
    return ProposedAction(
        action_index=idx, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 1, **extra}
    )


def approve_and_permit(w3, world, safety: SafetyService, actions, tick=1):
    obs = observe(w3, world)
    sim = simulate_actions(w3, world, GOLEM, actions, obs)
    val, _ = safety.validate("g1", tick, BehavioralPhase.THRIVING, actions, sim, obs)
    return obs, sim, val


def test_swap_simulate_validate_execute_verify(
    w3: Web3, world_snapshot: Deployment, stores, safety
) -> None:
    world = world_snapshot
    journal, permits = stores
    action = swap_1_weth()
    pool = contract(w3, world, "POOL")
    quote = pool.functions.get_amount_out(10**18, world.addresses["WETH"]).call() / 1e6

    obs, sim, val = approve_and_permit(w3, world, safety, [action])
    s = sim.actions[0]
    assert s.ok, s.revert_reason
    assert s.expected["amount_out"] == pytest.approx(quote, rel=1e-12)
    assert s.expected["delta:WETH"] == -1.0 and s.expected["delta:USDC"] == pytest.approx(quote)
    assert s.gas_estimate > 21_000
    assert val.actions[0].approved, val.actions[0].reason
    permit_id = val.actions[0].permit_id

    n0 = nonce(w3)
    executor = Executor(w3, world, Account.from_key(GOLEM_KEY), journal, permits)
    record = executor.execute("g1", 1, action, permit_id, obs)
    assert record.status is ActionStatus.EXECUTED, record.block_reason
    assert record.permit_id == permit_id and record.tx_hash and record.block_number
    assert record.gas_used > 21_000 and record.gas_cost > 0
    assert nonce(w3) == n0 + 2  # approve + swap
    assert permits.get(permit_id).status is PermitStatus.COMMITTED
    assert [i.status for i in journal.intents_for("g1", 1, 0)] == [IntentStatus.MINED, IntentStatus.MINED]
    receipt = w3.eth.get_transaction_receipt(record.tx_hash)
    assert receipt["status"] == 1 and receipt["to"] == pool.address

    mine(w3)  # a second block on top: 2 confirmations (heartbeat §S10)
    outcome = verify_actions(w3, world, GOLEM, [action], sim, [record], obs, confirmations=2, timeout_s=5)
    assert outcome.verified, outcome.actual
    assert outcome.ground_truth_source == "receipt+balance_check"
    assert abs(outcome.deviations_bps["delta:USDC"]) < 0.01 and abs(outcome.deviations_bps["delta:WETH"]) < 0.01
    post = read_snapshot(w3, world, GOLEM)
    assert post.balances["WETH"] == pytest.approx(obs.snapshot.balances["WETH"] - 1.0)
    assert post.balances["USDC"] == pytest.approx(obs.snapshot.balances["USDC"] + quote)
    # 1 WETH at $2000 sold into a 500 WETH pool with a 30 bps fee: a small, real loss
    assert -30.0 < outcome.pnl_impact < -5.0

    # the signer key appears nowhere the run left behind
    bare_key = GOLEM_KEY[2:].lower()
    for text in (record.model_dump_json(), outcome.model_dump_json(), repr(executor), str(journal.intents_for("g1", 1, 0))):
        assert bare_key not in text.lower()


def test_verify_waits_for_confirmations(
    w3: Web3, world_snapshot: Deployment, stores, safety
) -> None:
    world = world_snapshot
    journal, permits = stores
    action = swap_1_weth()
    obs, sim, val = approve_and_permit(w3, world, safety, [action])
    record = Executor(w3, world, Account.from_key(GOLEM_KEY), journal, permits).execute(
        "g1", 1, action, val.actions[0].permit_id, obs
    )
    outcome = verify_actions(w3, world, GOLEM, [action], sim, [record], obs, confirmations=3, timeout_s=0.3)
    assert not outcome.verified and "1 of 3 confirmations" in outcome.actual


def test_impossible_min_out_reports_slippage(
    w3: Web3, world_snapshot: Deployment, stores, safety
) -> None:
    action = swap_1_weth(min_amount_out=1_000_000)  # a million USDC for one WETH
    obs, sim, val = approve_and_permit(w3, world_snapshot, safety, [action])
    assert not sim.actions[0].ok
    assert sim.actions[0].revert_reason == "slippage"
    assert not val.actions[0].approved
    assert val.actions[0].reason == "simulation failed: slippage"
    assert val.actions[0].permit_id is None


def test_single_call_eth_call_fallback_matches_simulate_v1(w3: Web3, world_snapshot: Deployment) -> None:
    world = world_snapshot
    obs = observe(w3, world)
    borrow = ProposedAction(action_index=0, tool="borrow", arguments={"amount": 500})
    too_much = ProposedAction(action_index=0, tool="borrow", arguments={"amount": 100_000})
    (ok_call,) = build_calls(w3, world, GOLEM, borrow, obs)
    (bad_call,) = build_calls(w3, world, GOLEM, too_much, obs)
    for call in (ok_call, bad_call):
        v1 = simulate_calls(w3, GOLEM, [call])[0]
        plain = simulate_calls(w3, GOLEM, [call], use_simulate_v1=False)[0]
        assert (v1.ok, v1.revert_reason) == (plain.ok, plain.revert_reason)
    assert simulate_calls(w3, GOLEM, [bad_call], use_simulate_v1=False)[0].revert_reason == "unhealthy"
    with pytest.raises(SimulationError, match="need eth_simulateV1"):
        simulate_calls(w3, GOLEM, [ok_call, ok_call], use_simulate_v1=False)


def test_policy_refuses_dai_and_oversize_before_simulation_matters(
    w3: Web3, world_snapshot: Deployment, stores, safety
) -> None:
    dai = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "DAI", "token_out": "USDC", "amount_in": 10})
    big = ProposedAction(action_index=1, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 5})
    obs, sim, val = approve_and_permit(w3, world_snapshot, safety, [dai, big])
    assert "does not trade DAI" in sim.actions[0].revert_reason
    assert sim.actions[1].ok  # the chain would take it; the cage does not
    assert "DAI is not in approved_assets" in val.actions[0].reason
    assert "$10,000.00 exceeds max_trade_size_usd $5,000.00" in val.actions[1].reason
    assert val.approved == []


def test_retry_does_not_send_a_second_transaction(
    w3: Web3, world_snapshot: Deployment, stores, safety
) -> None:
    world = world_snapshot
    journal, permits = stores
    action = swap_1_weth()
    obs, sim, val = approve_and_permit(w3, world, safety, [action])
    permit_id = val.actions[0].permit_id
    executor = Executor(w3, world, Account.from_key(GOLEM_KEY), journal, permits)

    n0 = nonce(w3)
    first = executor.execute("g1", 1, action, permit_id, obs)
    n1 = nonce(w3)
    assert n1 == n0 + 2
    # Temporal retries the activity: same tick, same action, same (now committed) permit.
    again = executor.execute("g1", 1, action, permit_id, obs)
    assert nonce(w3) == n1
    assert again.tx_hash == first.tx_hash and again.status is ActionStatus.EXECUTED
    assert again.gas_used == first.gas_used
    # A fresh executor on the same journal (a restarted worker) does not send either.
    fresh = Executor(w3, world, Account.from_key(GOLEM_KEY), TxJournal(journal.path), PermitStore(permits.path))
    assert fresh.execute("g1", 1, action, permit_id, obs).tx_hash == first.tx_hash
    assert nonce(w3) == n1


class FlakyBroadcast:
    """Wraps the node's eth.send_raw_transaction: the first broadcast is lost (the crash window
    between journaling an intent and the node accepting it)."""

    def __init__(self, w3: Web3) -> None:
        self.w3 = w3
        self.real = w3.eth.send_raw_transaction
        self.lost: list[str] = []

    def __call__(self, raw):
        if not self.lost:
            self.lost.append(raw)
            raise ConnectionError("connection reset while broadcasting")
        return self.real(raw)


def test_crash_after_journal_rebroadcasts_the_same_bytes(
    w3: Web3, world_snapshot: Deployment, stores, safety, monkeypatch
) -> None:
    world = world_snapshot
    journal, permits = stores
    action = swap_1_weth()
    obs, sim, val = approve_and_permit(w3, world, safety, [action])
    permit_id = val.actions[0].permit_id
    executor = Executor(w3, world, Account.from_key(GOLEM_KEY), journal, permits)

    flaky = FlakyBroadcast(w3)
    monkeypatch.setattr(w3.eth, "send_raw_transaction", flaky)
    n0 = nonce(w3)
    with pytest.raises(ConnectionError):
        executor.execute("g1", 1, action, permit_id, obs)
    assert nonce(w3) == n0  # nothing reached the chain
    intent = journal.get("g1", 1, 0, 0)
    assert intent.status is IntentStatus.SIGNED and intent.raw_tx == flaky.lost[0]

    record = executor.execute("g1", 1, action, permit_id, obs)
    assert record.status is ActionStatus.EXECUTED
    assert nonce(w3) == n0 + 2
    # the approve that went out is byte-for-byte the one journaled before the "crash"
    assert w3.eth.get_transaction_receipt(intent.tx_hash)["status"] == 1
    assert journal.get("g1", 1, 0, 0).tx_hash == intent.tx_hash


def test_execute_without_a_valid_permit_raises(
    w3: Web3, world_snapshot: Deployment, stores, safety
) -> None:
    world = world_snapshot
    journal, permits = stores
    action = swap_1_weth()
    obs = observe(w3, world)
    executor = Executor(w3, world, Account.from_key(GOLEM_KEY), journal, permits)
    n0 = nonce(w3)
    with pytest.raises(PermitError, match="unknown permit"):
        executor.execute("g1", 1, action, "permit-forged", obs)
    with pytest.raises(PermitError, match="needs a permit"):
        executor.execute("g1", 1, action, "", obs)
    # a real permit, but for another action of the tick, or another tool
    other = permits.issue("g1", 1, 5, "swap", 2000.0, safety.cage.policy_hash())
    with pytest.raises(PermitError, match="action 5"):
        executor.execute("g1", 1, action, other.id, obs)
    supply_permit = permits.issue("g1", 1, 0, "supply", 2000.0, safety.cage.policy_hash())
    with pytest.raises(PermitError, match="for tool 'supply'"):
        executor.execute("g1", 1, action, supply_permit.id, obs)
    # a permit whose value limit is below the action's value
    small = permits.issue("g1", 2, 0, "swap", 100.0, safety.cage.policy_hash())
    with pytest.raises(PermitError, match=r"allows \$100.00"):
        executor.execute("g1", 2, action, small.id, obs)
    cancelled = permits.issue("g1", 3, 0, "swap", 2000.0, safety.cage.policy_hash())
    permits.cancel(cancelled.id, "steer")
    with pytest.raises(PermitError, match="cancelled"):
        executor.execute("g1", 3, action, cancelled.id, obs)
    assert nonce(w3) == n0
    assert journal.get_plan("g1", 1, 0) is None


def test_lending_actions_carry_state_across_calls(
    w3: Web3, world_snapshot: Deployment, stores, safety
) -> None:
    """supply then borrow in one simulation (the borrow relies on the supply), executed and verified."""
    world = world_snapshot
    journal, permits = stores
    actions = [
        ProposedAction(action_index=0, tool="supply", arguments={"amount": 1}),
        ProposedAction(action_index=1, tool="borrow", arguments={"amount": 500}),
        ProposedAction(action_index=2, tool="repay", arguments={"amount": 1_000_000}),  # capped at the debt
    ]
    obs, sim, val = approve_and_permit(w3, world, safety, actions[:2])
    assert [a.ok for a in sim.actions] == [True, True], [a.revert_reason for a in sim.actions]
    assert sim.actions[0].expected == {"delta:WETH": -1.0, "delta:collateral": 1.0}
    assert sim.actions[1].expected == {"delta:USDC": 500.0, "delta:debt": 500.0}
    assert len(val.approved) == 2

    executor = Executor(w3, world, Account.from_key(GOLEM_KEY), journal, permits)
    records = [executor.execute("g1", 1, a, v.permit_id, obs) for a, v in zip(actions[:2], val.actions)]
    assert all(r.status is ActionStatus.EXECUTED for r in records), [r.block_reason for r in records]
    outcome = verify_actions(w3, world, GOLEM, actions[:2], sim, records, obs, confirmations=1, timeout_s=5)
    assert outcome.verified, outcome.actual
    assert abs(outcome.pnl_impact + sum(r.gas_cost for r in records)) < 1e-6  # supply/borrow move no value

    # a repay bigger than the debt is simulated at the capped amount (policy says too big, though)
    debt = read_snapshot(w3, world, GOLEM).positions[0].debt
    sim2 = simulate_actions(w3, world, GOLEM, [actions[2]], observe(w3, world))
    assert sim2.actions[0].ok
    assert sim2.actions[0].expected["delta:debt"] == pytest.approx(-debt)


def test_action_that_would_revert_at_execution_is_failed_not_sent(
    w3: Web3, world_snapshot: Deployment, stores, safety
) -> None:
    """The pool moves between validation and execution so the frozen min_amount_out can't be met."""
    world = world_snapshot
    journal, permits = stores
    action = swap_1_weth(max_slippage_bps=10)
    obs, sim, val = approve_and_permit(w3, world, safety, [action])
    executor = Executor(w3, world, Account.from_key(GOLEM_KEY), journal, permits)
    # freeze the plan at today's quote, then have the trader dump 50 WETH into the pool
    permit_id = val.actions[0].permit_id
    calls = build_calls(w3, world, GOLEM, action, obs)
    journal.record_plan("g1", 1, 0, permit_id, [c.model_dump() for c in calls])
    trader = TxSender.for_key(w3, ANVIL_KEYS[1])
    weth, pool = contract(w3, world, "WETH"), contract(w3, world, "POOL")
    for fn in (
        weth.functions.approve(pool.address, 50 * 10**18),
        pool.functions.swap(weth.address, 50 * 10**18, 0, trader.address),
    ):
        tx = fn.build_transaction({"from": trader.address, "nonce": w3.eth.get_transaction_count(trader.address), "chainId": world.chain_id})
        signed = trader.account.sign_transaction(tx)
        assert w3.eth.wait_for_transaction_receipt(w3.eth.send_raw_transaction(signed.raw_transaction))["status"] == 1

    n0 = nonce(w3)
    record = executor.execute("g1", 1, action, permit_id, obs)
    assert record.status is ActionStatus.FAILED
    assert "swap would revert: slippage" in record.block_reason
    assert nonce(w3) == n0 + 1  # the approve went out; the swap never did
    assert executor.execute("g1", 1, action, permit_id, obs).block_reason == record.block_reason
    assert nonce(w3) == n0 + 1
    outcome = verify_actions(w3, world, GOLEM, [action], sim, [record], obs, confirmations=1, timeout_s=1)
    assert not outcome.verified and "failed" in outcome.actual
