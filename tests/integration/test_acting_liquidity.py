"""add_liquidity / remove_liquidity through Uniswap V2 Router02 on a real Anvil, through SafetyService:
simulate → validate → execute → verify, the pair's LP shares moving as simulated and no approval left
to the router; Conservation refusing a deposit; a bad fraction refused with the field named."""

from __future__ import annotations

import pytest
from eth_account import Account
from web3 import Web3

from golem.chain.contracts import Deployment, contract
from golem.chain.executor import Executor
from golem.chain.simulate import simulate_actions
from golem.chain.tools.build import build_calls
from golem.chain.tools.schemas import LP_SHARE_DECIMALS
from golem.chain.tools.uniswap_pool import deposit_plan
from golem.chain.tools.valuation import lp_position, lp_value_usd
from golem.models.enums import ActionStatus, BehavioralPhase
from golem.models.tick import ProposedAction
from golem.world.deploy import TxSender
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS
from tests.integration.golem_rig import golem_observation as observe

pytestmark = pytest.mark.integration

GOLEM = ANVIL_ADDRESSES[2]
THRIVING = BehavioralPhase.THRIVING


def shares(w3: Web3, world: Deployment) -> int:
    return contract(w3, world, "PAIR_WETH_USDC").functions.balanceOf(GOLEM).call()


def pair_state(w3: Web3, world: Deployment) -> tuple[int, int, int]:
    """(LP total supply, WETH reserve, USDC reserve) of the WETH/USDC pair."""
    pair = contract(w3, world, "PAIR_WETH_USDC")
    r0, r1, _ = pair.functions.getReserves().call()
    if pair.functions.token0().call() != world.address("WETH"):
        r0, r1 = r1, r0
    return pair.functions.totalSupply().call(), r0, r1


def allowances(w3: Web3, world: Deployment) -> list[int]:
    router = world.address("UNI_ROUTER")
    return [contract(w3, world, k).functions.allowance(GOLEM, router).call() for k in ("WETH", "USDC", "PAIR_WETH_USDC")]


def act(svc, w3, world, action, tick, phase=THRIVING):
    """One action through the whole write path; returns (pre-observation, simulation, validation, decision,
    record or None when refused)."""
    obs = observe(w3, world)
    sim = simulate_actions(w3, world, GOLEM, [action], obs)
    val, (decision,) = svc.validate("g1", tick, phase, [action], sim, obs)
    if not val.actions[0].approved:
        return obs, sim, val, decision, None
    executor = Executor(w3, world, Account.from_key(ANVIL_KEYS[2]), svc.journal, svc.permits)
    return obs, sim, val, decision, svc.execute(executor, "g1", tick, action, val.actions[0].permit_id, obs)


