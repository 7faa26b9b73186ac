"""STRATEGY.md parsing, and the example golem home validating against the shared config model."""

from __future__ import annotations

from pathlib import Path

import pytest

from golem.inference.strategy import StrategyError, load_strategy, parse_strategy, rules_in
from golem.models.config import GolemConfig, load_config

HOME = Path(__file__).resolve().parents[2] / "examples" / "golem-home"

GOOD = """# Strategy: test
Prose is fine here. WHEN this is prose outside a section it is ignored.

## Rules
Some prose inside the section is fine too.
- WHEN health_factor < 1.6 THEN repay 25% debt
- when price_change_bps <= -300 and regime != trending_up then swap 20% weth to USDC
- WHEN steer contains "reduce exposure and hedge" THEN swap 25% WETH to USDC
- WHEN balance.usdc > 1_000 AND gas_gwei < 50 THEN supply 1.5 collateral
* WHEN pool_oracle_gap_bps >= 150 THEN borrow 100 debt

## Constraints
- MUST keep health_factor >= 1.3
- MUST NOT swap more than 50% WETH
- MUST NOT borrow
"""


def test_parse_good_strategy():
    s = parse_strategy(GOOD)
    assert s.title == "Strategy: test"
    assert [r.line for r in s.rules] == [6, 7, 8, 9, 10]
    r1, r2, r3, r4, r5 = s.rules
    assert (r1.conditions[0].metric, r1.conditions[0].op, r1.conditions[0].value) == ("health_factor", "<", 1.6)
    assert r1.action.tool == "repay" and r1.action.amount.percent and r1.action.amount.value == 25
    assert [str(c) for c in r2.conditions] == ["price_change_bps <= -300", "regime != trending_up"]
    assert (r2.action.token_in, r2.action.token_out) == ("WETH", "USDC")
    assert r3.conditions[0].kind == "steer" and r3.conditions[0].text == "reduce exposure and hedge"
    assert r4.conditions[0].metric == "balance.USDC" and r4.conditions[0].value == 1000
    assert r4.action.tool == "supply" and not r4.action.amount.percent and r4.action.amount.value == 1.5
    assert r5.action.tool == "borrow"
    kinds = [(c.kind, c.metric or c.tool) for c in s.constraints]
    assert kinds == [("keep", "health_factor"), ("cap", "swap"), ("forbid", "borrow")]
    assert s.constraints[1].token == "WETH" and s.constraints[1].amount.value == 50


@pytest.mark.parametrize("line,needles", [
    ("- WHEN health < 1.6 THEN repay 25% debt", ["line 4", "unknown metric 'health'", "health_factor"]),
    ("- WHEN health_factor < 1.6 THEN sell 25% WETH", ["line 4", "unknown action 'sell'", "swap <amount>"]),
    ("- WHEN health_factor < abc THEN repay 25% debt", ["line 4", "'abc' is not a number"]),
    ("- WHEN health_factor < 1.6 THEN swap 25% WETH to PEPE", ["line 4", "unknown token 'PEPE'", "WETH, USDC, DAI"]),
    ("- WHEN health_factor < 1.6 THEN repay 150% debt", ["line 4", "out of range"]),
    ("- WHEN health_factor < 1.6 THEN borrow 10% debt", ["line 4", "cannot be a percentage"]),
    ("- WHEN regime > volatile THEN repay 10% debt", ["line 4", "regime cannot be compared"]),
    ("- WHEN regime == sideways THEN repay 10% debt", ["line 4", "unknown regime 'sideways'", "range_bound"]),
    ("- WHEN steer contains reduce THEN repay 10% debt", ["line 4", "steer contains \"some words\""]),
    ("- health_factor < 1.6 then repay", ["line 4", "WHEN … THEN"]),
    ("WHEN health_factor < 1.6 THEN repay 25% debt", ["line 4", "must be bullets"]),
    ("- WHEN health_factor < 1.6 THEN swap 5% USDC to usdc", ["line 4", "to itself"]),
    ("- WHEN health_factor < 1.6 THEN repay 5% collateral", ["line 4", "repay acts on debt"]),
])
def test_rule_errors_name_line_field_and_fix(line, needles):
    text = f"# S\n\n## Rules\n{line}\n"
    with pytest.raises(StrategyError) as e:
        parse_strategy(text)
    for n in needles:
        assert n in str(e.value)


@pytest.mark.parametrize("line,needle", [
    ("- MUST keep regime == volatile", "regime cannot be kept"),
    ("- MUST NOT yolo", "unknown tool 'yolo'"),
    ("- MUST be nice", "cannot read the constraint"),
    ("- MUST NOT swap more than lots WETH", "not a number"),
])
def test_constraint_errors(line, needle):
    with pytest.raises(StrategyError) as e:
        parse_strategy(f"# S\n## Rules\n- WHEN price > 1 THEN repay 1% debt\n## Constraints\n{line}\n")
    assert "line 5" in str(e.value) and needle in str(e.value)


def test_missing_rules_section_and_settings():
    with pytest.raises(StrategyError, match="no \"## Rules\" section"):
        parse_strategy("# Strategy\njust prose\n")
    with pytest.raises(StrategyError, match="line 3: unknown setting"):
        parse_strategy("# S\n## Settings\n- leverage: 3\n## Rules\n")
    with pytest.raises(StrategyError, match="same token"):
        parse_strategy("# S\n## Settings\n- collateral: USDC\n- debt: USDC\n## Rules\n")
    s = parse_strategy("# S\n## Settings\n- collateral: DAI\n## Rules\n<!-- \n- WHEN nonsense\n-->\n")
    assert s.collateral_token == "DAI" and s.rules == []


def test_playbook_rules_are_lenient():
    s = parse_strategy(GOOD)
    text = "# Playbook\n- WHEN gas_gwei > 100 THEN repay 5% debt\n- WHEN vibes THEN swap\n- plain heuristic\n"
    rules = rules_in(text, "PLAYBOOK.md", s)
    assert len(rules) == 1 and rules[0].label == "PLAYBOOK.md:2"


def test_example_home_is_valid(tmp_path):
    cfg = load_config(HOME / "golem.toml")
    assert isinstance(cfg, GolemConfig)
    assert (cfg.clock.theta_base_seconds, cfg.clock.theta_min_seconds, cfg.clock.theta_max_seconds) == (2, 1, 5)
    assert (cfg.clock.delta_theta_ticks, cfg.clock.continue_as_new_ticks) == (50, 100)
    strategy = load_strategy(HOME / "STRATEGY.md")
    tools = {r.action.tool for r in strategy.rules}
    assert {"repay", "swap"} <= tools
    assert any(c.kind == "steer" for r in strategy.rules for c in r.conditions)
    assert (HOME / "HEARTBEAT.md").read_text().strip()
    bad = tmp_path / "STRATEGY.md"
    bad.write_text("# S\n## Rules\n- WHEN x < 1 THEN repay 1% debt\n")
    with pytest.raises(StrategyError) as e:
        load_strategy(bad)
    assert str(e.value).startswith(f"{bad} line 3: unknown metric 'x'")
    with pytest.raises(StrategyError, match="not found"):
        load_strategy(tmp_path / "missing.md")
