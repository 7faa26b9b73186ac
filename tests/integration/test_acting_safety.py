"""Acting safely on a real Anvil, through SafetyService: the audited write path, OutcomeVerification
with decoded logs, 2-block confirmation, anvil_reorg re-marking the action, refusals recorded, and a
tampered audit trail failing verification."""

from __future__ import annotations

import sqlite3

import pytest
from eth_account import Account
from web3 import Web3

from golem.chain.contracts import Deployment, contract
from golem.chain.executor import Executor
from golem.chain.permits import PermitError, PermitStore
from golem.chain.read_tools import READ_TOOLS
from golem.chain.simulate import simulate_actions
from golem.chain.speculation import SpeculationEngine, take
from golem.chain.tools.schemas import ToolArgumentError
from golem.models.config import GolemConfig
from golem.models.enums import ActionStatus, BehavioralPhase
from golem.models.tick import ProposedAction
from cli.safety import cmd_audit
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS
from tests.integration.golem_rig import golem_observation as observe

pytestmark = pytest.mark.integration

GOLEM = ANVIL_ADDRESSES[2]
THRIVING = BehavioralPhase.THRIVING


def run_write_path(w3, world, svc, actions, tick=1):
    obs = observe(w3, world)
    sim = simulate_actions(w3, world, GOLEM, actions, obs)
    val, decisions = svc.validate("g1", tick, THRIVING, actions, sim, obs)
    return obs, sim, val, decisions


def test_audited_write_path_verification_confirmation_and_reorg(w3: Web3, world_snapshot: Deployment, svc, tmp_path):
    world = world_snapshot
    swap = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 1})
    obs, sim, val, _ = run_write_path(w3, world, svc, [swap])
    assert val.actions[0].approved, val.actions[0].reason
    executor = Executor(w3, world, Account.from_key(ANVIL_KEYS[2]), svc.journal, svc.permits)
    rec = svc.execute(executor, "g1", 1, swap, val.actions[0].permit_id, obs)
    assert rec.status is ActionStatus.EXECUTED

    w3.provider.make_request("evm_mine", [])  # the 2nd confirmation
    ov = svc.verify(w3, world, "g1", 1, GOLEM, [swap], sim, [rec], obs, timeout_s=3)
    assert ov.outcome.verified, (ov.outcome.actual, ov.invariant_violations)
    assert ov.safety_incident is None and ov.invariant_violations == []
    labels = [lg.label for lg in ov.actions[0].logs]
    assert labels == ["WETH.Approval", "WETH.Transfer", "USDC.Transfer", "PAIR_WETH_USDC.Sync", "PAIR_WETH_USDC.Swap"]
    swap_log = ov.actions[0].logs[-1]
    weth_is_0 = int(world.address("WETH"), 16) < int(world.address("USDC"), 16)
    weth_in = swap_log.args["amount0In" if weth_is_0 else "amount1In"]
    usdc_out = swap_log.args["amount1Out" if weth_is_0 else "amount0Out"]
    assert int(weth_in) == 10**18 and swap_log.args["to"] == GOLEM
    assert swap_log.args["sender"] == world.address("UNI_ROUTER")
    assert int(usdc_out) / 1e6 == pytest.approx(sim.actions[0].expected["amount_out"], rel=1e-12)
    assert ov.deviations.missing_expected_logs == [] and ov.deviations.unexpected_logs == []
    assert abs(ov.deviations.balance_change_bps["delta:USDC"]) < 0.01
    # Simulated at the next second, the swap pays the pair's cumulative-price update (~45k gas); mined in the
    # same second as the block before it (Anvil automines fast), it does not: used may be up to ~30 % under.
    assert ov.prediction["expected_gas"] > 0 and -3_000 < ov.deviations.gas_deviation_bps < 500
    assert ov.pre_state["balances"]["WETH"] - ov.post_state["balances"]["WETH"] == pytest.approx(1.0)

    # first poll: 2 blocks on the swap → confirmed
    report = svc.confirm(w3, "g1")
    assert [a.tick for a in report.newly_confirmed] == [1] and not report.force_t2 and report.depth == 2
    # the chain drops the last 3 blocks (approve, swap, the extra one) and mines replacements
    assert "error" not in w3.provider.make_request("anvil_reorg", [3, []])
    report = svc.confirm(w3, "g1")
    assert report.force_t2 and report.reorged_ticks == [1]
    assert "no longer on chain" in report.reorged[0].detail
    assert svc.confirmations.get("g1", 1, 0).status.value == "reorged"

    kinds = [e.kind for e in svc.audit.entries()]
    for k in ("tool_call.allowed", "permit.created", "permit.committed", "tx.executed", "outcome.verified",
              "action.confirmed", "action.reorged", "chain.reorg"):
        assert k in kinds, (k, kinds)
    assert svc.audit.verify().ok
    assert ANVIL_KEYS[2][2:].lower() not in (tmp_path / "audit.sqlite").read_bytes().decode("latin-1").lower()

    # a tampered audit trail fails verification, and `golem audit verify` says so
    class Args:
        data, action, n, kind = str(tmp_path), "verify", 20, None

    assert cmd_audit(Args) == 0
    with sqlite3.connect(tmp_path / "audit.sqlite") as db:
        db.execute("UPDATE audit_log SET payload = replace(payload, 'swap', 'repay') WHERE kind = 'permit.committed'")
    assert not svc.audit.verify().ok and cmd_audit(Args) == 1


