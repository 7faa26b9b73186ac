"""Learning on real Temporal + Anvil: an owner rule that keeps paying becomes a learned PLAYBOOK rule at the delta
cycle, and that rule then changes a later offline decision on chain — with its entry id in the record, Reflexion's
numbers beside it and the credit its verified outcome gave."""

from __future__ import annotations

import asyncio

import pytest

from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.life.cycle_store import CycleStore
from tests.integration.golem_rig import in_process_worker, make_rig

pytestmark = pytest.mark.integration

# The world's loan starts near health factor 2.06: this rule repays 1 % a tick (each repay lifts the HF ~1 %)
# until the HF passes 2.2, then the golem holds — unless it has learned to go on.
STRATEGY = """# Strategy: learn to repay earlier

## Settings
- collateral: WETH
- debt: USDC

## Rules
- WHEN health_factor < 2.2 THEN repay 1% debt

## Constraints
- MUST keep health_factor >= 1.3
- MUST keep balance.USDC >= 500
- MUST NOT borrow
"""


async def test_outcome_derived_rule_changes_a_later_offline_decision_on_chain(temporal_client, tmp_path):
    # every tick decides afresh (no System 1 reuse); the rig switches trials off, so the learned rule is promoted by
    # the Curator's votes alone (a rule's trial: tests/integration/test_learning_trial.py)
    rig = make_rig(tmp_path, "learning-loop", "calm", gating={"mode": "always"},
                   decision_cache={"min_consistency": 1000})
    (rig.home / "STRATEGY.md").write_text(STRATEGY)
    try:
        async with in_process_worker(temporal_client, rig):
            # the delta cycle of tick 10 runs beside ticks 10, 11; the continue-as-new after tick 11 waits for it, so
            # ticks 12-15 decide with its PLAYBOOK.md
            handle = await rig.start_golem(temporal_client, max_ticks=16)
            await asyncio.wait_for(handle.result(), timeout=240)  # the parent folded every tick
        store = CycleStore(rig.data_dir)
        records = [store.load(r["tick"]) for r in reversed(store.recent(30))]
        owner = [r for r in records if r.deliberation and any(a.origin == "owner" for a in r.deliberation.rules_applied)]
        assert len(owner) >= 5, [r.deliberation.decision for r in records if r.deliberation]
        # predict, then compare: every acted tick states what it expected and Reflexion compares it with the chain
        first = owner[0]
        assert first.deliberation.expected.health_factor_after > first.deliberation.expected.health_factor_before
        rx = first.reflexion
        assert rx.verdict == "positive" and rx.verified_health_factor == first.outcome.health_factor_after
        assert f"verified {rx.verified_health_factor:.3f}" in rx.insight and rx.insight_admission is not None
        not_acting, half = rx.counterfactuals
        assert (not_acting.label, half.label) == ("not acting", "half size")
        # half size, simulated with eth_simulateV1 on the pre-tick block: between not acting and the full repay
        assert half.source == f"eth_simulateV1 at the pre-tick block {first.observation.snapshot.block_number}"
        assert not_acting.health_factor_after < half.health_factor_after < rx.verified_health_factor

        # cybernetics: every tick records the ContextPolicy revision in force (offline, nothing to retune: 0)
        assert {r.context_policy_revision for r in records} == {0}

        # the delta cycle at tick 10 learned the rule from >= 5 positive outcomes
        learned = [h for h in HeuristicStore(rig.data_dir / "grimoire" / "heuristics.sqlite").list()
                   if h.text.startswith("WHEN health_factor < 2.42")]
        assert len(learned) == 1 and learned[0].status == "active", learned
        hid = learned[0].id
        assert hid in (rig.data_dir / "PLAYBOOK.md").read_text()

        # a later tick (once the delta cycle of tick 10 ended): the owner's rule no longer fires (HF > 2.2), the learned one does, on chain
        later = [r for r in records if r.deliberation and any(a.entry_id == hid for a in r.deliberation.rules_applied)]
        assert later, [(r.tick, r.deliberation.decision) for r in records if r.deliberation]
        # far from every line the learned repay is routine: at a gas price over the recent median it waits (deferred,
        # on the record) and goes out on a later tick; the first tick it was sent is the one judged here
        sent = [r for r in later if r.actions and r.actions[0].status.value == "executed"]
        waited = [r for r in later if r.actions and r.actions[0].status.value == "deferred"]
        assert all("median" in (r.actions[0].block_reason or "") for r in waited), [r.actions[0] for r in waited]
        assert sent, [(r.tick, [(a.status, a.block_reason) for a in r.actions]) for r in later]
        tick = sent[0]
        assert tick.tick >= 10 and tick.observation.min_health_factor() >= 2.2
        (applied,) = tick.deliberation.rules_applied
        assert applied.origin == "learned" and applied.rule.startswith("PLAYBOOK.md:")
        assert tick.actions[0].status.value == "executed" and tick.actions[0].tx_hash
        assert tick.outcome.health_factor_after > tick.outcome.health_factor_before
        # credit: the verified outcome strengthened the learned rule that produced it
        assert any(c.entry_id == hid and c.kind == "heuristic" and c.delta == 1 for c in tick.credit), tick.credit
    finally:
        rig.stop()