def test_add_then_remove_half_through_the_safety_service(w3: Web3, world_snapshot: Deployment, svc) -> None:
    world = world_snapshot
    price = observe(w3, world).snapshot.pool.price
    assert shares(w3, world) == 0 and lp_position(observe(w3, world).snapshot) is None
    add = ProposedAction(action_index=0, tool="add_liquidity",
                         arguments={"amount_weth": 1, "amount_usdc": round(price, 2), "max_slippage_bps": 20})
    total0, r0, r1 = pair_state(w3, world)
    obs, sim, val, dec, rec = act(svc, w3, world, add, tick=1)
    s = sim.actions[0]
    assert s.ok, s.revert_reason
    # the router deposits at the pair's ratio (taking a hair less of one side), the pair mints min(a0/r0, a1/r1)·supply
    p0, p1, short = deposit_plan(10**18, int(round(price, 2) * 10**6), r0, r1)
    assert short < 1.0
    minted = min(p0 * total0 // r0, p1 * total0 // r1)
    assert s.expected["delta:lp_shares"] == pytest.approx(minted / 10**LP_SHARE_DECIMALS, rel=1e-12)
    assert s.expected["delta:WETH"] == -p0 / 1e18 and s.expected["delta:USDC"] == pytest.approx(-p1 / 1e6)
    assert val.actions[0].approved, val.actions[0].reason
    assert dec.value_usd == pytest.approx(obs.snapshot.oracle_price + round(price, 2))
    assert rec.status is ActionStatus.EXECUTED, rec.block_reason
    assert shares(w3, world) == minted
    w3.provider.make_request("evm_mine", [])  # the 2nd confirmation
    ov = svc.verify(w3, world, "g1", 1, GOLEM, [add], sim, [rec], obs, timeout_s=3)
    assert ov.outcome.verified, (ov.outcome.actual, ov.invariant_violations)
    assert [lg.label for lg in ov.actions[0].logs] == [
        "WETH.Approval", "USDC.Approval", "WETH.Transfer", "USDC.Transfer", "PAIR_WETH_USDC.Transfer",
        "PAIR_WETH_USDC.Sync", "PAIR_WETH_USDC.Mint"]
    mint_transfer = ov.actions[0].logs[4]
    assert int(mint_transfer.args["value"]) == minted and mint_transfer.args["to"] == GOLEM
    assert allowances(w3, world) == [0, 0, 0]  # the router took exactly the planned amounts
    assert abs(ov.deviations.balance_change_bps["delta:lp_shares"]) < 0.01
    assert ov.post_state["tracked"]["delta:lp_shares"] - ov.pre_state["tracked"]["delta:lp_shares"] == pytest.approx(
        minted / 10**LP_SHARE_DECIMALS)
    assert abs(ov.outcome.pnl_impact) < 1.0  # a deposit at the pool ratio neither gains nor loses (but gas)
    assert ov.outcome.cause_variable == "pool:add_liquidity"

    # the golem now sees its pool position; a deposit in Conservation is refused, a withdrawal is not
    pos = lp_position(observe(w3, world).snapshot)
    assert pos is not None and pos.collateral == pytest.approx(minted / (total0 + minted) * (r0 + p0) / 1e18)
    _, _, val_c, _, rec_c = act(svc, w3, world, add.model_copy(update={"action_index": 0}), tick=2,
                             phase=BehavioralPhase.CONSERVATION)
    assert rec_c is None and not val_c.actions[0].approved
    assert "conservation phase blocks new positions: add_liquidity 1 WETH" in val_c.actions[0].reason

    # remove half: the pool pays out pro rata, shares halve, verified against the chain
    remove = ProposedAction(action_index=0, tool="remove_liquidity", arguments={"fraction": 0.5})
    total1, r0, r1 = pair_state(w3, world)
    obs, sim, val, dec, rec = act(svc, w3, world, remove, tick=3, phase=BehavioralPhase.CONSERVATION)
    assert rec is not None and rec.status is ActionStatus.EXECUTED, val.actions[0].reason
    weth_before, usdc_before = obs.snapshot.balances["WETH"], obs.snapshot.balances["USDC"]
    burn = minted // 2
    exp = sim.actions[0].expected
    assert exp["delta:lp_shares"] == pytest.approx(-burn / 10**LP_SHARE_DECIMALS)
    assert exp["delta:WETH"] == pytest.approx(burn * r0 // total1 / 1e18, rel=1e-12)
    assert exp["delta:USDC"] == pytest.approx(burn * r1 // total1 / 1e6, rel=1e-12)
    # the permit is sized at half the pool claim the golem observed (≈ half the $4,000 deposited)
    assert dec.value_usd == pytest.approx(0.5 * lp_value_usd(obs)) and 1_900 < dec.value_usd < 2_100
    assert shares(w3, world) == minted - burn
    post = observe(w3, world).snapshot
    assert post.balances["WETH"] - weth_before == pytest.approx(exp["delta:WETH"], abs=1e-12)
    assert post.balances["USDC"] - usdc_before == pytest.approx(exp["delta:USDC"], abs=1e-6)
    w3.provider.make_request("evm_mine", [])
    ov = svc.verify(w3, world, "g1", 3, GOLEM, [remove], sim, [rec], obs, timeout_s=3)
    assert ov.outcome.verified, (ov.outcome.actual, ov.invariant_violations)
    assert sorted(lg.label for lg in ov.actions[0].logs) == sorted([
        "PAIR_WETH_USDC.Approval", "PAIR_WETH_USDC.Transfer", "PAIR_WETH_USDC.Transfer", "WETH.Transfer",
        "USDC.Transfer", "PAIR_WETH_USDC.Sync", "PAIR_WETH_USDC.Burn"])
    assert allowances(w3, world) == [0, 0, 0]
    assert svc.audit.verify().ok


def test_fraction_above_one_is_refused_naming_the_field(w3: Web3, world_snapshot: Deployment, svc) -> None:
    world = world_snapshot
    n0 = w3.eth.get_transaction_count(GOLEM)
    bad = ProposedAction(action_index=0, tool="remove_liquidity", arguments={"fraction": 1.5})
    obs, sim, val, _, rec = act(svc, w3, world, bad, tick=1)
    assert rec is None and not val.actions[0].approved and val.actions[0].permit_id is None
    assert "invalid arguments: remove_liquidity.fraction: must be in (0, 1]" in sim.actions[0].revert_reason
    assert "remove_liquidity.fraction" in val.actions[0].reason and "got 1.5" in val.actions[0].reason
    blocked = svc.audit.entries(kind_prefix="permit.blocked")
    assert len(blocked) == 1 and "remove_liquidity.fraction" in blocked[0].payload["reason"]
    assert w3.eth.get_transaction_count(GOLEM) == n0


@pytest.mark.parametrize("cleanup", [True, False], ids=["with-revoke", "revoke-cut"])
def test_router_taking_less_than_planned_leaves_no_allowance(
    w3: Web3, world_snapshot: Deployment, svc, cleanup: bool
) -> None:
    """The pair's price moves between planning and inclusion (within the bound): the router takes less USDC
    than approved, so the planned cleanup revokes the rest; the deposit still verifies. With the revoke cut
    from the plan, the lingering-approval invariant names the router as the spender."""
    world = world_snapshot
    price = observe(w3, world).snapshot.pool.price
    add = ProposedAction(action_index=0, tool="add_liquidity",
                         arguments={"amount_weth": 1, "amount_usdc": round(price, 2), "max_slippage_bps": 50})
    obs = observe(w3, world)
    sim = simulate_actions(w3, world, GOLEM, [add], obs)
    val, _ = svc.validate("g1", 1, THRIVING, [add], sim, obs)
    assert val.actions[0].approved, val.actions[0].reason
    executor = Executor(w3, world, Account.from_key(ANVIL_KEYS[2]), svc.journal, svc.permits)
    calls = build_calls(w3, world, GOLEM, add, obs)
    if not cleanup:
        calls = [c for c in calls if not c.cleanup]
    svc.journal.record_plan("g1", 1, 0, val.actions[0].permit_id, [c.model_dump() for c in calls])
    # the trader sells 0.5 WETH into the pair: USDC per WETH falls ~0.2 %
    trader = TxSender.for_key(w3, ANVIL_KEYS[1])
    weth, router = contract(w3, world, "WETH"), contract(w3, world, "UNI_ROUTER")
    for fn in (weth.functions.approve(router.address, 5 * 10**17),
               router.functions.swapExactTokensForTokens(5 * 10**17, 0, [weth.address, world.address("USDC")],
                                                         trader.address, 2**40)):
        # explicit gas: Anvil estimates at the latest block's second; mined in the next one, the pair's
        # cumulative-price update (~45k) would run an estimated limit out of gas
        tx = fn.build_transaction({"from": trader.address, "nonce": w3.eth.get_transaction_count(trader.address),
                                   "chainId": world.chain_id, "gas": 300_000})
        assert w3.eth.wait_for_transaction_receipt(
            w3.eth.send_raw_transaction(trader.account.sign_transaction(tx).raw_transaction))["status"] == 1

    rec = svc.execute(executor, "g1", 1, add, val.actions[0].permit_id, obs)
    assert rec.status is ActionStatus.EXECUTED, rec.block_reason
    w3.provider.make_request("evm_mine", [])
    ov = svc.verify(w3, world, "g1", 1, GOLEM, [add], sim, [rec], obs, timeout_s=3)
    if not cleanup:
        left = allowances(w3, world)[1]
        assert left > 0 and ov.invariant_violations == [
            f"lingering approval: {left} USDC base units still approved to UNI_ROUTER"]
        assert not ov.outcome.verified and ov.safety_incident is not None
        return
    assert [i.label for i in svc.journal.intents_for("g1", 1, 0)] == [
        "approve_WETH", "approve_USDC", "add_liquidity", "revoke_USDC"]
    assert allowances(w3, world) == [0, 0, 0]
    assert ov.outcome.verified, (ov.outcome.actual, ov.invariant_violations)
    assert 5 < ov.deviations.balance_change_bps["delta:USDC"] < 50  # less USDC went in than simulated


def test_a_transaction_that_runs_out_of_gas_says_so(w3: Web3, world_snapshot: Deployment, svc, monkeypatch) -> None:
    """A limit below what the call needs: the record names out-of-gas and the limit, not a vague revert."""
    import golem.chain.executor as executor_mod

    monkeypatch.setattr(executor_mod, "GAS_LIMIT_MARGIN", 0.6)
    monkeypatch.setattr(executor_mod, "GAS_LIMIT_HEADROOM", 0)
    world = world_snapshot
    price = observe(w3, world).snapshot.pool.price
    add = ProposedAction(action_index=0, tool="add_liquidity",
                         arguments={"amount_weth": 1, "amount_usdc": round(price, 2), "max_slippage_bps": 20})
    *_, rec = act(svc, w3, world, add, tick=1)
    assert rec is not None and rec.status is ActionStatus.FAILED
    assert rec.block_reason is not None and "ran out of gas (used all" in rec.block_reason, rec.block_reason
    assert shares(w3, world) == 0
