"""Semantic store, hybrid retrieval, admission, decay, graphs, upkeep and transfer on real SQLite + LanceDB."""

from __future__ import annotations

import random
import sqlite3

import pytest

from golem.grimoire.semantic.admission import AdmissionAction, admit
from golem.grimoire.store.embeddings import default_embedder, embedder_by_name
from golem.grimoire.episodes.model import Episode, episode_id
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.semantic.graph import CausalGraph, KnowledgeGraph
from golem.grimoire.retrieval import retrieve_for_tick
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, Provenance, SemanticStore
from golem.grimoire.semantic.migrations import _MIGRATIONS, SCHEMA_VERSION, _split_sql
from golem.grimoire.transfer import export_lines, import_file
from golem.grimoire.upkeep import cognitive_metrics, maintain, table_stats

SRC = EntrySource(golem_id="g1")


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


@pytest.fixture
def stores(tmp_path, embedder):
    return (EpisodeStore(tmp_path / "episodes.lance", embedder),
            SemanticStore(tmp_path / "semantic.sqlite", tmp_path / "semantic.lance", embedder))


def entry(content, cat=EntryType.INSIGHT, **kw):
    return GrimoireEntry(category=cat, content=content, source=SRC, **kw)


@pytest.fixture(scope="module")
def haystack(tmp_path_factory, embedder):
    """2,000 distractor episodes + 1,000 distractor entries + one planted warning."""
    d = tmp_path_factory.mktemp("hay")
    eps, sem = EpisodeStore(d / "e.lance", embedder), SemanticStore(d / "s.sqlite", d / "s.lance", embedder)
    rng = random.Random(7)
    assets, verbs = ["WETH", "USDC", "DAI"], ["swapped", "held", "deposited", "withdrew"]
    eps.upsert_many([Episode(
        id=episode_id("g1", t), golem_id="g1", tick=t, created_at="2026-03-01T00:00:00+00:00", regime="range_bound",
        tier="T1", summary=f"Tick {t}: range bound, gas {rng.randint(1, 40)} gwei, {rng.choice(verbs)} "
                           f"{rng.randint(1, 900)} {rng.choice(assets)}, pool reserves steady") for t in range(2000)])
    sem.put_many([entry(f"Gas averages {rng.randint(1, 40)} gwei around hour {rng.randint(0, 23)} when "
                        f"{rng.choice(assets)} volume is {rng.choice(['low', 'high'])}") for _ in range(1000)])
    sem.put(entry("Oracle lag during a crash lets the lending health factor slide toward liquidation; repay debt early",
                  EntryType.WARNING, id="planted", market_regime="volatile", quality_score=0.8, confidence=0.9))
    return eps, sem


def test_planted_entry_ranks_first_among_thousands(haystack):
    eps, sem = haystack
    res = retrieve_for_tick(eps, sem, "ETH crash, health factor dropping near the liquidation threshold",
                            regime="volatile", tick=2000, k=5, tier="T2", log=False)
    assert res.retrieved and not res.abstained
    assert res.items[0].id == "planted"
    assert set(res.items[0].scores) >= {"rrf", "effective_confidence", "quality", "recency", "regime_match", "semantic"}
    assert res.tokens <= 500


def test_irrelevant_query_abstains_and_t0_skips(haystack):
    eps, sem = haystack
    res = retrieve_for_tick(eps, sem, "recipe for chocolate cake with strawberries", regime="volatile", tick=2000,
                            tier="T2", log=False)
    assert res.retrieved and res.abstained and res.items == []
    res = retrieve_for_tick(eps, sem, "ETH crash health factor", regime="volatile", tick=2000, tier="T0", log=False)
    assert not res.retrieved and res.items == []


