"""`golem backtest PATH.csv`: the live golem on a recorded market path, with a report (and baselines)."""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from datetime import datetime, timezone
from pathlib import Path

from cli.common import Command


def _grimoire_dir(given: str) -> Path:
    """--grimoire takes a run's data dir, or a backtest output dir holding one (data/ or golem/data/)."""
    p = Path(given).resolve()
    for cand in (p, p / "data", p / "golem" / "data"):
        if (cand / "grimoire" / "semantic.sqlite").exists():
            return cand
    raise SystemExit(f"golem backtest: --grimoire {given}: no Grimoire there (looked for grimoire/semantic.sqlite in "
                     f"{p}, {p / 'data'} and {p / 'golem' / 'data'}); give an earlier backtest's --out directory")


def cmd_backtest(args: Namespace) -> int:
    from golem.backtest.path import PathError
    from golem.backtest.report import build_report, compare_reports, render_comparison, render_table, write_report
    from golem.models.config import ConfigError
    from infra.backtest import BacktestError, BacktestOptions, run_backtest
    from infra.supervisor import stop_on_signals

    path = Path(args.path)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    out = Path(args.out) if args.out else Path("backtests") / f"{path.stem}-{stamp}"
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"golem backtest: --out {out} is not empty; give a new directory (runs never overwrite each other)")
    opts = BacktestOptions(
        path=path, home=Path(args.home).resolve(), out=out.resolve(), memory=args.memory == "on",
        grimoire=_grimoire_dir(args.grimoire) if args.grimoire else None, compare=args.compare,
        progress=not args.json, steps=args.steps,
    )
    stop_on_signals()  # `kill` of a backtest stops its Temporal dev server and Anvil too (they left orphans)
    try:
        runs = run_backtest(opts)
    except (PathError, ConfigError, BacktestError) as err:
        raise SystemExit(f"golem backtest: {err}") from None
    except KeyboardInterrupt as stop:
        from infra.console import say
        from infra.supervisor import sweep_children

        sweep_children()  # the run stopped its worker, Anvil and Temporal in order; this kills what that left, named
        say(f"golem backtest: stopped ({stop or 'interrupted'}); its Temporal and Anvil are stopped, its files are "
            f"in {opts.out}", err=True)
        return 130
    reports = []
    for run in runs:
        report = build_report(run.info, run.marks)
        if run.out_dir is None:
            raise SystemExit(f"golem backtest: run {run.name} finished without an output directory to write its report")
        write_report(report, run.marks, run.out_dir)
        reports.append(report)
    if args.compare:
        table = compare_reports(reports, marks={run.name: run.marks for run in runs})
        text = render_comparison(table)
        (opts.out / "compare.md").write_text(text + "\n")
        (opts.out / "compare.json").write_text(table.model_dump_json(indent=2))
    if args.json:
        payload = [r.model_dump(mode="json") for r in reports]
        print(json.dumps(payload if args.compare else payload[0], indent=2))
        return 0
    if args.compare:
        print(text)
    else:
        print(render_table(reports[0]))
    print(f"\nreport: {opts.out}/{'<run>/' if args.compare else ''}report.md, report.json, report.png", file=sys.stderr)
    return 0


def register(command: Command) -> None:
    s = command("backtest", "run the golem on a recorded market path (CSV) and report how it decided")
    s.add_argument("path", help="CSV: tick,pool_price,oracle_price,gas_gwei,volume_usd[,timestamp][,regime]")
    s.add_argument("--out", help="output directory (default backtests/<name>-<time>); must be new or empty")
    s.add_argument("--memory", choices=["on", "off"], default="on",
                   help="off: retrieval returns nothing and nothing is admitted ([grimoire] memory = false)")
    s.add_argument("--grimoire", metavar="DATA_DIR", help="start from another run's Grimoire (entries as inherited)")
    s.add_argument("--compare", action="store_true",
                   help="also run hold, STRATEGY.md rules every tick, and memory off; print side by side")
    s.add_argument("--steps", choices=["local", "activities"], default="local",
                   help="local (default): a tick's observe/analyze/gate/reflect and the gamma read as local "
                        "activities; activities: every step an activity task, as `golem run` runs them (slower, "
                        "the same decisions; docs/how-to/backtesting.md)")
    s.add_argument("--json", action="store_true", help="print the report(s) as JSON")
    s.set_defaults(fn=cmd_backtest)
