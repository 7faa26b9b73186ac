"""Regime-matched evaluation on real Temporal + Anvil: every tick is tagged (record, episode), each rule that enters
PLAYBOOK.md at a delta cycle is recorded as a learning change, and at a later cycle it is judged on the golem's own
per-tick outcomes in matched regime cells: a rule that makes the golem lose (a repay every tick in a calm market: gas
for nothing) is rolled back — retired, out of the next PLAYBOOK.md revision, an event saying why — while a rule
that changed nothing is kept, marked inconclusive."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from golem.events.store import EventStore
from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.learning.ledger import LearningLedger
from golem.life.cycle_store import CycleStore
from tests.integration.golem_rig import in_process_worker, make_rig

pytestmark = pytest.mark.integration

STRATEGY = """# Strategy: hold the loan

## Settings
- collateral: WETH
- debt: USDC

## Rules
- WHEN health_factor < 1.3 THEN repay 50% debt

## Constraints
- MUST keep health_factor >= 1.3
- MUST keep balance.USDC >= 500
- MUST NOT borrow
"""
BENIGN = "WHEN health_factor < 1.2 THEN repay 20% debt"  # never fires at the world's HF of about 2.06
HARMFUL = "WHEN health_factor > 1.5 THEN repay 1% debt"  # fires every tick: the gas of a repay nothing needed


def _promote(store: HeuristicStore, text: str, tag: str):
    """A learned rule voted into PLAYBOOK.md, as the Curator's ADD and UPVOTEs leave it (0.5 + 2 × 0.1)."""
    h = store.add_or_reinforce(text, "global", f"{tag}-episode")
    return store.vote(h.id, 2, 0)


async def test_a_rule_that_loses_in_matched_regimes_is_rolled_back_and_one_without_effect_kept(temporal_client,
                                                                                                tmp_path):
    rig = make_rig(tmp_path, "regime-rollback", "calm", gating={"mode": "always"},
                   decision_cache={"min_consistency": 1000},
                   learning={"regime_window_ticks": 10, "regime_min_matched": 4})
    (rig.home / "STRATEGY.md").write_text(STRATEGY)
    heuristics = HeuristicStore(rig.data_dir / "grimoire" / "heuristics.sqlite")
    benign = _promote(heuristics, BENIGN, "benign")  # compiled into PLAYBOOK.md at the first delta cycle (tick 10)
    store = CycleStore(rig.data_dir)
    try:
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=34)
            # after the first delta cycle has compiled the benign rule, the harmful one is voted in: it enters
            # PLAYBOOK.md at the second (tick 20) and is judged at the third (tick 30) on ticks 10-19 vs 20-29
            while store.count() < 11:  # the first delta cycle (tick 10) has started, beside the ticks
                await asyncio.sleep(0.2)
            await temporal_client.get_workflow_handle(f"golem-{rig.golem_id}-delta-10").result()
            harmful = _promote(heuristics, HARMFUL, "harmful")
            await asyncio.wait_for(handle.result(), timeout=420)
            # the cycles run beside the ticks: the rule is in PLAYBOOK.md from the end of the tick-20 cycle to the
            # end of the tick-30 one
            entered, removed = [(await temporal_client.get_workflow_handle(
                f"golem-{rig.golem_id}-delta-{t}").describe()).close_time for t in (20, 30)]
        ledger = LearningLedger(rig.data_dir / "grimoire" / "learning.sqlite")
        changes = {c.ref: c for c in ledger.changes()}
        assert (changes[benign.id].op, changes[benign.id].tick) == ("entered", 10), changes
        assert (changes[harmful.id].op, changes[harmful.id].tick) == ("entered", 20), changes

        # the rule without effect: kept, inconclusive, still in PLAYBOOK.md
        kept = changes[benign.id]
        assert kept.status == "inconclusive" and kept.judged_tick == 20, kept
        playbook = (rig.data_dir / "PLAYBOOK.md").read_text()
        assert benign.id in playbook

        # the rule that lost: rolled back at tick 30 with its figures, retired, out of PLAYBOOK.md
        bad = changes[harmful.id]
        assert bad.status == "rolled_back" and bad.judged_tick == 30, bad
        cmp = bad.figures["comparison"]
        assert cmp["verdict"] == "harmful" and cmp["effect_usd"] < 0 and cmp["z"] <= -1.645 and cmp["n_after"] >= 4
        assert "worse in matched regimes" in bad.reason
        assert heuristics.get(harmful.id).status == "retired"
        assert harmful.id not in playbook

        records = {r["tick"]: store.load(r["tick"]) for r in store.recent(40)}
        fired = [t for t, r in records.items() if r.deliberation
                 and any(a.entry_id == harmful.id for a in r.deliberation.rules_applied)]
        # it acted only while it was in PLAYBOOK.md: every tick it fired in ran while it was there (the cycles run
        # beside the ticks, so the tick during which a cycle ends may have read the file before it changed)
        spans = {}
        for t in fired:
            d = await temporal_client.get_workflow_handle(f"golem-{rig.golem_id}-tick-{t}").describe()
            spans[t] = (d.start_time, d.close_time)
        assert fired and all(start <= removed and end >= entered for start, end in spans.values()), \
            (entered, removed, spans)
        assert any(datetime.fromisoformat(r.timestamp) > removed for r in records.values()), "ticks after it left"
        # every tick is tagged from what it observed (a tenth of 30 WETH sold into the pool's 500: 1.2 %, "normal"),
        # and its episode carries the cell
        tagged = records[25].observation.regime_tag
        assert tagged is not None and tagged.trend == "range" and tagged.liquidity_band == "normal"
        from golem.grimoire.episodes.store import EpisodeStore  # noqa: PLC0415 (the worker's embedder, loaded once)

        services = rig.services()
        episode = services.episodes.get(records[25].episodes_written[0])
        assert isinstance(services.episodes, EpisodeStore) and episode.regime_tag == tagged.cell
        # so does the Reflexion insight an acted tick admitted into the Grimoire
        admitted = [r for r in records.values() if r.reflexion and r.reflexion.insight_admission == "admitted"]
        assert admitted, [(r.tick, r.reflexion.insight_admission) for r in records.values() if r.reflexion]
        entry = services.semantic.get(admitted[0].reflexion.insight_entry_id)
        assert entry.regime_tag == admitted[0].observation.regime_tag.cell

        events = EventStore(rig.data_dir).read(kinds=["grimoire.change_rolled_back"])
        assert harmful.id in [e.payload["ref"] for e in events] and {e.tick for e in events} == {30}
        # a change the golem's own distillation made at the same cycle shares the harmful rule's windows, and verdict
        assert {e.payload["made_tick"] for e in events} == {20}, [e.payload for e in events]
    finally:
        rig.stop()