def test_refusals_are_blocked_and_recorded(w3: Web3, world_snapshot: Deployment, svc):
    world = world_snapshot
    actions = [
        # an LLM asking for an unapproved asset (DAI) — refused by the PolicyCage
        ProposedAction(action_index=0, tool="swap", arguments={"token_in": "USDC", "token_out": "DAI", "amount_in": 50},
                       rationale="LLM: diversify into DAI"),
        # a reverting simulation: a floor no pool quote can meet
        ProposedAction(action_index=1, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 1,
                                                               "min_amount_out": 1_000_000}),
        # oversize (validated here without a re-simulation)
        ProposedAction(action_index=2, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 5}),
        ProposedAction(action_index=3, tool="repay", arguments={"amount": 10}),  # fine
    ]
    n0 = w3.eth.get_transaction_count(GOLEM)
    obs, sim, val, decisions = run_write_path(w3, world, svc, actions)
    assert [a.approved for a in val.actions] == [False, False, False, True]
    assert "DAI is not in approved_assets" in val.actions[0].reason
    assert val.actions[1].reason == "simulation failed: UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT"
    # oversize: the cage clips it to max_trade_size_usd, but a clip must be simulated again at its size first
    assert "size to fit: clipped but not simulated again" in val.actions[2].reason
    kinds = [(e.kind, e.payload.get("action_index")) for e in svc.audit.entries()]
    assert ("simulation.reverted", 1) in kinds and ("permit.blocked", 0) in kinds and ("permit.blocked", 1) in kinds
    blocked = [e for e in svc.audit.entries(kind_prefix="permit.blocked") if e.payload["action_index"] == 1][0]
    assert blocked.payload["reason"] == "simulation failed: UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT"

    # no permit → nothing can be executed; a reused permit and an expired one are refused and audited
    executor = Executor(w3, world, Account.from_key(ANVIL_KEYS[2]), svc.journal, svc.permits)
    with pytest.raises(PermitError):
        svc.execute(executor, "g1", 1, actions[0], "permit-forged", obs)
    good = val.actions[3].permit_id
    assert svc.execute(executor, "g1", 1, actions[3], good, obs).status is ActionStatus.EXECUTED
    with pytest.raises(PermitError, match="issued for golem g1 tick 1 action 3, not golem g1 tick 2"):
        svc.execute(executor, "g1", 2, actions[3], good, obs)  # the same permit for another tick
    clock = [0.0]
    expiring = PermitStore(svc.permits.path, clock=lambda: clock[0])
    p = expiring.issue("g1", 3, 0, "repay", 10.0, svc.cage.policy_hash(), ttl_s=1)
    clock[0] = 5.0
    stale = Executor(w3, world, Account.from_key(ANVIL_KEYS[2]), svc.journal, expiring)
    with pytest.raises(PermitError, match="expired"):
        svc.execute(stale, "g1", 3, ProposedAction(action_index=0, tool="repay", arguments={"amount": 10}), p.id, obs)
    refused = svc.audit.entries(kind_prefix="permit.refused")
    assert len(refused) == 3 and "expired" in refused[-1].payload["reason"]
    assert w3.eth.get_transaction_count(GOLEM) == n0 + 2  # approve + repay of the one permitted action
    assert svc.audit.verify().ok


