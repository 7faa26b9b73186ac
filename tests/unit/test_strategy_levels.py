"""The levels of a strategy's lines where they act: MUST binds (unchanged), SHOULD shrinks an action in sizing and keeps
the evaluator's verdict from 'good', MAY lets a tool be offered and pass the cage only while its strategy is active;
and a strategy's state survives the fold into GolemState and reaches `golem status`."""

from __future__ import annotations

from argparse import Namespace

import pytest

from cli.status import strategy_lines
from golem.cognition.decide import apply_must_gate, offered
from golem.cognition.fold import fold_tick_result, new_golem_state
from golem.inference.evaluator import evaluate_outcome, weigh_should
from golem.inference.strategies import bundle, parse_set
from golem.models.config import GolemConfig
from golem.models.enums import Tier
from golem.models.record import DeliberationRecord, OutcomeRecord
from golem.models.strategy_runs import StrategyRun
from golem.models.tick import Deliberation, SimulationResult, TickResult
from golem.safety.cage import size_to_fit, validate_layered
from golem.chain.permits import PermitStore
from golem.safety.constraints import Book, constraint_refusal, must_gate
from golem.safety.sizing import SOFT_LAYER, SizeCap, soft_floor
from golem.usecases.status import golem_status
from tests.unit.test_safety_cage import act, ctx, obs, sim_for, swap
from tests.unit.test_sizing import cage

MAIN = "# S\n## Rules\n## Constraints\n- MUST keep balance.USDC >= 500\n"
HEDGE = """# Hedge
## Rules
## Constraints
- SHOULD NOT swap more than 10% WETH
- SHOULD NOT supply
- MAY borrow
"""


def effective(active: list[str]):
    s = parse_set(bundle(MAIN, [("strategies/hedge.md", HEDGE)])).effective(active)
    assert s is not None
    return s


# ---- SHOULD ---------------------------------------------------------------------------------------------------------

def test_soft_caps_never_go_below_the_minimum_and_name_what_was_exceeded():
    caps = [SizeCap(limit="SHOULD", layer=SOFT_LAYER, max_amount=0.0, why="SHOULD a"),
            SizeCap(limit="SHOULD", layer=SOFT_LAYER, max_amount=9.0, why="SHOULD b"),
            SizeCap(limit="max_trade_size_usd", layer="safety", max_amount=0.5, why="hard")]
    out, past = soft_floor(caps, 0.25, 4.0)
    assert [c.max_amount for c in out] == [0.25, 9.0, 0.5] and past == ["SHOULD a"]
    assert soft_floor(caps, 0.25, None) == (caps, [])


def test_a_should_line_shrinks_the_swap_and_says_so(tmp_path):
    # 20 WETH in the wallet: SHOULD NOT swap more than 10 % WETH → 2 WETH of the 2.4 proposed ($4,800 < $5,000 cap)
    context = ctx(strategy=effective(["hedge"]))
    actions = [swap(2.4)]
    fits = size_to_fit(cage(), actions, SimulationResult(actions=[sim_for(a) for a in actions]), context)
    assert fits[0].amount == pytest.approx(2.0) and fits[0].binding is not None
    assert fits[0].binding.limit == "SHOULD" and fits[0].should == [
        "SHOULD (strategies/hedge.md line 4: `SHOULD NOT swap more than 10% WETH`)"]
    res, _ = validate_layered(cage(), actions, SimulationResult(actions=[sim_for(a) for a in actions]), context,
                              PermitStore(tmp_path / "p.sqlite"),
                              resimulate=lambda sized: SimulationResult(actions=[sim_for(a) for a in sized]))
    [v] = res.actions
    assert v.approved and v.action is not None and v.action.arguments["amount_in"] == pytest.approx(2.0)
    assert v.should == fits[0].should and "SHOULD" in (v.clipped or "")
    # inactive, the SHOULD lines weigh nothing
    idle = size_to_fit(cage(), actions, SimulationResult(actions=[sim_for(a) for a in actions]),
                       ctx(strategy=effective([])))
    assert idle[0].amount == pytest.approx(2.4) and idle[0].should == []


