"""The tune lives of new paths are new: no path equals a shipped one (whose lives are the tune part) or a held-out one
(whose lives are the sealed part), and each is a fold of its own (bench/memory_eval/extra_tune.py)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from memory_eval import extra_tune  # noqa: E402


def prices(p: Path) -> list[str]:
    return [line.split(",")[2] for line in p.read_text().splitlines()[1:]]


def test_new_paths_are_neither_shipped_nor_held_out(tmp_path):
    written = extra_tune.write_new_paths(tmp_path)
    assert len(written) == len(extra_tune.NEW_PATHS) >= 12
    known = {p.name: prices(p) for p in [*(ROOT / "examples" / "scenarios").glob("*.csv"),
                                          *(ROOT / "bench" / "heldout" / "paths").glob("*.csv")]}
    assert len(known) >= 19
    for p in written:
        mine = prices(p)
        assert 150 <= len(mine) <= 240
        for name, other in known.items():
            assert mine[:60] != other[:60], f"{p.name} repeats {name}"
    names = {f"new-{shape}-s{seed}" for shape, seed in extra_tune.NEW_PATHS}
    assert not names & (extra_tune.life_names("tune") | extra_tune.life_names("sealed"))
    # one fold per path in abstention.py: a life's group is its name after the prefix, never a shipped path's
    groups = {n.split("-", 1)[-1] for n in names}
    assert len(groups) == len(names) and not groups & extra_tune.life_names("tune")
