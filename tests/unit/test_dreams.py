"""Pure parts of the dream cycle: scheduler urgency and the doubling of rehearsal, Tier 1 threat lists, REM
scenarios named by their source episode, the rehearsal verdict, the staging buffer's promotion, threat coverage."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from golem.grimoire.episodes.model import Episode
from golem.grimoire.dreams.staging import (
    DREAM_VALIDATED_CONFIDENCE,
    DreamJournal,
    StagedItem,
    StageKind,
    StageStatus,
    StagingBuffer,
    Trigger,
    corroborate,
    staged_id,
    threat_coverage,
)
from golem.grimoire.dreams.threats import (
    Crisis,
    PositionView,
    ResponseCheck,
    Scenario,
    ThreatKind,
    judge,
    rem_scenarios,
    swap_impact_bps,
    tier1_threats,
)
from golem.cognition.dream_scheduler import dream_urgency
from golem.models.enums import MarketRegime, Tier
from golem.models.state import GolemState, PADVector, TickSummary


def test_calm_golem_dreams_on_the_fixed_schedule_and_a_troubled_one_earlier():
    calm = GolemState(golem_id="g", tick=199, last_dream_tick=0)
    assert not dream_urgency(calm, 200, 20).due
    assert dream_urgency(calm.model_copy(update={"tick": 200}), 200, 20).due
    troubled = calm.model_copy(update={
        "tick": 120, "position_health": {"aave": 1.2}, "pad": PADVector(pleasure=-0.8, arousal=0.8),
        "recent_ticks": [TickSummary(tick=i, regime=r) for i, r in enumerate(
            [MarketRegime.TRENDING_UP, MarketRegime.VOLATILE, MarketRegime.TRENDING_DOWN, MarketRegime.VOLATILE])],
    })
    u = dream_urgency(troubled, 200, 20)
    assert u.due and u.terms["risk"] > 0.25 and u.terms["emotion"] > 0.2 and u.terms["novelty"] > 0
    assert "risk" in " ".join(u.reasons)
    # never sooner than the minimum gap, however troubled
    assert not dream_urgency(troubled.model_copy(update={"tick": 10}), 200, 20).due
    assert not dream_urgency(troubled.model_copy(update={"dreaming": True}), 200, 20).due


def test_prediction_error_stands_in_for_a_neutral_daimon():
    s = GolemState(golem_id="g", tick=50, recent_ticks=[TickSummary(tick=i, prediction_error=0.9) for i in range(5)])
    assert dream_urgency(s, 200, 20).terms["emotion"] > 0.25


def test_rev6_doubles_threat_rehearsal_in_volatile_regimes():
    assert dream_urgency(GolemState(golem_id="g", regime=MarketRegime.VOLATILE), 200, 20).threat_rehearsals == 2
    assert dream_urgency(GolemState(golem_id="g", regime=MarketRegime.RANGE_BOUND), 200, 20).threat_rehearsals == 1
    pos = PositionView(health_factor=1.5, debt=8000, collateral=10, weth=20)
    once, twice = tier1_threats(pos, 1), tier1_threats(pos, 2)
    assert {s.threat for s in once} == set(ThreatKind)
    assert len(twice) == 2 * len(once)
    deep = {s.name: s for s in twice}
    assert deep["liquidation cascade ×1.5"].crisis.price_shock < deep["liquidation cascade"].crisis.price_shock


def test_threats_follow_the_positions():
    assert tier1_threats(PositionView()) == []
    no_loan = {s.threat for s in tier1_threats(PositionView(weth=5))}
    assert no_loan == {ThreatKind.POOL_DRAINED, ThreatKind.REVERTING_EXIT}
    cascade = next(s for s in tier1_threats(PositionView(health_factor=2.1, debt=1, collateral=1))
                   if s.threat == ThreatKind.LIQUIDATION_CASCADE)
    # HF ∝ price: the shock takes HF 2.1 to 1.05
    assert abs(cascade.crisis.price_shock - -0.5) < 1e-9


def _episode(eid: str, tick: int) -> Episode:
    return Episode(id=eid, golem_id="g", tick=tick, created_at="2026-01-01T00:00:00+00:00",
                   regime=MarketRegime.TRENDING_DOWN, tier=Tier.T1, summary=f"tick {tick}")


def test_rem_varies_real_episodes_worst_health_first():
    eps = [_episode("a", 1), _episode("b", 2), _episode("c", 3)]
    out = rem_scenarios(eps, {"a": 1.8, "b": 1.19}, limit=2)
    assert {s.source_episode for s in out} == {"a", "b"}, "only episodes with a loan, each named"
    first = out[0]
    assert first.source_episode == "b" and first.name == "deeper crash after tick 2"
    # deeper than the crash that would just liquidate it (1 − 1/1.19 ≈ 16%)
    assert first.crisis.price_shock < -(1 - 1 / 1.19)
    assert any(s.crisis.liquidity_removed > 0 for s in out) and any(not s.crisis.move_pool for s in out)


@given(amount=st.floats(0.001, 1e4), r_in=st.floats(1.0, 1e7), r_out=st.floats(1.0, 1e7))
def test_swap_impact_is_at_least_the_fee_and_grows_with_size(amount, r_in, r_out):
    small = swap_impact_bps(amount, r_in, r_out)
    assert 29.9 <= small <= 10_000
    assert swap_impact_bps(amount * 2, r_in, r_out) >= small - 1e-6


def test_a_response_that_cannot_save_the_loan_is_broken_with_a_concrete_warning_and_guard():
    sc = Scenario(name="liquidation cascade", threat=ThreatKind.LIQUIDATION_CASCADE, crisis=Crisis(price_shock=-0.35))
    live = ResponseCheck(where="live", actions=["repay 100.0"], gas_units=300_000, gas_usd=0.5,
                         gas_allowance_usd=2.0, health_before=1.19, price=1150.0)
    fork = ResponseCheck(where="fork", actions=["repay 100.0"], executed=True, health_before=0.77,
                         health_after=0.78, gas_usd=0.6, gas_allowance_usd=2.0)
    r = judge(sc, live, fork)
    assert not r.ok and r.problems == ["after the response the health factor is 0.780 on the crisis fork "
                                       "(liquidatable below 1)"]
    assert r.warning.startswith("At health factor 1.19 and price 1150.00, dream rehearsal of liquidation_cascade")
    # 1.3 / 0.65 + 0.05 ≈ 2.0 keeps the floor through the shock, capped at 90% of today's 1.19 — raised to the
    # 1.4 minimum: a position this close to liquidation is told to deleverage now
    assert r.guard == "- WHEN health_factor < 1.4 THEN repay 25% debt"
    healthy_now = judge(sc, live.model_copy(update={"health_before": 2.06}), fork)
    assert healthy_now.guard == "- WHEN health_factor < 1.8 THEN repay 25% debt", "never a guard true today"
    healthy = judge(sc, live, fork.model_copy(update={"health_after": 1.4}))
    assert healthy.ok and healthy.warning is None and healthy.guard is None


def test_revert_gas_and_thin_pool_are_each_named():
    sc = Scenario(name="pool drained", threat=ThreatKind.POOL_DRAINED, crisis=Crisis(liquidity_removed=0.9))
    chk = ResponseCheck(where="fork", actions=["swap 2 WETH to USDC"], simulates=False, revert_reason="K",
                        gas_usd=5.0, gas_allowance_usd=2.0, exit_impact_bps=442.0, max_slippage_bps=100.0)
    problems = judge(sc, None, chk).problems
    assert any("reverts on the crisis fork: K" in p for p in problems)
    assert any("442 bps below spot" in p for p in problems)
    assert judge(sc, None, chk).guard.startswith("- WHEN price_change_bps <= -150 THEN swap")


def test_gas_over_the_emergency_slice_is_a_note_over_the_whole_partition_a_problem():
    """The gas gate never defers a protective action (golem/safety/gas.py): a sequence over the $2 slice still runs
    and is noted; only a sequence over the whole day's partition is more than the golem can afford."""
    sc = Scenario(name="liquidation cascade", threat=ThreatKind.LIQUIDATION_CASCADE, crisis=Crisis(price_shock=-0.3))
    chk = ResponseCheck(where="live", actions=["repay 100", "swap 1 WETH to USDC", "repay 50"], gas_usd=2.45,
                        gas_allowance_usd=2.0, gas_partition_usd=10.0)
    over_slice = judge(sc, chk, None)
    assert over_slice.ok and over_slice.problems == [] and over_slice.guard is None
    assert over_slice.notes == ["gas $2.45 on the live chain is over the $2.00 emergency slice: the gate does not "
                                "defer protective actions, so once the routine share is spent it runs $0.45 over "
                                "the day's partition"]
    over_day = judge(sc, chk.model_copy(update={"gas_usd": 12.5}), None)
    assert not over_day.ok and over_day.problems == ["gas $12.50 on the live chain exceeds the whole day's $10.00 "
                                                     "gas partition"]
    assert over_day.notes == []
    assert judge(sc, chk.model_copy(update={"gas_usd": 1.5}), None).notes == []


