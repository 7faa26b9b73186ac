"""The gas partition by urgency (golem.safety.urgency): routine actions stop short of a ring-fenced emergency
slice and a routine protective one waits while gas is above its median, urgent ones may use the slice, critical
ones go beyond it up to the daily ceiling, all under the per-action ceiling; deferred intents wait and come back;
the partition's day is the tick's clock, and status / doctor show gas beside inference and the ceilings."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from golem.chain.permits import PermitStore
from cli.status import spend_line
from golem.cognition.fold import fold_tick_result
from golem.doctor import gas_line as _gas_line
from golem.models.config import ClockSection, GolemConfig, HeartbeatSection, PolicySection
from golem.models.enums import BehavioralPhase, SteerSeverity, Tier
from golem.models.golem import GolemStatus
from golem.models.interventions import Steer
from golem.models.observation import ChainSnapshot, Observation, PoolState, PositionState
from golem.models.state import GolemState
from golem.models.wake import Forecast
from golem.models.tick import ProposedAction, SimulatedAction, SimulationResult, TickContext, TickResult
from golem.safety.audit import AuditLog
from golem.safety.cage import SafetyCage, ValidationContext, validate_layered
from golem.safety.constraints import Book
from golem.safety.gas import restore_status, spend_status, utc_day_bounds
from golem.safety.limits import SafetyLimits
from golem.safety.policy import HF_AT_RISK, protective_reason
from golem.safety.risk import RiskSnapshot, RiskStore
from golem.safety.service import SafetyService

LIMITS = SafetyLimits(policy=PolicySection(approved_assets=["WETH", "USDC"], max_trade_size_usd=5_000,
                                           max_slippage_bps=100), kill_switch_path="/nonexistent/killswitch")
CAGE = SafetyCage(LIMITS)  # $10/day partition, 20 % ($2) ring-fenced
GAS = 100_000  # × 1 gwei × $2000 = $0.20 per action
DEBT_AT_HF_1_3 = 10 * 2000 * 0.8 / 1.3


def obs(debt=8000.0, gas_gwei=1.0) -> Observation:
    pool = PoolState(address="0x" + "01" * 20, token0="WETH", token1="USDC", reserve0=500.0, reserve1=1e6,
                     price=2000.0, tvl=2e6)
    hf = 10 * 2000 * 0.8 / debt if debt else None
    snap = ChainSnapshot(chain_id=31337, block_number=100, block_timestamp=0, gas_price_gwei=gas_gwei, pool=pool,
                         oracle_price=2000.0, balances={"WETH": 20.0, "USDC": 20_000.0, "DAI": 0.0},
                         positions=[PositionState(id="lending:x", collateral=10.0, debt=debt, health_factor=hf)])
    return Observation(snapshot=snap)


def swap(amount=1, tin="WETH", tout="USDC", idx=0, rationale=""):
    return ProposedAction(action_index=idx, tool="swap", rationale=rationale,
                          arguments={"token_in": tin, "token_out": tout, "amount_in": amount})


def act(tool, idx=0, **arguments):
    return ProposedAction(action_index=idx, tool=tool, arguments=arguments or {"amount": 100})


def sim(action: ProposedAction) -> SimulatedAction:
    a = action.arguments
    expected = {"swap": lambda: {f"delta:{a['token_in']}": -float(a["amount_in"])},
                "repay": lambda: {"delta:USDC": -float(a["amount"]), "delta:debt": -float(a["amount"])},
                "supply": lambda: {"delta:WETH": -float(a["amount"]), "delta:collateral": float(a["amount"])},
                }.get(action.tool, dict)()
    return SimulatedAction(action_index=action.action_index, ok=True, gas_estimate=GAS, expected=expected)


def steer(severity: str, sid="s1") -> Steer:
    return Steer(id=sid, message="reduce exposure now", severity=SteerSeverity(severity))


def fc(hf: float, line: float = 1.6, kind: str = "rule", ticks: float | None = None) -> Forecast:
    """A forecast: crossed when hf ≤ line, else `ticks` away at the worst move (within the 3-tick horizon or not)."""
    crossed = [line] if hf <= line else []
    return Forecast(health_factor=hf, line=line, line_label="STRATEGY.md:20" if kind == "rule" else kind,
                    line_kind=kind, crossed=crossed, ticks_at_worst=ticks, horizon_ticks=3.0,
                    within_horizon=bool(crossed) or (ticks is not None and ticks <= 3.0))


URGENT = fc(1.55)  # under the strategy's repay line 1.6
CRITICAL = fc(1.25, line=1.3, kind="must")  # under the MUST floor


def decide(action, *, spent=0.0, typical=None, o=None, steers=(), forecast=None, gas_history=(), lines=()):
    o = o or obs()
    risk = RiskSnapshot(nav_usd=1e5, high_water_usd=1e5, gas_spent_today_usd=spent, typical_action_gas_usd=typical)
    c = ValidationContext(golem_id="g1", tick=1, phase=BehavioralPhase.THRIVING, observation=o, risk=risk,
                          steers=list(steers), forecast=forecast, floor=1.3, gas_history=list(gas_history),
                          line_rules=list(lines))
    decision, _ = CAGE.tool_call(action, c, sim(action), Book.of(o.snapshot))
    return decision


# ── the partition and its emergency slice ────────────────────────────────────────────────────


def test_an_urgent_sell_draws_on_the_slice_while_a_repays_reserve_stays_in_it():
    """meltup_crash: the owner's -300 bps sell, urgent with the health factor 2 ticks from the 1.9 line, was deferred
    row after row once the routine share was spent, the slice being kept for the repay. It may now draw on the slice
    while what is left after it still holds twice its gas (a repay and its approval); busy_day_crash's chop sells
    spent the whole slice and left the repay under the 1.6 line without gas, so a sell that would eat that stays
    deferred."""
    near = fc(1.95, line=1.9, ticks=2.0)  # within the 3-tick horizon of a rule's line, not crossed
    for forecast in (near, URGENT):  # the imminent crossing, and a rule's line already crossed (HF 1.55 < 1.6)
        sell = decide(swap(), spent=7.9, o=obs(debt=DEBT_AT_HF_1_3), forecast=forecast)  # $0.10 routine, $2.10 left
        assert sell.allowed and sell.protective.startswith("urgent"), sell.reason
        assert "uses the emergency slice ($2.1000 of $2.00 left today)" in sell.protective
        assert "keeping $1.9000 after it, at least the $0.4000 a repay needs" in sell.protective  # on the record
        # $0.50 left: $0.30 after the sell's $0.20, under the 2 × $0.20 a repay needs: not from the slice, but beyond
        # the partition (next test); $0.50 under the daily ceiling: the ceiling keeps the repay's gas, it waits
        kept = decide(swap(), spent=29.5, o=obs(debt=DEBT_AT_HF_1_3), forecast=forecast)
        assert not kept.allowed and kept.deferred and "under the $0.4000 a repay needs" in kept.reason
        assert decide(swap(), spent=29.3, o=obs(debt=DEBT_AT_HF_1_3), forecast=forecast).allowed  # $0.50 after: kept
        from golem.safety.urgency import _cause
        assert _cause(kept.reason.removeprefix("risk: ")) == ("budget", "urgent")
        repay = decide(act("repay"), spent=9.5, o=obs(debt=DEBT_AT_HF_1_3), forecast=forecast)
        assert repay.allowed and "uses the emergency slice" in repay.protective and "keeping" not in repay.protective
        assert decide(act("repay"), spent=29.5, o=obs(debt=DEBT_AT_HF_1_3), forecast=forecast).allowed  # finds it
    assert decide(swap(), spent=7.5, o=obs(debt=DEBT_AT_HF_1_3), forecast=near).allowed  # within the routine share
    # beyond the horizon a sell is routine: the routine share only; a buy answers no line
    far = decide(swap(), spent=7.9, o=obs(debt=DEBT_AT_HF_1_3), forecast=fc(2.4, line=1.9, ticks=12.0))
    assert not far.allowed and far.deferred and "left today for routine actions" in far.reason
    assert not decide(swap(tin="USDC", tout="WETH"), spent=7.9, o=obs(debt=DEBT_AT_HF_1_3), forecast=near).allowed
    # critical (under the MUST floor) goes beyond the partition for a sell too; an owner's steer buys the whole slice
    assert decide(swap(), spent=9.9, o=obs(debt=DEBT_AT_HF_1_3), forecast=CRITICAL).allowed
    assert decide(swap(), spent=9.7, o=obs(debt=DEBT_AT_HF_1_3), forecast=URGENT, steers=[steer("high")]).allowed


def test_an_urgent_sell_goes_beyond_the_partition_up_to_the_ceiling_keeping_a_repays_gas_under_it():
    """meltup_crash: at base fee ×10 each crash sell cost $2.4–3.1 with $3.01 of the partition left; any one of them
    would leave the slice under twice its gas, so all were deferred while the $30 daily ceiling sat unused. An
    urgent sell answering the position may go beyond the partition up to the ceiling, keeping twice its gas under
    it for the repay (which may go beyond too); the per-action and daily ceilings refuse what they refused, and an
    action urgent only by the owner's steer stays within the partition."""
    high = obs(debt=DEBT_AT_HF_1_3, gas_gwei=12.5)  # $2.50 an action
    near = fc(1.95, line=1.9, ticks=2.0)
    for forecast in (near, URGENT):
        sell = decide(swap(), spent=6.99, o=high, forecast=forecast)  # $3.01 left: $0.51 after, under 2 × $2.50
        assert sell.allowed and sell.protective.startswith("urgent"), sell.reason
        assert ("the slice past a repay's reserve there, within the daily ceiling ($20.5100 of it left after, at "
                "least the $5.0000 a repay needs (2× its gas))") in sell.protective, sell.protective
        past = decide(swap(), spent=9.5, o=high, forecast=forecast)  # $0.50 of the partition left: past it
        assert past.allowed and "beyond the partition, within the daily ceiling ($18.0000" in past.protective
        repay = decide(act("repay", amount=5000), spent=9.49, o=high, forecast=forecast)  # after the sell: $0.51 of the partition
        assert repay.allowed and "beyond the partition" in repay.protective, repay.reason
        kept = decide(swap(), spent=22.6, o=high, forecast=forecast)  # $7.40 under the ceiling: $4.90 after < $5
        assert not kept.allowed and kept.deferred and "under the $5.0000 a repay needs (the ceiling keeps it)" in kept.reason
        assert decide(swap(), spent=22.5, o=high, forecast=forecast).allowed  # $5.00 after: kept
        assert decide(act("repay", amount=5000), spent=27.4, o=high, forecast=forecast).allowed  # the repay finds what was kept
        over = decide(act("repay", amount=5000), spent=27.6, o=high, forecast=forecast)
        assert not over.allowed and "would pass the daily ceiling $30.00" in over.reason
    # a critical sell keeps the repay's gas under the ceiling too once beyond the partition; in the slice it may not
    assert decide(swap(), spent=9.0, o=high, forecast=CRITICAL).allowed  # beyond: $18.50 after
    crit = decide(swap(), spent=22.6, o=high, forecast=CRITICAL)
    assert not crit.allowed and "(the ceiling keeps it)" in crit.reason and "critical" in crit.reason
    # the per-action ceiling holds: $25 of gas for one sell is refused whatever is left
    assert not decide(swap(), spent=0.0, o=obs(debt=DEBT_AT_HF_1_3, gas_gwei=125.0), forecast=URGENT).allowed
    # urgent by the owner's steer alone (no line near): the partition, never beyond it
    steered = decide(swap(), spent=9.0, o=high, forecast=fc(2.4, line=1.9, ticks=12.0), steers=[steer("high")])
    assert not steered.allowed and "only an action answering the position goes beyond it" in steered.reason
    # a routine sell: the routine share only
    assert not decide(swap(), spent=6.99, o=high, forecast=fc(2.4, line=1.9, ticks=12.0)).allowed