def test_should_not_a_tool_halves_it_and_never_refuses_it():
    context = ctx(strategy=effective(["hedge"]))
    actions = [act("supply", 4.0)]
    [f] = size_to_fit(cage(), actions, SimulationResult(actions=[sim_for(a) for a in actions]), context)
    assert f.action is not None and f.amount == pytest.approx(2.0) and f.should
    tiny = [act("supply", 0.001)]  # $2: below the $10 minimum halved → kept at the minimum, not refused
    [g] = size_to_fit(cage(min_trade_usd=1.0), tiny, SimulationResult(actions=[sim_for(a) for a in tiny]), context)
    assert g.action is not None and g.refusal is None and g.amount == pytest.approx(0.0005)


async def test_the_evaluator_weighs_should_lines():
    assert weigh_should("good", ["SHOULD x"]) == ("neutral", "good by the metrics, but past 1 SHOULD line(s): SHOULD x")
    assert weigh_should("bad", ["SHOULD x"]) == ("bad", None) and weigh_should("good", []) == ("good", None)
    gen = DeliberationRecord(model="offline-deliberator", tier=Tier.T1, reasoning_summary="r", decision="d",
                             confidence=0.7)
    gain = OutcomeRecord(verified=True, pnl_impact=3.0)
    assert (await evaluate_outcome(gain, [], gen)).final_verdict == "good"
    ev = await evaluate_outcome(gain, [], gen, should=["SHOULD (strategies/hedge.md line 4: `…`)"])
    assert ev.final_verdict == "neutral" and ev.should_breached and ev.external_verdict == "good"


# ---- MAY ------------------------------------------------------------------------------------------------------------

def test_a_may_tool_is_withheld_and_refused_while_its_strategy_is_idle():
    idle, on = effective([]), effective(["hedge"])
    gate = must_gate(idle, obs().snapshot)
    assert list(gate.withheld) == ["borrow"] and "strategy hedge" in gate.withheld["borrow"]
    tools = [{"name": "swap"}, {"name": "borrow"}, {"name": "decide"}]
    assert [t["name"] for t in offered(tools, gate) or []] == ["swap", "decide"]
    assert offered(tools, must_gate(on, obs().snapshot)) == tools
    d = Deliberation(record=DeliberationRecord(model="m", tier=Tier.T2, recommends_action=True),
                     actions=[act("borrow", 100.0), act("repay", 10.0, idx=1)])
    gated = apply_must_gate(d, gate)
    assert [a.tool for a in gated.actions] == ["repay"]
    assert gated.record.rejections == [f"borrow: {gate.withheld['borrow']}"]
    book = Book.of(obs().snapshot)
    assert (constraint_refusal(idle, act("borrow", 100.0), book, book, True) or "").startswith("MAY: borrow is allowed")
    assert constraint_refusal(on, act("borrow", 100.0), book, book, True) is None


# ---- durable state and status ----------------------------------------------------------------------------------------

def test_the_fold_keeps_the_runs_and_status_shows_them(tmp_path):
    cfg = GolemConfig.model_validate({"golem": {"id": "g1"}})
    s = new_golem_state(cfg)
    runs = [StrategyRun(id="hedge", status="complete", started_tick=3, completed_tick=4,
                        completed_at="2026-01-01T00:04:00+00:00", completion="1 action(s) executed", actions=1),
            StrategyRun(id="dca", status="active", started_tick=4, started_at="2026-01-01T00:04:00+00:00")]
    result = TickResult(tick=0, tier=Tier.T0, regime="calm", prediction_error=0.0, threshold=0.5, price=2000.0,
                        gas_price_gwei=1.0, tvl=1.0, oracle_price=2000.0, strategy_runs=runs)
    after = fold_tick_result(s, result, "2026-01-01T00:04:00+00:00", cfg.clock, cfg.heartbeat)
    assert after.strategy_runs == runs
    # a tick from before strategies (None) leaves them as they were
    again = fold_tick_result(after, result.model_copy(update={"strategy_runs": None}), "2026-01-01T00:05:00+00:00",
                             cfg.clock, cfg.heartbeat)
    assert again.strategy_runs == runs
    st = golem_status(again, cfg, activity="waiting", tick_workflow_id=None, run_ticks=1, config_version="v")
    lines = strategy_lines(st, Namespace(data=str(tmp_path)))
    assert lines == ["  strategy:   hedge: complete at tick 4 (2026-01-01T00:04:00+00:00): 1 action(s) executed",
                     "  strategy:   dca: active since tick 4 (2026-01-01T00:04:00+00:00), 0 action(s)"]


