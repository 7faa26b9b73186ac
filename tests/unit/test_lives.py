"""bench/lives.py: lives are shipped scenarios only, each life starts from the life before's data, and the
manifest names the recipe and the inheritance (the backtest itself is replaced by a stand-in writing its report)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench import judge, lives


def test_a_heldout_path_is_never_lived(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="only shipped"):
        lives.scenario_csvs(["gap_through_line"])  # a held-out name: no shipped CSV by it
    # a held-out path's content under a shipped name is refused too
    shipped = tmp_path / "scenarios"
    shipped.mkdir()
    shutil.copy(judge.SETS["heldout"] / "gap_through_line.csv", shipped / "new_crash.csv")
    monkeypatch.setattr(lives, "SHIPPED", shipped)
    with pytest.raises(SystemExit, match="held-out path"):
        lives.scenario_csvs(["new_crash"])


def test_each_life_starts_from_the_life_before_and_the_manifest_names_the_inheritance(tmp_path, monkeypatch):
    calls: list[list[str]] = []

    def backtest(cmd, **kw):
        calls.append(cmd)
        out = Path(cmd[cmd.index("--out") + 1])
        (out / "data" / "grimoire").mkdir(parents=True)
        (out / "data" / "grimoire" / "semantic.sqlite").write_bytes(b"")
        given = cmd[cmd.index("--grimoire") + 1] if "--grimoire" in cmd else None
        (out / "report.json").write_text(json.dumps({"report": {
            "figures": {"total_return": -0.1, "max_drawdown": 0.2}, "info": {"grimoire_from": given, "rows": 240}},
            "marks": []}))
        return 0

    monkeypatch.setattr(lives.subprocess, "call", backtest)
    home = lives.ROOT / "examples" / "golem-home"
    data = lives.build(tmp_path / "lives", home, ["slow_bleed", "crash_recovery"])
    assert "--grimoire" not in calls[0]  # the first life starts from nothing
    assert calls[1][calls[1].index("--grimoire") + 1] == str(tmp_path / "lives" / "01-slow_bleed" / "data")
    assert data == tmp_path / "lives" / "02-crash_recovery" / "data"
    man = json.loads((tmp_path / "lives" / "MANIFEST.json").read_text())
    assert [s["name"] for s in man["recipe"]["scenarios"]] == ["slow_bleed", "crash_recovery"]
    assert man["inheritance"] == "02-crash_recovery/data" and len(man["recipe_sha256"]) == 64
    assert man["lives"][1]["grimoire_from"].endswith("01-slow_bleed/data")
    assert lives.inheritance(tmp_path / "lives") == data.resolve()
