"""Size to fit (golem.safety.sizing through the cage): the clipped size satisfies every limit the cage checks, and
is the largest that does; a clip below the minimum worth doing is refused; the permit is bound to the clipped size."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.chain.permits import PermitStore
from golem.inference.strategy import parse_strategy
from golem.models.config import PolicySection
from golem.models.tick import SimulationResult
from golem.safety.audit import AuditLog
from golem.safety.cage import SafetyCage, size_to_fit, validate_layered
from golem.safety.constraints import Book
from golem.safety.limits import SafetyLimits
from golem.safety.sizing import SizeCap, fit, impact_cap_amount, price_impact
from tests.unit.test_safety_cage import act, ctx, obs, sim_for, swap

STRATEGY = parse_strategy("# S\n## Rules\n## Constraints\n- MUST NOT swap more than 30% WETH\n- MUST keep balance.USDC >= 500\n"
                          "- MUST keep health_factor >= 1.3\n")


def cage(**policy) -> SafetyCage:
    base = dict(approved_assets=["WETH", "USDC"], max_trade_size_usd=5_000, max_slippage_bps=100)
    return SafetyCage(SafetyLimits(policy=PolicySection(**{**base, **policy}), kill_switch_path="/nonexistent/k"))


def allowed(c: SafetyCage, action, context) -> tuple[bool, str]:
    d, _ = c.tool_call(action, context, sim_for(action), Book.of(context.observation.snapshot))
    return d.allowed, d.reason


@settings(max_examples=120, deadline=None)
@given(amount=st.floats(0.01, 60.0), max_trade=st.floats(500.0, 50_000.0), weth=st.floats(0.5, 40.0),
       price=st.floats(800.0, 4000.0), impact_bps=st.floats(40.0, 500.0), tool=st.sampled_from(["swap", "withdraw",
                                                                                             "borrow", "repay"]))
def test_the_clipped_size_passes_every_limit_and_is_the_largest_that_does(amount, max_trade, weth, price, impact_bps,
                                                                         tool):
    c = cage(max_trade_size_usd=max_trade, max_price_impact_bps=impact_bps, min_trade_usd=0.0,
             min_trade_gas_multiple=0.0)
    o = obs(weth=weth, oracle=price, pool_price=price)
    context = ctx(o, strategy=STRATEGY)
    action = swap(round(amount, 6)) if tool == "swap" else act(tool, round(amount * (price if tool in ("borrow", "repay")
                                                                                     else 1.0), 6))
    caps, _ = c.size_caps(action, context, Book.of(o.snapshot))
    f = fit(action, caps, 0.0)
    if not f.clipped:
        if f.action is not None:  # nothing binds: the cage takes it as proposed (unless a non-size rule refuses it)
            ok, why = allowed(c, action, context)
            assert ok or "size" not in why, why
        return
    assert f.action is not None
    ok, why = allowed(c, f.action, context)
    assert ok, (f.binding, why)
    # maximal: a little more (one step above the floor of 6 decimals, and 0.1 % more) breaks a limit
    bigger = f.amount * 1.001 + 2e-6
    from golem.safety.sizing import with_amount
    ok, _ = allowed(c, with_amount(action, bigger), context)
    assert not ok


@settings(max_examples=200, deadline=None)
@given(proposed=st.floats(0.001, 1e6), caps=st.lists(st.floats(0.0, 1e6), max_size=6), minimum=st.floats(0, 1e3))
def test_fit_takes_the_smallest_cap_and_refuses_only_below_the_minimum(proposed, caps, minimum):
    action = act("repay", round(proposed, 6))
    p = float(action.arguments["amount"])
    cs = [SizeCap(limit=f"c{i}", layer="safety", max_amount=m, why=f"cap {i}") for i, m in enumerate(caps)]
    f = fit(action, cs, minimum)
    smallest = min(caps, default=float("inf"))
    if smallest >= p:
        assert f.action == action and not f.clipped
    elif f.action is None:
        assert f.refusal and (f.amount < minimum or f.amount <= 0)
    else:
        assert f.clipped and f.amount <= smallest and f.amount > smallest - 1e-6 and f.amount >= minimum
        assert f.binding is not None and f.binding.max_amount == smallest


def test_price_impact_inverse():
    for bps in (31.0, 50.0, 300.0, 1000.0):
        a = impact_cap_amount(bps / 1e4, 500.0)
        assert price_impact(a, 500.0) * 1e4 == pytest.approx(bps, rel=1e-9)


def test_validate_layered_clips_binds_the_permit_and_audits(tmp_path):
    c = cage()
    # $10k, then $20k twice: max_trade_size_usd binds the first two, the 30 % WETH cap (6 of 20) the third
    actions = [swap(5.0, idx=0), swap(10.0, idx=1), swap(10.0, idx=2)]
    context = ctx(strategy=STRATEGY)
    resims: list[list] = []

    def resimulate(sized):
        resims.append(sized)
        return SimulationResult(actions=[sim_for(a) for a in sized])

    permits, audit = PermitStore(tmp_path / "p.sqlite"), AuditLog(tmp_path / "a.sqlite")
    res, decisions = validate_layered(c, actions, SimulationResult(actions=[sim_for(a) for a in actions]), context,
                                      permits, audit, resimulate=resimulate)
    first, second, third = res.actions
    assert first.approved and first.action.arguments["amount_in"] == 2.5 and "max_trade_size_usd" in first.clipped
    assert second.approved and second.action.arguments["amount_in"] == 2.5
    assert third.approved and third.action.arguments["amount_in"] == 1.0 and "STRATEGY.md" in third.clipped
    assert permits.get(first.permit_id).value_limit_usd == pytest.approx(5000.0)
    assert [a.arguments["amount_in"] for a in resims[0]] == [2.5, 2.5, 1.0] and res.simulation is not None
    assert [a.arguments["amount_in"] for a in res.sized(actions)] == [2.5, 2.5, 1.0]
    assert len(audit.entries(kind_prefix="tool_call.clipped")) == 3


def test_a_clip_below_the_minimum_is_refused_and_nothing_is_resimulated(tmp_path):
    c = cage(min_trade_usd=100.0, max_sandwich_loss_bps=100.0)  # size to fit alone: the sandwich check stands aside
    # 20 WETH, 30 % cap = 6 WETH; 5.97 already swapped by the first → 0.03 WETH ($60) left for the second
    actions = [swap(2.45, idx=0), swap(2.45, idx=1), swap(1.07, idx=2), swap(1.0, idx=3)]
    context = ctx(strategy=STRATEGY)
    fits = size_to_fit(c, actions, SimulationResult(actions=[sim_for(a) for a in actions]), context)
    assert [f.clipped for f in fits[:3]] == [False, False, False]
    assert fits[3].action is None and "below the minimum worth doing" in fits[3].refusal
    res, _ = validate_layered(c, actions, SimulationResult(actions=[sim_for(a) for a in actions]), context,
                              PermitStore(tmp_path / "p.sqlite"), resimulate=lambda s: pytest.fail("nothing clipped"))
    assert [a.approved for a in res.actions] == [True, True, True, False]
    assert "size to fit" in res.actions[3].reason and "STRATEGY.md" in res.actions[3].reason
