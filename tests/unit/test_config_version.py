"""Config versions: the hash, the diff and the validator's refusals, as pure functions."""

from __future__ import annotations

import pytest

from golem.models.config import GolemConfig
from golem.models.config_version import ConfigChange, config_diff, config_version, strategy_sha256, validate_change

SHA = strategy_sha256("## Rules\n")


def test_version_is_the_values_not_the_spelling():
    a = GolemConfig.model_validate({"policy": {"max_trade_size_usd": 1000}})
    b = GolemConfig.model_validate({"policy": {"max_trade_size_usd": 1000.0, "max_slippage_bps": 100.0}})
    assert config_version(a, SHA) == config_version(b, SHA)  # defaults filled in, int == float
    c = GolemConfig.model_validate({"policy": {"max_trade_size_usd": 2000}})
    assert config_version(a, SHA) != config_version(c, SHA)
    assert config_version(a, SHA) != config_version(a, strategy_sha256("## Rules\n- WHEN x THEN y\n"))
    assert config_diff(a, c) == ["[policy.max_trade_size_usd] 1000.0 -> 2000.0"]


def test_validator_names_the_bad_keys_and_keeps_the_golem_id():
    running = GolemConfig.model_validate({"golem": {"id": "g1"}})
    with pytest.raises(ValueError) as err:
        validate_change(running, ConfigChange(config={"golem": {"id": "g1"}, "policy": {"max_trade_size_usd": -1},
                                                      "clock": {"theta_typo": 3}}, strategy_sha256=SHA))
    assert "[policy.max_trade_size_usd]" in str(err.value) and "[clock.theta_typo] unknown key" in str(err.value)
    with pytest.raises(ValueError, match=r"\[golem.id\] cannot change"):
        validate_change(running, ConfigChange(config={"golem": {"id": "g2"}}, strategy_sha256=SHA))
    ok = validate_change(running, ConfigChange(config={"golem": {"id": "g1"}, "policy": {"max_trade_size_usd": 7}}))
    assert ok.policy.max_trade_size_usd == 7


def test_the_diff_of_a_late_section_names_only_the_key_that_changed():
    """[wake] and the late [policy] keys are left out of the dump at their defaults; changing one key of such a
    section must read as that key, not as the whole section appearing from null."""
    from golem.models.config import GolemConfig
    from golem.models.config_version import config_diff

    old = GolemConfig()
    new = GolemConfig.model_validate({"wake": {"horizon_ticks": 5}, "policy": {"gas_ceiling_per_action_usd": 15}})
    assert config_diff(old, new) == ["[policy.gas_ceiling_per_action_usd] 20.0 -> 15.0",
                                     "[wake.horizon_ticks] 3.0 -> 5.0"]
    assert config_diff(new, old) == ["[policy.gas_ceiling_per_action_usd] 15.0 -> 20.0",
                                     "[wake.horizon_ticks] 5.0 -> 3.0"]


def test_apply_change_swaps_the_version_from_the_next_tick_and_says_what_changed():
    from golem.models.config_version import ConfigVersionInfo
    from golem.usecases.config_apply import apply_change

    running = GolemConfig.model_validate({"golem": {"id": "g1"}})
    info = ConfigVersionInfo(version=config_version(running, SHA), strategy_sha256=SHA, applied_at_tick=3)
    same = apply_change(running, info, ConfigChange(config={"golem": {"id": "g1"}}, strategy_sha256=SHA), 9, "t")
    assert same.note == "" and same.info is info and same.answer.effective_from_tick == 3
    swap = apply_change(running, info, ConfigChange(config={"golem": {"id": "g1"}, "policy": {"max_trade_size_usd": 7}},
                                                    strategy_sha256=SHA, source="cli"), 9, "t")
    assert swap.config.policy.max_trade_size_usd == 7 and swap.info.previous == info.version
    assert (swap.info.applied_at_tick, swap.answer.effective_from_tick, swap.info.source) == (9, 9, "cli")
    assert "[policy.max_trade_size_usd]" in swap.note and swap.answer.changed == swap.note.split(": ", 1)[1].split("; ")
