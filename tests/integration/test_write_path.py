"""The write path on a real Anvil against the real protocols (Uniswap V2 Router02, the Aave V3 Pool):
simulate → validate (PolicyCage, permits) → execute (exactly once, via the tx journal) → verify."""

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
from golem.chain.tools.build import build_calls
from golem.chain.tools.schemas import ToolArgumentError
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
    router = contract(w3, world, "UNI_ROUTER")
    path = [world.address("WETH"), world.address("USDC")]
    quote = router.functions.getAmountsOut(10**18, path).call()[-1] / 1e6

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
    assert nonce(w3) == n0 + 2  # approve + swap; the planned revoke is not sent: the router used the allowance up
    assert permits.get(permit_id).status is PermitStatus.COMMITTED
    intents = journal.intents_for("g1", 1, 0)
    assert [(i.label, i.status) for i in intents] == [("approve_WETH", IntentStatus.MINED), ("swap", IntentStatus.MINED)]
    receipt = w3.eth.get_transaction_receipt(record.tx_hash)
    assert receipt["status"] == 1 and receipt["to"] == router.address
    assert contract(w3, world, "WETH").functions.allowance(GOLEM, router.address).call() == 0
    # the swap itself went through Router02.swapExactTokensForTokens with the simulated quote's floor
    fn, params = router.decode_function_input(w3.eth.get_transaction(record.tx_hash)["input"])
    assert fn.fn_name == "swapExactTokensForTokens" and params["path"] == path and params["to"] == GOLEM
    assert params["amountOutMin"] == int(quote * 1e6 * (10_000 - 50) // 10_000)
    assert params["deadline"] > w3.eth.get_block(receipt["blockNumber"] - 1)["timestamp"]

    mine(w3)  # a second block on top: 2 confirmations
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


def test_a_swap_on_a_chain_idle_past_the_deadline_window_is_not_expired(
    w3: Web3, world_snapshot: Deployment, stores, safety
) -> None:
    """A chain mined only when a transaction comes (Anvil; a test chain idle between tests) has a latest block older
    than the swap's deadline window: the deadline is stamped from the time the next block will carry, not the
    latest block's, so the swap is mined instead of reverting with EXPIRED."""
    world = world_snapshot
    journal, permits = stores
    action = swap_1_weth()
    obs, sim, val = approve_and_permit(w3, world, safety, [action])
    assert val.actions[0].approved, val.actions[0].reason
    w3.provider.make_request("evm_increaseTime", [900])  # 15 idle minutes, no block mined since
    record = Executor(w3, world, Account.from_key(GOLEM_KEY), journal, permits).execute(
        "g1", 1, action, val.actions[0].permit_id, obs)
    assert record.status is ActionStatus.EXECUTED, record.block_reason
    receipt = w3.eth.get_transaction_receipt(record.tx_hash)
    params = contract(w3, world, "UNI_ROUTER").decode_function_input(w3.eth.get_transaction(record.tx_hash)["input"])[1]
    assert params["deadline"] >= w3.eth.get_block(receipt["blockNumber"])["timestamp"]


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
    assert sim.actions[0].revert_reason == "UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT"
    assert not val.actions[0].approved
    assert val.actions[0].reason == "simulation failed: UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT"
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
    assert simulate_calls(w3, GOLEM, [bad_call], use_simulate_v1=False)[0].revert_reason == (
        "COLLATERAL_CANNOT_COVER_NEW_BORROW (Aave error 36)")
    with pytest.raises(SimulationError, match="need eth_simulateV1"):
        simulate_calls(w3, GOLEM, [ok_call, ok_call], use_simulate_v1=False)


def test_policy_refuses_dai_and_oversize_before_simulation_matters(
    w3: Web3, world_snapshot: Deployment, stores, safety
) -> None:
    dai = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "DAI", "token_out": "USDC", "amount_in": 10})
    big = ProposedAction(action_index=1, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 5})
    obs, sim, val = approve_and_permit(w3, world_snapshot, safety, [dai, big])
    assert sim.actions[0].ok and sim.actions[1].ok  # the chain would take both (DAI → WETH → USDC); the cage does not
    assert "DAI is not in approved_assets" in val.actions[0].reason
    # oversize: the cage would clip it to max_trade_size_usd, but a clip must be simulated again first
    assert "max_trade_size_usd" in val.actions[1].reason and "not simulated again" in val.actions[1].reason
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
    weth, router = contract(w3, world, "WETH"), contract(w3, world, "UNI_ROUTER")
    deadline = w3.eth.get_block("latest")["timestamp"] + 600
    for fn in (
        weth.functions.approve(router.address, 50 * 10**18),
        router.functions.swapExactTokensForTokens(
            50 * 10**18, 0, [weth.address, world.address("USDC")], trader.address, deadline),
    ):
        # explicit gas: an estimate at the latest block's second can run out in the next (the pair's oracle update)
        tx = fn.build_transaction({"from": trader.address, "nonce": w3.eth.get_transaction_count(trader.address),
                                   "chainId": world.chain_id, "gas": 300_000})
        signed = trader.account.sign_transaction(tx)
        assert w3.eth.wait_for_transaction_receipt(w3.eth.send_raw_transaction(signed.raw_transaction))["status"] == 1

    n0 = nonce(w3)
    record = executor.execute("g1", 1, action, permit_id, obs)
    assert record.status is ActionStatus.FAILED
    assert "swap would revert: UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT" in record.block_reason
    # the approve went out, the swap never did, and the cleanup revoked the approve: nothing lingers
    assert [i.label for i in journal.intents_for("g1", 1, 0)] == ["approve_WETH", "revoke_WETH"]
    assert nonce(w3) == n0 + 2
    assert weth.functions.allowance(GOLEM, router.address).call() == 0
    assert executor.execute("g1", 1, action, permit_id, obs).block_reason == record.block_reason
    assert nonce(w3) == n0 + 2
    outcome = verify_actions(w3, world, GOLEM, [action], sim, [record], obs, confirmations=1, timeout_s=1)
    assert not outcome.verified and "failed" in outcome.actual


