"""The replay clock waits for theta in path time: with a home whose theta (90 s) is longer than a row (60 s), a
backtest ticks on every other row and the rows between only watch (a gamma pulse), as the live clock would. With
the demo home theta is shorter than a row, so every row ticks and nothing else can tell this apart."""

from __future__ import annotations

import asyncio
import shutil
import tomllib
from pathlib import Path

import pytest
import tomli_w

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
THETA = 90.0  # > the path's 60 s per row; min = base = max, so no regime, tier or budget moves it


def _home(tmp: Path) -> Path:
    home = tmp / "home"
    home.mkdir()
    src = REPO / "examples" / "golem-home"
    for name in ("STRATEGY.md", "HEARTBEAT.md"):
        shutil.copy(src / name, home / name)
    raw = tomllib.loads((src / "golem.toml").read_text())
    raw["clock"].update(theta_base_seconds=THETA, theta_min_seconds=THETA, theta_max_seconds=THETA)
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    return home


def test_a_theta_longer_than_a_row_ticks_every_other_row(tmp_path):
    from golem.backtest.path import load_path
    from infra.backtest import BacktestOptions, _backtest

    csv = tmp_path / "calm10.csv"
    csv.write_text("tick,timestamp,pool_price,oracle_price,gas_gwei,volume_usd,regime\n" + "".join(
        f"{i},{T0 + 60 * i},{2000 + i:.1f},{2000 + i:.1f},1.2,5000,calm\n" for i in range(10)))
    opts = BacktestOptions(path=csv, home=_home(tmp_path), out=tmp_path / "out", progress=False)
    [run] = asyncio.run(_backtest(opts, load_path(csv)))
    ticked = [m.row for m in run.marks if m.tick is not None]
    assert len(run.marks) == 10
    # row 0 ticks (no tick yet), then the first row at least 90 s of path time after the last tick: 2, 4, 6, 8
    assert ticked == [0, 2, 4, 6, 8], [(m.row, m.tick) for m in run.marks]
    assert [m.tick for m in run.marks if m.tick is not None] == [0, 1, 2, 3, 4]
