"""The judge's inherited arm (bench/judge.py --memory-from) runs `golem backtest` from the lives' Grimoire: the run
records where it inherited from and starts with the rule the earlier life kept in its PLAYBOOK.md. Real Temporal dev
server and Anvil (the CLI the judge runs as a subprocess)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from bench import judge
from tests.integration.test_backtest import REPO, _path_csv
from tests.integration.test_backtest_second_pass import RULE, _first_pass_data


def test_the_inherited_arm_starts_from_the_lives_grimoire(tmp_path: Path) -> None:
    lives = tmp_path / "lives"
    hid = _first_pass_data(lives / "01-crash_recovery" / "data")  # what an earlier life kept
    (lives / "MANIFEST.json").write_text(json.dumps({"inheritance": "01-crash_recovery/data", "lives": []}))
    home = tmp_path / "home"
    shutil.copytree(REPO / "examples" / "golem-home", home)
    csv = _path_csv(tmp_path / "p.csv", rows=8)
    grimoire = judge.memory_from(str(lives), None, home)
    out = tmp_path / "j"
    assert judge.run_path(csv, out, home, grimoire, compare=False) == 0, \
        (out / f"p.{judge.INHERITED}.log").read_text()[-2000:]
    pr = judge.load_path_runs(out / "p")
    assert pr.inherited_error is None and judge.INHERITED in pr.reports
    assert pr.reports[judge.INHERITED]["report"]["info"]["grimoire_from"] == str(grimoire)
    playbook = (out / "p" / judge.INHERITED / "data" / "PLAYBOOK.md").read_text()
    assert RULE in playbook and hid in playbook  # the earlier life's kept rule is this run's from row 0
