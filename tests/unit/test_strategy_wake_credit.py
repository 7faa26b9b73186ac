"""A strategy's start wakes the deliberator (the wake floor, like a rule the preview sees fire), and an action is
credited to the strategy it serves — its rule, a tool only its MAY line offers, the strategy the model named in
decide, or the only one active — so `after N actions` counts the LLM's actions too (docs/design/strategies.md)."""

from __future__ import annotations

from datetime import datetime, timezone

from golem.cognition.lines import lift, wake_check
from golem.cognition.system1 import synthetic_snapshot
from golem.inference.decision import decision_tools, parse_decision
from golem.inference.strategies import after_actions, advance, bundle, credits, parse_set
from golem.inference.strategy import parse_strategy
from golem.models.config import ProbeThresholds, WakeSection
from golem.models.enums import Tier
from golem.models.observation import Observation
from golem.models.tick import ProposedAction
from tests.unit.inference_fakes import decide, tool_use

MAIN = "# S\n## Rules\n- WHEN health_factor < 1.2 THEN repay 25% debt\n## Constraints\n"
DCA = "# DCA\n## Schedule\n- window: 00:10-00:20\n## Completion\n- after 2 actions\n"
LP = "# LP\n## Completion\n- after 1 action\n## Constraints\n- MAY borrow\n"


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=timezone.utc)


def _set():
    return parse_set(bundle(MAIN, [("strategies/dca.md", DCA), ("strategies/lp.md", LP)]))


def _obs(price: float = 2000.0) -> Observation:
    return Observation(snapshot=synthetic_snapshot(price, 0, debt_usdc=8000.0), observed_at="t")


# ---- the start wakes the deliberator ----------------------------------------------------------------------------------

def test_a_strategy_starting_lifts_a_quiet_tick_to_t1_and_says_why():
    sset = _set()
    strategy = parse_strategy(MAIN)
    waiting = advance(sset, [], 1, utc(2026, 1, 1, 0, 5), {"price": 2000.0})
    obs = _obs()
    obs.strategies = waiting
    quiet = wake_check(strategy, obs, [2.0, 2.0], 2000.0, ProbeThresholds(), WakeSection())
    assert waiting.active == ["lp"] and quiet.floor == Tier.T1 and quiet.started == ["lp: in season"]
    # the next tick: lp is active already, dca still waits — nothing starts, nothing to wake for (no rule fires)
    obs.strategies = advance(sset, waiting.runs, 2, utc(2026, 1, 1, 0, 6), {"price": 2000.0})
    assert obs.strategies.events == []
    calm = wake_check(strategy, obs, [2.0, 2.0], 2000.0, ProbeThresholds(), WakeSection())
    assert calm.floor is None and calm.started == []
    # dca's window opens: a strategy without rules still wakes the golem on the tick it starts
    obs.strategies = advance(sset, obs.strategies.runs, 3, utc(2026, 1, 1, 0, 10), {"price": 2000.0})
    w = wake_check(strategy, obs, [2.0, 2.0], 2000.0, ProbeThresholds(), WakeSection(preview_rules=False))
    assert w.floor == Tier.T1 and w.rule_hits == []
    tier, reason, lifted = lift(Tier.T0, "T0: PE 0.010 < θ 0.300", w)
    assert tier == Tier.T1 and lifted.lifted_from == Tier.T0
    assert reason == ("T0: PE 0.010 < θ 0.300; wake: T0→T1, strategy dca: in season since "
                      "2026-01-01T00:10:00+00:00 started")


# ---- crediting an action to a strategy --------------------------------------------------------------------------------

def _acts(*tools: str) -> list[ProposedAction]:
    return [ProposedAction(action_index=i, tool=t) for i, t in enumerate(tools)]


