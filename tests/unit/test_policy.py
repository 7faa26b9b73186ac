"""PolicyCage and tool-argument validation (pure: no chain)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golem.chain.tools.arguments import action_tokens, parse_arguments, to_base_units
from golem.chain.tools.schemas import TOOL_SCHEMAS, ToolArgumentError
from golem.chain.tools.valuation import action_value_usd
from golem.models.config import PolicySection
from golem.models.enums import BehavioralPhase
from golem.models.observation import ChainSnapshot, Observation, PoolState
from golem.models.tick import ProposedAction
from golem.safety.policy import PolicyCage, opens_exposure


def observation(oracle_price: float = 2000.0) -> Observation:
    pool = PoolState(
        address="0x0000000000000000000000000000000000000001",
        token0="WETH",
        token1="USDC",
        reserve0=500.0,
        reserve1=1_000_000.0,
        price=2000.0,
        tvl=2_000_000.0,
    )
    snap = ChainSnapshot(
        chain_id=31337, block_number=10, block_timestamp=0, gas_price_gwei=1.0, pool=pool, oracle_price=oracle_price
    )
    return Observation(snapshot=snap)


def swap(amount_in=1, token_in="WETH", token_out="USDC", idx=0, **extra) -> ProposedAction:
    return ProposedAction(
        action_index=idx,
        tool="swap",
        arguments={"token_in": token_in, "token_out": token_out, "amount_in": amount_in, **extra},
    )


CAGE = PolicyCage(PolicySection(approved_assets=["WETH", "USDC"], max_trade_size_usd=5_000, max_slippage_bps=100))
OBS = observation()


# ── tool arguments ───────────────────────────────────────────────────────────────────────────


def test_schemas_cover_every_write_tool():
    assert set(TOOL_SCHEMAS) == {"swap", "supply", "withdraw", "borrow", "repay", "add_liquidity", "remove_liquidity"}
    for name, schema in TOOL_SCHEMAS.items():
        assert schema["name"] == name
        assert schema["input_schema"]["additionalProperties"] is False
        assert schema["input_schema"]["required"]


@pytest.mark.parametrize(
    "tool,args,needle",
    [
        ("swap", {"token_in": "WETH", "token_out": "USDC"}, "amount_in"),
        ("swap", {"token_in": "WETH", "token_out": "USDC", "amount_in": -1}, "swap.amount_in"),
        ("swap", {"token_in": "WETH", "token_out": "USDC", "amount_in": "abc"}, "swap.amount_in"),
        ("swap", {"token_in": "WETH", "token_out": "USDC", "amount_in": float("nan")}, "swap.amount_in"),
        ("swap", {"token_in": "WETH", "token_out": "USDC", "amount_in": True}, "swap.amount_in"),
        ("swap", {"token_in": "PEPE", "token_out": "USDC", "amount_in": 1}, "swap.token_in"),
        ("swap", {"token_in": "WETH", "token_out": "WETH", "amount_in": 1}, "swap.token_out"),
        ("swap", {"token_in": "WETH", "token_out": "USDC", "amount_in": 1, "max_slippage_bps": 20_000}, "max_slippage_bps"),
        ("swap", {"token_in": "WETH", "token_out": "USDC", "amount_in": 1, "to": "0xabc"}, "to"),
        ("supply", {}, "amount"),
        ("borrow", {"amount": 0}, "borrow.amount"),
        ("teleport", {"amount": 1}, "unknown tool"),
    ],
)
def test_bad_arguments_name_the_argument(tool, args, needle):
    with pytest.raises(ToolArgumentError, match=needle):
        parse_arguments(tool, args)


def test_arguments_are_normalised():
    args = parse_arguments("swap", {"token_in": "weth", "token_out": "usdc", "amount_in": "1.5"})
    assert args["token_in"] == "WETH" and args["token_out"] == "USDC"
    assert str(args["amount_in"]) == "1.5"
    assert args["max_slippage_bps"] == 50.0  # the default bound is explicit


def test_base_units_round_down_and_refuse_dust():
    from decimal import Decimal

    assert to_base_units(Decimal("1.2345678"), "USDC") == 1_234_567
    assert to_base_units(Decimal("1"), "WETH") == 10**18
    with pytest.raises(ToolArgumentError, match="smallest unit"):
        to_base_units(Decimal("0.0000001"), "USDC")


def test_action_value_and_tokens():
    assert action_value_usd(swap(1.5), OBS) == pytest.approx(3000.0)
    assert action_value_usd(swap(300, "USDC", "WETH"), OBS) == pytest.approx(300.0)
    assert action_value_usd(ProposedAction(action_index=0, tool="supply", arguments={"amount": 2}), OBS) == 4000.0
    assert action_value_usd(ProposedAction(action_index=0, tool="repay", arguments={"amount": 250}), OBS) == 250.0
    assert action_tokens(ProposedAction(action_index=0, tool="borrow", arguments={"amount": 1})) == ["USDC"]


# ── the cage ─────────────────────────────────────────────────────────────────────────────────


def test_swap_within_limits_passes():
    v = CAGE.check(swap(1), OBS, BehavioralPhase.THRIVING)
    assert v.ok, v.reason


def test_unapproved_asset_dai_refused():
    v = CAGE.check(swap(100, "DAI", "USDC"), OBS, BehavioralPhase.THRIVING)
    assert not v.ok
    assert "DAI" in v.reason and "approved_assets" in v.reason and "WETH" in v.reason


def test_trade_size_reason_has_numbers():
    v = CAGE.check(swap(3), OBS, BehavioralPhase.THRIVING)  # 3 WETH × $2000 = $6000
    assert not v.ok
    assert "$6,000.00" in v.reason and "$5,000.00" in v.reason and "max_trade_size_usd" in v.reason


def test_trade_size_uses_oracle_price():
    assert CAGE.check(swap(3), observation(oracle_price=1000.0), BehavioralPhase.THRIVING).ok


def test_slippage_limit_reason_has_numbers():
    v = CAGE.check(swap(1, max_slippage_bps=250), OBS, BehavioralPhase.THRIVING)
    assert not v.ok
    assert "250" in v.reason and "100" in v.reason and "slippage" in v.reason


def test_unknown_tool_refused():
    v = CAGE.check(ProposedAction(action_index=0, tool="transfer", arguments={"amount": 1}), OBS, BehavioralPhase.THRIVING)
    assert not v.ok and "unknown tool 'transfer'" in v.reason


def test_invalid_arguments_refused_with_argument_name():
    v = CAGE.check(swap(-2), OBS, BehavioralPhase.THRIVING)
    assert not v.ok and "swap.amount_in" in v.reason


@pytest.mark.parametrize("phase", [BehavioralPhase.CONSERVATION, BehavioralPhase.DECLINING, BehavioralPhase.TERMINAL])
def test_restricted_phases_block_new_positions(phase):
    supply = ProposedAction(action_index=0, tool="supply", arguments={"amount": 1})
    borrow = ProposedAction(action_index=0, tool="borrow", arguments={"amount": 100})
    buy_weth = swap(500, "USDC", "WETH")
    for action in (supply, borrow, buy_weth):
        v = CAGE.check(action, OBS, phase)
        assert not v.ok and phase.value in v.reason and "new positions" in v.reason
    # De-risking stays allowed: sell WETH for USDC, repay, withdraw.
    for action in (
        swap(1),
        ProposedAction(action_index=0, tool="repay", arguments={"amount": 100}),
        ProposedAction(action_index=0, tool="withdraw", arguments={"amount": 1}),
    ):
        assert CAGE.check(action, OBS, phase).ok


@pytest.mark.parametrize("phase", [BehavioralPhase.THRIVING, BehavioralPhase.STABLE])
def test_healthy_phases_may_open_positions(phase):
    assert CAGE.check(ProposedAction(action_index=0, tool="supply", arguments={"amount": 1}), OBS, phase).ok
    assert CAGE.check(swap(500, "USDC", "WETH"), OBS, phase).ok


def test_opens_exposure():
    assert opens_exposure(swap(1, "USDC", "WETH"))
    assert not opens_exposure(swap(1, "WETH", "USDC"))


@given(amount=st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False))
def test_value_limit_is_the_boundary(amount):
    """Whatever the size, the verdict is exactly `value <= max_trade_size_usd`."""
    v = CAGE.check(swap(amount, "USDC", "WETH"), OBS, BehavioralPhase.THRIVING)
    assert v.ok == (amount <= 5_000)


def test_policy_hash_is_canonical_sha256():
    a = PolicyCage(PolicySection(approved_assets=["WETH", "USDC"], max_trade_size_usd=5_000, max_slippage_bps=100))
    b = PolicyCage(PolicySection(max_slippage_bps=100, max_trade_size_usd=5_000.0, approved_assets=["WETH", "USDC"]))
    c = PolicyCage(PolicySection(approved_assets=["WETH", "USDC"], max_trade_size_usd=5_001, max_slippage_bps=100))
    assert a.policy_hash() == b.policy_hash() != c.policy_hash()
    expected = hashlib.sha256(
        json.dumps(
            {"approved_assets": ["WETH", "USDC"], "max_slippage_bps": 100.0, "max_trade_size_usd": 5000.0},
            sort_keys=True,
            separators=(",", ":"),
        ).encode()
    ).hexdigest()
    assert a.policy_hash() == expected  # the keys added later are left out at their defaults ...
    d = PolicyCage(PolicySection(approved_assets=["WETH", "USDC"], max_trade_size_usd=5_000, max_slippage_bps=100,
                                 max_price_impact_bps=200))
    assert d.policy_hash() != a.policy_hash()  # ... and hashed once set