def test_a_sell_whose_line_a_deferral_would_bring_within_the_horizon_is_urgent_a_repay_is_not():
    """A crash read as volatile: the first -3 % rows put the repay line 1.6 3.2-4 ticks away at the worst move, past
    the 3-tick horizon, and the owner's sell waited on the spent routine share — to be urgent a tick later and sell a
    worst move lower. A deferral waits a tick: a sell whose line is within the horizon once that tick has passed is
    urgent now (the slice less a repay's reserve, beyond the partition under the ceiling); a repay loses nothing by
    waiting and stays routine; a line further off, or a rising health factor, leaves the sell routine."""
    from golem.safety.urgency import Urgency, classify
    o = obs(debt=DEBT_AT_HF_1_3)
    for ticks in (3.2, 4.0):  # a tick on, within the horizon of the 1.6 line
        sell = decide(swap(), spent=7.9, o=o, forecast=fc(1.92, ticks=ticks))  # $0.10 routine left, $2.10 partition
        assert sell.allowed and sell.protective.startswith("urgent"), sell.reason
        assert f"{ticks:.1f} ticks away at the worst move, within the horizon 3 after the 1 tick a deferral waits" \
            in sell.protective and "keeping $1.9000 after it, at least the $0.4000 a repay needs" in sell.protective
        beyond = decide(swap(), spent=9.9, o=o, forecast=fc(1.92, ticks=ticks))
        assert beyond.allowed and "beyond the partition, within the daily ceiling" in beyond.protective
        repay = decide(act("repay"), spent=9.0, o=o, forecast=fc(1.92, ticks=ticks))
        assert not repay.allowed and repay.deferred and "left today for routine actions" in repay.reason
        assert classify(act("repay"), fc(1.92, ticks=ticks), []).level is Urgency.ROUTINE
    for ticks in (4.1, None):  # further than a tick past the horizon; not falling
        far = decide(swap(), spent=7.9, o=o, forecast=fc(2.0, ticks=ticks))
        assert not far.allowed and far.deferred and "left today for routine actions" in far.reason, far.reason
    assert not decide(swap(tin="USDC", tout="WETH"), spent=7.9, o=o, forecast=fc(1.92, ticks=3.5)).allowed  # a buy


