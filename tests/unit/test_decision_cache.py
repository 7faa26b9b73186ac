"""Decision cache: pattern hash, consistency, TTL, invalidation, drift, hit rate."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.cognition.decision_cache import (
    DecisionCacheSection,
    cache_conditions,
    hit_rate_report,
    invalidate,
    lookup,
    on_playbook_revision,
    pattern_hash,
    record_decision,
)
from golem.cognition.system1 import synthetic_snapshot
from golem.models.enums import MarketRegime, ProbeSeverity
from golem.models.observation import Anomaly, Observation
from golem.models.state import DecisionCacheState

CFG = DecisionCacheSection()
T0 = 1_700_000_000.0


def obs(price=2000.0, regime=MarketRegime.TRENDING_DOWN, fired=()) -> Observation:
    return Observation(snapshot=synthetic_snapshot(price, 1), regime=regime,
                       anomalies=[Anomaly(probe=p, severity=ProbeSeverity.HIGH, description="") for p in fired])


def seen(times=3, price=2000.0, regime="trending_down", models=("h:hf-repay",), now=T0, playbook=1, policy=1):
    c = DecisionCacheState()
    o = obs(price)
    for i in range(times):
        c = record_decision(c, "p1", "repay 25% debt", cache_conditions(o), mental_models=list(models), now=now + i,
                            tick=i, regime=regime, playbook_revision=playbook, context_policy_revision=policy, cfg=CFG)
    return c


def look(c, price=2000.0, now=T0 + 10, regime="trending_down", playbook=1, policy=1, pattern="p1"):
    return lookup(c, pattern, cache_conditions(obs(price)), now=now, regime=regime, playbook_revision=playbook,
                  context_policy_revision=policy, cfg=CFG)


def test_pattern_hash_is_stable_and_coarse():
    a = pattern_hash(obs(2000.0, fired=["price_delta"]), 2100.0)
    assert a == pattern_hash(obs(2001.0, fired=["price_delta"]), 2100.0)  # same 50-bps bucket
    assert a != pattern_hash(obs(2000.0, fired=["price_delta"]), 2000.0)  # different move
    assert a != pattern_hash(obs(2000.0, regime=MarketRegime.VOLATILE, fired=["price_delta"]), 2100.0)
    assert a != pattern_hash(obs(2000.0), 2100.0)  # different probes fired
    assert len(a) == 16


def test_needs_three_consistent_decisions_then_hits():
    c, r = look(seen(times=2))
    assert not r.hit and "needs 3" in r.reason
    c, r = look(seen(times=3))
    assert r.hit and r.decision.consistent_action == "repay 25% debt" and r.decision.consistency_count == 3
    assert c.hits == 1 and c.lookups == 1 and c.hit_rate == 1.0


def test_an_inconsistent_decision_resets_the_count():
    c = seen(times=3)
    c = record_decision(c, "p1", "do nothing", {"price": 2000.0}, mental_models=[], now=T0 + 5, tick=9,
                        regime="trending_down", playbook_revision=1, context_policy_revision=1, cfg=CFG)
    assert c.entries[0].consistency_count == 1 and not look(c)[1].hit


def test_ttl_expiry():
    c, r = look(seen(), now=T0 + CFG.ttl_seconds + 10)
    assert not r.hit and c.entries == [] and c.invalidations == {"ttl": 1}


def test_regime_change_invalidates_everything():
    c = seen()
    c = record_decision(c, "p2", "swap", {"price": 2000.0}, mental_models=[], now=T0, tick=3,
                        regime="trending_down", playbook_revision=1, context_policy_revision=1, cfg=CFG)
    c, r = look(c, regime="volatile")
    assert not r.hit and c.entries == [] and c.invalidations == {"regime_change": 2}


def test_context_policy_revision_invalidates_everything():
    c, r = look(seen(), policy=2)
    assert not r.hit and c.invalidations == {"context_policy_revision": 1}


def test_playbook_revision_invalidates_entries_using_modified_heuristics():
    c = seen(models=("h:hf-repay",))
    c = record_decision(c, "p2", "swap", {"price": 2000.0}, mental_models=["h:momentum"], now=T0, tick=3,
                        regime="trending_down", playbook_revision=1, context_policy_revision=1, cfg=CFG)
    c2 = on_playbook_revision(c, 2, {"h:momentum"})
    assert [e.pattern_hash for e in c2.entries] == ["p1"] and c2.entries[0].playbook_revision == 2
    assert c2.invalidations == {"playbook_revision": 1}
    assert look(c2, playbook=2)[1].hit
    # a revision nobody announced with its heuristics: the entry cannot be trusted
    c3, r = look(c, playbook=2)
    assert not r.hit and "PLAYBOOK revision 1 → 2" in r.reason and c3.entries == []


@pytest.mark.parametrize("price,hit", [(2000 * 1.19, True), (2000 * 1.21, False), (2000 * 0.79, False)])
def test_condition_drift_over_20_percent_invalidates(price, hit):
    c, r = look(seen(), price=price)
    assert r.hit == hit
    if not hit:
        assert "drifted" in r.reason and c.invalidations == {"drift": 1} and c.entries == []


def test_hit_rate_report_and_bounded_size():
    c = DecisionCacheState()
    for i in range(100):
        c = record_decision(c, f"p{i}", "a", {"price": 1.0}, mental_models=[], now=T0 + i, tick=i, regime="r",
                            playbook_revision=0, context_policy_revision=0, cfg=CFG)
    assert len(c.entries) == CFG.max_entries and c.entries[-1].pattern_hash == "p99"
    c, _ = lookup(c, "p99", {"price": 1.0}, now=T0 + 100, regime="r", playbook_revision=0,
                  context_policy_revision=0, cfg=CFG)
    c, _ = lookup(c, "nope", {"price": 1.0}, now=T0 + 100, regime="r", playbook_revision=0,
                  context_policy_revision=0, cfg=CFG)
    assert hit_rate_report(c)["lookups"] == 2 and hit_rate_report(c)["hit_rate"] == 0.0  # p99 seen once


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["x", "y"]),
                          st.sampled_from(["r1", "r2"]), st.floats(0.5, 2.0)), max_size=40))
def test_stats_stay_consistent(ops):
    c = DecisionCacheState()
    now = T0
    for pattern, action, regime, price in ops:
        now += 60
        c, res = lookup(c, pattern, {"price": price}, now=now, regime=regime, playbook_revision=0,
                        context_policy_revision=0, cfg=CFG)
        assert not res.hit or res.decision.consistency_count >= CFG.min_consistency
        c = record_decision(c, pattern, action, {"price": price}, mental_models=[], now=now, tick=0, regime=regime,
                            playbook_revision=0, context_policy_revision=0, cfg=CFG)
        assert 0 <= c.hits <= c.lookups and 0.0 <= c.hit_rate <= 1.0
        assert len({e.pattern_hash for e in c.entries}) == len(c.entries)
    c2 = invalidate(c, regime="other", context_policy_revision=0, now=now)
    assert c2.entries == []