@pytest.mark.parametrize("path", ["bear", "bull"])
async def test_a_beta_loss_does_not_demote_a_heuristic(temporal_client, tmp_path, path):
    """Attribution on a bear and a bull path: a learned rule (that never fires) enters PLAYBOOK.md at the tick-10
    cycle. Bear: the market crashes right after; the golem loses, the delta cycle of tick 20 puts the loss on market
    beta ("wait, do not overreact") and the rule, judged in matched regimes (the crash's cells have no before), is kept
    and stays active — a naive before/after comparison blames it for the crash. Bull: the market's gain is beta too,
    and the rule is not credited with it."""
    from golem.models.golem import ConsolidationResult

    rig = make_rig(tmp_path, f"beta-{path}", "crash" if path == "bear" else "trending", theta=0.3, gating={"mode": "always"},
                   decision_cache={"min_consistency": 1000},
                   learning={"regime_window_ticks": 10, "regime_min_matched": 4})
    (rig.home / "STRATEGY.md").write_text(STRATEGY)
    heuristics = HeuristicStore(rig.data_dir / "grimoire" / "heuristics.sqlite")
    benign = _promote(heuristics, BENIGN, "benign")
    rig.start_market(interval=0.3, per_tick=True, crash_after=12)
    try:
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=24)
            await asyncio.wait_for(handle.result(), timeout=420)
            delta = await temporal_client.get_workflow_handle(f"golem-{rig.golem_id}-delta-20",
                                                              result_type=ConsolidationResult).result()
        a = delta.attribution
        assert a is not None and a["strategy_alpha"] == a["knowledge_alpha"] == 0.0, a  # the golem never acted
        if path == "bear":
            assert a["total"] < 0 and a["market_beta"] < 0, a
            assert a["dominant"] == "market_beta" and a["responsible_loop"].startswith("none"), a
        else:
            assert a["total"] > 0 and a["market_beta"] == pytest.approx(a["total"], abs=1e-3) and a["dominant"] is None
        (change,) = [c for c in LearningLedger(rig.data_dir / "grimoire" / "learning.sqlite").changes()
                     if c.ref == benign.id]
        assert change.op == "entered" and change.status not in ("rolled_back", "improved"), change
        assert heuristics.get(benign.id).status == "active" and benign.id in (rig.data_dir / "PLAYBOOK.md").read_text()
        assert not [op for op in delta.curator.get("operations", []) if op.get("entry_id") == benign.id
                    and op.get("op") in ("DOWNVOTE", "RETIRE")], delta.curator
    finally:
        rig.stop()