def test_bad_arguments_are_clear_tool_argument_errors(w3: Web3, world_snapshot: Deployment) -> None:
    """Arguments the protocols cannot take are refused before anything is simulated or signed, naming the
    argument and what to do; simulation reports them as invalid arguments, not as reverts."""
    world = world_snapshot
    obs = observe(w3, world)

    def refused(tool, args, match):
        with pytest.raises(ToolArgumentError, match=match):
            build_calls(w3, world, GOLEM, ProposedAction(action_index=0, tool=tool, arguments=args), obs)

    refused("swap", {"token_in": "WETH", "token_out": "WETH", "amount_in": 1}, r"swap.token_out: must differ")
    refused("swap", {"token_in": "WBTC", "token_out": "USDC", "amount_in": 1}, r"swap.token_in: unknown token 'WBTC'")
    refused("swap", {"token_in": "WETH", "token_out": "USDC", "amount_in": -1},
            r"swap.amount_in: must be a finite number > 0")
    refused("swap", {"token_in": "USDC", "token_out": "WETH", "amount_in": "0.0000001"}, r"below the token's smallest unit")
    refused("withdraw", {"amount": 100}, r"withdraw.amount: 100 WETH is more than the 10.000000 WETH supplied on Aave")
    refused("remove_liquidity", {"fraction": 0.5}, r"remove_liquidity.fraction: the account holds no LP shares")
    refused("add_liquidity", {"amount_weth": 1, "amount_usdc": 1000},
            r"add_liquidity.amount_weth: .* the router would take 5,000.0 bps less WETH .* deposit about 2000.00 USDC")
    # a book without the WETH/DAI pair cannot route DAI
    no_dai = world.model_copy(update={"addresses": {k: v for k, v in world.addresses.items() if k != "PAIR_WETH_DAI"}})
    with pytest.raises(ToolArgumentError, match="the address book has no PAIR_WETH_DAI"):
        build_calls(w3, no_dai, GOLEM, ProposedAction(action_index=0, tool="swap",
                    arguments={"token_in": "DAI", "token_out": "USDC", "amount_in": 1}), obs)
    # no debt: nothing to repay (another account, with no Aave position)
    stranger = Account.create().address
    with pytest.raises(ToolArgumentError, match="repay.amount: the account has no variable USDC debt on Aave"):
        build_calls(w3, world, stranger, ProposedAction(action_index=0, tool="repay", arguments={"amount": 10}), obs)
    too_much = ProposedAction(action_index=0, tool="withdraw", arguments={"amount": 100})
    sim = simulate_actions(w3, world, GOLEM, [too_much], obs)
    assert not sim.actions[0].ok and sim.actions[0].revert_reason.startswith("invalid arguments: withdraw.amount")