@pytest.mark.parametrize("name", ["wordllama", "wordllama-64"])
def test_each_embedder_abstains_at_its_own_floor(tmp_path, name):
    """Cosine scales differ between models, so the abstention floor is the embedder's (or [grimoire] semantic_floor)."""
    e = embedder_by_name(name)
    sem = SemanticStore(tmp_path / "s.sqlite", tmp_path / "s.lance", e)
    eps = EpisodeStore(tmp_path / "e.lance", e)
    rng = random.Random(3)
    sem.put_many([entry(f"Gas averages {rng.randint(1, 40)} gwei around hour {rng.randint(0, 23)} when "
                        f"{rng.choice(['WETH', 'USDC'])} volume is {rng.choice(['low', 'high'])}") for _ in range(50)])
    sem.put(entry("Oracle lag during a crash lets the lending health factor slide toward liquidation; repay debt early",
                  EntryType.WARNING, id="planted", quality_score=0.8, confidence=0.9))
    hit = retrieve_for_tick(eps, sem, "ETH crash, health factor dropping near the liquidation threshold",
                            regime="volatile", tick=10, tier="T2", log=False)
    assert hit.items and hit.items[0].id == "planted" and hit.items[0].scores["semantic"] >= e.semantic_floor
    miss = retrieve_for_tick(eps, sem, "recipe for chocolate cake with strawberries", regime="volatile", tick=10,
                             tier="T2", log=False)
    assert miss.abstained and str(e.semantic_floor) in miss.reason
    strict = retrieve_for_tick(eps, sem, "ETH crash, health factor dropping near the liquidation threshold",
                               regime="volatile", tick=10, tier="T2", log=False, floor=0.99)
    assert strict.abstained, "an explicit floor ([grimoire] semantic_floor) overrides the embedder's"


def test_token_budget_limits_items(haystack):
    eps, sem = haystack
    res = retrieve_for_tick(eps, sem, "gas gwei WETH volume pool reserves", regime="range_bound", tick=2000, k=5,
                            token_budget=60, tier="T2", log=False)
    assert 1 <= len(res.items) < 5 and res.tokens <= 60


def test_migration_from_v1_keeps_rows(tmp_path, embedder):
    db_path = tmp_path / "old.sqlite"
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for stmt in _split_sql(_MIGRATIONS[0]):
        db.execute(stmt)
    db.execute("INSERT INTO schema_version VALUES (1)")
    db.execute("INSERT INTO grimoire_entries (id, category, content, confidence, quality_score, decay_class, provenance,"
               " source, created_tick) VALUES ('old1', 'insight', 'gas spikes at the CPI release', 0.6, 0.5,"
               " 'tactical', 'self_learned', '{\"golem_id\": \"g0\"}', 7)")
    db.commit()
    db.close()
    sem = SemanticStore(db_path, tmp_path / "old.lance", embedder)
    e = sem.get("old1")
    assert e is not None and e.strength == 1.0 and e.last_accessed_at == 7 and e.consecutive_low_confidence == 0
    assert sem.fts_search("CPI release")[0][0] == "old1"  # FTS5 backfilled by the migration
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION


def test_admission_merge_quarantine_supersede(stores):
    _, sem = stores
    base = entry("When the regime is volatile and the gate escalates to T2, acting has gained money over 12 trades",
                 EntryType.HEURISTIC, confidence=0.8, validated_count=5, parent_episode_ids=["e1"], created_tick=10)
    d = admit(sem, base, tick=10)
    assert d.action == AdmissionAction.ADMITTED and sem.get(base.id).confidence == 0.8
    # near-duplicate: evidence merges into the existing entry
    dup = entry(base.content, EntryType.HEURISTIC, parent_episode_ids=["e2"], created_tick=11)
    d = admit(sem, dup, tick=11)
    assert d.action == AdmissionAction.SKIPPED and d.entry_id == base.id
    merged = sem.get(base.id)
    assert merged.parent_episode_ids == ["e1", "e2"] and merged.validated_count == 6
    assert merged.confidence == pytest.approx(0.9)
    assert sem.count() == 1
    # unsupported contradiction of a high-confidence entry → quarantine
    contra = entry("When the regime is volatile and the gate escalates to T2, acting has lost money over 12 trades",
                   EntryType.HEURISTIC, parent_episode_ids=["e3"], created_tick=12)
    d = admit(sem, contra, tick=12)
    assert d.action == AdmissionAction.QUARANTINED and d.conflicts_with == [base.id]
    assert [q["entry"].id for q in sem.quarantined()] == [contra.id] and sem.get(contra.id) is None
    # a low-confidence contradicted fact is superseded (valid_until), not deleted
    weak = entry("Pool fees on WETH/USDC rise above 30 bps when volume is high", confidence=0.4, created_tick=20,
                 parent_episode_ids=["e4"])
    admit(sem, weak, tick=20)
    newer = entry("Pool fees on WETH/USDC fall below 30 bps when volume is high", created_tick=30,
                  parent_episode_ids=["e5", "e6"])
    d = admit(sem, newer, tick=30)
    assert weak.id in d.superseded and d.action in (AdmissionAction.ADMITTED, AdmissionAction.ADMITTED_LOW)
    old = sem.get(weak.id)
    assert old.valid_until == 30 and old.contradicted_count == 1
    assert weak.id not in {e.id for e in sem.all()}


