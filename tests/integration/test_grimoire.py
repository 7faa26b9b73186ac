"""Grimoire on real storage: LanceDB episodes with the real WordLlama embedder, SQLite heuristics,
PLAYBOOK.md on disk, dream replay over them."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from golem.grimoire.decay import DREAM_STRENGTH_INCREMENT, RETENTION_FLOOR
from golem.grimoire.dreams.replay import replay_gain, run_dream_replay, select_replay
from golem.grimoire.store.embeddings import WordLlamaEmbedder, default_embedder
from golem.grimoire.episodes.model import Episode, episode_from_record, episode_id
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.playbook.heuristics import (
    INITIAL_CONFIDENCE,
    HeuristicStore,
    derive_heuristics_from_episodes,
    normalise_text,
)
from golem.grimoire.playbook.compile import read_revision, rewrite_playbook
from golem.models import (
    ActionRecord,
    ActionStatus,
    Anomaly,
    ChainSnapshot,
    DecisionCycleRecord,
    MarketRegime,
    Observation,
    OutcomeRecord,
    PoolState,
    ProbeSeverity,
    Tier,
)


@pytest.fixture(scope="module")
def embedder() -> WordLlamaEmbedder:
    return default_embedder()


@pytest.fixture
def store(tmp_path, embedder) -> EpisodeStore:
    return EpisodeStore(tmp_path / "episodes.lance", embedder)


def make_ep(tick: int, summary: str, *, regime=MarketRegime.VOLATILE, tier=Tier.T2, actions=0,
            pnl=None, pe=0.1, strategy=None, **kw) -> Episode:
    return Episode(
        id=episode_id("g1", tick), golem_id="g1", tick=tick, created_at=f"2026-03-01T00:{tick % 60:02d}:00+00:00",
        regime=regime, tier=tier, summary=summary, actions=actions, pnl_impact=pnl, prediction_error=pe,
        outcome_verified=True if pnl is not None else None, strategy=strategy, **kw,
    )


CRASH = "ETH price crashed 28% in ten minutes; lending position health factor fell to 1.04, close to liquidation"
CALM = "Quiet range-bound market, pool reserves steady, gas 3 gwei, nothing to do"


# ---- embedder -------------------------------------------------------------------------------
def test_embedder_is_offline_normalised_and_cached(embedder):
    assert default_embedder() is embedder
    vecs = embedder.embed([CRASH, CALM])
    assert vecs.dtype == np.float32 and vecs.shape == (2, 256)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 256)
    with pytest.raises(ValueError, match="non-empty"):
        embedder.embed([""])
    with pytest.raises(TypeError):
        embedder.embed(CRASH)  # type: ignore[arg-type]


def test_embedder_loads_without_network(monkeypatch):
    import socket

    def refuse(*args, **kwargs):
        raise AssertionError("the embedder tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    fresh = WordLlamaEmbedder()
    assert fresh.embed(["offline"]).shape == (1, 256)


# ---- episode store ----------------------------------------------------------------------------
def test_upsert_same_id_overwrites(store):
    store.upsert(make_ep(7, CRASH, confidence=0.4))
    store.upsert(make_ep(7, CRASH, confidence=0.9))
    assert store.count() == 1
    assert store.get(episode_id("g1", 7)).confidence == 0.9
    assert store.get("g1:tick:999") is None
    assert store.get("it's quoted") is None  # ids go into a SQL filter: quotes must be escaped


def test_search_ranks_crash_above_calm(store):
    store.upsert_many([make_ep(1, CALM, regime=MarketRegime.RANGE_BOUND, tier=Tier.T0),
                       make_ep(2, CRASH), make_ep(3, "Gas spiked to 80 gwei during an NFT mint")])
    hits = store.search("crash liquidation risk", k=3, min_score=-1.0)
    assert len(hits) == 3
    assert len(store.search("crash liquidation risk", k=3)) < 3  # default min_score 0 drops anti-similar rows
    ids = [ep.id for ep, _ in hits]
    assert ids[0] == episode_id("g1", 2)
    scores = dict((ep.id, s) for ep, s in hits)
    assert scores[episode_id("g1", 2)] > scores[episode_id("g1", 1)]
    assert all(-1.0 <= s <= 1.0 for s in scores.values())
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    # min_score filters; search itself never touches access bookkeeping
    top = scores[ids[0]]
    assert [ep.id for ep, _ in store.search("crash liquidation risk", k=3, min_score=top - 1e-6)] == [ids[0]]
    assert store.get(ids[0]).access_count == 0
    with pytest.raises(ValueError):
        store.search("   ")


def test_reopen_reuses_table_and_second_reader_sees_writes(tmp_path, embedder):
    path = tmp_path / "db"
    writer = EpisodeStore(path, embedder)
    reader = EpisodeStore(path, embedder)
    writer.upsert(make_ep(1, CRASH))
    assert reader.count() == 1 and reader.get(episode_id("g1", 1)).summary == CRASH
    writer.upsert(make_ep(2, CALM))
    assert EpisodeStore(path, embedder).count() == 2


def test_reopen_with_other_model_reembeds_or_says_so(tmp_path, embedder):
    """A different model (here WordLlama truncated to 64-d, a real second vector space) never mixes with the
    stored vectors: the store re-embeds everything, or refuses clearly when asked to."""
    EpisodeStore(tmp_path / "db", embedder).upsert_many([make_ep(1, CRASH), make_ep(2, CALM)])
    small = WordLlamaEmbedder(trunc_dim=64)
    with pytest.raises(ValueError, match="256.*golem grimoire reembed"):
        EpisodeStore(tmp_path / "db", small, on_model_switch="error")
    store = EpisodeStore(tmp_path / "db", small)
    assert store.reembedded == 2 and store.count() == 2
    assert store.table.schema.field("vector").type.list_size == 64
    assert store.search("crash liquidation risk", k=1)[0][0].tick == 1


def test_mark_accessed_and_top_utility(store):
    store.upsert_many([make_ep(1, CRASH, utility=0.2), make_ep(2, CALM, utility=0.9),
                       make_ep(3, "Oracle lagged pool price by 2%", utility=0.5)])
    assert [e.tick for e in store.top_utility(2)] == [2, 3]
    assert store.mark_accessed([episode_id("g1", 1)], tick=40) == 1
    ep = store.get(episode_id("g1", 1))
    assert (ep.last_accessed_tick, ep.access_count, ep.strength) == (40, 1, 1.0)


def test_decay_pass_lowers_old_unaccessed_episode(store):
    store.upsert_many([make_ep(0, CRASH), make_ep(10, CALM)])
    store.mark_accessed([episode_id("g1", 10)], tick=2000)
    report = store.apply_decay(now_tick=2000, tick_seconds=60.0)
    assert report.scanned == 2 and report.decayed == 1
    old, fresh = store.get(episode_id("g1", 0)), store.get(episode_id("g1", 10))
    assert RETENTION_FLOOR <= old.retention < 1.0  # 2000 ticks × 60 s ≈ 33 h against 48 h
    assert fresh.retention == 1.0
    assert report.avg_confidence_after < report.avg_confidence_before
    # much later: the old one hits the floor and sits below the Curator's 0.1 prune line
    later = store.apply_decay(now_tick=50_000, tick_seconds=60.0)
    assert store.get(episode_id("g1", 0)).retention == RETENTION_FLOOR
    assert later.below_prune_floor == 2
    # a second pass at the same tick changes nothing
    again = store.apply_decay(now_tick=50_000, tick_seconds=60.0)
    assert again.decayed == 0


def test_episode_validation_errors():
    with pytest.raises(ValueError, match="created_at"):
        Episode.model_validate({**make_ep(1, CRASH).model_dump(), "created_at": "yesterday"})
    with pytest.raises(ValueError):
        make_ep(1, CRASH, utility=1.5)
    with pytest.raises(ValueError):
        make_ep(1, "   ")


def _record(tick: int) -> DecisionCycleRecord:
    pool = PoolState(address="0x" + "11" * 20, token0="WETH", token1="USDC",
                     reserve0=100.0, reserve1=250_000.0, price=2500.0, tvl=500_000.0)
    snap = ChainSnapshot(chain_id=31337, block_number=100 + tick, block_timestamp=1_700_000_000 + tick,
                         gas_price_gwei=2.0, pool=pool, oracle_price=2500.0)
    return DecisionCycleRecord(
        tick=tick, timestamp="2026-03-01T12:00:00+00:00", golem_id="g1",
        observation=Observation(snapshot=snap, regime=MarketRegime.VOLATILE),
        regime=MarketRegime.VOLATILE, prediction_error=0.7, deliberation_threshold=0.3, tier=Tier.T2,
        gating_reason="prediction error above threshold",
        anomalies=[Anomaly(probe="price_move", severity=ProbeSeverity.HIGH, description="price -12% in one tick")],
        actions=[ActionRecord(action_index=0, action_type="swap", tool_name="swap_exact_in",
                              status=ActionStatus.EXECUTED, tx_hash="0x" + "ab" * 32)],
        outcome=OutcomeRecord(verified=True, pnl_impact=-14.5),
    )


def test_episode_from_record_round_trips_through_store(store):
    ep = episode_from_record(_record(12), strategy="eth-dca")
    assert ep.id == "g1:tick:12" and ep.actions == 1 and ep.pnl_impact == -14.5 and ep.outcome_verified
    assert "price_move" in ep.summary and "swap executed" in ep.summary
    assert ep.utility == pytest.approx(replay_gain(-14.5, 0.7))
    store.upsert(ep)
    assert store.get(ep.id) == ep


# ---- heuristics + PLAYBOOK ---------------------------------------------------------------------
def test_add_or_reinforce_counts_each_episode_once(tmp_path):
    hs = HeuristicStore(tmp_path / "semantic.sqlite")
    a = hs.add_or_reinforce("When gas > 50 gwei, defer swaps (seen 3 times).", "global", "g1:tick:1")
    assert (a.confidence, a.evidence_count) == (INITIAL_CONFIDENCE, 1)
    b = hs.add_or_reinforce("when gas > 60  gwei, defer swaps (seen 4 times)", "global", "g1:tick:2")
    assert b.id == a.id and b.evidence_count == 2 and b.confidence == pytest.approx(0.6)
    assert b.text.endswith("(seen 4 times)")  # freshest statistics win
    same = hs.add_or_reinforce("When gas > 60 gwei, defer swaps (seen 4 times)", "global", "g1:tick:2")
    assert same.evidence_count == 2 and same.confidence == pytest.approx(0.6)
    other_scope = hs.add_or_reinforce("When gas > 60 gwei, defer swaps", "eth-dca", "g1:tick:2")
    assert other_scope.id != a.id
    assert normalise_text("T2 ticks gained +4.1") != normalise_text("T0 ticks gained +4.1")
    assert {h.id for h in hs.list(0.55)} == {a.id}
    assert hs.count() == 2
    assert hs.downvote(a.id).confidence == pytest.approx(0.45)
    with pytest.raises(ValueError, match="scope"):
        hs.add_or_reinforce("x", "", "g1:tick:1")


def _volatile_series() -> list[Episode]:
    eps = [make_ep(t, f"Volatile swing tick {t}, swapped", actions=1, pnl=p, pe=0.6)
           for t, p in [(1, 12.0), (2, 8.0), (3, -2.0), (4, 10.0)]]
    eps += [make_ep(t, f"Calm tick {t}", regime=MarketRegime.RANGE_BOUND, tier=Tier.T0, pe=0.02)
            for t in (5, 6, 7)]
    eps += [make_ep(8, "Trending up, rebalanced", regime=MarketRegime.TRENDING_UP, actions=1, pnl=3.0,
                    strategy="eth-dca"),
            make_ep(9, "Trending up, rebalanced again", regime=MarketRegime.TRENDING_UP, actions=1, pnl=-1.0,
                    strategy="eth-dca")]
    return eps


def test_derive_heuristics_computes_from_recurring_patterns():
    eps = _volatile_series()
    derived = derive_heuristics_from_episodes(eps)
    assert derived == derive_heuristics_from_episodes(list(reversed(eps)))  # deterministic
    by_text: dict[str, list[str]] = {}
    for text, scope, ep_id in derived:
        assert scope == "global"
        by_text.setdefault(text, []).append(ep_id)
    assert len(by_text) == 2  # volatile/T2/acted (4) and range-bound/T0/idle (3); eth-dca has only 2
    acted = next(t for t in by_text if "acting" in t)
    assert "mean pnl +7.00" in acted and "4 measured actions (3 profitable" in acted
    assert by_text[acted] == [episode_id("g1", t) for t in (1, 2, 3, 4)]
    idle = next(t for t in by_text if "holding" in t)
    assert "3 ticks without action" in idle and "0.020" in idle


def test_playbook_sections_and_revisions(tmp_path):
    hs = HeuristicStore(tmp_path / "semantic.sqlite")
    path = tmp_path / "PLAYBOOK.md"
    for i in range(3):  # 0.5 → 0.6 → 0.7: promoted
        hs.add_or_reinforce("Avoid swaps when gas is above 50 gwei", "global", f"g1:tick:{i}")
        hs.add_or_reinforce("Buy the dip after a 5% drop", "eth-dca", f"g1:tick:{i}")
    hs.add_or_reinforce("Rebalance LP hourly", "weth-usdc-lp", "g1:tick:9")  # 0.5: not promoted

    r1 = rewrite_playbook(hs, path)
    text = path.read_text()
    assert r1.revision == 1 and read_revision(path) == 1 and r1.heuristics == 2
    assert r1.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert "## Global" in text and "## Strategy: eth-dca" in text and "Rebalance LP" not in text
    assert text.index("## Global") < text.index("Avoid swaps") < text.index("## Strategy: eth-dca") < text.index("Buy the dip")

    assert rewrite_playbook(hs, path).revision == 1  # nothing changed: same revision, no rewrite
    for i in range(2):
        hs.add_or_reinforce("Rebalance LP hourly", "weth-usdc-lp", f"g1:tick:{10 + i}")
    r2 = rewrite_playbook(hs, path)
    assert r2.revision == 2 and r2.changed and "## Strategy: weth-usdc-lp" in path.read_text()
    assert not list(tmp_path.glob(".PLAYBOOK.md.*"))  # no temp files left behind

    hand_written = tmp_path / "other.md"
    hand_written.write_text("# my rules\n")
    with pytest.raises(ValueError, match="revision"):
        rewrite_playbook(hs, hand_written)


# ---- dream replay ---------------------------------------------------------------------------------
def test_select_replay_prefers_gain_and_recency():
    big_old = make_ep(1, "big loss", pnl=-50.0, pe=0.2)
    big_new = make_ep(3000, "big loss again", pnl=-50.0, pe=0.2)
    small = make_ep(3001, "tiny", pnl=0.5, pe=0.05)
    nothing = make_ep(3002, "nothing", pe=0.0)
    chosen = select_replay([small, big_old, nothing, big_new], 3, now_tick=3002)
    assert [e.tick for e in chosen] == [3000, 1, 3001]  # zero-gain episode never replayed
    assert select_replay([small], 0) == []


def test_dream_replay_strengthens_validated_episodes(store, tmp_path):
    store.upsert_many(_volatile_series())
    hs = HeuristicStore(tmp_path / "semantic.sqlite")
    report = run_dream_replay(store, hs, n=5, tick=20)
    assert len(report.replayed) == 5
    assert report.strengthened and set(report.strengthened) <= set(report.replayed)
    for ep_id in report.strengthened:
        ep = store.get(ep_id)
        assert ep.strength == 1.0 + DREAM_STRENGTH_INCREMENT and ep.dream_validated and ep.last_replayed_tick == 20
    # eth-dca's pattern has only two episodes: replayed maybe, never strengthened
    for ep_id in set(report.replayed) - set(report.strengthened):
        assert store.get(ep_id).strength == 1.0
    assert episode_id("g1", 8) not in report.strengthened
    assert report.heuristics_touched
    touched = [hs.get(h) for h in report.heuristics_touched]
    assert all(h is not None and h.evidence_count >= 3 for h in touched)

    # a retried dream at the same tick adds nothing; the next dream strengthens again
    before = {i: store.get(i).strength for i in report.strengthened}
    run_dream_replay(store, hs, n=5, tick=20)
    assert {i: store.get(i).strength for i in report.strengthened} == before
    assert [hs.get(h).evidence_count for h in report.heuristics_touched] == [h.evidence_count for h in touched]
    assert store.count() == 9
