"""A second pass (`golem backtest --grimoire <first run>/data`) keeps the rules the first pass measured and kept in
PLAYBOOK.md through its own delta cycles (docs/design/learning.md#a-second-pass). Real Temporal dev server and Anvil."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from golem.backtest.path import load_path
from golem.grimoire.playbook import view as playbook_view
from golem.grimoire.playbook.compile import PlaybookHistory, rewrite_playbook
from golem.grimoire.playbook.heuristics import GLOBAL_SCOPE, HeuristicStore
from golem.grimoire.semantic.store import SemanticStore
from golem.grimoire.store.embeddings import default_embedder
from infra.backtest import BacktestOptions, _backtest
from tests.integration.test_backtest import REPO, _path_csv

RULE = "WHEN health_factor < 2.09 AND balance.WETH > 10 AND regime == trending_down THEN swap 30% WETH to USDC"


def _first_pass_data(root: Path) -> str:
    """What a first pass leaves when its trial kept a learned rule: the rule's row (kept, in PLAYBOOK.md), its
    semantic entry admitted by the gate, and the compiled PLAYBOOK.md."""
    grim = root / "grimoire"
    grim.mkdir(parents=True)
    heuristics = HeuristicStore(grim / "heuristics.sqlite")
    for i in range(6):
        h = heuristics.add_or_reinforce(RULE, GLOBAL_SCOPE, f"hold-trending_down-tick-{65 + i}")
    heuristics.record_trial(h.id, 100, "add", "kept", '{"verdict": "kept"}', "first-pass")
    semantic = SemanticStore(grim / "semantic.sqlite", grim / "semantic.lance", default_embedder())
    assert playbook_view.offer(heuristics, semantic, "bt-golem", 100) == {h.id: "admitted"}
    rewrite_playbook(heuristics, root / "PLAYBOOK.md", tick=100)
    assert RULE in (root / "PLAYBOOK.md").read_text()
    return h.id


def test_a_second_pass_keeps_the_rule_the_first_pass_kept_through_its_delta_cycles(tmp_path: Path) -> None:
    hid = _first_pass_data(tmp_path / "first")
    home = tmp_path / "home"
    shutil.copytree(REPO / "examples" / "golem-home", home)
    toml = (home / "golem.toml").read_text()
    toml = toml.replace("delta_theta_ticks = 50 ", "delta_theta_ticks = 8  ").replace("trial = true", "trial = false")
    (home / "golem.toml").write_text(toml)
    csv = _path_csv(tmp_path / "p.csv", rows=20)
    out = tmp_path / "second"
    asyncio.run(_backtest(BacktestOptions(path=csv, home=home, out=out, progress=False, grimoire=tmp_path / "first"),
                          load_path(csv)))
    data = out / "data"
    assert (data / "cycles").exists()
    # the second pass's own cycles (ticks 8, 16; the copied history holds the first pass's tick-100 revision)
    revisions = [r for r in PlaybookHistory(data / "grimoire" / "heuristics.sqlite").log() if r.tick in (8, 16)]
    assert revisions, "no delta cycle compiled PLAYBOOK.md in the second pass"
    # every one compiled the inherited rule back in: its entry was not read as a decayed 0.3 inheritance
    assert all(RULE in r.text for r in revisions), [r.text[-300:] for r in revisions]
    assert RULE in (data / "PLAYBOOK.md").read_text() and hid in (data / "PLAYBOOK.md").read_text()