# ── the Aave V3 Pool and two-hop routes, end to end with OutcomeVerification ───────────────────

# max_sandwich_loss_bps at the slippage limit: these tests check the write path at the sizes and bounds they propose
# (the sandwich check's tightening has its own tests, tests/integration/test_threats.py)
WIDE = PolicySection(approved_assets=["WETH", "USDC", "DAI"], max_trade_size_usd=50_000, max_slippage_bps=100,
                     max_sandwich_loss_bps=100)


@pytest.fixture
def wide(tmp_path, stores) -> SafetyService:
    journal, permits = stores
    cfg = GolemConfig(policy=WIDE)
    cfg.probes.kill_switch_path = str(tmp_path / "no-killswitch")
    return SafetyService(cfg, tmp_path, permits=permits, journal=journal)


def full_path(w3, world, safety: SafetyService, actions, tick=1):
    """simulate → validate → execute (through the journal) → 2 confirmations → OutcomeVerification."""
    obs, sim, val = approve_and_permit(w3, world, safety, actions, tick)
    assert all(a.approved for a in val.actions), [a.reason for a in val.actions]
    executor = Executor(w3, world, Account.from_key(GOLEM_KEY), safety.journal, safety.permits)
    records = [safety.execute(executor, "g1", tick, a, v.permit_id, obs) for a, v in zip(actions, val.actions)]
    assert all(r.status is ActionStatus.EXECUTED for r in records), [r.block_reason for r in records]
    mine(w3)
    ov = safety.verify(w3, world, "g1", tick, GOLEM, actions, sim, records, obs, timeout_s=5)
    assert ov.outcome.verified and ov.invariant_violations == [], (ov.outcome.actual, ov.invariant_violations)
    assert ov.deviations.unexpected_logs == [] and ov.deviations.missing_expected_logs == []
    return obs, sim, val, records, ov, executor


def debt_raw(w3, world) -> int:
    return contract(w3, world, "VDEBT_USDC").functions.balanceOf(GOLEM).call()


def test_repay_on_the_aave_pool_exactly_once_and_verified(w3: Web3, world_snapshot: Deployment, wide) -> None:
    world = world_snapshot
    pool, usdc = contract(w3, world, "AAVE_POOL"), contract(w3, world, "USDC")
    repay = ProposedAction(action_index=0, tool="repay", arguments={"amount": 1_000})
    n0 = nonce(w3)
    obs, sim, _, (rec,), ov, executor = full_path(w3, world, wide, [repay])
    assert sim.actions[0].expected == {"delta:USDC": -1_000.0, "delta:debt": -1_000.0}
    assert nonce(w3) == n0 + 2  # exact approve + repay; nothing left to revoke
    assert usdc.functions.allowance(GOLEM, pool.address).call() == 0
    assert [lg.label for lg in ov.actions[0].logs] == [
        "USDC.Approval", "VDEBT_USDC.Transfer", "VDEBT_USDC.Burn", "AAVE_POOL.ReserveDataUpdated", "USDC.Transfer",
        "AAVE_POOL.Repay"]
    event = ov.actions[0].logs[-1]
    assert int(event.args["amount"]) == 1_000 * 10**6 and event.args["user"] == GOLEM and event.args["repayer"] == GOLEM
    assert event.args["useATokens"] is False
    fn, params = pool.decode_function_input(w3.eth.get_transaction(rec.tx_hash)["input"])
    assert fn.fn_name == "repay" and params["interestRateMode"] == 2 and params["amount"] == 1_000 * 10**6
    # debt as Aave computes it dropped by what was paid (interest since the observation aside)
    assert abs(ov.deviations.balance_change_bps["delta:debt"]) < 0.01
    # a retried execute (same tick, same permit) sends nothing
    assert executor.execute("g1", 1, repay, rec.permit_id, obs).tx_hash == rec.tx_hash and nonce(w3) == n0 + 2