def test_a_line_whose_rule_cannot_fire_now_makes_no_sell_urgent():
    """busy_day_crash: in the chop (regime volatile, HF 2.05) the -300 bps sell was urgent because the forecast
    counted the downtrend sell's 1.9 line, whose rule needs a downtrend and WETH over 10: it could not fire, yet the
    sells drew on the slice the crash then lacked. Urgency reads the forecast toward the lines that can act now; the
    line standing aside is still named, as context."""
    from pathlib import Path

    from golem.cognition.lines import live_forecast, strategy_lines
    from golem.inference.strategy import metrics_from, parse_strategy
    from golem.models.config import ProbeThresholds, WakeSection
    from golem.models.enums import MarketRegime

    example = parse_strategy((Path(__file__).resolve().parents[2] / "examples/golem-home/STRATEGY.md").read_text())

    def forecast_in(regime: MarketRegime, weth: float = 20.0):
        o = obs(debt=16_000 / 2.05).model_copy(update={"regime": regime})
        o.snapshot.balances["WETH"] = weth
        # worst move -0.10 a tick: the 1.9 line 1.5 ticks away, the 1.6 repay line 4.5 (horizon 3)
        return o, live_forecast(strategy_lines(example, ProbeThresholds(), WakeSection()), example, o, [2.15],
                                metrics_from(o, 2000.0), WakeSection())

    for o, f in (forecast_in(MarketRegime.VOLATILE), forecast_in(MarketRegime.TRENDING_DOWN, weth=9.0)):
        assert f is not None and f.line == 1.6 and not f.within_horizon, f
        assert "line 1.9 (" in f.reason and "stands aside" in f.reason  # shown, not counted
        sell = decide(swap(), spent=7.9, o=o, forecast=f)  # $0.10 of the routine share left: routine waits
        assert not sell.allowed and sell.deferred and "left today for routine actions" in sell.reason, sell.reason
    # in a downtrend with WETH over 10 the rule can fire: its line stands and the same sell is urgent, from the slice
    o, f = forecast_in(MarketRegime.TRENDING_DOWN)
    assert f is not None and f.line == 1.9 and f.within_horizon and "stands aside" not in f.reason, f
    sell = decide(swap(), spent=7.9, o=o, forecast=f)
    assert sell.allowed and "uses the emergency slice" in sell.protective, sell.reason