def test_staged_items_promote_only_on_waking_evidence_after_the_dream(tmp_path):
    item = StagedItem(id=staged_id(10, StageKind.HYPOTHESIS, "x"), cycle_tick=10, kind=StageKind.HYPOTHESIS,
                      content="x", trigger=Trigger(health_below=1.3))
    assert corroborate(item, [(9, 1.1, None), (11, 1.6, None)]) == item, "before the dream, or not the situation"
    once = corroborate(item, [(11, 1.2, None)])
    assert once.status == StageStatus.PARTIALLY_VALIDATED and once.confidence == 0.3
    assert corroborate(once, [(11, 1.2, None)]) == once, "the same tick counts once"
    twice = corroborate(once, [(11, 1.2, None), (12, 1.25, None)])
    assert twice.status == StageStatus.VALIDATED and twice.confidence == DREAM_VALIDATED_CONFIDENCE
    buf = StagingBuffer(tmp_path / "s.sqlite")
    buf.put(item)
    buf.put(twice.model_copy(update={"id": "other"}))
    buf.put(item)  # a retried integration: the same id, no duplicate
    assert len(buf.all()) == 2 and buf.dream_yield() == 0.5 and [i.id for i in buf.open_items()] == [item.id]


def test_threat_coverage_over_the_last_seven_cycles():
    j = lambda t, due, done: DreamJournal(golem_id="g", tick=t, threats_due=due, threats_rehearsed=done)  # noqa: E731
    assert threat_coverage([]) is None
    assert threat_coverage([j(1, ["a", "b"], ["a"])]) == 0.5
    assert threat_coverage([j(1, ["a", "b"], ["a"]), j(2, ["b"], ["b"])]) == 1.0
    old = [j(i, ["a", "b"], ["b"]) for i in range(8)]
    assert threat_coverage([j(0, ["a"], ["a"]), *old]) == 0.5, "a cycle eight back no longer counts"