# ---- what the LLM reads ------------------------------------------------------------------------------------------------

def test_the_invariants_name_active_should_lines_and_what_may_lines_hold_back():
    from golem.inference.workspace import invariants_text
    from tests.unit.test_offline_deliberator import decide_input

    inp = decide_input()
    on = invariants_text(inp, effective(["hedge"]))
    assert "strategies/hedge.md line 4: SHOULD NOT swap more than 10% WETH (soft: a larger action is shrunk" in on
    assert "Not available now" not in on and "STRATEGY.md line 4: MUST keep balance.USDC >= 500" in on
    idle = invariants_text(inp, effective([]))
    assert "SHOULD" not in idle and "Not available now: borrow is allowed only while strategy hedge is active" in idle


async def test_the_offline_deliberator_acts_on_an_active_strategys_rule_as_the_owners():
    from golem.inference.offline import OfflineDeliberator
    from tests.unit.test_offline_deliberator import decide_input

    text = "# Buy\n## Rules\n- WHEN price > 0 THEN swap 1% USDC to WETH\n"
    sset = parse_set(bundle(MAIN, [("strategies/buy.md", text)]))
    d = await OfflineDeliberator().decide(decide_input(), sset.effective(["buy"]), "")
    assert [(r.rule, r.origin) for r in d.record.rules_applied] == [("strategies/buy.md:3", "owner")]
    idle = await OfflineDeliberator().decide(decide_input(), sset.effective([]), "")
    assert idle.actions == []


def test_show_and_status_read_the_record_strategies(tmp_path, capsys):
    from cli.records import cmd_show
    from golem.cognition.system1 import synthetic_snapshot
    from golem.life.cycle_store import CycleStore
    from golem.models.observation import Observation
    from golem.models.record import DecisionCycleRecord
    from golem.models.strategy_runs import StrategyActivity, StrategyCredit, StrategyEvent

    obs = Observation(snapshot=synthetic_snapshot(2000.0, 0, debt_usdc=8000.0), observed_at="t")
    act = StrategyActivity(runs=[StrategyRun(id="w", status="complete", completed_tick=9, completion="1 action(s)")],
                           events=[StrategyEvent(strategy="w", kind="completed", why="1 action(s) executed")],
                           errors=["strategies/bad.md line 3: bad cron"],
                           credited=[StrategyCredit(action_index=0, tool="swap", strategy="w",
                                                    why="the decision named it (decide.strategy)")])
    rec = DecisionCycleRecord(tick=9, timestamp="2026-01-01T00:09:00+00:00", golem_id="g", observation=obs,
                              regime=obs.regime, prediction_error=0.1, deliberation_threshold=0.3, tier=Tier.T1,
                              gating_reason="wake", strategies=act)
    CycleStore(tmp_path).persist(rec)
    assert cmd_show(Namespace(data=str(tmp_path), tick=9, run=None, runs=False, brief=True)) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  strategy: w completed: 1 action(s) executed" in out
    assert "  strategy: w counts action 0 (swap): the decision named it (decide.strategy)" in out
    assert "  strategy file error: strategies/bad.md line 3: bad cron" in out
    cfg = GolemConfig.model_validate({"golem": {"id": "g"}})
    st = golem_status(new_golem_state(cfg), cfg, activity="waiting", tick_workflow_id=None, run_ticks=1,
                      config_version="v")
    assert strategy_lines(st, Namespace(data=str(tmp_path))) == [
        "  STRATEGY FILE ERROR (left out, the others run): strategies/bad.md line 3: bad cron"]