def test_credit_goes_by_rule_then_may_then_the_named_strategy_then_the_only_active_one():
    sset = _set()
    both = ["dca", "lp"]
    # a rule says whose: the strategy's own file, or STRATEGY.md's (nobody's)
    c = credits(_acts("swap", "repay"), {0: "strategies/dca.md:7", 1: "STRATEGY.md:3"}, "lp", sset, both)
    assert [(x.action_index, x.strategy, x.why) for x in c] == [(0, "dca", "its rule strategies/dca.md:7")]
    # a tool only lp's MAY line offers is lp's, whatever the model named
    c = credits(_acts("borrow", "swap"), {}, "dca", sset, both)
    assert [(x.strategy, x.why) for x in c] == [("lp", "only strategy lp's MAY line offers borrow"),
                                                ("dca", "the decision named it (decide.strategy)")]
    # two active and none named: the swap is nobody's; one active: it is that one's
    assert credits(_acts("swap"), {}, "", sset, both) == []
    [only] = credits(_acts("swap"), {}, "", sset, ["dca"])
    assert (only.strategy, only.why) == ("dca", "the only active strategy (the decision named none)")
    # the model said it serves STRATEGY.md; an action the owner approved; none active: nobody's
    assert credits(_acts("swap"), {}, "STRATEGY.md", sset, ["dca"]) == []
    approved = [ProposedAction(action_index=0, tool="swap", approval_id="apr-3-0")]
    assert credits(approved, {}, "dca", sset, ["dca"]) == []
    assert credits(_acts("swap"), {}, "dca", sset, []) == []


def test_credited_llm_actions_complete_the_strategy_and_the_record_says_which():
    sset = _set()
    start = advance(sset, [], 10, utc(2026, 1, 1, 0, 12), {"price": 2000.0})
    c = credits(_acts("swap", "swap"), {}, "dca", sset, start.active)
    done = after_actions(start, sset, c, 10, utc(2026, 1, 1, 0, 12))
    dca = next(r for r in done.runs if r.id == "dca")
    assert dca.status == "complete" and dca.actions == 2 and "2 action(s) executed" in dca.completion
    assert [(x.strategy, x.tool) for x in done.credited] == [("dca", "swap"), ("dca", "swap")]
    # a credit for a strategy that is not active is not counted
    late = after_actions(done, sset, c, 11, utc(2026, 1, 1, 0, 13))
    assert late.credited == [] and next(r for r in late.runs if r.id == "dca").actions == 2


# ---- decide asks which strategy the decision serves ----------------------------------------------------------------

def test_decide_offers_the_active_strategies_and_checks_the_named_one():
    plain = decision_tools(["WETH", "USDC"])
    assert "strategy" not in plain[-1]["input_schema"]["properties"]  # no strategy active: the tool as before
    tools = decision_tools(["WETH", "USDC"], None, ["dca"])
    assert tools[-1]["input_schema"]["properties"]["strategy"]["enum"] == ["dca", "STRATEGY.md"]
    swap = tool_use("swap", {"token_in": "USDC", "token_out": "WETH", "amount_in": 100.0}, 1)
    ok = parse_decision([swap, decide("buy", 0.7, True, strategy="dca")], ["WETH", "USDC"], strategies=["dca"])
    assert ok.strategy == "dca" and len(ok.actions) == 1 and not ok.rejections
    bad = parse_decision([swap, decide("buy", 0.7, True, strategy="dcb")], ["WETH", "USDC"], strategies=["dca"])
    assert bad.strategy == "" and len(bad.actions) == 1  # the action stands; it is credited as if none were named
    assert bad.rejections == ["decide.strategy 'dcb' is not an active strategy (active: dca; or STRATEGY.md); "
                              "not credited to any"]


def test_a_t1_prompt_shows_the_active_strategies_files_whole():
    """At T1 the prompt lists rules, not files; a strategy that says in words what to do (no rule) is shown whole."""
    from golem.inference.config import InferenceConfig
    from golem.inference.workspace import WorkspaceSources, assemble_workspace
    from tests.unit.test_offline_deliberator import decide_input

    sset = _set()
    inp = decide_input(tier=Tier.T1)
    alloc = InferenceConfig().allocations(Tier.T1)

    def prompt(active: list[str]) -> str:
        ws = assemble_workspace(inp, WorkspaceSources(strategy=sset.effective(active)), alloc)
        return "\n".join(b["text"] for b in ws.system)

    shown = prompt(["dca"])
    assert "Active strategy `dca` (strategies/dca.md):\n# DCA\n## Schedule\n- window: 00:10-00:20" in shown
    assert "Active strategy" not in prompt([])