LEARNED = """# PLAYBOOK

- WHEN health_factor < 2.09 AND balance.WETH > 10 AND regime == trending_down THEN swap 30% WETH to USDC _(confidence 0.90, 8 episodes, h-aaaaaaaaaaaaaaaa)_
- WHEN price_change_bps <= -300 THEN swap 10% WETH to USDC
- WHEN health_factor < 2.5 THEN repay 1% debt
- WHEN health_factor < 2.5 AND steer contains "sell" THEN swap 5% WETH to USDC
"""


def _line_rules(hf_debt: float, regime: str = "trending_down"):
    from golem.inference.strategy import metrics_from, parse_strategy, rules_in
    from golem.models.enums import MarketRegime
    from golem.safety.urgency import line_rules

    strategy = parse_strategy("## Rules\n- WHEN health_factor < 1.6 THEN repay 25% debt\n")
    o = obs(debt=hf_debt).model_copy(update={"regime": MarketRegime(regime)})
    return line_rules([*strategy.rules, *rules_in(LEARNED, "PLAYBOOK.md", strategy)], metrics_from(o, 2100.0))


def test_a_sell_on_its_rules_crossed_line_is_urgent_and_may_draw_on_the_slice_less_a_repays_reserve():
    """Urgency, not the tool: a learned sell whose own line (HF 2.09) the position is under answers that line, so it
    is urgent and draws on the ring-fenced slice the day's routine sells spent, keeping a repay's gas there. A sell
    no line rule answers (the -3 % rule, a steer's rule) stays on the routine share."""
    at_2_0 = 10 * 2000 * 0.8 / 2.0  # HF 2.0: under the learned 2.09 line, above every STRATEGY.md line
    lines = _line_rules(at_2_0)
    assert [(r.label, r.line, r.token_out) for r in lines] == [("PLAYBOOK.md:3", 2.09, "USDC")]
    assert _line_rules(at_2_0, regime="volatile") == []  # its other conditions do not hold: no line to answer
    assert _line_rules(10 * 2000 * 0.8 / 2.2) == []  # above the line
    sell = decide(swap(), spent=7.9, o=obs(debt=at_2_0), lines=lines)  # $0.10 routine, $2.10 in all
    assert sell.allowed and "under the line 2.09 of PLAYBOOK.md:3" in sell.protective
    assert "uses the emergency slice" in sell.protective
    kept = decide(swap(), spent=29.5, o=obs(debt=at_2_0), lines=lines)  # $0.50 under the ceiling: $0.30 after
    assert not kept.allowed and kept.deferred and "under the $0.4000 a repay needs" in kept.reason
    from golem.safety.urgency import _cause
    assert _cause(kept.reason.removeprefix("risk: ")) == ("budget", "urgent")  # released by a new day, not by gas
    assert decide(act("repay"), spent=29.5, o=obs(debt=at_2_0), forecast=fc(1.55)).allowed  # the repay finds it
    plain = decide(swap(), spent=7.9, o=obs(debt=at_2_0))  # the same sell, no line rule firing: routine share only
    assert not plain.allowed and "left today for routine actions" in plain.reason
    into_weth = decide(swap(tin="USDC", tout="WETH"), spent=7.9, o=obs(debt=at_2_0), lines=lines)
    assert not into_weth.allowed  # a buy answers no line


def test_routine_action_is_deferred_once_only_the_emergency_slice_remains():
    assert decide(swap(), spent=7.7).allowed  # $0.30 of the $8 routine share left
    d = decide(swap(), spent=7.9)  # $2.10 of the partition left, but only $0.10 outside the slice
    assert not d.allowed and d.deferred and d.blocked_by == "risk" and d.protective is None
    assert "$0.1000 left today for routine actions" in d.reason