def test_full_repay_pays_the_debt_at_inclusion_and_revokes_the_margin(
    w3: Web3, world_snapshot: Deployment, wide
) -> None:
    """More than the debt repays all of it: the debt grows per second, so the plan approves it plus an
    interest margin, passes type(uint256).max, and revokes what is left; Aave's health factor is then
    infinite (no debt) and no allowance lingers."""
    world = world_snapshot
    pool, usdc = contract(w3, world, "AAVE_POOL"), contract(w3, world, "USDC")
    w3.provider.make_request("evm_increaseTime", [30 * 24 * 3600])  # a month of interest
    mine(w3)
    before = debt_raw(w3, world)
    assert before > 8_000 * 10**6  # interest accrued on the 8,000 USDC borrowed at deploy
    repay = ProposedAction(action_index=0, tool="repay", arguments={"amount": 9_000})
    n0 = nonce(w3)
    obs, sim, _, (rec,), ov, _ = full_path(w3, world, wide, [repay])
    assert debt_raw(w3, world) == 0
    assert usdc.functions.allowance(GOLEM, pool.address).call() == 0
    assert nonce(w3) == n0 + 3  # approve (debt + margin), repay(max), revoke
    calls = wide.journal.get_plan("g1", 1, 0).calls
    assert [c["label"] for c in calls] == ["approve_USDC", "repay", "revoke_USDC"]
    fn, params = pool.decode_function_input(calls[1]["data"])
    assert params["amount"] == 2**256 - 1
    approved = usdc.decode_function_input(calls[0]["data"])[1]["amount"]
    repaid = int(ov.actions[0].logs[[lg.label for lg in ov.actions[0].logs].index("AAVE_POOL.Repay")].args["amount"])
    assert before <= repaid < approved <= before * 1.001
    assert sim.actions[0].expected["delta:debt"] == pytest.approx(-repaid / 1e6, rel=1e-6)
    post = read_snapshot(w3, world, GOLEM)
    assert post.positions[0].debt == 0 and post.positions[0].health_factor is None


def test_supply_borrow_withdraw_on_the_aave_pool_verified(w3: Web3, world_snapshot: Deployment, wide) -> None:
    world = world_snapshot
    aave = contract(w3, world, "AAVE_POOL")
    actions = [
        ProposedAction(action_index=0, tool="supply", arguments={"amount": 2}),
        ProposedAction(action_index=1, tool="borrow", arguments={"amount": 1_000}),
        ProposedAction(action_index=2, tool="withdraw", arguments={"amount": 1}),
    ]
    obs, sim, _, records, ov, _ = full_path(w3, world, wide, actions)
    labels = [[lg.label for lg in a.logs] for a in ov.actions]
    assert "AAVE_POOL.Supply" in labels[0] and "A_WETH.Mint" in labels[0]
    assert "AAVE_POOL.Borrow" in labels[1] and "VDEBT_USDC.Mint" in labels[1]
    assert "AAVE_POOL.Withdraw" in labels[2] and "A_WETH.Burn" in labels[2]
    borrow = next(lg for lg in ov.actions[1].logs if lg.label == "AAVE_POOL.Borrow")
    assert borrow.args["interestRateMode"] == 2 and borrow.args["onBehalfOf"] == GOLEM
    for k, v in {"delta:WETH": -1.0, "delta:collateral": 1.0, "delta:USDC": 1_000.0, "delta:debt": 1_000.0}.items():
        assert ov.post_state["tracked"][k] - ov.pre_state["tracked"][k] == pytest.approx(v, abs=1e-6)
    # the recorded health factor is Aave's
    hf = aave.functions.getUserAccountData(GOLEM).call()[5] / 1e18
    assert read_snapshot(w3, world, GOLEM).positions[0].health_factor == pytest.approx(hf, rel=1e-12)
    assert contract(w3, world, "WETH").functions.allowance(GOLEM, aave.address).call() == 0


def test_withdrawing_everything_is_refused_by_aave_with_the_reason(w3: Web3, world_snapshot: Deployment, wide) -> None:
    world = world_snapshot
    obs = observe(w3, world)
    everything = ProposedAction(action_index=0, tool="withdraw", arguments={"amount": obs.snapshot.positions[0].collateral})
    sim = simulate_actions(w3, world, GOLEM, [everything], obs)
    assert not sim.actions[0].ok
    assert sim.actions[0].revert_reason == "HEALTH_FACTOR_LOWER_THAN_LIQUIDATION_THRESHOLD (Aave error 35)"


