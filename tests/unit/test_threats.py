"""The DeFi threat detectors' arithmetic (golem.safety.threats): the sandwich against a brute-force search, the
tolerance and size that keep it under the bound, and the market detectors on staged block series."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.models.threats import MarketMark, MarketWindow
from golem.safety.threats import (
    _profit,
    amount_out,
    exposure_at,
    flash_loan_moves,
    market_refusal,
    market_threats,
    oracle_manipulation,
    safe_amount,
    safe_tolerance,
    sandwich_exposure,
)

R_WETH, R_USDC = 500.0, 1_000_000.0  # the dev world's pair


def test_amount_out_is_uniswap_v2s_formula():
    a, rin, rout = 3.0, 500.0, 1_000_000.0
    assert amount_out(a, rin, rout) == pytest.approx(a * 997 * rout / (rin * 1000 + a * 997), rel=1e-12)


def test_a_small_swap_pays_no_front_runner_and_a_large_one_loses_its_whole_tolerance():
    small = exposure_at(0.5, R_WETH, R_USDC, 50, None, 0.0)  # $1,000
    assert small.front_run == 0 and small.victim_loss == 0
    big = exposure_at(5.0, R_WETH, R_USDC, 100, None, 0.0)  # $10,000 at 100 bps
    assert big.attacker_profit > 0
    # the front-run pushes the victim right down to its minimum: the loss is the whole tolerance
    assert big.loss_bps == pytest.approx(100.0, abs=1e-3)
    assert _profit(big.front_run, 5.0, R_WETH, R_USDC)[1] >= big.min_out * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.5, 30.0), st.floats(10.0, 500.0))
def test_the_best_front_run_beats_every_other_on_a_grid(amount, slippage):
    e = exposure_at(amount, R_WETH, R_USDC, slippage, None, 0.0)
    grid = [e.front_run * k / 50 for k in range(0, 51)] if e.front_run > 0 else [0.0]
    best_on_grid = max(_profit(x, amount, R_WETH, R_USDC)[0] for x in grid)
    assert e.attacker_profit >= best_on_grid - 1e-9
    # and nothing beyond its front-run is open to the attacker: the victim's swap would revert
    if e.front_run > 0:
        assert _profit(e.front_run * 1.001, amount, R_WETH, R_USDC)[1] < e.min_out


def test_gas_the_attacker_cannot_cover_means_no_sandwich():
    e = sandwich_exposure(2.5, R_WETH, R_USDC, amount_out(2.5, R_WETH, R_USDC) * 0.995, attacker_cost_in=0.0)
    assert e.attacker_profit > 0
    priced_out = sandwich_exposure(2.5, R_WETH, R_USDC, e.min_out, attacker_cost_in=e.attacker_profit * 1.01)
    assert priced_out.front_run == 0 and priced_out.victim_loss == 0


@settings(max_examples=30, deadline=None)
@given(st.floats(2.0, 40.0), st.floats(40.0, 1000.0), st.floats(5.0, 60.0))
def test_the_safe_tolerance_keeps_the_best_sandwich_within_the_bound(amount, slippage, bound):
    s = safe_tolerance(amount, R_WETH, R_USDC, slippage, None, bound, 0.0)
    assert s <= slippage
    assert exposure_at(amount, R_WETH, R_USDC, s, None, 0.0).loss_bps <= bound + 1e-9
    assert s >= min(bound, slippage) - 0.01  # the loss never exceeds the tolerance, so the bound itself is safe


def test_the_safe_amount_shrinks_a_swap_until_no_sandwich_takes_more_than_the_bound():
    a = safe_amount(20.0, R_WETH, R_USDC, 5.0, 2.0, 0.0)
    assert 0 < a < 20.0
    assert exposure_at(a, R_WETH, R_USDC, 5.0, None, 0.0).loss_bps <= 2.0
    assert exposure_at(a * 1.05, R_WETH, R_USDC, 5.0, None, 0.0).loss_bps > 2.0


def window(pool: list[float], feed: list[float], start: int = 100) -> MarketWindow:
    return MarketWindow(marks=[MarketMark(block=start + i, reserve_weth=R_WETH, reserve_usdc=R_WETH * p, feed_price=f)
                               for i, (p, f) in enumerate(zip(pool, feed))])


def test_a_pool_spike_that_reverts_against_a_still_feed_is_flash_loan_shaped():
    v = flash_loan_moves(window([2000, 2000, 2200, 2001, 2000], [2000] * 5), 300)
    assert v.fired and v.figures["block"] == 102 and v.figures["revert_block"] == 103
    assert v.figures["move_bps"] == pytest.approx(1000.0)
    assert market_refusal("swap", False, None, [v]) == (f"flash-loan-shaped move: {v.detail}", True)
    assert market_refusal("swap", False, "steer s1 (high) governs this tick", [v]) == (None, False)  # protective
    assert market_refusal("repay", False, None, [v]) == (None, False)  # not priced off the pool


def test_the_market_moving_both_prices_together_fires_nothing():
    whipsaw = window([2000, 2000, 2200, 2000, 2000], [2000, 2000, 2200, 2000, 2000])
    assert not any(v.fired for v in market_threats(whipsaw, 300))
    calm = window([2000, 2003, 1998, 2001, 2000], [2000, 2000, 2001, 2001, 2000])
    assert not any(v.fired for v in market_threats(calm, 300))
    assert market_threats(None, 300) == []


def test_a_spike_that_stays_is_not_flash_loan_shaped_but_a_pool_run_away_from_its_feed():
    held = window([2000, 2000, 2000, 2200, 2200], [2000] * 5)
    assert not flash_loan_moves(held, 300).fired
    v = oracle_manipulation(held, 300)
    assert v.fired and v.source == "pool" and v.figures["move_bps"] == pytest.approx(1000.0)
    assert market_refusal("swap", True, None, [v])[0] is not None  # buying WETH off the pushed pool
    assert market_refusal("swap", False, None, [v]) == (None, False)  # selling exposure is not refused
    assert market_refusal("borrow", True, None, [v]) == (None, False)  # the feed is sound


def test_a_feed_round_that_jumps_and_reverts_refuses_borrowing_against_it():
    v = oracle_manipulation(window([2000] * 5, [2000, 2000, 2300, 2000, 2000]), 300)
    assert v.fired and v.source == "feed" and v.figures["revert_block"] == 103
    assert market_refusal("borrow", True, None, [v])[0] is not None
    assert market_refusal("withdraw", False, None, [v])[0] is not None
    assert market_refusal("swap", True, None, [v]) == (None, False)


def test_a_pool_converging_on_its_feed_is_no_manipulation():
    # an arbitrage closing a gap moves the pool fast, towards the feed
    assert not oracle_manipulation(window([2200, 2200, 2000, 2000], [2000] * 4), 300).fired


# ── through the cage (golem.safety.cage.validate_layered) ──────────────────────────────────────────────────────


def _cage(**policy):
    from golem.models.config import PolicySection
    from golem.safety.cage import SafetyCage
    from golem.safety.limits import SafetyLimits

    base = dict(approved_assets=["WETH", "USDC"], max_trade_size_usd=50_000, max_slippage_bps=500)
    return SafetyCage(SafetyLimits(policy=PolicySection(**{**base, **policy}), kill_switch_path="/nonexistent/k"))


def _validate(cage, actions, context, tmp_path, resims=None):
    from golem.chain.permits import PermitStore
    from golem.models.tick import SimulationResult
    from golem.safety.audit import AuditLog
    from golem.safety.cage import validate_layered
    from tests.unit.test_safety_cage import sim_for

    audit = AuditLog(tmp_path / "a.sqlite")

    def resimulate(sized):
        if resims is not None:
            resims.append(sized)
        return SimulationResult(actions=[sim_for(a) for a in sized])

    res, decisions = validate_layered(cage, actions, SimulationResult(actions=[sim_for(a) for a in actions]), context,
                                      PermitStore(tmp_path / "p.sqlite"), audit, resimulate=resimulate)
    return res, decisions, audit


def test_a_wide_swap_is_tightened_to_the_bound_resimulated_and_audited(tmp_path):
    from tests.unit.test_safety_cage import ctx, swap

    resims: list = []
    big = swap(10.0, max_slippage_bps=300)  # $20,000 against 500 WETH at 300 bps: a front-runner takes it all
    res, _, audit = _validate(_cage(), [big], ctx(), tmp_path, resims)
    v = res.actions[0]
    assert v.approved and v.action is not None
    tightened = v.action.arguments["max_slippage_bps"]
    assert 30.0 <= tightened < 300.0 and v.action.arguments["amount_in"] == 10.0
    assert resims and resims[0][0].arguments["max_slippage_bps"] == tightened  # simulated again as it will be sent
    assert "slippage bound tightened from 300 to" in v.reason and v.clipped is None  # not a size clip
    assert v.threats and v.threats[0].startswith("sandwich (tightened)")
    (threat,) = res.threats
    assert threat.fired and threat.response == "tightened" and threat.figures["loss_bps"] == pytest.approx(300, abs=0.01)
    assert threat.figures["loss_bps_after"] <= 30.0
    entry = audit.entries(kind_prefix="threat.sandwich")[-1]
    assert entry.payload["fired"] and entry.payload["figures"]["tightened_bps"] == tightened
    # the same swap at a tolerance no front-runner can profit from goes on untouched
    res, _, _ = _validate(_cage(), [swap(10.0, max_slippage_bps=20)], ctx(), tmp_path / "b", [])
    assert res.actions[0].approved and res.actions[0].action is None and not res.threats[0].fired


def test_a_bound_under_the_least_workable_tolerance_clips_the_swap_or_refuses_it(tmp_path):
    from tests.unit.test_safety_cage import ctx, swap

    res, _, _ = _validate(_cage(max_sandwich_loss_bps=2.0), [swap(20.0, max_slippage_bps=100)], ctx(), tmp_path, [])
    v = res.actions[0]
    assert v.approved and v.action is not None and v.action.arguments["max_slippage_bps"] == 5.0
    assert 0 < v.action.arguments["amount_in"] < 20.0 and "max_sandwich_loss_bps" in v.clipped
    assert res.threats[0].response == "clipped"
    # nothing worth doing left: refused with the reason
    # (about 2 WETH is all a 2 bps bound leaves of a swap against 500 WETH; $5,000 is the least worth doing)
    res, _, _ = _validate(_cage(max_sandwich_loss_bps=2.0, min_trade_usd=5_000), [swap(10.0, max_slippage_bps=100)],
                          ctx(), tmp_path / "b", [])
    assert not res.actions[0].approved and "sandwich" in res.actions[0].reason
    assert res.threats[0].response == "refused"


def test_the_market_detectors_refuse_and_hold_through_the_cage(tmp_path):
    from tests.unit.test_safety_cage import act, ctx, swap

    sell, buy, borrow = swap(1.0, idx=0), swap(2000.0, "USDC", "WETH", idx=1), act("borrow", 100.0, idx=2)
    flash = ctx().model_copy(update={"market": window([2000, 2000, 2200, 2001, 2000], [2000] * 5)})
    res, decisions, audit = _validate(_cage(), [sell, buy, borrow], flash, tmp_path)
    assert [(a.approved, a.deferred) for a in res.actions] == [(False, True), (False, True), (True, False)]
    assert "flash-loan-shaped move" in res.actions[0].reason and decisions[0].blocked_by == "risk"
    assert all(any(t.startswith("flash_loan:") for t in a.threats) for a in res.actions)
    fl = next(v for v in res.threats if v.detector == "flash_loan")
    assert fl.fired and fl.response == "held"
    assert {e.kind for e in audit.entries(kind_prefix="threat.")} == {"threat.flash_loan", "threat.oracle_manipulation",
                                                                      "threat.sandwich"}
    pushed = ctx().model_copy(update={"market": window([2000, 2000, 2000, 2200, 2200], [2000] * 5)})
    res, _, _ = _validate(_cage(), [sell, buy, borrow], pushed, tmp_path / "b")
    assert [a.approved for a in res.actions] == [True, False, True]  # only the buy priced off the pushed pool
    assert "oracle manipulation" in res.actions[1].reason
    calm = ctx().model_copy(update={"market": window([2000, 2002, 1999, 2001, 2000], [2000] * 5)})
    res, _, _ = _validate(_cage(), [sell, buy, borrow], calm, tmp_path / "c")
    assert all(a.approved for a in res.actions) and not any(v.fired for v in res.threats)


def test_the_second_swap_of_a_tick_is_judged_on_the_reserves_the_first_leaves(tmp_path):
    from tests.unit.test_safety_cage import ctx, swap

    first, second = swap(5.0, max_slippage_bps=300, idx=0), swap(5.0, max_slippage_bps=300, idx=1)
    res, _, _ = _validate(_cage(), [first, second], ctx(), tmp_path, [])
    a, b = (v.figures for v in res.threats)
    assert (a["reserve_in"], a["reserve_out"]) == (500.0, 1_000_000.0)
    assert b["reserve_in"] == pytest.approx(505.0)
    assert b["reserve_out"] == pytest.approx(1_000_000.0 - amount_out(5.0, 500.0, 1_000_000.0))