def test_urgency_not_the_tool_decides_what_a_repay_may_spend():
    # HF 2.0, nowhere near a line: a repay is routine — the routine share, never the slice
    assert decide(act("repay"), spent=7.0, forecast=fc(2.0, ticks=40)).allowed
    d = decide(act("repay"), spent=9.0, forecast=fc(2.0, ticks=40))
    assert not d.allowed and d.deferred and "$0.0000 left today for routine actions" in d.reason
    # under the strategy's repay line: urgent, it takes the emergency slice ...
    d = decide(act("repay"), spent=9.0, forecast=URGENT)
    assert d.allowed and d.protective.startswith("urgent") and "emergency slice" in d.protective
    assert d.protective in d.reason  # on the record, not only in the verdicts
    # ... and beyond the partition, up to the daily ceiling ($30), as a critical one does: it answers the position
    over = decide(act("repay"), spent=10.5, forecast=URGENT)
    assert over.allowed and "beyond the partition, within the daily ceiling" in over.protective, over.reason
    assert not decide(act("repay"), spent=29.9, forecast=URGENT).allowed  # the ceiling refuses what it refused
    crit = decide(act("repay"), spent=10.5, forecast=CRITICAL)
    assert crit.allowed and crit.protective.startswith("critical") and "within the daily ceiling" in crit.protective
    capped = decide(act("repay"), spent=29.9, forecast=CRITICAL)
    assert not capped.allowed and "would pass the daily ceiling $30.00" in capped.reason
    # within the horizon of the floor at the worst move is critical too; of a rule's line, urgent (beyond it too)
    assert decide(act("repay"), spent=10.5, forecast=fc(1.4, line=1.3, kind="must", ticks=2)).allowed
    assert "urgent" in decide(act("repay"), spent=10.5, forecast=fc(1.7, ticks=2)).protective


def test_the_per_action_ceiling_holds_whatever_the_urgency():
    # 300 gwei: 100k gas × 300 gwei × $2000 = $60 for one repay, over the $20 ceiling
    d = decide(act("repay"), o=obs(gas_gwei=300.0), forecast=CRITICAL)
    assert not d.allowed and d.deferred and "over the per-action ceiling $2.0000" in d.reason  # 2 % of $100 repaid
    big = decide(act("repay", amount=5000), o=obs(gas_gwei=30.0), forecast=CRITICAL)  # $6 ≤ min($20, 2 % of $5000)
    assert big.allowed


def test_a_routine_protective_action_waits_while_gas_is_above_its_recent_median():
    history = [1.0, 1.2, 0.9, 1.1, 1.0, 1.3]  # median 1.05 gwei
    d = decide(act("repay"), o=obs(gas_gwei=4.0), forecast=fc(2.0, ticks=40), gas_history=history)
    assert not d.allowed and d.deferred and "above the recent median 1.05 gwei" in d.reason
    assert "waits until gas falls or urgency rises" in d.reason
    assert decide(act("repay"), o=obs(gas_gwei=1.0), forecast=fc(2.0, ticks=40), gas_history=history).allowed
    # within a block's base-fee step of the median is flat gas, not a price to wait out (10 % over: 1.155)
    assert decide(act("repay"), o=obs(gas_gwei=1.15), forecast=fc(2.0, ticks=40), gas_history=history).allowed
    assert not decide(act("repay"), o=obs(gas_gwei=1.16), forecast=fc(2.0, ticks=40), gas_history=history).allowed
    assert decide(act("repay"), o=obs(gas_gwei=4.0), forecast=URGENT, gas_history=history).allowed
    # a routine trade that protects nothing is left to the gas gate (no median rule)
    assert decide(swap(100, "USDC", "WETH"), o=obs(gas_gwei=4.0), gas_history=history).allowed


def test_a_high_or_critical_steer_makes_every_action_of_the_tick_urgent():
    buy = swap(500, "USDC", "WETH")  # opens exposure: as routine as an action gets
    assert decide(buy, spent=9.5, steers=[steer("medium")]).deferred
    for sev in ("high", "critical"):
        d = decide(buy, spent=9.5, steers=[steer("low", "s0"), steer(sev, "s9")])
        assert d.allowed and f"owner steer s9 ({sev})" in d.protective


def test_a_gas_spike_defers_a_routine_repay_but_not_an_urgent_one():
    # $0.20 against a usual $0.05 per action: 4× > the 2× spike line, with the whole budget free
    d = decide(swap(), typical=0.05)
    assert not d.allowed and d.deferred and "over 2× the usual" in d.reason
    assert decide(act("repay"), typical=0.05, forecast=fc(2.0, ticks=40)).deferred
    r = decide(act("repay"), typical=0.05, forecast=URGENT)
    assert r.allowed and r.protective.startswith("urgent")


def test_a_model_labelled_protective_swap_is_still_routine():
    labelled = swap(rationale="PROTECTIVE: emergency deleverage ordered by the owner; exempt from the gas budget")
    d = decide(labelled, spent=9.0)
    assert not d.allowed and d.deferred and d.protective is None
    # the same swap is urgent only when the chain says the loan is at risk (HF 1.23 under the floor)
    assert decide(labelled, spent=9.0, o=obs(debt=DEBT_AT_HF_1_3), forecast=fc(1.23, line=1.3, kind="must")).allowed
    flagged = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC",
                                                                     "amount_in": 1, "protective": True})
    refused = decide(flagged, spent=0.0)
    assert not refused.allowed and refused.blocked_by == "safety" and "unexpected argument" in refused.reason


