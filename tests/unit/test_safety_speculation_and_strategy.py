"""Co-occurrence EMA speculation (read tools only) and the strategy validation stages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golem.chain.read_tools import READ_TOOLS, ToolRegistry
from golem.chain.speculation import SpeculationEngine, ema_update, predictions
from golem.chain.tools.schemas import TOOL_SCHEMAS, ToolArgumentError
from golem.models.config import PolicySection
from golem.safety.limits import SafetyLimits
from golem.safety.strategy_check import STRATEGY_UNVIABLE, validate_strategy

NAMES = st.sampled_from(["get_balances", "get_pool_state", "get_gas_price", "swap", "quote_swap"])


def test_ema_matches_the_spec():
    t = ema_update({}, "a", "b")
    assert t == {"a": {"b": 0.1}}
    t = ema_update(t, "a", "b")
    assert t["a"]["b"] == pytest.approx(0.19)
    t = ema_update(t, "a", "c")
    assert t["a"]["b"] == pytest.approx(0.19 * 0.99) and t["a"]["c"] == 0.1


@given(st.lists(st.tuples(NAMES, NAMES), max_size=60))
def test_ema_probabilities_stay_in_range(pairs):
    t: dict = {}
    for a, b in pairs:
        t = ema_update(t, a, b)
    assert all(0.01 < p < 1.0 for bs in t.values() for p in bs.values())


def test_speculation_only_predicts_read_tools(tmp_path):
    eng = SpeculationEngine(tmp_path / "spec.sqlite")
    for _ in range(15):
        eng.record_sequence(["get_gas_price", "get_position", "swap"])
    eng.record_sequence(["get_position", "get_block"])
    table = eng.table()
    assert table["get_position"]["swap"] >= 0.7 and table["get_position"]["get_block"] < 0.7
    assert [n for n, _ in predictions(table, "get_position")] == ["swap"]
    assert eng.predict("get_position") == []  # swap is a write tool: never speculated
    assert [n for n, _ in eng.predict("get_gas_price")] == ["get_position"]
    # persisted
    assert SpeculationEngine(tmp_path / "spec.sqlite").table() == table


def test_registry_tiers():
    reg = ToolRegistry()
    assert reg.read_tool("swap") is None and reg.is_write("swap")
    assert reg.read_tool("get_balances") is READ_TOOLS["get_balances"]
    schemas = reg.schemas(forbidden=["borrow"])
    names = {s["name"]: s["tier"] for s in schemas}
    assert names["get_balances"] == "read" and names["swap"] == "write" and "borrow" not in names
    assert set(TOOL_SCHEMAS) - {"borrow"} <= set(names)
    with pytest.raises(ToolArgumentError, match="quote_swap: missing required argument"):
        READ_TOOLS["quote_swap"](None, None, "0x", {"token_in": "WETH"})
    with pytest.raises(ToolArgumentError, match="unexpected argument"):
        READ_TOOLS["get_balances"](None, None, "0x", {"x": 1})


LIMITS = SafetyLimits(policy=PolicySection(approved_assets=["WETH", "USDC"], max_trade_size_usd=5_000))


def test_malformed_strategy_names_line_field_and_fix():
    res = validate_strategy("## Rules\n- WHEN health_factor < 1.6 THEN repay lots debt\n", LIMITS)
    assert res.status == STRATEGY_UNVIABLE and not res.viable
    issue = res.issues[0]
    assert issue.stage == "schema" and issue.field == "STRATEGY.md line 2" and "'lots' is not a number" in issue.message
    assert "Use a plain number" in issue.message
    missing = validate_strategy("# nothing\n", LIMITS)
    assert missing.status == STRATEGY_UNVIABLE and "## Rules" in missing.issues[0].message


def test_consistency_range_and_risk_findings():
    text = """
## Rules
- WHEN price_change_bps <= -30000 THEN swap 10% WETH to USDC
- WHEN steer contains "dai" THEN swap 10% USDC to DAI
- WHEN health_factor > 3 THEN borrow 100000 debt
## Constraints
- MUST keep debt <= 100
- MUST keep debt >= 200
"""
    res = validate_strategy(text, LIMITS)
    by_stage = {(i.stage, i.severity) for i in res.issues}
    assert res.status == STRATEGY_UNVIABLE  # the two debt lines contradict each other
    assert ("consistency", "critical") in by_stage and ("range", "warning") in by_stage and ("risk", "warning") in by_stage
    text_all = res.explanation()
    assert "DAI, not in approved_assets" in text_all and "likely a decimal error" in text_all
    assert "-30000 is outside the plausible range" in text_all and "no MUST keep health_factor floor" in text_all


def test_no_usable_rule_is_unviable():
    res = validate_strategy("## Rules\n- WHEN regime == volatile THEN borrow 10 debt\n## Constraints\n- MUST NOT borrow\n",
                            LIMITS)
    assert res.status == STRATEGY_UNVIABLE and "no rule can ever act" in res.explanation()


def test_example_strategy_only_warns_offline():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "examples/golem-home/STRATEGY.md").read_text()
    res = validate_strategy(text, LIMITS)
    assert res.viable and [i.stage for i in res.issues] == ["dry_run"]
