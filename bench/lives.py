"""Memory from earlier lives: a Grimoire built by living through shipped crash and bear scenarios in sequence, each
life a `golem backtest --grimoire <the life before's data>` (the first from nothing); the last life's data dir is
the inheritance a judge hands a golem that has never seen its path (docs/how-to/judging.md).

    python bench/lives.py --out runs/lives [--home DIR] [--scenarios slow_bleed,crash_recovery]

Only shipped scenarios: a held-out path (by name or by content) is refused. OUT/MANIFEST.json records the recipe
(scenarios and their SHA-256, the home's files, the tree's commit), each life's figures and what it inherited.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "examples" / "scenarios"
HELDOUT = ROOT / "bench" / "heldout" / "MANIFEST.json"
# The default life: the shipped crash out of calm, whose first pass keeps the downtrend hedge it could not use
# (docs/design/learning.md, "What one pass cannot learn"). More lives (--scenarios slow_bleed,crash_recovery) add
# what each taught; each life is one golem run (~15 min here), so the default is the one that carries the hedge.
LIVES = ("crash_recovery",)
MANIFEST = "MANIFEST.json"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def golem_command() -> list[str]:
    script = Path(sys.executable).with_name("golem")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


def life_dir(out: Path, i: int, name: str) -> Path:
    return out / f"{i + 1:02d}-{name}"


def scenario_csvs(names: list[str]) -> list[Path]:
    """The shipped CSV of each name; a name that is not shipped, or whose content is a held-out path's, is refused."""
    held = {m["sha256"] for m in json.loads(HELDOUT.read_text())["paths"].values()}
    out = []
    for n in names:
        csv = SHIPPED / f"{n}.csv"
        if not csv.exists():
            raise SystemExit(f"bench/lives.py: {n}: no {csv.relative_to(ROOT)} (only shipped scenarios are lived)")
        if _sha(csv) in held:
            raise SystemExit(f"bench/lives.py: {n} is a held-out path; a judge never learns from those")
        out.append(csv)
    return out


def life_command(csv: Path, out: Path, home: Path, before: Path | None) -> list[str]:
    """One life: the golem arm alone on `csv`, memory on, starting from the life before's data (if any)."""
    cmd = [*golem_command(), "backtest", str(csv), "--out", str(out), "--home", str(home)]
    return cmd + (["--grimoire", str(before / "data")] if before is not None else [])


def recipe(names: list[str], csvs: list[Path], home: Path) -> dict:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "golem", "activities", "workflows",
                            "infra", "workers", "cli"], capture_output=True, text=True).stdout.strip()
    return {"scenarios": [{"name": n, "file": str(c.relative_to(ROOT)), "sha256": _sha(c)} for n, c in zip(names, csvs)],
            "home": {f.name: _sha(f) for f in sorted(home.iterdir()) if f.is_file()},
            "commit": commit, "decision_code_dirty": bool(dirty)}


def _figures(run: Path) -> dict:
    rep = json.loads((run / "report.json").read_text())["report"]  # {"report": ..., "marks": [...]}
    f, info = rep["figures"], rep.get("info") or {}
    return {"total_return": f.get("total_return"), "max_drawdown": f.get("max_drawdown"),
            "grimoire_from": info.get("grimoire_from"), "rows": info.get("rows")}


def build(out: Path, home: Path, names: list[str]) -> Path:
    """Live each scenario in turn; returns the inheritance (the last life's data dir). The manifest is written after
    each life, so a stopped build says how far it got."""
    csvs = scenario_csvs(names)
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"bench/lives.py: --out {out} is not empty; give a new directory")
    out.mkdir(parents=True, exist_ok=True)
    man = {"recipe": recipe(names, csvs, home), "started_at": datetime.now(timezone.utc).isoformat(), "lives": []}
    man["recipe_sha256"] = hashlib.sha256(json.dumps(man["recipe"], sort_keys=True).encode()).hexdigest()
    before = None
    for i, (n, csv) in enumerate(zip(names, csvs)):
        run = life_dir(out, i, n)
        cmd = life_command(csv, run, home, before)
        with (out / f"{run.name}.log").open("w") as log:
            rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT)
        man["lives"].append({"scenario": n, "dir": run.name, "exit": rc, "command": cmd[len(golem_command()):],
                             **(_figures(run) if rc == 0 else {})})
        (out / MANIFEST).write_text(json.dumps(man, indent=1))
        if rc != 0:
            raise SystemExit(f"bench/lives.py: life {run.name} failed (exit {rc}); see {out / (run.name + '.log')}")
        before = run
    man["inheritance"] = str((before / "data").relative_to(out))
    man["finished_at"] = datetime.now(timezone.utc).isoformat()
    (out / MANIFEST).write_text(json.dumps(man, indent=1))
    return before / "data"


def inheritance(lives: Path) -> Path:
    """The data dir a finished build hands on (its manifest's `inheritance`); refuses an unfinished build."""
    f = lives / MANIFEST
    if not f.exists():
        raise SystemExit(f"bench/lives.py: {lives}: no {MANIFEST} (build one with bench/lives.py --out {lives})")
    man = json.loads(f.read_text())
    if "inheritance" not in man:
        raise SystemExit(f"bench/lives.py: {lives}: the build did not finish (no inheritance in {MANIFEST})")
    data = (lives / man["inheritance"]).resolve()
    if not (data / "grimoire" / "semantic.sqlite").exists():
        raise SystemExit(f"bench/lives.py: {data}: no Grimoire there")
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="a new directory: one subdirectory per life, and MANIFEST.json")
    ap.add_argument("--home", default=str(ROOT / "examples" / "golem-home"), help="the golem home (default: the example)")
    ap.add_argument("--scenarios", default=",".join(LIVES), help=f"shipped scenario names, in order (default {','.join(LIVES)})")
    args = ap.parse_args(argv)
    data = build(Path(args.out).resolve(), Path(args.home).resolve(), [s for s in args.scenarios.split(",") if s])
    print(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