def test_two_hop_swap_through_weth_verified(w3: Web3, world_snapshot: Deployment, wide) -> None:
    """USDC → DAI routes USDC → WETH → DAI across both pairs; both pairs' Swap and Sync are required."""
    world = world_snapshot
    swap = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "USDC", "token_out": "DAI", "amount_in": 100})
    router = contract(w3, world, "UNI_ROUTER")
    path = [world.address(s) for s in ("USDC", "WETH", "DAI")]
    quote = router.functions.getAmountsOut(100 * 10**6, path).call()[-1] / 1e18
    obs, sim, _, (rec,), ov, _ = full_path(w3, world, wide, [swap])
    assert sim.actions[0].expected["amount_out"] == pytest.approx(quote, rel=1e-12)
    assert 99.0 < quote < 100.0  # two 30 bps fees
    assert sorted(lg.label for lg in ov.actions[0].logs) == sorted([
        "USDC.Approval", "USDC.Transfer", "WETH.Transfer", "PAIR_WETH_USDC.Sync", "PAIR_WETH_USDC.Swap",
        "DAI.Transfer", "PAIR_WETH_DAI.Sync", "PAIR_WETH_DAI.Swap"])
    post = read_snapshot(w3, world, GOLEM)
    assert post.balances["DAI"] - obs.snapshot.balances["DAI"] == pytest.approx(quote, rel=1e-9)


def test_two_swaps_in_one_decision_are_each_quoted_on_the_reserves_the_first_leaves(
    w3: Web3, world_snapshot: Deployment, wide
) -> None:
    """Dream rehearsal found "reduce exposure" broken: two WETH → USDC swaps in one decision, each quoted on
    the pre-trade reserves, so the second's amountOutMin was above what it could fill (INSUFFICIENT_OUTPUT_AMOUNT)
    and step 5 blocked the exit. Each swap is now quoted on the state the earlier actions leave; its own
    max_slippage_bps still bounds it, and the executor (which builds each action after the last was mined) fills
    what the simulation expected."""
    world = world_snapshot
    router = contract(w3, world, "UNI_ROUTER")
    path = [world.address("WETH"), world.address("USDC")]
    sell = [ProposedAction(action_index=i, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC",
                                                                    "amount_in": 6, "max_slippage_bps": 100})
            for i in range(2)]
    first = router.functions.getAmountsOut(6 * 10**18, path).call()[-1]
    both = router.functions.getAmountsOut(12 * 10**18, path).call()[-1]
    # the second swap fills ~2.4% below the first: beyond the 100 bps it may slip from a pre-trade quote
    assert (both - first) < first * (10_000 - 100) // 10_000
    obs, sim, val, records, ov, _ = full_path(w3, world, wide, sell)
    assert [s.ok for s in sim.actions] == [True, True], [s.revert_reason for s in sim.actions]
    assert sim.actions[0].expected["amount_out"] == pytest.approx(first / 1e6, rel=1e-12)
    # the second is quoted on the reserves the first leaves (constant product, 0.3% fee: Uniswap V2's getAmountOut)
    r_weth = int(obs.snapshot.pool.reserve0 * 10**18) + 6 * 10**18
    r_usdc = int(obs.snapshot.pool.reserve1 * 10**6) - first
    second = 6 * 10**18 * 997 * r_usdc // (r_weth * 1000 + 6 * 10**18 * 997)
    assert sim.actions[1].expected["amount_out"] == pytest.approx(second / 1e6, abs=2e-6)
    # each swap's floor is its own quote less 100 bps, the second's quoted after the first
    mins = [router.decode_function_input(w3.eth.get_transaction(r.tx_hash)["input"])[1]["amountOutMin"]
            for r in records]
    assert mins[0] == first * 9_900 // 10_000 and abs(mins[1] - second * 9_900 // 10_000) <= 1
    post = read_snapshot(w3, world, GOLEM)
    assert post.balances["USDC"] - obs.snapshot.balances["USDC"] == pytest.approx((first + second) / 1e6, abs=1e-5)
    # a slippage bound tighter than the first swap's own impact on the second still refuses it: the limit holds
    now = router.functions.getAmountsOut(6 * 10**18, path).call()[-1]
    tight = [a.model_copy(update={"arguments": {**a.arguments, "min_amount_out": now * 0.999 / 1e6}}) for a in sell]
    sim2 = simulate_actions(w3, world, GOLEM, tight, observe(w3, world))
    assert sim2.actions[0].ok and not sim2.actions[1].ok
    assert sim2.actions[1].revert_reason == "UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT"
