"""One arm of a learned rule's trial, run as a child process by workers/trial.py: `run_backtest` of the path,
home, Grimoire and start position its arm file names, its figures written as TrialFigures JSON
(docs/design/learning.md)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(spec_path: Path) -> None:
    """The child: one `run_backtest` of the arm file, its figures written as TrialFigures JSON."""
    from golem.backtest.report import build_report
    from golem.learning.trial import StartPosition, figures_of
    from infra.backtest import BacktestOptions, run_backtest, world_position

    spec = json.loads(spec_path.read_text())
    started = time.perf_counter()
    held = spec.get("position")
    position = world_position(StartPosition.model_validate(held)) if held else None
    (run,) = run_backtest(BacktestOptions(path=Path(spec["path"]), home=Path(spec["home"]), out=Path(spec["out"]),
                                          grimoire=Path(spec["grimoire"]), progress=False, position=position))
    judged = run.marks[min(int(spec.get("warmup", 0)), max(0, len(run.marks) - 2)):]  # figures over the window only
    report = build_report(run.info, judged)
    actions = [f"{m.row}:{a.tool}" for m in run.marks for a in m.actions if a.status == "executed"]
    fig = figures_of(report.figures, actions)
    Path(spec["figures"]).write_text(fig.model_dump_json())
    print(f"trial arm done in {time.perf_counter() - started:.1f} s: {fig.model_dump_json()}", file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