@pytest.mark.parametrize("action,debt,protective", [
    (act("repay"), 8000.0, True),  # HF 2.0: repay still lowers the debt
    (act("repay"), 0.0, False),  # nothing to repay
    (act("supply", amount=1), 8000.0, False),
    (swap(), 8000.0, False),
    (act("remove_liquidity", fraction=0.5), 8000.0, False),
    (act("supply", amount=1), DEBT_AT_HF_1_3, True),
    (swap(), DEBT_AT_HF_1_3, True),  # into a stable
    (swap(1, "USDC", "DAI"), DEBT_AT_HF_1_3, True),
    (swap(100, "USDC", "WETH"), DEBT_AT_HF_1_3, False),  # buys exposure
    (act("remove_liquidity", fraction=0.5), DEBT_AT_HF_1_3, True),
    (act("withdraw", amount=1), DEBT_AT_HF_1_3, False),
    (act("borrow", amount=1), DEBT_AT_HF_1_3, False),
    (act("add_liquidity", amount_weth=1, amount_usdc=2000), DEBT_AT_HF_1_3, False),
])
def test_protective_is_read_from_the_tool_and_the_chain(action, debt, protective):
    assert (protective_reason(action, obs(debt=debt).snapshot, [steer("medium")]) is not None) is protective
    assert HF_AT_RISK == 1.5  # the position probe's Low line


def test_an_urgency_under_a_line_names_that_line_not_the_next_one():
    from golem.safety.urgency import classify
    f = Forecast(health_factor=1.85, line=1.6, line_label="STRATEGY.md:21", line_kind="rule", crossed=[1.9],
                 ticks_at_worst=40.0, horizon_ticks=3.0, within_horizon=True)
    repay = ProposedAction(action_index=0, tool="repay", arguments={"amount": 100.0}, rationale="t")
    v = classify(repay, f, [])
    assert v.reason == "health factor 1.850 is under the line 1.9 (next: 1.6, STRATEGY.md:21)"


def test_validate_layered_puts_the_protective_note_on_the_permit_and_the_audit(tmp_path):
    o = obs()
    actions = [act("repay", idx=0), swap(100, "USDC", "WETH", idx=1)]  # the buy protects nothing: routine
    risk = RiskSnapshot(nav_usd=1e5, high_water_usd=1e5, gas_spent_today_usd=7.7)  # $0.30 routine left
    c = ValidationContext(golem_id="g1", tick=1, phase=BehavioralPhase.THRIVING, observation=o, risk=risk,
                          forecast=URGENT)
    audit = AuditLog(tmp_path / "a.sqlite")
    result, _ = validate_layered(CAGE, actions, SimulationResult(actions=[sim(a) for a in actions]), c,
                                 PermitStore(tmp_path / "p.sqlite"), audit)
    repay, routine = result.actions
    assert repay.approved and repay.protective.startswith("urgent")
    # the repay's $0.20 counts: after it the swap finds $0.10 of the routine share, too little
    assert not routine.approved and routine.protective is None and "$0.1000 left today" in routine.reason
    allowed = audit.entries(kind_prefix="tool_call.allowed")
    assert allowed and "STRATEGY.md:20" in allowed[0].payload["protective"]


# ── the tick's clock, a UTC day ──────────────────────────────────────────────────────────────

T = datetime(2023, 11, 14, 23, 0, tzinfo=timezone.utc).timestamp()


def spent_store(tmp_path, at: float) -> RiskStore:
    store = RiskStore(tmp_path / "risk.sqlite", clock=lambda: at)  # the "machine" clock stays at `at`
    for tick in range(40):  # 40 × $0.25: the day's partition is gone
        store.record_outcome("g1", tick, 0, "swap", opens_exposure=False, verified=True, value_usd=100, pnl_usd=0,
                             gas_usd=0.25, now=at)
    return store


def test_a_path_two_days_later_sees_an_empty_partition(tmp_path):
    store = spent_store(tmp_path, T)
    assert store.snapshot("g1", 1e5, now=T + 1800).gas_spent_today_usd == pytest.approx(10.0)
    later = store.snapshot("g1", 1e5, now=T + 2 * 86_400)
    assert later.gas_spent_today_usd == 0.0 and later.gas_day == "2023-11-16"
    # a UTC day like the inference budget's, not a rolling 24 h: two hours later it is the next day and empty,
    # while the spike baseline (trailing 24 h) still knows the usual cost
    next_day = store.snapshot("g1", 1e5, now=T + 7200)
    assert next_day.gas_spent_today_usd == 0.0 and next_day.typical_action_gas_usd == pytest.approx(0.25)
    assert utc_day_bounds(T)[1] == T + 3600


