"""Retrieval answers alike in every process: sums over a question's terms run in one order (a set's order follows the
interpreter's hash seed, and a float sum follows its order), and a warning holding exactly half the question's known
idf mass counts as half (docs/design/grimoire.md, "The fourth round")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from golem.grimoire.access import search
from golem.grimoire.episodes.model import Episode, episode_id
from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore
from golem.grimoire.store.embeddings import default_embedder

ROOT = Path(__file__).resolve().parents[2]
# an action question: two words the memory knows (one entry each), the warning holding one of them, seven it never saw
ACTION = "Should I add leverage through the pool amid flurbish zangles and gronk tiddles?"
# words of many different document frequencies, so the order of their sum shows in its last bits
MIXED = "Did the oracle lag or swap fees cost more than interest in a volatile week?"


def build(d: Path) -> tuple[EpisodeStore, SemanticStore]:
    emb = default_embedder()
    eps = EpisodeStore(d / "e.lance", emb)
    sem = SemanticStore(d / "s.sqlite", d / "s.lance", emb)
    if not eps.table.count_rows():
        eps.upsert_many([Episode(id=episode_id("h", t), golem_id="h", tick=t, created_at="2026-01-01T00:00:00+00:00",
                                 regime="range_bound", tier="T0", summary=f"Tick {t}: swap fees quiet, held.")
                         for t in range(10, 100, 10)])
        src = EntrySource(golem_id="h")
        sem.put_many([GrimoireEntry(id=i, category=c, content=t, source=src, created_tick=5) for i, c, t in [
            ("warn", EntryType.WARNING, "Warning: the pool reverts swaps."),
            ("other", EntryType.INSIGHT, "Leverage costs interest."),
            ("oracle", EntryType.INSIGHT, "The oracle updates hourly; swap fees follow it."),
            ("week", EntryType.INSIGHT, "A volatile week: swap fees doubled."),
            ("rewards", EntryType.INSIGHT, "Rewards accrue weekly.")]])
    return eps, sem


def test_a_warning_holding_exactly_half_the_known_words_answers_the_action(tmp_path):
    eps, sem = build(tmp_path)
    res = search(eps, sem, ACTION, regime="range_bound", tick=100, k=10)
    # on paper the warning holds half the known idf mass; in floating point the quotient is 0.49999999999999994
    assert res.evidence["p_unanswerable"] >= 0.7, res.evidence  # the calibrated decision alone would abstain
    assert not res.abstained and res.items[0].id == "warn", (res.reason, res.evidence)
    assert res.evidence["warning_match"] == 1.0


PROBE = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from tests.unit.test_retrieval_hash_seed import ACTION, MIXED, build
from golem.grimoire.access import search
from golem.grimoire.semantic.index import entry_index
eps, sem = build(Path(sys.argv[1]))
idx = entry_index(sem)
out = {}
for q in (ACTION, MIXED):
    res = search(eps, sem, q, regime="range_bound", tick=100, k=10)
    out[q] = {"items": [i.id for i in res.items], "abstained": res.abstained,
              "evidence": {k: repr(v) for k, v in sorted(res.evidence.items())},
              "coverage": [repr(float(x)) for x in idx.coverage(__import__("golem.grimoire.store.terms",
                                                                           fromlist=["terms"]).terms(q))]}
print(json.dumps(out, sort_keys=True))
"""


# seeds 0 and 2 order this test's question terms differently in a set: summed in set order, their bits differ
@pytest.mark.parametrize("seeds", [(0, 2)])
def test_every_hash_seed_gives_the_same_bits(tmp_path, seeds):
    build(tmp_path)  # the stores once; each process only reads them
    got = {}
    for seed in seeds:
        env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(ROOT)}
        p = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path), str(ROOT)], env=env, capture_output=True,
                           text=True, timeout=240, check=True)
        got[seed] = json.loads(p.stdout.strip().splitlines()[-1])
    first = got[seeds[0]]
    for seed in seeds[1:]:
        assert got[seed] == first, f"hash seed {seed} differs from {seeds[0]}"
