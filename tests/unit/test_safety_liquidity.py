"""add_liquidity / remove_liquidity without a chain: argument validation, the deposit-ratio bound,
value, exposure and phase rules, the tool_call layers, the book, NAV, expected logs and the LLM's
tool list."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golem.chain.outcome import expected_log_labels
from golem.chain.tools.arguments import action_tokens, parse_arguments
from golem.chain.tools.schemas import DEFAULT_MAX_SLIPPAGE_BPS, LP_POSITION_KIND, TOOL_SCHEMAS, ToolArgumentError
from golem.chain.tools.uniswap_pool import deposit_plan
from golem.chain.tools.valuation import action_value_usd, lp_value_usd, slippage_bps_of
from golem.chain.verify import _usd
from golem.inference.decision import decision_tools
from golem.models.config import PolicySection
from golem.models.enums import BehavioralPhase
from golem.models.observation import ChainSnapshot, Observation, PoolState, PositionState
from golem.models.tick import ProposedAction, SimulatedAction
from golem.safety.cage import SafetyCage, ValidationContext
from golem.safety.constraints import Book
from golem.safety.limits import SafetyLimits
from golem.safety.policy import RESTRICTED_PHASES, PolicyCage, opens_exposure
from golem.safety.risk import net_value_usd

CAGE = PolicyCage(PolicySection(approved_assets=["WETH", "USDC"], max_trade_size_usd=5_000, max_slippage_bps=100))


def obs(*, lp_weth: float | None = None, oracle: float = 2000.0, pool_price: float = 2000.0) -> Observation:
    pool = PoolState(address="0x" + "01" * 20, token0="WETH", token1="USDC", reserve0=500.0,
                     reserve1=500.0 * pool_price, price=pool_price, tvl=1e6)
    positions = [PositionState(id="lending:x", collateral=10.0, debt=8000.0, health_factor=2.0)]
    if lp_weth is not None:
        positions.append(PositionState(id="lp:" + "0x" + "01" * 20, kind=LP_POSITION_KIND, collateral=lp_weth))
    snap = ChainSnapshot(chain_id=31337, block_number=100, block_timestamp=0, gas_price_gwei=1.0, pool=pool,
                         oracle_price=oracle, balances={"WETH": 20.0, "USDC": 20_000.0}, positions=positions)
    return Observation(snapshot=snap)


def add(weth=1, usdc=2000, idx=0, **kw) -> ProposedAction:
    return ProposedAction(action_index=idx, tool="add_liquidity",
                          arguments={"amount_weth": weth, "amount_usdc": usdc, **kw})


def remove(fraction=0.5, idx=0) -> ProposedAction:
    return ProposedAction(action_index=idx, tool="remove_liquidity", arguments={"fraction": fraction})


# ── arguments ────────────────────────────────────────────────────────────────────────────────


def test_schemas_are_well_formed_for_the_llm():
    a, r = TOOL_SCHEMAS["add_liquidity"]["input_schema"], TOOL_SCHEMAS["remove_liquidity"]["input_schema"]
    assert a["required"] == ["amount_weth", "amount_usdc"] and set(a["properties"]) == {
        "amount_weth", "amount_usdc", "max_slippage_bps"}
    assert r["required"] == ["fraction"] and r["properties"]["fraction"]["maximum"] == 1
    assert r["properties"]["fraction"]["exclusiveMinimum"] == 0
    assert a["additionalProperties"] is False and r["additionalProperties"] is False


def test_parse_normalises_and_defaults():
    p = parse_arguments("add_liquidity", {"amount_weth": "1.5", "amount_usdc": 3000})
    assert p == {"amount_weth": Decimal("1.5"), "amount_usdc": Decimal("3000"),
                 "max_slippage_bps": DEFAULT_MAX_SLIPPAGE_BPS}
    assert parse_arguments("remove_liquidity", {"fraction": 1}) == {"fraction": Decimal("1")}
    assert slippage_bps_of(add(max_slippage_bps=20)) == 20.0 and slippage_bps_of(remove()) is None


@pytest.mark.parametrize(
    "tool,args,needle",
    [
        ("remove_liquidity", {"fraction": 1.5}, "remove_liquidity.fraction: must be in (0, 1]"),
        ("remove_liquidity", {"fraction": 0}, "remove_liquidity.fraction: must be in (0, 1]"),
        ("remove_liquidity", {"fraction": -0.1}, "remove_liquidity.fraction"),
        ("remove_liquidity", {"fraction": "half"}, "remove_liquidity.fraction: 'half' is not a number"),
        ("remove_liquidity", {"fraction": True}, "remove_liquidity.fraction"),
        ("remove_liquidity", {"fraction": float("nan")}, "remove_liquidity.fraction"),
        ("remove_liquidity", {}, "missing required argument(s) fraction"),
        ("remove_liquidity", {"fraction": 0.5, "shares": 10}, "unexpected argument(s) shares"),
        ("add_liquidity", {"amount_weth": 1}, "missing required argument(s) amount_usdc"),
        ("add_liquidity", {"amount_weth": 0, "amount_usdc": 5}, "add_liquidity.amount_weth"),
        ("add_liquidity", {"amount_weth": 1, "amount_usdc": -5}, "add_liquidity.amount_usdc"),
        ("add_liquidity", {"amount_weth": 1, "amount_usdc": 5, "max_slippage_bps": 20_000},
         "add_liquidity.max_slippage_bps: must be between 0 and 10000"),
        ("add_liquidity", {"amount_weth": 1, "amount_usdc": 5, "max_slippage_bps": "tight"},
         "add_liquidity.max_slippage_bps"),
    ],
)
def test_bad_arguments_name_the_field(tool, args, needle):
    with pytest.raises(ToolArgumentError) as e:
        parse_arguments(tool, args)
    assert needle in str(e.value)


@given(st.floats(min_value=1e-6, max_value=1.0))
def test_every_fraction_in_range_parses(f):
    assert 0 < parse_arguments("remove_liquidity", {"fraction": f})["fraction"] <= 1


@given(st.floats(min_value=1.0, allow_infinity=False, allow_nan=False).filter(lambda x: x > 1.0))
def test_every_fraction_above_one_is_refused(f):
    with pytest.raises(ToolArgumentError, match="remove_liquidity.fraction"):
        parse_arguments("remove_liquidity", {"fraction": f})


# ── the deposit-ratio bound (Router02.addLiquidity's own rule) ──────────────────────────────

_RES = st.integers(min_value=10**6, max_value=10**30)
_AMT = st.integers(min_value=1, max_value=10**24)


@given(_RES, _RES, _AMT, _AMT)
def test_the_plan_is_what_the_router_takes_and_never_more_than_given(r0, r1, a0, a1):
    p0, p1, short = deposit_plan(a0, a1, r0, r1)
    assert 0 <= p0 <= a0 and 0 <= p1 <= a1 and 0.0 <= short <= 10_000.0
    # UniswapV2Router02._addLiquidity on the planned amounts: bOptimal = quote(p0) fits → (p0, bOptimal)
    b_opt = p0 * r1 // r0
    assert b_opt <= p1 and b_opt == p1  # the router takes exactly the plan: exact approvals are used up
    # one side is taken in full, the shortfall is measured on the other
    assert p0 == a0 or short == pytest.approx((a0 - p0) / a0 * 1e4)
    assert p0 != a0 or short == pytest.approx((a1 - p1) / a1 * 1e4)


@given(_RES, _RES, st.integers(min_value=10**12, max_value=10**24))
def test_no_shortfall_at_the_pool_ratio(r0, r1, a0):
    a1 = a0 * r1 // r0
    if a1 < 10**6:
        return
    assert deposit_plan(a0, a1, r0, r1) == (a0, a1, 0.0)


def test_shortfall_is_what_the_router_would_not_take():
    # 1 WETH + 1000 USDC into a 2000 USDC/WETH pool: the router takes 0.5 WETH → 5000 bps short on WETH
    assert deposit_plan(10**18, 1000 * 10**6, 500 * 10**18, 1_000_000 * 10**6) == (
        5 * 10**17, 1000 * 10**6, pytest.approx(5000.0))
    # 1 WETH + 2100 USDC: 2000 USDC taken, 100 short of 2100 → 476.2 bps
    p0, p1, short = deposit_plan(10**18, 2100 * 10**6, 500 * 10**18, 1_000_000 * 10**6)
    assert (p0, p1) == (10**18, 2000 * 10**6) and short == pytest.approx(476.19, abs=0.01)
    assert deposit_plan(10**18, 2000 * 10**6, 0, 0) == (10**18, 2000 * 10**6, 0.0)  # an empty pair: as given


# ── value, exposure, policy ──────────────────────────────────────────────────────────────────


def test_value_tokens_and_exposure():
    assert action_value_usd(add(1, 2000), obs()) == 4000.0
    assert action_value_usd(add(1, 2000), obs(oracle=1900.0)) == 3900.0  # WETH at the oracle
    o = obs(lp_weth=2.0)  # claim 2 WETH + 4000 USDC = $8000
    assert lp_value_usd(o) == 8000.0 and action_value_usd(remove(0.25), o) == 2000.0
    assert action_value_usd(remove(1), obs()) == 0.0  # no position, nothing to take out
    assert action_tokens(add()) == action_tokens(remove()) == ["WETH", "USDC"]
    assert opens_exposure(add()) and not opens_exposure(remove())


@pytest.mark.parametrize("phase", sorted(RESTRICTED_PHASES, key=lambda p: p.value))
def test_restricted_phases_block_deposits_not_withdrawals(phase):
    v = CAGE.check(add(), obs(lp_weth=1.0), phase)
    assert not v.ok and f"{phase.value} phase blocks new positions: add_liquidity 1 WETH + 2000 USDC" in v.reason
    assert CAGE.check(remove(), obs(lp_weth=1.0), phase).ok
    assert CAGE.check(add(), obs(), BehavioralPhase.THRIVING).ok


def test_policy_limits_apply_to_liquidity():
    thriving = BehavioralPhase.THRIVING
    v = CAGE.check(add(2, 4000), obs(), thriving)
    assert not v.ok and "$8,000.00 exceeds max_trade_size_usd $5,000.00" in v.reason
    v = CAGE.check(remove(1), obs(lp_weth=2.0), thriving)  # $8,000 out of the pool at once
    assert not v.ok and "exceeds max_trade_size_usd" in v.reason
    v = CAGE.check(add(max_slippage_bps=500), obs(), thriving)
    assert not v.ok and "max_slippage_bps 500 exceeds the policy limit of 100 bps" in v.reason
    usdc_only = PolicyCage(PolicySection(approved_assets=["USDC", "DAI"]))
    for action in (add(), remove()):
        v = usdc_only.check(action, obs(lp_weth=1.0), thriving)
        assert not v.ok and "asset WETH is not in approved_assets" in v.reason


def test_tool_call_layers_on_a_deposit():
    cage = SafetyCage(SafetyLimits(policy=PolicySection(), kill_switch_path="/nonexistent/killswitch"))
    exp = {"delta:WETH": -1.0, "delta:USDC": -2000.0, "delta:lp_shares": 44.7}
    sim = SimulatedAction(action_index=0, ok=True, gas_estimate=150_000, expected=exp)

    def ctx(o, phase=BehavioralPhase.THRIVING):
        return ValidationContext(golem_id="g", tick=1, phase=phase, observation=o)

    before = Book.of(obs().snapshot)
    d, after = cage.tool_call(add(), ctx(obs()), sim, before)
    assert d.allowed and d.value_usd == 4000.0, d.reason
    assert after.lp_shares_delta == 44.7 and after.balances["WETH"] == 19.0 and "LP_SHARES" not in after.balances
    # the pool 10% off the oracle: a deposit would be priced by a possibly manipulated pool
    d, _ = cage.tool_call(add(), ctx(obs(pool_price=2200.0)), sim, before)
    assert not d.allowed and d.blocked_by == "risk" and "deviates 1000 bps from the oracle" in d.reason
    d, _ = cage.tool_call(remove(1.5), ctx(obs(lp_weth=1.0)), None, before)
    assert not d.allowed and d.blocked_by == "safety" and "remove_liquidity.fraction" in d.reason


def test_nav_counts_the_pool_claim():
    assert net_value_usd(obs(lp_weth=1.0).snapshot) - net_value_usd(obs().snapshot) == 4000.0


def test_verification_prices_shares_and_expects_pool_logs():
    assert _usd("delta:lp_shares", 2000.0, 89.4) == 89.4 and _usd("delta:WETH", 2000.0, 89.4) == 2000.0
    assert expected_log_labels(add(), ["approve_WETH", "approve_USDC", "add_liquidity"]) == [
        "WETH.Approval", "USDC.Approval", "WETH.Transfer", "USDC.Transfer", "PAIR_WETH_USDC.Transfer",
        "PAIR_WETH_USDC.Sync", "PAIR_WETH_USDC.Mint"]
    # the LP token approved to the router, sent to the pair and burned; a revoke emits its own Approval
    assert expected_log_labels(remove(), ["approve_PAIR_WETH_USDC", "remove_liquidity", "revoke_PAIR_WETH_USDC"]) == [
        "PAIR_WETH_USDC.Approval", "PAIR_WETH_USDC.Approval", "PAIR_WETH_USDC.Transfer", "PAIR_WETH_USDC.Transfer",
        "WETH.Transfer", "USDC.Transfer", "PAIR_WETH_USDC.Sync", "PAIR_WETH_USDC.Burn"]


def test_the_llm_sees_the_liquidity_tools():
    names = [t["name"] for t in decision_tools(["WETH", "USDC"])]
    assert "add_liquidity" in names and "remove_liquidity" in names


def test_fallback_liquidation_threshold_is_the_embedded_worlds_weth_reserve():
    from golem.safety.constraints import FALLBACK_LIQUIDATION_THRESHOLD
    from golem.world.deploy import LIQUIDATION_THRESHOLD, RESERVES

    assert FALLBACK_LIQUIDATION_THRESHOLD == LIQUIDATION_THRESHOLD == RESERVES["WETH"].lt / 10_000