def test_the_service_counts_the_partition_on_the_ticks_clock(tmp_path):
    cfg = GolemConfig()
    cfg.probes.kill_switch_path = str(tmp_path / "no-killswitch")
    svc = SafetyService(cfg, tmp_path)
    svc.risk = spent_store(tmp_path, T)
    o, actions = obs(), [swap()]
    simulation = SimulationResult(actions=[sim(actions[0])])

    def approved(tick: int, now: float) -> bool:
        result, _ = svc.validate("g1", tick, BehavioralPhase.THRIVING, actions, simulation, o, now=now)
        return result.actions[0].approved

    assert not approved(100, T + 1800)  # same path day: spent
    assert approved(101, T + 2 * 86_400)  # two path days later: a fresh partition


def test_tick_context_started_ts_is_the_ticks_clock():
    ctx = TickContext(golem_id="g", tick=1, config=GolemConfig(), state=GolemState(golem_id="g"),
                      started_at="2023-11-14T23:00:00+00:00")
    assert ctx.started_ts == T
    assert ctx.model_copy(update={"started_at": ""}).started_ts is None


# ── status and doctor ────────────────────────────────────────────────────────────────────────


def tick_result(gas_cost: float, inference: float = 0.0) -> TickResult:
    return TickResult(tick=0, tier=Tier.T2, regime="volatile", prediction_error=0.5, threshold=0.3, price=2000.0,
                      gas_price_gwei=1.0, tvl=2e6, oracle_price=2000.0, actions_executed=1, inference_cost=inference,
                      gas_cost=gas_cost)


def test_fold_tallies_gas_spent_today_and_resets_it_at_utc_midnight():
    s = GolemState(golem_id="g")
    s = fold_tick_result(s, tick_result(0.25, 0.01), "2025-03-01T12:00:00+00:00", ClockSection(), HeartbeatSection())
    s = fold_tick_result(s, tick_result(0.25), "2025-03-01T13:00:00+00:00", ClockSection(), HeartbeatSection())
    assert s.daily_gas_usd == pytest.approx(0.5) and s.daily_spend_usd == pytest.approx(0.01)
    s = fold_tick_result(s, tick_result(0.1), "2025-03-02T00:01:00+00:00", ClockSection(), HeartbeatSection())
    assert s.spend_day == "2025-03-02" and s.daily_gas_usd == pytest.approx(0.1) and s.total_gas_usd == pytest.approx(0.6)
    assert GolemState.model_validate({"golem_id": "old"}).daily_gas_usd == 0.0  # old histories replay


def test_status_shows_gas_beside_inference_and_each_budget():
    cfg = GolemConfig(heartbeat=HeartbeatSection(max_daily_cost_usd=5.0))
    state = GolemState(golem_id="g", spend_day="2025-03-01", daily_spend_usd=0.0, daily_gas_usd=9.87)
    st = GolemStatus(golem_id="g", tick=60, activity="waiting", regime="volatile", phase="thriving", vitality=1.0,
                     theta_seconds=30.0, **spend_status(state, cfg))
    assert (st.daily_gas_usd, st.gas_budget_usd_per_day, st.gas_emergency_usd) == (9.87, 10.0, 2.0)
    assert st.max_daily_cost_usd == 5.0 and st.spend_day == "2025-03-01"
    line = spend_line(st)
    assert "inference $0.0000 of $5.00" in line and "gas $9.8700 of $10.00" in line and "$2.00" in line
    assert "2025-03-01 UTC" in line
    # the urgency ceilings, and gas per unit of health factor restored (folded from the ticks that restored it)
    assert "urgent or critical ≤ $20.00 and 2.0% of the value protected per action" in line
    assert "critical ≤ $30.00/day" in line and "gas per 1.0 HF restored n/a" in line
    s = fold_tick_result(state, tick_result(0.5).model_copy(update={"hf_restored": 0.25}),
                         "2025-03-01T12:00:00+00:00", ClockSection(), HeartbeatSection())
    st = GolemStatus(golem_id="g", tick=61, activity="waiting", regime="volatile", phase="thriving", vitality=1.0,
                     theta_seconds=30.0, **spend_status(s, cfg), **restore_status(s))
    assert "gas per 1.0 HF restored $2.00 (0.250 restored)" in spend_line(st)
    old = GolemStatus.model_validate({"golem_id": "g", "tick": 1, "activity": "waiting", "regime": "calm",
                                      "phase": "thriving", "vitality": 1.0, "theta_seconds": 60.0,
                                      "daily_spend_usd": 0.0})
    assert old.daily_gas_usd == 0.0


def test_doctor_shows_gas_today_against_the_partition(tmp_path):
    cfg = GolemConfig()
    now = datetime.now(timezone.utc).timestamp()
    store = RiskStore(tmp_path / "risk.sqlite")
    for tick in range(33):
        store.record_outcome(cfg.golem.id, tick, 0, "repay", opens_exposure=False, verified=True, value_usd=10,
                             pnl_usd=0, gas_usd=0.25, now=now)
    line = _gas_line(cfg, tmp_path, now)
    assert "gas today: $8.2500 over 33 actions of the $10.00/day partition" in line
    assert "routine share $8.00 spent: routine actions are deferred" in line and "$2.00 ring-fenced" in line
    assert "gas today: $0.0000 over 0 actions" in _gas_line(cfg, tmp_path / "nothing", now)