def test_a_guard_reaches_the_playbook_as_a_rule_only_after_two_waking_corroborations(tmp_path):
    from golem.grimoire.dreams.integration import _guard_evidence
    from golem.grimoire.playbook.heuristics import HeuristicStore
    from golem.grimoire.playbook.compile import rewrite_playbook
    from golem.inference.strategy import load_strategy, rules_in

    strategy = load_strategy(Path(__file__).resolve().parents[2] / "examples" / "golem-home" / "STRATEGY.md")
    hs, playbook = HeuristicStore(tmp_path / "h.sqlite"), tmp_path / "PLAYBOOK.md"
    item = StagedItem(id="g1", cycle_tick=10, kind=StageKind.GUARD, content="guard", scenario="liquidation cascade",
                      status=StageStatus.PARTIALLY_VALIDATED, trigger=Trigger(health_below=2.0),
                      rule="WHEN health_factor < 2 THEN repay 25% debt")
    _guard_evidence(hs, item, "g", [])  # staged: in the store at 0.5, below the PLAYBOOK's 0.7
    rewrite_playbook(hs, playbook, history=False)
    assert rules_in(playbook.read_text(), "PLAYBOOK.md", strategy) == []
    validated = corroborate(item, [(11, 1.8, None), (12, 1.7, None)])
    assert validated.status == StageStatus.VALIDATED
    _guard_evidence(hs, validated, "g", validated.corroborations)
    rewrite_playbook(hs, playbook, history=False)
    rules = rules_in(playbook.read_text(), "PLAYBOOK.md", strategy)
    assert [r.text for r in rules] == ["WHEN health_factor < 2 THEN repay 25% debt"], playbook.read_text()


def _acted(i: int, tick: int, tool: str = "repay", pnl: float | None = 1.0, verified: bool | None = True,
           regime: MarketRegime = MarketRegime.TRENDING_DOWN) -> Episode:
    return Episode(id=f"e{i}", golem_id="g", tick=tick, created_at="2026-01-01T00:00:00+00:00", regime=regime,
                   tier=Tier.T1, summary=f"{tool} at tick {tick}", actions=1, action_tools=[tool], pnl_impact=pnl,
                   outcome_verified=verified)


def test_curator_tags_contradictory_and_thin_evidence_for_dreaming(tmp_path):
    from golem.grimoire.dreams.tags import DreamTags, dream_priority

    # five repays in one regime: four paid, one lost → the one that contradicts the rest; plenty of support
    repays = [_acted(i, 100 + i) for i in range(4)] + [_acted(4, 104, pnl=-5.0)]
    # a swap seen twice: thin; an unverified supply: contradicted by the chain
    swaps = [_acted(10, 120, "swap"), _acted(11, 121, "swap")]
    supply = [_acted(20, 130, "supply", verified=False)]
    quiet = Episode(id="q", golem_id="g", tick=131, created_at="2026-01-01T00:00:00+00:00",
                    regime=MarketRegime.TRENDING_DOWN, tier=Tier.T0, summary="watched")
    old = _acted(30, 1, "swap", regime=MarketRegime.VOLATILE)  # outside the window
    tags = dream_priority(repays + swaps + supply + [quiet, old], now_tick=250)
    assert set(tags) == {"e4", "e10", "e11", "e20"}
    assert tags["e4"].startswith("contradictory: repay in trending_down turned out 4 positive and 1 negative")
    assert tags["e10"].startswith("thin: 2 episode(s) of swap") and "did not verify" in tags["e20"]

    store = DreamTags(tmp_path / "dream-staging.sqlite")
    assert [t.episode for t in store.tag(repays + swaps + supply, 150)] == ["e20", "e11", "e10", "e4"]
    store.dreamed(["e20", "e4"], 160)
    assert {t.episode for t in store.open()} == {"e10", "e11"}
    store.tag(repays + swaps + supply, 200)  # a dreamed tag is not reopened, an open one not duplicated
    assert {t.episode for t in store.open()} == {"e10", "e11"} and len(store.all()) == 4


