"""The trial runner the delta cycle's trial step is handed: two `golem backtest` runs of the golem's own recent
rows, one whose PLAYBOOK.md holds the rule and one whose does not (docs/design/learning.md).

Each run is infra/backtest.py's `run_backtest` in a child process (`python -m infra.trial_arm SPEC`): its own
Temporal dev server and Anvil under the trial's directory, nothing on the live chain, and the live worker's
event loop, logging and signal handlers untouched. Cancelling the step terminates the child, which stops in order.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

import tomli_w

from golem.backtest.models import PathRow
from golem.backtest.path import write_path_csv
from golem.learning.trial import StartPosition, TrialFigures
from golem.models.config import GolemConfig

ARMS = ("with", "without")
NEVER = 10**9  # a cadence no trial reaches: the trial golem learns nothing while it is measured


def trial_home(config: GolemConfig, strategy_text: str, home: Path) -> Path:
    """The golem as configured, with its learning switched off for the trial: no delta cycle (its PLAYBOOK.md stays
    the one under test), no dream, no nested trial."""
    raw = config.model_dump(mode="json", exclude_none=True)
    raw["clock"].update(delta_theta_ticks=NEVER, dream_every_ticks=NEVER)
    raw["chain"]["address_book"] = "embedded"  # the trial's world is the dev world, whatever chain the golem is on
    raw["dream"]["min_gap_ticks"] = NEVER
    raw.setdefault("learning", {})["trial"] = False  # a default [learning] is left out of the dump
    home.mkdir(parents=True, exist_ok=True)
    (home / "golem.toml").write_text(tomli_w.dumps(raw))
    (home / "STRATEGY.md").write_text(strategy_text)
    return home


def _grimoire_source(root: Path, playbook_text: str) -> Path:
    """A data dir for `--grimoire`: an empty semantic store and the arm's PLAYBOOK.md (the rule under test, or not)."""
    (root / "grimoire").mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(root / "grimoire" / "semantic.sqlite")):
        pass
    (root / "PLAYBOOK.md").write_text(playbook_text)
    return root


class BacktestTrialRunner:
    """Runs a trial's two arms one after the other (2 cores: side by side would only slow both)."""

    def __init__(self, python: str = sys.executable) -> None:
        self.python = python

    async def run(self, rows: list[PathRow], config: GolemConfig, strategy_text: str,
                  playbooks: tuple[str, str], out: Path, warmup: int = 0,
                  position: StartPosition | None = None) -> tuple[TrialFigures, TrialFigures]:
        out.mkdir(parents=True, exist_ok=True)
        with (out / "path.csv").open("w") as f:
            write_path_csv(rows, f)
        home = trial_home(config, strategy_text, out / "home")
        figures = []
        for arm, playbook in zip(ARMS, playbooks):
            # a retried step runs into the directory its earlier attempt left: each arm starts from nothing, or it
            # would inherit that attempt's transaction journal, records and Grimoire (run_backtest refuses that)
            for left in (out / arm, out / f"{arm}-source"):
                shutil.rmtree(left, ignore_errors=True)
            (out / f"{arm}.json").unlink(missing_ok=True)
            spec = {"path": str(out / "path.csv"), "home": str(home), "out": str(out / arm),
                    "grimoire": str(_grimoire_source(out / f"{arm}-source", playbook)),
                    "figures": str(out / f"{arm}.json"), "warmup": warmup,
                    "position": position.model_dump(mode="json") if position is not None else None}
            (out / f"{arm}-spec.json").write_text(json.dumps(spec))
            await self._child(out / f"{arm}-spec.json", out / f"{arm}.log")
            figures.append(TrialFigures.model_validate_json((out / f"{arm}.json").read_text()))
        return figures[0], figures[1]

    async def _child(self, spec: Path, log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[1]),
                                                                         os.environ.get("PYTHONPATH", "")) if p)}
        with log.open("w") as err:
            proc = await asyncio.create_subprocess_exec(self.python, "-m", "infra.trial_arm", str(spec),
                                                        stdout=err, stderr=err, env=env, start_new_session=True)
            try:
                code = await proc.wait()
            except asyncio.CancelledError:  # the step was cancelled or timed out: the backtest stops in order
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), 30)
                except asyncio.TimeoutError:
                    proc.kill()
                raise
        if code != 0:
            tail = log.read_text()[-800:]
            raise RuntimeError(f"trial backtest {spec.parent.name}/{spec.stem} exited {code}: {tail}")

