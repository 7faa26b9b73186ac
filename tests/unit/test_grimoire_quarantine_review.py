"""Quarantine review at the next Curator cycle (the hallucination firewall) and the owner's
`golem grimoire quarantine` commands, on real SQLite + LanceDB stores in temp dirs."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from cli.main import main
from golem.grimoire.semantic.admission import (
    QUARANTINE_MAX_REVIEWS,
    AdmissionAction,
    admit,
    assess_quarantine,
    review_quarantine,
)
from golem.grimoire.store.embeddings import default_embedder
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore
from golem.grimoire.semantic.migrations import _MIGRATIONS, _split_sql
from golem.grimoire.upkeep import cognitive_metrics

HOME = Path(__file__).resolve().parents[2] / "examples" / "golem-home"
SRC = EntrySource(golem_id="g1")
PAID = "When the regime is volatile and the gate escalates to T2, acting has gained money over 12 trades"
LOST = "When the regime is volatile and the gate escalates to T2, acting has lost money over 12 trades"


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


def open_store(root: Path, embedder) -> SemanticStore:
    # the worker's layout (workers/services.py), so the CLI finds the same files
    return SemanticStore(root / "grimoire" / "semantic.sqlite", root / "grimoire" / "semantic.lance", embedder)


def heuristic(content, **kw) -> GrimoireEntry:
    return GrimoireEntry(category=EntryType.HEURISTIC, content=content, source=SRC, **kw)


@pytest.fixture
def quarantined(tmp_path, embedder):
    """A confident entry (confidence 0.8, 5 validations) and an unsupported contradiction of it, quarantined at 12."""
    sem = open_store(tmp_path, embedder)
    base = heuristic(PAID, confidence=0.8, validated_count=5, parent_episode_ids=["e1"], created_tick=10)
    assert admit(sem, base, tick=10).action == AdmissionAction.ADMITTED
    contra = heuristic(LOST, parent_episode_ids=["e20"], created_tick=12)
    d = admit(sem, contra, tick=12)
    assert d.action == AdmissionAction.QUARANTINED and d.conflicts_with == [base.id]
    return sem, base, contra


def test_not_reviewed_in_the_cycle_that_quarantined_it(quarantined):
    sem, _, contra = quarantined
    assert review_quarantine(sem, 12) == []
    assert sem.quarantined_one(contra.id)["review_cycles"] == 0


@pytest.mark.parametrize("change, status", [
    ("supersede", "superseded"),
    ("weaken", "weakened"),
    ("archive", "gone"),
])
def test_released_when_the_contradicted_entry_no_longer_stands(quarantined, change, status):
    sem, base, contra = quarantined
    if change == "supersede":
        sem.supersede(base.id, 30)
    elif change == "weaken":
        sem.update(sem.get(base.id).model_copy(update={"confidence": 0.55}))
    else:  # three Curator cycles far in the future: retention below the floor → cold storage
        for t in (10**7, 10**7 + 1, 10**7 + 2):
            sem.curator_decay(t)
        assert sem.get(base.id) is None and sem.cold_count() == 1
    [qa] = assess_quarantine(sem, 60)
    assert qa.releasable and qa.conflicts == {base.id: status}
    [o] = review_quarantine(sem, 60, utility_fn=lambda e: 0.9)
    assert o.outcome == "released" and status in o.reason
    assert o.admission_action in ("admitted", "admitted_low") and o.entry_id == contra.id
    stored = sem.get(contra.id)
    assert stored is not None and stored.content == LOST and stored.parent_episode_ids == ["e20"]
    row = sem.quarantined_one(contra.id)
    assert (row["status"], row["reviewed"], row["resolved_tick"]) == ("released", True, 60)
    assert row["admission_action"] == o.admission_action and status in row["resolution"]
    assert sem.quarantined("pending") == [] and review_quarantine(sem, 110) == []


def test_dropped_after_n_review_cycles_and_the_row_is_kept(quarantined):
    sem, base, contra = quarantined
    assert QUARANTINE_MAX_REVIEWS == 3
    outcomes = []
    for tick in (60, 60, 110, 160):  # the second review at 60 is a retried cycle: it counts once
        outcomes += review_quarantine(sem, tick)
    assert [(o.outcome, o.review_cycles) for o in outcomes] == [("kept", 1), ("kept", 2), ("dropped", 3)]
    assert base.id in outcomes[0].reason and "still contradicts" in outcomes[0].reason
    row = sem.quarantined_one(contra.id)
    assert row["status"] == "dropped" and row["resolved_tick"] == 160
    assert row["resolution"].startswith("dropped after 3 review cycles: still contradicts")
    assert row["entry"].content == LOST, "the candidate itself stays in the audit"
    assert sem.get(contra.id) is None and sem.get(base.id).valid_until is None
    assert cognitive_metrics(sem, now_tick=160)["quarantined_pending"] == 0
    assert review_quarantine(sem, 210) == []


def test_repeats_gather_evidence_until_the_candidate_outweighs_the_entry(quarantined):
    sem, base, contra = quarantined
    # The same contradiction distilled again from more episodes joins the pending row instead of a new row.
    for i in range(21, 27):
        d = admit(sem, heuristic(LOST, parent_episode_ids=[f"e{i}"], created_tick=13), tick=13)
        assert d.action == AdmissionAction.QUARANTINED and d.entry_id == contra.id
    [row] = sem.quarantined()
    assert row["entry"].parent_episode_ids == ["e20", *(f"e{i}" for i in range(21, 27))]
    [qa] = assess_quarantine(sem, 60)
    assert qa.conflicts == {base.id: "outweighed"}  # 7 episodes against 5 validations, and newer
    [o] = review_quarantine(sem, 60, utility_fn=lambda e: 0.8)
    assert o.outcome == "released" and o.admission_action in ("admitted", "admitted_low")
    old = sem.get(base.id)
    assert old.valid_until == 60 and old.contradicted_count == 1, "the outweighed entry is superseded"
    assert [e.id for e in sem.all()] == [contra.id]


def test_a_release_that_meets_another_confident_contradiction_stays_quarantined(quarantined):
    sem, base, contra = quarantined
    sem.supersede(base.id, 30)
    other = heuristic(PAID.replace("12 trades", "14 trades"), confidence=0.9, validated_count=8,
                      parent_episode_ids=["e40"], created_tick=40)
    sem.put(other)
    [o] = review_quarantine(sem, 60, utility_fn=lambda e: 0.9)
    assert o.outcome == "kept" and other.id in o.reason and o.review_cycles == 1
    row = sem.quarantined_one(contra.id)
    assert row["status"] == "pending" and row["conflicts_with"] == [other.id] and row["tick"] == 12
    assert len(sem.quarantined()) == 1


def test_migration_from_v5_keeps_quarantine_rows(tmp_path, embedder):
    db_path = tmp_path / "grimoire" / "semantic.sqlite"
    db_path.parent.mkdir()
    db = sqlite3.connect(db_path)
    db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for version in range(5):
        for stmt in _split_sql(_MIGRATIONS[version]):
            db.execute(stmt)
        db.execute("INSERT INTO schema_version VALUES (?)", (version + 1,))
    db.execute("INSERT INTO quarantined_entries (id, entry, reason, conflicts_with, quarantined_tick) VALUES "
               "(?, ?, 'contradicts high-confidence entries', '[\"x\"]', 7)",
               ("q-old", heuristic(LOST, id="q-old").model_dump_json()))
    db.commit()
    db.close()
    sem = open_store(tmp_path, embedder)
    row = sem.quarantined_one("q-old")
    assert (row["status"], row["review_cycles"], row["tick"]) == ("pending", 0, 7)
    [o] = review_quarantine(sem, 50, utility_fn=lambda e: 0.9)
    assert o.outcome == "released" and "x gone" in o.reason


def test_owner_cli_list_release_drop(quarantined, tmp_path, capsys):
    sem, base, contra = quarantined
    second = heuristic("When the regime is volatile and the gate escalates to T2, acting has lost money over "
                       "12 trades and slippage rose above 80 bps", parent_episode_ids=["e30"], created_tick=14)
    sem.quarantine(second, "contradicts high-confidence entries", [base.id], 14)
    home = tmp_path / "home"
    shutil.copytree(HOME, home)
    common = ["--home", str(home), "--data", str(tmp_path)]

    assert main([*common, "grimoire", "quarantine", "list"]) == 0
    out = capsys.readouterr().out
    assert contra.id in out and second.id in out and "pending" in out and LOST in out
    assert main([*common, "grimoire", "quarantine", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == [contra.id, second.id] and rows[0]["conflicts_with"] == [base.id]

    # release on the owner's word while the confident entry still stands: the composite (factual 0.1, novelty
    # ~0.07 next to its near-opposite) is below 0.45, so it goes in at the low confidence 0.3, flagged
    assert main([*common, "grimoire", "quarantine", "release", contra.id, "--tick", "70", "--json"]) == 0
    rel = json.loads(capsys.readouterr().out)
    assert rel["released"] and rel["action"] == "admitted_low" and rel["score"] < 0.45
    assert set(rel["factors"]) == {"future_utility", "factual_confidence", "novelty", "recency", "type_prior"}
    assert any("owner release" in f for f in rel["flags"])
    assert sem.quarantined_one(contra.id)["status"] == "released"
    assert sem.get(contra.id).confidence == 0.3 and sem.get(base.id).valid_until is None

    assert main([*common, "grimoire", "quarantine", "drop", second.id, "--reason", "a fluke", "--tick", "71"]) == 0
    assert "dropped at tick 71" in capsys.readouterr().out
    row = sem.quarantined_one(second.id)
    assert row["status"] == "dropped" and row["resolution"] == "owner drop: a fluke"

    assert main([*common, "grimoire", "quarantine", "list"]) == 0
    assert "nothing pending" in capsys.readouterr().out
    assert main([*common, "grimoire", "quarantine", "list", "--all"]) == 0
    out = capsys.readouterr().out
    assert "released" in out and "dropped" in out and "owner drop: a fluke" in out

    with pytest.raises(SystemExit, match="already released"):
        main([*common, "grimoire", "quarantine", "release", contra.id])
    with pytest.raises(SystemExit, match="no quarantined entry 'nope'"):
        main([*common, "grimoire", "quarantine", "drop", "nope"])


def test_admission_scores_artifact_quality_at_creation(tmp_path, embedder):
    """Every admitted artifact gets its quality score when it is written; a producer's own score stands."""
    sem = open_store(tmp_path, embedder)
    concrete = heuristic("When the health factor falls below 1.5, repay 25% of the USDC debt within 2 ticks",
                         parent_episode_ids=["e1", "e2"], created_tick=5)
    d = admit(sem, concrete, tick=5)
    assert d.action in (AdmissionAction.ADMITTED, AdmissionAction.ADMITTED_LOW) and d.quality is not None
    assert sem.get(concrete.id).quality_score == pytest.approx(d.quality.score)
    vague = heuristic("It depends, clearly things can change, be careful out there with the market",
                      parent_episode_ids=["e3"], created_tick=5)
    dv = admit(sem, vague, tick=5)
    assert {"empty rhetoric", "weasel words"} <= set(dv.quality.red_flags)
    assert any(f.startswith("quality red flag") for f in dv.flags)
    assert dv.quality.score < 0.3 < d.quality.score  # below 0.3 it will decay 2× faster
    assert sem.get(dv.entry_id).quality_score == pytest.approx(dv.quality.score)
    preset = heuristic("When gas is above 80 gwei, defer swaps until the next block under 30 gwei",
                       parent_episode_ids=["e4"], created_tick=5, quality_score=0.9)
    dp = admit(sem, preset, tick=5)
    assert dp.entry_id == preset.id and sem.get(preset.id).quality_score == 0.9