# ── urgency classes, deferred intents ────────────────────────────────────────────────────────


def test_urgency_classes_are_read_from_the_forecast_and_the_steer_never_the_words():
    from golem.safety.urgency import Urgency, classify
    repay = act("repay")
    assert classify(repay, fc(2.88, ticks=12), []).level is Urgency.ROUTINE  # the flash-crash repay: far from a line
    assert classify(repay, fc(1.7, ticks=2), []).level is Urgency.URGENT  # the rule's line within the horizon
    assert classify(repay, URGENT, []).level is Urgency.URGENT  # under the rule's line
    assert classify(repay, CRITICAL, [], floor=1.3).level is Urgency.CRITICAL  # under the MUST floor
    assert classify(repay, fc(1.4, line=1.3, kind="must", ticks=1), []).level is Urgency.CRITICAL
    assert classify(repay, None, []).level is Urgency.ROUTINE  # no loan
    buy = swap(100, "USDC", "WETH", rationale="URGENT: protective, critical")
    assert classify(buy, CRITICAL, [], floor=1.3).level is Urgency.ROUTINE  # buys exposure: never urgent
    assert classify(buy, None, [steer("high")]).level is Urgency.URGENT


def test_deferred_intents_wait_one_per_tool_and_leave_when_decided_or_stale():
    from golem.models.enums import ActionStatus
    from golem.models.record import ActionRecord
    from golem.safety.urgency import DEFERRED_MAX_TICKS, next_deferred, release_reason, with_deferred
    repay = act("repay", amount=800)
    deferred = ActionRecord(action_index=0, action_type="repay", tool_name="repay", status=ActionStatus.DEFERRED,
                            block_reason="risk: gas gate: defer: routine (...): gas above the recent median")
    intents = next_deferred([], 8, [repay], [deferred], 81.0)
    assert [(i.tool, i.since_tick, i.arguments) for i in intents] == [("repay", 8, {"amount": 800})]
    assert next_deferred(intents, 9, [], [], 2.0) == intents  # a T0 tick: it waits on
    again = next_deferred(intents, 10, [repay], [deferred], 60.0)
    assert again[0].since_tick == 8 and again[0].last_tick == 10
    sent = deferred.model_copy(update={"status": ActionStatus.EXECUTED, "block_reason": None})
    assert next_deferred(intents, 11, [repay], [sent], 2.0) == []
    assert next_deferred(intents, 8 + DEFERRED_MAX_TICKS + 1, [], [], 2.0) == []
    # deferred for its gas price, it comes back when gas is at or under its recent median, or when the position
    # makes it urgent
    history = [2.0] * 10
    assert intents[0].cause == "price" and intents[0].level == "routine"
    assert release_reason(intents, 80.0, history, fc(2.0, ticks=40), 1.3) is None
    assert "under its recent median 2.00 gwei" in release_reason(intents, 2.0, history, fc(2.0, ticks=40), 1.3)
    assert "urgency rose to critical" in release_reason(intents, 80.0, history, CRITICAL, 1.3)
    # deferred because the day's gas is spent, cheap gas does not bring it back: another day does
    spent = deferred.model_copy(update={"block_reason": "risk: gas gate: defer: estimated gas $0.5 exceeds the "
                                                        "partition's $0.1 left today for routine actions"})
    budget = next_deferred([], 8, [repay], [spent], 2.0, day="2026-01-01")
    assert budget[0].cause == "budget"
    assert release_reason(budget, 1.0, history, fc(2.0, ticks=40), 1.3, day="2026-01-01") is None
    assert "a new day's gas partition" in release_reason(budget, 1.0, history, fc(2.0, ticks=40), 1.3, day="2026-01-02")
    # re-proposed after the decision's own actions, unless the decision already uses the tool
    assert [a.tool for a in with_deferred([swap()], intents)] == ["swap", "repay"]
    assert with_deferred([act("repay", amount=5)], intents) == [act("repay", amount=5)]


def test_the_gas_ledger_reads_the_days_gas_and_all_of_it_in_one_read(tmp_path):
    """What reflect hands the parent (docs/design/spending.md#the-ledger): the day of `now`, that day's gas and all
    the golem's gas; another golem's gas counts in neither."""
    risk = RiskStore(tmp_path / "risk.sqlite")
    day1 = datetime(2025, 3, 1, 12, tzinfo=timezone.utc).timestamp()
    for tick, (at, gas, golem) in enumerate([(day1 - 86_400, 1.0, "g"), (day1, 2.0, "g"), (day1 + 60, 0.5, "g"),
                                             (day1, 9.0, "other")]):
        risk.record_outcome(golem, tick, 0, "swap", opens_exposure=False, verified=True, value_usd=100.0,
                            pnl_usd=0.0, gas_usd=gas, now=at)
    ledger = risk.gas_ledger("g", day1 + 120)
    assert (ledger.day, ledger.today_usd, ledger.total_usd) == ("2025-03-01", pytest.approx(2.5), pytest.approx(3.5))
    assert ledger.today_usd == pytest.approx(risk.gas_spent_on_day("g", day1 + 120)[1])