def test_admission_rejects_low_scores_and_admits_middle_at_0_3(stores):
    _, sem = stores
    admit(sem, entry("Gas averages 12 gwei around 3 AM UTC when WETH volume is low"), tick=0)
    vague = entry("stuff happened", EntryType.STRATEGY_FRAGMENT, created_tick=0)
    d = admit(sem, vague, tick=5000, utility_fn=lambda e: 0.0)  # old, useless, low prior
    assert d.action == AdmissionAction.REJECTED and sem.get(vague.id) is None
    mid = entry("When DAI borrow rates exceed 9%, repay part of the loan", EntryType.INSIGHT, confidence=0.5)
    d = admit(sem, mid, tick=0, utility_fn=lambda e: 0.2)
    assert 0.45 <= d.score < 0.55, d.factors
    assert d.action == AdmissionAction.ADMITTED_LOW and sem.get(mid.id).confidence == 0.3
    m = cognitive_metrics(sem, now_tick=0)
    assert m["admission_outcomes"]["rejected"] == 1 and 0 < m["admission_rate"] < 1


def test_strength_and_curator_decay_to_cold_storage(stores):
    _, sem = stores
    e = sem.put(entry("Gas is cheapest at 3 AM UTC on Sundays", confidence=0.5, created_tick=0))
    s = sem.put(entry("Uniswap constant product pools price by x times y equals k", confidence=0.5,
                      decay_class="structural", created_tick=0))
    assert sem.reinforce([e.id], tick=5, positive_outcome=False) == 0  # retrieval alone never strengthens
    sem.mark_accessed([e.id], tick=5)
    assert sem.get(e.id).strength == 1.0 and sem.get(e.id).last_accessed_at == 5
    sem.reinforce([e.id], tick=5, positive_outcome=True)
    sem.dream_validate([e.id], tick=6)
    got = sem.get(e.id)
    assert got.strength == 2.5 and got.dream_validated and got.validated_count == 1
    far = 5 + 60 * 24 * 400  # long enough for any half-life
    for cycle in (1, 2):
        r = sem.curator_decay(far + cycle, tick_seconds=60.0)
        assert r["archived"] == 0 and sem.get(e.id).consecutive_low_confidence == cycle
    assert sem.curator_decay(far + 3, tick_seconds=60.0)["archived"] == 1
    assert sem.get(e.id) is None and sem.cold_count() == 1
    assert sem.get(s.id) is not None  # structural entries are never pruned


def test_knowledge_graph_bitemporal(stores):
    _, sem = stores
    kg = KnowledgeGraph(sem.db_path)
    f1 = kg.assert_fact("aave", "oracle", "chainlink", block=100, tick=1)
    assert kg.assert_fact("aave", "oracle", "chainlink", block=150, tick=2) == f1  # idempotent
    kg.assert_fact("aave", "oracle", "pyth", block=200, tick=5)
    assert [f.object for f in kg.query_at_block("aave", 150)] == ["chainlink"]
    assert [f.object for f in kg.query_at_block("aave", 250)] == ["pyth"]
    # as known at tick 3 (before the switch was learned), chainlink was believed current forever
    known = kg.query_as_known_at("aave", 3, block=250)
    assert [(f.object, f.valid_until) for f in known] == [("chainlink", None)]
    kg.assert_fact("pyth", "feeds", "eth_usd", block=200, tick=5)
    kg.assert_fact("eth_usd", "prices", "lp_position", block=200, tick=5)
    assert kg.k_hop_neighbors("aave", 3, 250) == {"pyth": 1, "eth_usd": 2, "lp_position": 3}
    assert kg.k_hop_neighbors("aave", 3, 150) == {"chainlink": 1}
    assert kg.invalidate(f1, block=1, tick=9) is False  # already closed
    fid = kg.query_at_block("pyth", 250)[0].fact_id
    assert kg.invalidate(fid, block=300, tick=9) and kg.query_at_block("aave", 350) == []


