"""Tests written for mutants `make mutation` found surviving: each pins a behaviour that deleting or
negating one statement changed without any test noticing."""

from __future__ import annotations

import pytest

from golem.chain.permits import PermitStore
from golem.cognition.threshold import gate
from golem.inference.decision import DECIDE, parse_decision
from golem.inference.offline import _fmt
from golem.inference.strategy import parse_strategy
from golem.models.enums import Tier
from golem.models.state import GolemState
from tests.unit.test_offline_deliberator import decide, decide_input


def test_each_tier_gets_its_own_reason():
    state = GolemState(golem_id="g")
    assert gate(0.1, 0.3, state, [])[:2] == (Tier.T0, "T0: PE 0.100 < θ 0.300")
    assert gate(0.45, 0.3, state, [])[:2] == (Tier.T1, "T1: θ 0.300 ≤ PE 0.450 < 2θ 0.600")
    assert gate(0.7, 0.3, state, [])[:2] == (Tier.T2, "T2: PE 0.700 ≥ 2θ 0.600")


def test_a_metric_given_as_text_is_shown_as_is():
    assert _fmt("crash") == "crash" and _fmt(None) == "n/a"
    assert _fmt(1.23456) == "1.235" and _fmt(12345.678) == "12345.68"


async def test_the_policy_cap_limits_a_stablecoin_repay_too():
    s = parse_strategy("# S\n## Rules\n- WHEN price > 0 THEN repay 100% debt\n")
    d = await decide(decide_input(debt=8000, usdc=20000, max_trade=5000), s)
    assert [(a.tool, a.arguments["amount"]) for a in d.actions] == [("repay", pytest.approx(5000 * 0.95))]


@pytest.mark.parametrize("conf", ["high", None, 1.5, True])
def test_a_confidence_that_is_not_a_probability_is_a_recorded_rejection(conf):
    parsed = parse_decision([{"type": "tool_use", "name": DECIDE,
                              "input": {"confidence": conf, "recommends_action": False}}], ["WETH"])
    assert parsed.confidence == 0.0
    assert any(r.startswith("decide.confidence") for r in parsed.rejections), parsed.rejections


@pytest.mark.parametrize("ttl", [0, -5])
def test_a_permit_without_a_lifetime_is_refused(tmp_path, ttl):
    store = PermitStore(tmp_path / "permits.sqlite")
    with pytest.raises(ValueError, match="ttl_s must be > 0"):
        store.issue("g", 1, 0, "swap", 100.0, "h" * 64, ttl_s=ttl)


def test_a_refused_action_is_kept_as_a_blocked_permit_with_its_reason(tmp_path):
    store = PermitStore(tmp_path / "permits.sqlite")
    blocked = store.record_blocked("g", 2, 1, "borrow", "h" * 64, "asset DAI is not approved")
    assert store.get(blocked.id) == blocked and blocked.status.value == "blocked"
    assert [p.id for p in store.for_action("g", 2, 1)] == [blocked.id]
    assert [e.detail for e in store.audit(blocked.id)] == ["asset DAI is not approved"]


def test_a_refused_permit_use_is_audited(tmp_path):
    """The refusal's audit row used to be rolled back with the PermitError raised inside the transaction."""
    from golem.chain.permits import PermitError

    store = PermitStore(tmp_path / "permits.sqlite")
    permit = store.issue("g", 1, 0, "swap", 100.0, "h" * 64)
    with pytest.raises(PermitError, match="allows"):
        store.consume(permit.id, "swap", 1000.0)
    with pytest.raises(PermitError, match="is for tool"):
        store.consume(permit.id, "supply", 1.0)
    assert [e.detail for e in store.audit(permit.id)][1:] == ["refused: value $1,000.00", "refused: tool supply"]
    assert store.get(permit.id).status.value == "created"  # a refused use does not spend the permit
    assert store.consume(permit.id, "swap", 50.0).status.value == "committed"
