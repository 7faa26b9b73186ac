"""The tool_call layers (safety → risk → permits), limits that only tighten, MUST constraints, the
gas gate and the risk statistics — pure, on real SQLite stores where they persist."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.chain.permits import PermitStatus, PermitStore
from golem.inference.strategy import parse_strategy
from golem.models.config import GolemConfig, PolicySection
from golem.models.enums import BehavioralPhase
from golem.models.observation import ChainSnapshot, Observation, PoolState, PositionState
from golem.models.tick import ProposedAction, SimulatedAction, SimulationResult
from golem.safety.audit import AuditLog
from golem.safety.cage import SafetyCage, ValidationContext, validate_layered
from golem.safety.constraints import Book, must_gate
from golem.safety.gas import gas_gate
from golem.safety.limits import (
    TIGHTER,
    RiskLimits,
    SafetyLimits,
    check_limit_change,
    check_playbook_delta,
    tightened,
)
from golem.safety.risk import RiskSnapshot, RiskStore, ToolStats, kelly_fraction, net_value_usd, summarize

THRIVING = BehavioralPhase.THRIVING


def obs(*, collateral=10.0, debt=8000.0, weth=20.0, usdc=20_000.0, oracle=2000.0, pool_price=2000.0, gas=1.0,
        lt: float | None = 0.825):
    """An observation as the reader builds it from Aave: `lt` is getUserAccountData's liquidation threshold
    (the embedded market's WETH reserve: 82.5 %), None for a snapshot that does not carry one."""
    pool = PoolState(address="0x" + "01" * 20, token0="WETH", token1="USDC", reserve0=500.0,
                     reserve1=500.0 * pool_price, price=pool_price, tvl=1e6)
    hf = collateral * oracle * (lt or 0.825) / debt if debt else None
    snap = ChainSnapshot(chain_id=31337, block_number=100, block_timestamp=0, gas_price_gwei=gas, pool=pool,
                         oracle_price=oracle, balances={"WETH": weth, "USDC": usdc, "DAI": 0.0},
                         positions=[PositionState(id="lending:x", collateral=collateral, debt=debt, health_factor=hf,
                                                  liquidation_threshold=lt)])
    return Observation(snapshot=snap)


def swap(amount, tin="WETH", tout="USDC", idx=0, **kw):
    return ProposedAction(action_index=idx, tool="swap", arguments={"token_in": tin, "token_out": tout,
                                                                      "amount_in": amount, **kw})


def act(tool, amount, idx=0):
    return ProposedAction(action_index=idx, tool=tool, arguments={"amount": amount})


def sim_for(action: ProposedAction, ok=True, gas=100_000, price=2000.0, reason=None) -> SimulatedAction:
    a, t = action.arguments, action.tool
    if t == "swap":
        amt = float(a["amount_in"])
        out = amt * price if a["token_in"] == "WETH" else amt / price
        exp = {f"delta:{a['token_in']}": -amt, f"delta:{a['token_out']}": out}
    else:
        amt = float(a["amount"])
        exp = {"supply": {"delta:WETH": -amt, "delta:collateral": amt},
               "withdraw": {"delta:WETH": amt, "delta:collateral": -amt},
               "borrow": {"delta:USDC": amt, "delta:debt": amt},
               "repay": {"delta:USDC": -amt, "delta:debt": -amt}}[t]
    return SimulatedAction(action_index=action.action_index, ok=ok, gas_estimate=gas, expected=exp if ok else {},
                           revert_reason=reason)


LIMITS = SafetyLimits(policy=PolicySection(approved_assets=["WETH", "USDC"], max_trade_size_usd=5_000,
                                           max_slippage_bps=100), kill_switch_path="/nonexistent/killswitch")
CAGE = SafetyCage(LIMITS)


def ctx(o=None, risk=None, strategy=None, phase=THRIVING):
    o = o or obs()
    return ValidationContext(golem_id="g1", tick=1, phase=phase, observation=o,
                             risk=risk or RiskSnapshot(nav_usd=100_000, high_water_usd=100_000), strategy=strategy)


def decide(action, c=None, sim=...):
    c = c or ctx()
    s = sim_for(action) if sim is ... else sim
    decision, _ = CAGE.tool_call(action, c, s, Book.of(c.observation.snapshot))
    return decision


# ── the most restrictive layer wins, in order ────────────────────────────────────────────────


def test_allowed_action_passes_every_layer():
    d = decide(swap(1))
    assert d.allowed and [v.layer for v in d.verdicts] == ["safety", "risk", "permits"]


def test_safety_blocks_before_risk_and_permits():
    # unapproved asset (safety) AND a reverting simulation (permits): safety answers
    d = decide(swap(100, "DAI", "USDC"), sim=SimulatedAction(action_index=0, ok=False, revert_reason="x"))
    assert not d.allowed and d.blocked_by == "safety" and "DAI is not in approved_assets" in d.reason
    assert [v.layer for v in d.verdicts] == ["safety"]


def test_risk_blocks_before_permits():
    # withdrawing 5 of 10 WETH collateral with 8000 debt → HF 0.825·2000·5/8000 = 1.031 < floor 1.1
    d = decide(act("withdraw", 1.5), sim=sim_for(act("withdraw", 5)))
    assert not d.allowed and d.blocked_by == "risk" and "hard shield" in d.reason and "1.031" in d.reason


def test_the_health_projection_uses_aaves_liquidation_threshold():
    # the book at the observation reproduces the health factor Aave reported, whatever its threshold
    for lt in (0.825, 0.8, 0.7):
        o = obs(lt=lt)
        book = Book.of(o.snapshot)
        assert book.liquidation_threshold == lt
        assert book.health_factor == pytest.approx(o.snapshot.positions[0].health_factor, rel=1e-12)
        after = book.after(sim_for(act("withdraw", 5)).expected)
        assert after.health_factor == pytest.approx(2000 * 5 * lt / 8000)
    # a snapshot without Aave's number (no collateral yet) falls back to the embedded market's WETH 82.5 %
    assert Book.of(obs(lt=None).snapshot).liquidation_threshold == 0.825
    # LT 0.8 puts the same withdrawal at exactly 1.000 (under the 1.1 floor), as Aave would compute it
    d = decide(act("withdraw", 1.5), ctx(obs(lt=0.8)), sim=sim_for(act("withdraw", 5)))
    assert not d.allowed and "1.000" in d.reason


def test_reverting_simulation_is_the_permit_layers_refusal():
    d = decide(swap(1), sim=SimulatedAction(action_index=0, ok=False, revert_reason="slippage"))
    assert not d.allowed and d.blocked_by == "permits" and d.reason == "simulation failed: slippage"
    assert decide(swap(1), sim=None).reason.startswith("not simulated")


def test_llm_cannot_widen_slippage_or_size_through_arguments():
    assert "max_slippage_bps 500" in decide(swap(1, max_slippage_bps=500)).reason
    assert "exceeds max_trade_size_usd" in decide(swap(3)).reason
    widen = ProposedAction(action_index=0, tool="set_policy", arguments={"max_trade_size_usd": 1e9})
    assert "unknown tool 'set_policy'" in decide(widen, sim=None).reason


def test_phase_restriction_blocks_new_positions_only():
    c = ctx(phase=BehavioralPhase.CONSERVATION)
    assert "conservation phase blocks new positions" in decide(act("supply", 1), c).reason
    assert decide(act("repay", 100), c).allowed


def test_max_drawdown_blocks_exposure_but_allows_derisking():
    c = ctx(risk=RiskSnapshot(nav_usd=70_000, high_water_usd=100_000))  # 30 % > 20 %
    d = decide(swap(1000, "USDC", "WETH"), c)
    assert d.blocked_by == "safety" and "max drawdown" in d.reason and "30.0%" in d.reason
    assert decide(swap(1), c).allowed


def test_oracle_deviation_halts_swaps():
    d = decide(swap(1), ctx(obs(pool_price=2200.0)))  # 1000 bps off the oracle
    assert d.blocked_by == "risk" and "deviates 1000 bps" in d.reason


def test_kill_switch_blocks_every_write(tmp_path):
    switch = tmp_path / "kill"
    switch.touch()
    cage = SafetyCage(LIMITS.model_copy(update={"kill_switch_path": str(switch)}))
    c = ctx()
    d, _ = cage.tool_call(act("repay", 1), c, sim_for(act("repay", 1)), Book.of(c.observation.snapshot))
    assert not d.allowed and "kill switch" in d.reason


# ── the gas gate ────────────────────────────────────────────────────────────────────────


def test_gas_gate_numbers():
    assert gas_gate(1.0, 10.0, None, 2.0) is None
    assert "exceeds the partition" in gas_gate(11.0, 10.0, None, 2.0)
    assert "over 2× the usual" in gas_gate(2.1, 10.0, 1.0, 2.0)
    assert gas_gate(2.0, 10.0, 1.0, 2.0) is None


@given(est=st.floats(0, 100), avail=st.floats(-10, 100), typical=st.one_of(st.none(), st.floats(0.01, 50)))
def test_gas_gate_never_proceeds_over_budget(est, avail, typical):
    verdict = gas_gate(est, avail, typical, 2.0)
    if est > avail:
        assert verdict is not None
    if verdict is None and typical is not None:
        assert est <= typical * 2.0


def test_gas_gate_defers_in_the_cage():
    # 100k gas at 5000 gwei × $2000 = $1,000 of gas against a $10 partition
    d = decide(swap(1), ctx(obs(gas=5000.0)))
    assert not d.allowed and d.deferred and d.blocked_by == "risk" and "gas gate: defer" in d.reason


# ── Kelly sizing and adaptive guardrails ─────────────────────────────────────────────────────


def test_kelly_fraction():
    assert kelly_fraction(0.6, 1.0) == pytest.approx(0.2)
    assert kelly_fraction(0.4, 1.0) < 0


def test_kelly_blocks_exposure_without_edge_only_with_enough_data():
    few = RiskSnapshot(nav_usd=1e5, high_water_usd=1e5, bets=3, win_rate=0.0, payoff_ratio=0.0)
    assert decide(swap(500, "USDC", "WETH"), ctx(risk=few)).allowed  # 3 bets: the data does not support sizing yet
    many = few.model_copy(update={"bets": 12})
    d = decide(swap(500, "USDC", "WETH"), ctx(risk=many))
    assert d.blocked_by == "risk" and "Kelly sizing: no edge" in d.reason
    assert decide(swap(1), ctx(risk=many)).allowed  # selling WETH reduces exposure: never Kelly-capped


def test_kelly_caps_size_by_edge():
    risk = RiskSnapshot(nav_usd=10_000, high_water_usd=10_000, bets=20, win_rate=0.55, payoff_ratio=1.0)
    # f* = 0.1, half-Kelly of $10k = $500
    assert decide(swap(400, "USDC", "WETH"), ctx(risk=risk)).allowed
    d = decide(swap(600, "USDC", "WETH"), ctx(risk=risk))
    assert not d.allowed and "$500.00" in d.reason


def test_adaptive_guardrails():
    failing = RiskSnapshot(nav_usd=1e5, high_water_usd=1e5, tools={"supply": ToolStats(n=6, failures=4)})
    d = decide(act("supply", 1), ctx(risk=failing))
    assert d.blocked_by == "risk" and "failed verification in 4 of its last 6" in d.reason
    streak = RiskSnapshot(nav_usd=1e5, high_water_usd=1e5, consecutive_losses=3)
    assert "halve the size cap to $2,500.00" in decide(swap(3000, "USDC", "WETH"), ctx(risk=streak)).reason
    assert decide(swap(2000, "USDC", "WETH"), ctx(risk=streak)).allowed


def test_risk_store_learns_from_outcomes(tmp_path):
    store = RiskStore(tmp_path / "risk.sqlite")
    noon = 1_700_049_600.0  # 2023-11-15 12:00 UTC
    for tick in range(4):
        store.record_outcome("g1", tick, 0, "swap", opens_exposure=True, verified=True, value_usd=1000,
                             pnl_usd=-10, gas_usd=0.5, now=noon)
    store.record_outcome("g1", 3, 0, "swap", opens_exposure=True, verified=True, value_usd=1000, pnl_usd=-10,
                         gas_usd=0.5, now=noon)  # a retried verify overwrites
    store.mark_nav("g1", 1, 50_000, now=noon)
    snap = store.snapshot("g1", 45_000, now=noon + 60)
    assert snap.bets == 4 and snap.win_rate == 0.0 and snap.consecutive_losses == 4
    assert snap.drawdown_pct == pytest.approx(10.0)
    assert snap.gas_spent_today_usd == pytest.approx(2.0) and snap.typical_action_gas_usd == pytest.approx(0.5)
    assert snap.gas_day == "2023-11-15"


def test_summarize_streak_stops_at_a_win():
    rows = [("swap", 1, 1, 100, -1, 0, 0), ("swap", 1, 1, 100, -1, 0, 0), ("swap", 1, 1, 100, 5, 0, 0),
            ("swap", 1, 1, 100, -1, 0, 0)]
    s = summarize(rows, 1.0, 1.0, 0.0, 0)
    assert s.consecutive_losses == 2 and s.bets == 4 and s.win_rate == 0.25 and s.payoff_ratio == pytest.approx(5.0)


def test_net_value():
    assert net_value_usd(obs().snapshot) == pytest.approx(20 * 2000 + 20_000 + 10 * 2000 - 8000)


# ── MUST constraints ─────────────────────────────────────────────────────────────────────────

STRATEGY = parse_strategy("""
## Rules
- WHEN health_factor < 1.6 THEN repay 25% debt
## Constraints
- MUST keep health_factor >= 1.3
- MUST keep balance.USDC >= 500
- MUST NOT swap more than 30% WETH
- MUST NOT borrow
""")


def test_must_gate_before_the_llm():
    gate = must_gate(STRATEGY, obs().snapshot)  # HF 2.0, USDC 20k
    assert gate.breached == [] and gate.forbidden_tools == ["borrow"] and not gate.force_t2
    low = must_gate(STRATEGY, obs(oracle=1200.0, usdc=100.0).snapshot)  # HF 1.2, USDC 100
    assert low.force_t2 and len(low.breached) == 2
    assert "health_factor >= 1.3" in low.breached[0] and "is 1.2" in low.breached[0]


def test_must_constraints_on_the_simulated_post_state():
    c = ctx(strategy=STRATEGY)
    assert "forbids borrow" in decide(act("borrow", 10), c).reason
    c = ctx(obs(usdc=4_000.0), strategy=STRATEGY)
    d = decide(swap(3_600, "USDC", "WETH"), c)  # would leave 400 USDC
    assert d.blocked_by == "safety" and "balance.USDC would be 400" in d.reason
    # the 30 % cap is cumulative over the tick: 2 WETH + 5 WETH > 6 WETH
    book = Book.of(c.observation.snapshot)
    first, book = CAGE.tool_call(swap(2, idx=0), c, sim_for(swap(2, idx=0)), book)
    second, book = CAGE.tool_call(swap(2.5, idx=1), c, sim_for(swap(2.5, idx=1)), book)
    assert first.allowed and second.allowed
    third, _ = CAGE.tool_call(swap(2, idx=2), c, sim_for(swap(2, idx=2)), book)
    assert "exceeds the cap 6" in third.reason and "+4.5 earlier" in third.reason


def test_derisking_allowed_while_a_keep_is_breached():
    c = ctx(obs(oracle=1200.0), strategy=STRATEGY)  # HF 1.2 < 1.3
    assert decide(act("repay", 1000), c, sim=sim_for(act("repay", 1000), price=1200.0)).allowed
    d = decide(act("withdraw", 0.1), c)
    assert not d.allowed and "health_factor" in d.reason


# ── limits only tighten ──────────────────────────────────────────────────────────────────────


def test_widening_is_refused_and_tightening_applied():
    change = check_limit_change(LIMITS, {"max_trade_size_usd": 10_000, "max_slippage_bps": 50, "hf_hard_floor": 1.05,
                                         "max_drawdown_pct": 10, "approved_assets": ["WETH", "USDC", "DAI"]})
    assert not change.ok
    text = "\n".join(change.refused)
    assert "max_trade_size_usd 5000 → 10000" in text and "hf_hard_floor 1.1 → 1.05" in text and "DAI" in text
    assert change.applied == {"max_slippage_bps": 50, "max_drawdown_pct": 10}
    assert check_limit_change(LIMITS, {"approved_assets": ["WETH"]}).applied == {"approved_assets": ["WETH"]}
    assert "unknown limit" in check_limit_change(LIMITS, {"yolo": 1}).refused[0]


@settings(max_examples=60)
@given(st.dictionaries(st.sampled_from(sorted(TIGHTER)), st.floats(0.01, 1e4), max_size=6))
def test_applied_changes_never_widen(proposal):
    clean = {}
    for k, v in proposal.items():
        field = RiskLimits.model_fields.get(k) or PolicySection.model_fields.get(k)
        clean[k] = int(v) if field is not None and field.annotation is int else v
    change = check_limit_change(LIMITS, clean)
    try:
        new = tightened(LIMITS, change)
    except ValueError:
        return  # a tightening outside the field's own range (e.g. drawdown < 1 %) is refused by the model
    old_flat = {**{k: getattr(LIMITS.policy, k) for k in PolicySection.model_fields}, **LIMITS.risk.model_dump()}
    new_flat = {**{k: getattr(new.policy, k) for k in PolicySection.model_fields}, **new.risk.model_dump()}
    for k, direction in TIGHTER.items():
        assert (new_flat[k] <= old_flat[k]) if direction == "down" else (new_flat[k] >= old_flat[k])


def test_playbook_delta_cannot_weaken():
    old = "# Playbook\n- MUST keep health_factor >= 1.4\n- MUST NOT borrow\n- WHEN x THEN y\n"
    assert check_playbook_delta(old, old + "- MUST keep balance.USDC >= 100\n").ok
    assert check_playbook_delta(old, old.replace(">= 1.4", ">= 1.5")).ok  # tighter
    loosened = check_playbook_delta(old, old.replace(">= 1.4", ">= 1.2"))
    assert not loosened.ok and "loosens" in loosened.refused[0]
    dropped = check_playbook_delta(old, old.replace("- MUST NOT borrow\n", ""))
    assert not dropped.ok and "removes the safety constraint `MUST NOT borrow`" in dropped.refused[0]
    widened = check_playbook_delta(old, old + "- limit.max_trade_size_usd = 50000\n", LIMITS)
    assert not widened.ok and "max_trade_size_usd" in widened.refused[0]


def test_limits_from_config_and_hash_binding():
    cfg = GolemConfig()
    limits = SafetyLimits.from_config(cfg)
    assert limits.policy == cfg.policy and limits.risk == RiskLimits()
    tighter = tightened(limits, check_limit_change(limits, {"max_drawdown_pct": 10}))
    assert tighter.policy_hash() != limits.policy_hash() and len(limits.policy_hash()) == 64


# ── validate_layered: permits and the audit trail ────────────────────────────────────────────


def test_validate_layered_issues_permits_and_audits(tmp_path):
    permits, audit = PermitStore(tmp_path / "p.sqlite"), AuditLog(tmp_path / "a.sqlite")
    actions = [swap(1, idx=0), swap(100, "USDC", "DAI", idx=1), swap(1, idx=2)]
    sim = SimulationResult(actions=[sim_for(actions[0]), sim_for(actions[1]),
                                    SimulatedAction(action_index=2, ok=False, revert_reason="slippage")])
    res, decisions = validate_layered(CAGE, actions, sim, ctx(), permits, audit)
    assert [a.approved for a in res.actions] == [True, False, False]
    p = permits.get(res.actions[0].permit_id)
    assert p.status is PermitStatus.CREATED and p.policy_hash == LIMITS.policy_hash() and p.tool == "swap"
    assert [d.blocked_by for d in decisions] == [None, "safety", "permits"]
    kinds = [e.kind for e in audit.entries()]
    assert kinds == ["tool_call.allowed", "permit.created", "tool_call.blocked", "permit.blocked",
                     "tool_call.blocked", "permit.blocked", "threat.sandwich", "threat.sandwich"]
    # the sandwich check's verdict on each swap on the pair (1 WETH against 500: no sandwich pays), computed
    assert [(v.action_index, v.fired) for v in res.threats] == [(0, False), (2, False)]
    assert "no sandwich pays" in audit.entries(kind_prefix="threat.")[0].payload["detail"]
    assert audit.verify().ok


def test_a_fired_somatic_marker_shrinks_the_size_of_new_exposure_only():
    """A loss in this situation before (a strong negative marker) halves the size cap of new exposure."""
    from golem.safety.somatic import lay_marker, situation_of

    o = obs()
    sit = situation_of(o, 2000.0, "supply")  # the same regime, health band, flat price, the same tool
    markers, laid = lay_marker([], 3, sit, pnl_usd=-60.0, liquidated=False, valence=-0.7, what="lost")
    c = ctx(o).model_copy(update={"markers": markers, "last_price": 2000.0})
    assert decide(act("supply", 1.5)).allowed  # $3,000: within the $5,000 cap without the marker
    d = decide(act("supply", 1.5), c)
    assert not d.allowed and d.blocked_by == "risk" and laid.id in d.reason and "$2,500.00" in d.reason
    assert decide(act("supply", 1.0), c).allowed  # $2,000 fits the shrunk cap
    assert decide(act("repay", 3000), c).allowed  # risk-reducing: never shrunk
