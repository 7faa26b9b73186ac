"""`golem grimoire playbook log|diff|rollback` on a real data dir, the EpisodeStore table accessor,
idempotent causal-edge re-import, and the embedding drift check — real SQLite, LanceDB and WordLlama."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from cli.main import main
from golem.grimoire.store.embeddings import default_embedder, drift_check
from golem.grimoire.episodes.model import Episode, episode_id
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.semantic.graph import CausalGraph, edge_id
from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.grimoire.playbook.compile import PlaybookHistory, read_revision, rewrite_playbook
from golem.grimoire.semantic.store import SemanticStore
from golem.grimoire.transfer import export_lines, import_file

HOME = Path(__file__).resolve().parents[2] / "examples" / "golem-home"


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


def test_playbook_cli_log_diff_rollback(tmp_path, capsys):
    home = tmp_path / "home"
    shutil.copytree(HOME, home)
    data = tmp_path / "data"
    hs = HeuristicStore(data / "grimoire" / "heuristics.sqlite")  # the worker's layout
    path = data / "PLAYBOOK.md"
    for i in range(3):
        hs.add_or_reinforce("Avoid swaps when gas is above 50 gwei", "global", f"g:tick:{i}")
    rewrite_playbook(hs, path, tick=5)
    for i in range(3):
        hs.add_or_reinforce("Chase every rally with full size", "global", f"g:tick:{10 + i}")
    rewrite_playbook(hs, path, tick=15)
    common = ["--home", str(home), "--data", str(data)]

    assert main([*common, "grimoire", "playbook", "log"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["r1", "r2"] and "tick 15" in out[1] and "compile" in out[1]
    assert main([*common, "grimoire", "playbook", "diff", "1", "2"]) == 0
    d = capsys.readouterr().out
    assert "+- Chase every rally" in d and d.startswith("--- PLAYBOOK.md@1")
    assert main([*common, "grimoire", "playbook", "rollback", "1"]) == 0
    assert "revision 3 = revision 1" in capsys.readouterr().out
    assert read_revision(path) == 3 and "Chase every rally" not in path.read_text()
    assert [r.reason for r in PlaybookHistory(data / "grimoire" / "heuristics.sqlite").log()][-1] == "rollback:1"
    with pytest.raises(SystemExit, match="no PLAYBOOK revision 42"):
        main([*common, "grimoire", "playbook", "rollback", "42"])
    with pytest.raises(SystemExit, match="no heuristics store"):
        main(["--home", str(home), "--data", str(tmp_path / "nowhere"), "grimoire", "playbook", "log"])


def test_table_accessor_and_causal_edge_reimport_is_idempotent(tmp_path, embedder):
    eps = EpisodeStore(tmp_path / "a" / "e.lance", embedder)
    sem = SemanticStore(tmp_path / "a" / "s.sqlite", tmp_path / "a" / "s.lance", embedder)
    eps.upsert(Episode(id=episode_id("g1", 1), golem_id="g1", tick=1, created_at="2026-03-01T00:00:00+00:00",
                       regime="volatile", tier="T2", summary="gas spiked and the swap reverted"))
    assert eps.table.count_rows() == 1 and "summary" in eps.table.schema.names
    g = CausalGraph(sem.db_path)
    g.add_edge("gas", "revert", weight=0.9, tick=1)
    g.add_edge("gas", "revert", weight=0.5, tick=2)
    assert g.edges()[0]["edge_id"] == edge_id("gas", "revert") != edge_id("revert", "gas")
    path = tmp_path / "x.jsonl"
    path.write_text("\n".join(export_lines(eps, sem, golem_id="g1", tick=2)) + "\n")

    sem2 = SemanticStore(tmp_path / "b" / "s.sqlite", tmp_path / "b" / "s.lance", embedder)
    eps2 = EpisodeStore(tmp_path / "b" / "e.lance", embedder)
    g2 = CausalGraph(sem2.db_path)
    g2.add_edge("gas", "revert", weight=0.1, tick=0)  # the heir already knew a little
    import_file(path, eps2, sem2)
    once = g2.edges()
    assert once[0]["evidence"] == 2 and once[0]["weight"] == pytest.approx((0.1 + 0.3) / 2)  # capped at 0.3
    import_file(path, eps2, sem2)
    import_file(path, eps2, sem2, as_is=True)
    assert g2.edges() == once  # keyed by (edge id, exporter): re-import changes nothing

    bad = tmp_path / "bad.jsonl"
    lines = path.read_text().splitlines()
    bad.write_text("\n".join([lines[0], *[ln.replace(edge_id("gas", "revert"), "ce-forged") for ln in lines[1:]]]) + "\n")
    with pytest.raises(ValueError, match="edge_id 'ce-forged' does not match"):
        import_file(bad, eps2, sem2)


def test_drift_check_on_reference_set(embedder):
    ref = ["gas spiked above 80 gwei and the swap reverted", "health factor fell to 1.2 during the crash",
           "liquidity moved out of the WETH/USDC pool", "the oracle price lagged the market by two blocks"]
    stored = embedder.embed(ref)
    same = drift_check(embedder, ref, stored)
    assert same.ok and same.min_cosine > 0.999 and same.drifted == []
    rng = np.random.default_rng(0)
    noisy = stored.copy()
    noisy[2] = rng.normal(size=stored.shape[1]).astype(np.float32)
    rep = drift_check(embedder, ref, noisy)
    assert not rep.ok and rep.drifted == [2] and rep.min_cosine < 0.5
    with pytest.raises(ValueError, match="shape"):
        drift_check(embedder, ref, stored[:2])


def test_scheduled_drift_check_pins_then_compares(tmp_path):
    from golem.grimoire.store.embeddings import default_embedder, scheduled_drift_check

    pinned = tmp_path / "drift-reference.npy"
    first = scheduled_drift_check(default_embedder(), pinned)
    assert pinned.exists() and first.status == "healthy" and first.max_distance < 1e-5
    import numpy as np

    moved = np.load(pinned)
    moved[0] = -moved[0]  # as if the model had changed under us
    np.save(pinned, moved)
    report = scheduled_drift_check(default_embedder(), pinned)
    assert report.status == "critical" and 0 in report.drifted


def test_norm_variance_jump_is_a_distribution_shift(tmp_path):
    """Drift signal 3: a sudden increase of the reference vectors' norm variance → critical (pause writes)."""
    import json

    from golem.grimoire.store.embeddings import NORM_VARIANCE_CRITICAL_RATIO, default_embedder, scheduled_drift_check

    pinned = tmp_path / "drift-reference.npy"
    first = scheduled_drift_check(default_embedder(), pinned)
    meta = json.loads(pinned.with_suffix(".json").read_text())
    assert meta["norm_variance"] > 0 and first.as_dict()["norm_variance_ratio"] == pytest.approx(1.0)
    # as if the pinned week's norms had been much tighter: today's variance is a sudden increase
    meta["norm_variance"] /= NORM_VARIANCE_CRITICAL_RATIO * 1.5
    pinned.with_suffix(".json").write_text(json.dumps(meta))
    report = scheduled_drift_check(default_embedder(), pinned)
    assert report.max_distance < 1e-5, "the vectors themselves did not move"
    assert report.status == "critical" and report.norm_variance_ratio == pytest.approx(3.0, rel=1e-6)