def test_causal_bfs_three_hops_weighted(stores):
    _, sem = stores
    g = CausalGraph(sem.db_path)
    for a, b, w in [("rate", "dxy", 0.9), ("dxy", "eth", 0.8), ("eth", "hf", 0.5), ("hf", "liq", 0.9)]:
        g.add_edge(a, b, weight=w, tick=0)
    out = {n: (round(s, 4), h) for n, s, h in g.bfs(["rate"], now_tick=0)}
    assert out == {"dxy": (0.9, 1), "eth": (0.72, 2), "hf": (0.36, 3)}  # liq is 4 hops away
    assert [n for n, _, _ in g.bfs(["hf"], now_tick=0, direction="backward")] == ["eth", "dxy", "rate"]


def test_upkeep_folds_rows_into_fts_and_export_import(stores, tmp_path, embedder):
    eps, sem = stores
    sem.put_many([entry(f"insight number {i} about gas at hour {i}") for i in range(5)])
    maintain(eps, sem)
    sem.put(entry("late insight about liquidation cascades"))
    assert table_stats(sem.table, "content")["fts_unindexed_rows"] == 1
    rep = maintain(eps, sem)
    assert rep["semantic"]["after"]["fts_unindexed_rows"] == 0
    eps.upsert(Episode(id=episode_id("g1", 1), golem_id="g1", tick=1, created_at="2026-03-01T00:00:00+00:00",
                       regime="volatile", tier="T2", summary="crash tick", confidence=0.9))
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(export_lines(eps, sem, golem_id="g1", tick=1)) + "\n")
    eps2 = EpisodeStore(tmp_path / "b" / "e.lance", embedder)
    sem2 = SemanticStore(tmp_path / "b" / "s.sqlite", tmp_path / "b" / "s.lance", embedder)
    counts = import_file(path, eps2, sem2)
    assert counts == {"episodes": 1, "entries": 6, "causal_edges": 0}
    got = sem2.all()
    assert all(e.confidence <= 0.3 and e.provenance == Provenance.PREDECESSOR and e.source.golem_id == "g1" for e in got)
    assert eps2.get(episode_id("g1", 1)).confidence == 0.3
    import_file(path, eps2, sem2)
    assert sem2.count() == 6 and eps2.count() == 1  # re-import changes nothing
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text().splitlines()[0] + '\n{"kind": "entry", "content": ""}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        import_file(bad, eps2, sem2)


def test_mood_congruence_and_contrarian_retrieval(stores):
    """grimoire four-factor score: the episode recorded in the golem's current mood (its PAD octant tag) ranks
    first; every 100th tick the mood is inverted (anti-rumination) and the opposite one does."""
    eps, _ = stores
    text = "Tick {t}: volatile regime, health factor 1.42 falling toward liquidation, repaid 25% of the USDC debt"
    eps.upsert_many([
        Episode(id=episode_id("g1", t), golem_id="g1", tick=t, created_at="2026-03-01T00:00:00+00:00",
                regime="volatile", tier="T2", summary=text.format(t=t), emotional_tag=tag)
        for t, tag in ((1, "anxious"), (2, "relaxed"))])
    anxious_mood = (-0.5, 0.6, -0.4)
    q = "health factor falling toward liquidation in a volatile market"
    now = retrieve_for_tick(eps, None, q, regime="volatile", tick=50, tier="T2", pad=anxious_mood, log=False)
    by = {i.id: i for i in now.items}
    assert [i.id for i in now.items][0] == episode_id("g1", 1)
    assert by[episode_id("g1", 1)].scores["mood_congruence"] > 0.95  # same octant as the mood
    assert by[episode_id("g1", 2)].scores["mood_congruence"] < 0.5
    contrarian = retrieve_for_tick(eps, None, q, regime="volatile", tick=100, tier="T2", pad=anxious_mood, log=False)
    assert [i.id for i in contrarian.items][0] == episode_id("g1", 2)