def test_read_tools_and_speculation_on_chain(w3: Web3, world: Deployment, tmp_path):
    bal = READ_TOOLS["get_balances"](w3, world, GOLEM)
    assert bal["balances"]["WETH"] > 0
    q = READ_TOOLS["quote_swap"](w3, world, GOLEM, {"token_in": "WETH", "amount_in": 1})
    assert 1500 < q["amount_out"] < 2500 and q["path"] == ["WETH", "USDC"]
    q2 = READ_TOOLS["quote_swap"](w3, world, GOLEM, {"token_in": "USDC", "token_out": "DAI", "amount_in": 100})
    assert q2["path"] == ["USDC", "WETH", "DAI"] and 99 < q2["amount_out"] < 100
    with pytest.raises(ToolArgumentError, match="quote_swap.token_out: must differ"):
        READ_TOOLS["quote_swap"](w3, world, GOLEM, {"token_in": "DAI", "token_out": "dai", "amount_in": 1})
    # the oracle read is the Chainlink-style WETH feed's latest round and Aave's price for WETH
    feed = contract(w3, world, "FEED_WETH").functions.latestRoundData().call()
    o = READ_TOOLS["get_oracle_price"](w3, world, GOLEM)
    assert o["price"] == feed[1] / 1e8 and o["round_id"] == feed[0] and o["updated_at"] == feed[3]
    assert o["aave_oracle_price"] == o["price"] and o["heartbeat_s"] == 3600 and o["age_s"] >= 0
    eng = SpeculationEngine(tmp_path / "spec.sqlite")
    for _ in range(15):
        eng.record_sequence(["get_position", "get_gas_price"])
    futures = eng.speculate("get_position", w3, world, GOLEM)
    assert set(futures) == {"get_gas_price"} and take(futures, "get_gas_price")["gas_price_gwei"] > 0


def test_strategy_dry_run_on_chain(w3: Web3, world: Deployment):
    from pathlib import Path

    from golem.safety.limits import SafetyLimits
    from golem.safety.strategy_check import STRATEGY_UNVIABLE, validate_strategy

    limits = SafetyLimits.from_config(GolemConfig())
    obs = observe(w3, world)

    def simulate(actions, o):
        return simulate_actions(w3, world, GOLEM, actions, o)

    text = (Path(__file__).resolve().parents[2] / "examples/golem-home/STRATEGY.md").read_text()
    ok = validate_strategy(text, limits, observation=obs, simulate=simulate)
    assert ok.viable and len(ok.dry_run) == 5 and all(d["ok"] for d in ok.dry_run), ok.explanation()
    # withdrawing all collateral under 8,000 USDC of debt: Aave refuses (error 35), nothing can work today
    wide = SafetyLimits(policy=limits.policy.model_copy(update={"max_trade_size_usd": 1e6}))
    bad = validate_strategy("## Rules\n- WHEN health_factor > 1.5 THEN withdraw 100% collateral\n"
                            "## Constraints\n- MUST keep health_factor >= 1.2\n", wide, observation=obs, simulate=simulate)
    assert bad.status == STRATEGY_UNVIABLE
    assert "HEALTH_FACTOR_LOWER_THAN_LIQUIDATION_THRESHOLD" in bad.dry_run[0]["reason"]


def test_a_foreign_event_is_an_invariant_violation(w3: Web3, world_snapshot: Deployment, svc):
    """The receipts of a Router02 swap checked as if the action had been an Aave supply: the pair's Swap and
    Sync and the USDC transfer are foreign to a supply, and the Pool's Supply is missing."""
    world = world_snapshot
    swap = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC", "amount_in": 1})
    obs, sim, val, _ = run_write_path(w3, world, svc, [swap])
    executor = Executor(w3, world, Account.from_key(ANVIL_KEYS[2]), svc.journal, svc.permits)
    rec = svc.execute(executor, "g1", 1, swap, val.actions[0].permit_id, obs)
    w3.provider.make_request("evm_mine", [])
    supply = ProposedAction(action_index=0, tool="supply", arguments={"amount": 1})
    ov = svc.verify(w3, world, "g1", 1, GOLEM, [supply], sim, [rec], obs, timeout_s=3)
    assert not ov.outcome.verified and ov.safety_incident is not None
    assert {lg.label for lg in ov.deviations.unexpected_logs} == {
        "USDC.Transfer", "PAIR_WETH_USDC.Sync", "PAIR_WETH_USDC.Swap"}
    assert ov.deviations.missing_expected_logs == ["AAVE_POOL.Supply", "A_WETH.Transfer"]
    assert any("unexpected log PAIR_WETH_USDC.Swap" in v for v in ov.invariant_violations)
    # the same receipts checked against a book whose router is elsewhere: the tx called a contract outside it
    moved = world.model_copy(update={"addresses": {**world.addresses, "UNI_ROUTER": ANVIL_ADDRESSES[3]}})
    ov = svc.verify(w3, moved, "g1", 1, GOLEM, [swap], sim, [rec], obs, timeout_s=3)
    assert f"tx {rec.tx_hash} called {world.address('UNI_ROUTER')}, a contract outside the deployment" in (
        ov.invariant_violations)