def test_tagged_episodes_raise_urgency_and_are_replayed_first(tmp_path):
    from golem.grimoire.dreams.replay import run_dream_replay
    from golem.grimoire.episodes.store import EpisodeStore
    from golem.grimoire.playbook.heuristics import HeuristicStore

    s = GolemState(golem_id="g", tick=100, last_dream_tick=0)
    assert dream_urgency(s, 200, 20).terms["tags"] == 0
    assert dream_urgency(s, 200, 20, curator_tags=5).terms["tags"] == 0.2
    # the workflow's state carries the delta cycle's count into the scheduler
    from golem.cognition.fold import schedule_dream
    from golem.models.config import GolemConfig
    assert schedule_dream(s.model_copy(update={"dream_tags": 3}), GolemConfig()).terms["tags"] == 0.12

    from golem.grimoire.store.embeddings import default_embedder

    store = EpisodeStore(tmp_path / "episodes.lance", default_embedder())
    eps = [_acted(i, 10 + i, pnl=100.0 * (i + 1)) for i in range(6)] + [_acted(9, 5, pnl=0.02)]
    store.upsert_many(eps)
    plain = run_dream_replay(store, HeuristicStore(tmp_path / "h.sqlite"), 3, 50)
    assert "e9" not in plain.replayed, "a low-utility episode is not replayed by utility"
    tagged = run_dream_replay(store, HeuristicStore(tmp_path / "h2.sqlite"), 3, 51, first=["e9", "gone"])
    assert tagged.replayed[0] == "e9" and len(tagged.replayed) == 3


def test_rev6_thin_liquidity_doubles_threat_rehearsal():
    from golem.cognition.dream_scheduler import thin_liquidity

    assert thin_liquidity(1_000_000, [2_000_000] * 3) is None, "too few records to know what is normal"
    assert thin_liquidity(1_100_000, [2_000_000] * 10) is None
    why = thin_liquidity(900_000, [2_000_000] * 10)
    assert why == "thin liquidity: pool TVL 900,000 is 45% of its recent median 2,000,000"


def test_nrem_compression_folds_observation_duplicates_into_one_row_and_keeps_the_audit(tmp_path):
    import json
    import sqlite3

    from golem.grimoire.dreams.integration import compress, merge_groups
    from golem.grimoire.store.embeddings import default_embedder
    from golem.grimoire.episodes.store import EpisodeStore

    store = EpisodeStore(tmp_path / "episodes.lance", default_embedder())
    seen = [Episode(id=f"o{i}", golem_id="g", tick=10 + i, created_at="2026-01-01T00:00:00+00:00",
                    regime=MarketRegime.RANGE_BOUND, tier=Tier.T0, summary=f"quiet tick {i}", prediction_error=0.11,
                    strength=1.0 + i, access_count=1) for i in range(3)]
    acted = [_acted(20 + i, 30 + i) for i in range(2)]  # near-duplicates too, but outcomes hang on them
    store.upsert_many(seen + acted)
    groups = merge_groups(seen + acted)
    assert sorted(map(sorted, groups)) == [["e20", "e21"], ["o0", "o1", "o2"]]
    audit = tmp_path / "dream-staging.sqlite"
    out = compress(store, groups, 40, audit)
    assert out == [{"kept": "o2", "merged": ["o1", "o0"]}]
    assert sorted(e.id for e in store.all()) == ["e20", "e21", "o2"]
    kept = store.get_many(["o2"])[0]
    assert kept.strength == 3.0 and kept.access_count == 3 and kept.summary == "quiet tick 2"
    with sqlite3.connect(audit) as db:
        rows = db.execute("SELECT merged_id, kept_id, tick, body FROM merged_episodes ORDER BY merged_id").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [("o0", "o2", 40), ("o1", "o2", 40)]
    assert json.loads(rows[0][3])["summary"] == "quiet tick 0", "the merged episode is kept whole"
    assert compress(store, groups, 40, audit) == [], "a retried phase merges nothing more"
