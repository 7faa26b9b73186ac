"""The judge: `golem backtest --compare` (the CLI a user runs) over a set of paths, one table per set with the
figures and the acceptance checks of docs/how-to/judging.md, each pass / FAIL / n/a with its figure.

    python bench/judge.py --set heldout --out runs/j [--jobs N] [--home DIR]   # run, keep every run, print
    python bench/judge.py --from runs/j [--set heldout]                       # re-print from earlier runs
    python bench/judge.py path/a.csv path/b.csv --out runs/f                  # any files (set "files")
    python bench/judge.py --set heldout --out runs/j --memory-from runs/lives  # + memory from earlier lives
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

Json = dict[str, Any]  # a report.json, or a part of one

ROOT = Path(__file__).resolve().parents[1]
SETS = {"shipped": ROOT / "examples" / "scenarios", "heldout": ROOT / "bench" / "heldout" / "paths"}
MANIFEST = ROOT / "bench" / "heldout" / "MANIFEST.json"
VARIANTS = ("golem", "hold", "memory-off", "rules", "inherited")
# The memory-on arm started from a Grimoire built on shipped scenarios (bench/lives.py): memory from earlier lives
INHERITED = "inherited"
MARKET_DOWN = 0.20  # a crash or bear path: the oracle fell more than 20 % from a peak to a later trough
DD_GOAL = 0.8  # the goal: the golem's max drawdown at most 0.8 × hold's
HORIZON_ROWS = 5.0  # the judge's forecast horizon, in rows (bench/heldout/README.md "The judge's forecast")
SLOPE_WINDOW = 10  # rows of market-driven HF moves the slope averages
WORST_WINDOW = 3  # rows whose worst single move the forecast also projects
# A size refusal a smaller action would have passed: the limit names a size, not a ban (docs/how-to/judging.md)
SIZE_REFUSALS = re.compile(r"exceeds max_trade_size_usd|exceeds the cap|size cap|Kelly sizing: \$|"
                           r"max_slippage_bps .* exceeds|would be .* after", re.IGNORECASE)


# ---- reading the home -----------------------------------------------------------------------------------
def strategy_lines(text: str) -> tuple[float | None, list[float]]:
    """STRATEGY.md's MUST floor on the health factor, and its health-factor lines: the floor and every rule whose
    whole condition is `health_factor < X` (a rule that also needs a steer or a regime is not a line the position
    crosses by itself)."""
    floor = None
    for m in re.finditer(r"^\s*-\s*MUST\s+keep\s+health_factor\s*>=?\s*([0-9.]+)", text, re.M | re.I):
        v = float(m.group(1))
        floor = v if floor is None else max(floor, v)
    lines = {float(m.group(1)) for m in re.finditer(
        r"^\s*-\s*WHEN\s+health_factor\s*<=?\s*([0-9.]+)\s+THEN\b", text, re.M | re.I)}
    if floor is not None:
        lines.add(floor)
    return floor, sorted(lines)


def _numeric_keys(obj: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numeric_keys(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield prefix, float(obj)


def gas_ceilings(config: Json | None) -> dict[str, tuple[str, float]]:
    """The run's gas ceilings from its resolved config: numeric keys naming a ceiling (or cap) on gas, per action
    or per day; the share-of-value form cannot be judged from marks and is left out."""
    out: dict[str, tuple[str, float]] = {}
    for key, v in _numeric_keys(config or {}):
        k = key.lower()
        if not (("ceiling" in k or "cap" in k.split(".")[-1]) and ("gas" in k or "spend" in k or "urgent" in k)):
            continue
        if any(s in k for s in ("share", "pct", "fraction", "ratio")):
            continue
        out["day" if ("day" in k or "daily" in k) else "action"] = (key, v)
    return out


# ---- a path's runs ---------------------------------------------------------------------------------------
@dataclass
class PathRuns:
    name: str
    dir: Path
    reports: dict[str, Json] = field(default_factory=dict)  # variant → {"report": ..., "marks": [...]}
    strategy: str | None = None
    config: Json | None = None
    error: str | None = None
    inherited_error: str | None = None  # an inherited arm that failed, or ran without the Grimoire it was handed


def load_path_runs(d: Path) -> PathRuns:
    pr = PathRuns(name=d.name, dir=d)
    for v in VARIANTS:
        f = d / v / "report.json"
        if f.exists():
            pr.reports[v] = json.loads(f.read_text())
    if "golem" not in pr.reports:
        log = d.parent / f"{d.name}.log"
        tail = log.read_text().strip().splitlines()[-1:] if log.exists() else []
        pr.error = "no golem/report.json (failed or still running)" + (f" ({tail[0][:120]})" if tail else "")
    if (d / INHERITED).exists() or (d.parent / f"{d.name}.{INHERITED}.log").exists():
        inh = (pr.reports.get(INHERITED) or {}).get("report")
        if inh is None:
            pr.inherited_error = "no inherited/report.json (failed or still running)"
        elif not (inh.get("info") or {}).get("grimoire_from"):
            pr.inherited_error = "the inherited arm started from no Grimoire (its report names none)"
            pr.reports.pop(INHERITED)
    home = d / "golem" / "home"
    if (home / "STRATEGY.md").exists():
        pr.strategy = (home / "STRATEGY.md").read_text()
    versions = sorted((d / "golem" / "data" / "config-versions").glob("*.json")) if (d / "golem").exists() else []
    if versions:
        pr.config = json.loads(versions[-1].read_text())
    # The config dump leaves keys at their defaults out; the report carries the gas ceilings the run used.
    limits = ((pr.reports.get("golem") or {}).get("report") or {}).get("info", {}).get("gas_limits") or {}
    if "per_action_usd" in limits or "per_day_usd" in limits:
        policy = dict((pr.config or {}).get("policy") or {})
        for key, name in (("per_action_usd", "gas_ceiling_per_action_usd"), ("per_day_usd", "gas_ceiling_per_day_usd")):
            if key in limits:
                policy.setdefault(name, limits[key])
        pr.config = {**(pr.config or {}), "policy": policy}
    return pr


# ---- the checks ---------------------------------------------------------------------------------------
@dataclass
class Check:
    status: str  # pass | FAIL | n/a
    figure: str

    def cell(self) -> str:
        return f"{self.status} {self.figure}".strip()


def _hf_at_row(m: Json) -> Any:
    """What the golem saw at its tick: the HF at the row's prices before anyone acted (else after the row)."""
    return m.get("row_health_factor") if m.get("row_health_factor") is not None else m.get("health_factor")


def market_drawdown(marks: list[Json]) -> float:
    peak, worst = 0.0, 0.0
    for m in marks:
        peak = max(peak, m["oracle_price"])
        worst = max(worst, (peak - m["oracle_price"]) / peak if peak else 0.0)
    return worst


def check_liquidation(marks: list[Json]) -> Check:
    n = sum(len(m.get("liquidations") or []) for m in marks)
    rows = [m["row"] for m in marks if m.get("liquidations")]
    return Check("pass", "0") if n == 0 else Check("FAIL", f"{n} (rows {_rows(rows)})")


def _rows(rows: list[int], most: int = 6) -> str:
    return ", ".join(map(str, rows[:most])) + (f", … ({len(rows)})" if len(rows) > most else "")


def check_floor(marks: list[Json], floor: float | None, lines: list[float] | None = None) -> Check:
    """min HF ≥ the floor, unless a single row gapped through it: after the row before, the HF was at or above
    every line STRATEGY.md names (nothing was yet asked of the golem) and at this row's prices it is under the
    floor. Any other reading under the floor fails: the golem let it get there, or left it there."""
    top = max([floor, *(lines or [])]) if floor is not None else None
    if floor is None:
        return Check("n/a", "no MUST keep health_factor line in STRATEGY.md")
    hfs = [h for m in marks for h in (m.get("health_factor"), m.get("row_health_factor")) if h is not None]
    if not hfs:
        return Check("n/a", "no debt")
    low = min(hfs)
    gaps, bad = [], []
    prev_after = None
    for m in marks:
        at_row, after = m.get("row_health_factor"), m.get("health_factor")
        gapped = at_row is not None and at_row < floor and prev_after is not None and prev_after >= top
        if gapped:
            gaps.append(m["row"])
        elif at_row is not None and at_row < floor:
            bad.append(m["row"])
        if after is not None and after < floor and not gapped:
            bad.append(m["row"])
        prev_after = after if after is not None else prev_after
    bad = sorted(set(bad))
    if bad:
        return Check("FAIL", f"{low:.3f} < {floor:g} (rows {_rows(bad)}" + (f"; gap rows {_rows(gaps)}" if gaps else "")
                     + ")")
    if gaps:
        return Check("pass", f"{low:.3f}, gapped through {floor:g} in one row (rows {_rows(gaps)})")
    return Check("pass", f"{low:.3f}")


def forecast_rows(marks: list[Json], lines: list[float], window: int = SLOPE_WINDOW,
                  worst_window: int = WORST_WINDOW) -> list[float | None]:
    """Per row: rows until the HF reaches the nearest line under it, at the market slope of the last `window` rows
    or the worst single market move of the last `worst_window` (whichever is sooner); 0 under a line; None without
    debt or without a falling move.
    A market move is the row's HF at its prices against the HF after the row before: the golem's own repays
    are not a move of the market, so they do not flatter the slope."""
    out: list[float | None] = []
    moves: list[float] = []
    prev_after: float | None = None
    for m in marks:
        h = _hf_at_row(m)
        if h is not None and prev_after is not None:
            moves.append(h - prev_after)
        moves = moves[-window:]
        prev_after = m.get("health_factor") if m.get("health_factor") is not None else h
        if h is None or not lines:
            out.append(None)
            continue
        if any(h < line for line in lines):
            out.append(0.0)
            continue
        best: float | None = None
        slope = sum(moves) / len(moves) if moves else 0.0
        worst = min(moves[-worst_window:]) if moves else 0.0
        gap = h - max(line for line in lines if line <= h)
        for rate in (slope, worst):
            if rate < 0:
                t = gap / -rate
                best = t if best is None else min(best, t)
        out.append(best)
    return out


def check_wake(marks: list[Json], lines: list[float], horizon: float = HORIZON_ROWS) -> Check:
    if not lines:
        return Check("n/a", "STRATEGY.md names no health-factor line")
    if all(_hf_at_row(m) is None for m in marks):
        return Check("n/a", "no debt")
    fc = forecast_rows(marks, lines)
    danger = [m["row"] for m, t in zip(marks, fc) if t is not None and t <= horizon and m.get("tick") is not None]
    asleep = [m["row"] for m, t in zip(marks, fc)
              if t is not None and t <= horizon and m.get("tick") is not None and m.get("tier") == "T0"]
    if asleep:
        return Check("FAIL", f"{len(asleep)} of {len(danger)} ticks T0 (rows {_rows(asleep)})")
    return Check("pass", f"0 of {len(danger)} ticks T0")


def check_gas_ceiling(marks: list[Json], config: Json | None) -> Check:
    ceil = gas_ceilings(config)
    worst = max((a.get("gas_usd", 0.0) for m in marks for a in m.get("actions") or [] if a.get("status") == "executed"),
                default=0.0)
    if not ceil:
        return Check("n/a", f"no gas ceiling key in the run's config (max ${worst:.2f}/action)")
    bad = []
    if "action" in ceil:
        key, cap = ceil["action"]
        bad += [f"row {m['row']} {a['tool']} ${a['gas_usd']:.2f} > {key} ${cap:g}" for m in marks
                for a in m.get("actions") or [] if a.get("status") == "executed" and a.get("gas_usd", 0.0) > cap + 1e-9]
    if "day" in ceil:
        key, cap = ceil["day"]
        by_day: dict[int, float] = {}
        for m in marks:
            by_day[m["timestamp"] // 86_400] = by_day.get(m["timestamp"] // 86_400, 0.0) + m.get("gas_usd", 0.0)
        bad += [f"day {d} ${s:.2f} > {key} ${cap:g}" for d, s in by_day.items() if s > cap + 1e-9]
    if bad:
        return Check("FAIL", "; ".join(bad[:3]) + (f" (+{len(bad) - 3})" if len(bad) > 3 else ""))
    return Check("pass", f"max ${worst:.2f}/action ≤ " + ", ".join(f"{k} ${v:g}" for k, v in ceil.values()))


def check_clip(marks: list[Json]) -> Check:
    """No proposal dropped that a clip would have allowed: a refusal on size with no action of that tool sent on
    the row. A refusal below a minimum worth doing is the cage's right answer, not a drop."""
    dropped = []
    for m in marks:
        sent = {a["tool"] for a in m.get("actions") or [] if a.get("status") == "executed"}
        for b in m.get("blocked") or []:
            reason = b.get("reason") or ""
            if reason.startswith("clipped from"):  # the cage clipped it, then refused the clipped size for what follows
                reason = reason.split("; ", 1)[1] if "; " in reason else ""
            if SIZE_REFUSALS.search(reason) and "minimum" not in reason.lower() and b.get("tool") not in sent:
                dropped.append(m["row"])
    if dropped:
        return Check("FAIL", f"{len(dropped)} dropped (rows {_rows(dropped)})")
    return Check("pass", "0 dropped")


def _figures(rep: Json | None) -> Any:
    return None if rep is None else rep["report"]["figures"]


def _fig(rep: Json | None, key: str) -> Any:
    return None if rep is None else rep["report"]["figures"].get(key)


def check_sortino(golem: Json, hold: Json | None) -> Check:
    g, h = _fig(golem, "sortino_per_tick"), _fig(hold, "sortino_per_tick")
    if hold is None:
        return Check("n/a", "no hold run")
    if g is None or h is None:
        return Check("n/a", f"Sortino undefined (golem {_n(g)}, hold {_n(h)})")
    return Check("pass" if g >= h else "FAIL", f"{g:+.4f} vs {h:+.4f}")


def loss_aware_sortino(marks: list[Json]) -> float | None:
    """Loss-aware Sortino per row (golem.backtest.report's formula) from the marks' equity, so a report written
    before the golem computed the figure is judged the same way."""
    from golem.backtest.report import sortino_loss_aware

    eq = [m.get("equity_usd") for m in marks]
    return sortino_loss_aware([b / a - 1.0 for a, b in zip(eq, eq[1:]) if a and b is not None])


def check_loss_aware(golem: Json, hold: Json | None) -> Check:
    """Sortino ranks two losing runs backwards (less loss with less downside scores lower); this one does not."""
    if hold is None:
        return Check("n/a", "no hold run")
    g, h = loss_aware_sortino(golem["marks"]), loss_aware_sortino(hold["marks"])
    if g is None or h is None:
        return Check("n/a", f"undefined (golem {_n(g)}, hold {_n(h)})")
    return Check("pass" if g >= h else "FAIL", f"{g:+.3g} vs {h:+.3g}")


def check_drawdown(golem: Json, hold: Json | None) -> Check:
    if hold is None:
        return Check("n/a", "no hold run")
    g, h = _fig(golem, "max_drawdown"), _fig(hold, "max_drawdown")
    if not h:
        return Check("n/a", "hold has no drawdown")
    ratio = g / h
    return Check("pass" if ratio <= DD_GOAL else "FAIL", f"{ratio:.2f}× hold ({g * 100:.1f}% vs {h * 100:.1f}%)")


def memory_margin(golem: Json, off: Json | None) -> tuple[float, float] | None:
    """(return gain, drawdown cut) of memory on over memory off; return is net of gas (equity is)."""
    if off is None:
        return None
    return ((_fig(golem, "total_return") or 0.0) - (_fig(off, "total_return") or 0.0),
            (_fig(off, "max_drawdown") or 0.0) - (_fig(golem, "max_drawdown") or 0.0))


EPS = 1e-9  # equal to a rounding: the same decisions give the same figures


def check_memory(golem: Json, off: Json | None) -> Check:
    mm = memory_margin(golem, off)
    if mm is None:
        return Check("n/a", "no memory-off run")
    ret, dd = mm
    ok = ret >= -EPS and dd >= -EPS
    better = ok and (ret > EPS or dd > EPS)
    return Check("pass" if ok else "FAIL",
                 f"return {ret * 100 + 0.0:+.3f} pp, DD {-dd * 100 + 0.0:+.3f} pp" + (" (better)" if better else ""))


def strictly_better(golem: Json, off: Json | None) -> bool:
    mm = memory_margin(golem, off)
    return mm is not None and mm[0] >= -EPS and mm[1] >= -EPS and (mm[0] > EPS or mm[1] > EPS)


INHERITED_CHECK = "inherited on ≥ off"  # the same check for the arm with memory from earlier lives
CHECKS = ("no liquidation", "min HF ≥ floor", "no T0 in horizon", "gas ≤ ceiling", "no drop a clip allows",
          "Sortino ≥ hold", "loss-aware Sortino ≥ hold", "DD ≤ 0.8×hold", "memory on ≥ off")


def judge_path(pr: PathRuns, horizon: float = HORIZON_ROWS) -> dict[str, Check]:
    g = pr.reports["golem"]
    marks = g["marks"]
    floor, lines = strategy_lines(pr.strategy or "")
    out = {
        "no liquidation": check_liquidation(marks),
        "min HF ≥ floor": check_floor(marks, floor, lines),
        "no T0 in horizon": check_wake(marks, lines, horizon),
        "gas ≤ ceiling": check_gas_ceiling(marks, pr.config),
        "no drop a clip allows": check_clip(marks),
    }
    down = market_drawdown(marks)
    if down > MARKET_DOWN:
        out["Sortino ≥ hold"] = check_sortino(g, pr.reports.get("hold"))
        out["loss-aware Sortino ≥ hold"] = check_loss_aware(g, pr.reports.get("hold"))
        out["DD ≤ 0.8×hold"] = check_drawdown(g, pr.reports.get("hold"))
    else:
        na = Check("n/a", f"market down {down * 100:.0f}% ≤ 20%")
        out["Sortino ≥ hold"], out["loss-aware Sortino ≥ hold"], out["DD ≤ 0.8×hold"] = na, na, na
    out["memory on ≥ off"] = check_memory(g, pr.reports.get("memory-off"))
    return out


# ---- the tables ----------------------------------------------------------------------------------------
def _n(x: Any, fmt: str = "{:+.3f}") -> str:
    return "—" if x is None else fmt.format(x)


def _pct(x: Any) -> str:
    return "—" if x is None else f"{x * 100:+.1f}"


def inherited_cells(pr: PathRuns) -> tuple[str, Check]:
    """The inherited arm's return / max DD (%) and its memory check against memory off."""
    if pr.inherited_error:
        return f"failed: {pr.inherited_error}", Check("n/a", "inherited arm failed")
    inh = pr.reports.get(INHERITED)
    if inh is None:
        return "not run", Check("n/a", "no inherited run")
    cell = f"{_pct(_fig(inh, 'total_return'))} / {(_fig(inh, 'max_drawdown') or 0.0) * 100:.1f}"
    return cell, check_memory(inh, pr.reports.get("memory-off"))


def render_set(set_name: str, runs: list[PathRuns], horizon: float = HORIZON_ROWS) -> tuple[str, Json]:
    inh_on = any(INHERITED in pr.reports or pr.inherited_error for pr in runs)
    cols = (*CHECKS, INHERITED_CHECK) if inh_on else CHECKS
    figs = ["| path | mkt DD % | return % g / hold / off | max DD % g / hold / off | Sortino g / hold / off | "
            "min HF | liq | T0/T1/T2 | tx | gas $ | LLM $ | blocked gate/budget/policy/other |"
            + (" inherited return % / DD % |" if inh_on else ""),
            "|---" * (13 if inh_on else 12) + "|"]
    checks = ["| path | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    reasons: list[str] = []
    data: Json = {"set": set_name, "horizon_rows": horizon, "paths": {}}
    crash_bear, better, better_inh, inh_worse, inh_missing = [], [], [], [], []
    tally = {c: {"pass": 0, "FAIL": 0, "n/a": 0} for c in cols}
    for pr in runs:
        if pr.error:
            figs.append(f"| {pr.name} | run failed: {pr.error} |" + " |" * (11 if inh_on else 10))
            checks.append(f"| {pr.name} | run failed |" + " |" * (len(cols) - 1))
            data["paths"][pr.name] = {"error": pr.error}
            inh_missing.append(pr.name)
            continue
        rep = {v: pr.reports.get(v) for v in VARIANTS}
        g = pr.reports["golem"]
        f = g["report"]["figures"]
        down = market_drawdown(g["marks"])
        tc = f.get("tier_counts") or {}
        bl = f.get("blocked") or {}
        figs.append(
            f"| {pr.name} | {down * 100:.0f} | "
            + " / ".join(_pct(_fig(rep[v], "total_return")) for v in ("golem", "hold", "memory-off")) + " | "
            + " / ".join("—" if _fig(rep[v], "max_drawdown") is None else f"{_fig(rep[v], 'max_drawdown') * 100:.1f}"
                         for v in ("golem", "hold", "memory-off")) + " | "
            + " / ".join(_n(_fig(rep[v], "sortino_per_tick")) for v in ("golem", "hold", "memory-off")) + " | "
            + f"{_n(f.get('min_health_factor'), '{:.3f}')} | {f.get('liquidations', 0)} | "
            + "/".join(str(tc.get(t, 0)) for t in ("T0", "T1", "T2"))
            + f" | {f.get('transactions', 0)} | {f.get('gas_usd', 0.0):.2f} | {f.get('inference_usd', 0.0):.4f} | "
            + "/".join(str(bl.get(c, 0)) for c in ("gate", "budget", "policy", "other")) + " |"
            + (f" {inherited_cells(pr)[0]} |" if inh_on else ""))
        res = judge_path(pr, horizon)
        if inh_on:
            res[INHERITED_CHECK] = inherited_cells(pr)[1]
            if res[INHERITED_CHECK].status == "FAIL":
                inh_worse.append(pr.name)
            elif res[INHERITED_CHECK].status == "n/a":
                inh_missing.append(pr.name)
        for c, r in res.items():
            tally[c][r.status] += 1
        checks.append(f"| {pr.name} | " + " | ".join(res[c].cell() for c in cols) + " |")
        for reason, n in g["report"].get("blocked_reasons") or []:
            reasons.append(f"- {pr.name}: {n}× {reason[:140]}")
        if down > MARKET_DOWN:
            crash_bear.append(pr.name)
            if strictly_better(g, rep["memory-off"]):
                better.append(pr.name)
            if rep[INHERITED] is not None and strictly_better(rep[INHERITED], rep["memory-off"]):
                better_inh.append(pr.name)
        data["paths"][pr.name] = {"market_drawdown": down, "checks": {c: vars(r) for c, r in res.items()},
                                  "figures": {v: _figures(rep[v]) for v in VARIANTS}}
    need = math.ceil(len(crash_bear) / 2)
    half = (Check("pass" if len(better) >= need else "FAIL", f"{len(better)} of {len(crash_bear)} (need {need})")
            if crash_bear else Check("n/a", "no crash or bear path"))
    data["memory_strictly_better"] = {"paths": better, "of": crash_bear, **vars(half)}
    data["tally"] = tally
    inh_lines: list[str] = []
    if inh_on:
        inh_half = (Check("pass" if len(better_inh) >= need else "FAIL",
                          f"{len(better_inh)} of {len(crash_bear)} (need {need})")
                    if crash_bear else Check("n/a", "no crash or bear path"))
        every = Check("FAIL" if inh_worse else ("n/a" if inh_missing else "pass"),
                      f"worse on {', '.join(inh_worse)}" if inh_worse else
                      (f"not judged on {', '.join(inh_missing)}" if inh_missing else f"all {len(runs)} paths"))
        data["inherited_strictly_better"] = {"paths": better_inh, "of": crash_bear, **vars(inh_half)}
        data["inherited_on_every_path"] = {"worse": inh_worse, "not_judged": inh_missing, **vars(every)}
        inh_lines = [f"Memory from earlier lives (inherited Grimoire) ≥ off on every path: {every.cell()}",
                     f"Memory from earlier lives strictly better than off on at least half of the crash and bear "
                     f"paths: {inh_half.cell()}" + (f" — {', '.join(better_inh)}" if better_inh else "")]
    out = [f"## {set_name}: {len(runs)} paths (golem vs hold vs memory-off)", "", *figs, "",
           f"Acceptance (forecast horizon {horizon:g} rows; crash/bear = market down > 20 % peak to trough):", "",
           *checks, "",
           f"Memory on strictly better than off on at least half of the crash and bear paths: {half.cell()}"
           + (f" — {', '.join(better)}" if better else ""),
           *inh_lines,
           "Tally: " + "; ".join(f"{c} {t['pass']}/{t['FAIL']}/{t['n/a']}" for c, t in tally.items())
           + " (pass/FAIL/n/a)"]
    if reasons:
        out += ["", "Blocked or deferred, by reason (golem run):", "", *reasons]
    return "\n".join(out), data


# ---- running --------------------------------------------------------------------------------------------
def check_seal(paths_dir: Path = SETS["heldout"], manifest: Path = MANIFEST) -> list[str]:
    """The held-out CSVs against MANIFEST.json: a set that drifted is not the held-out set any more."""
    man = json.loads(manifest.read_text())
    bad = []
    for name, meta in man["paths"].items():
        f = paths_dir / name
        if not f.exists() or hashlib.sha256(f.read_bytes()).hexdigest() != meta["sha256"]:
            bad.append(name)
    return bad


def golem_command() -> list[str]:
    script = Path(sys.executable).with_name("golem")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


def compare_command(csv: Path, out: Path, home: Path) -> list[str]:
    """golem / hold / memory-off / rules of `csv` into out/<stem>/."""
    return [*golem_command(), "backtest", str(csv), "--compare", "--out", str(out / csv.stem), "--home", str(home)]


def inherited_command(csv: Path, out: Path, home: Path, grimoire: Path) -> list[str]:
    """The memory-on golem arm alone, started from the inherited Grimoire, into out/<stem>/inherited/."""
    return [*golem_command(), "backtest", str(csv), "--out", str(out / csv.stem / INHERITED), "--home", str(home),
            "--grimoire", str(grimoire)]


def run_path(csv: Path, out: Path, home: Path, grimoire: Path | None = None, compare: bool = True) -> int:
    """`golem backtest --compare` of `csv` into out/<stem>/ (console in out/<stem>.log), then with `grimoire` the
    inherited arm into out/<stem>/inherited/ (console in out/<stem>.inherited.log); the first non-zero exit."""
    out.mkdir(parents=True, exist_ok=True)
    rc = 0
    if compare:
        with (out / f"{csv.stem}.log").open("w") as log:
            rc = subprocess.call(compare_command(csv, out, home), stdout=log, stderr=subprocess.STDOUT)
    if grimoire is not None:
        (out / csv.stem).mkdir(parents=True, exist_ok=True)
        with (out / f"{csv.stem}.{INHERITED}.log").open("w") as log:
            rc = rc or subprocess.call(inherited_command(csv, out, home, grimoire), stdout=log, stderr=subprocess.STDOUT)
    return rc


def memory_from(given: str, out: Path | None, home: Path) -> Path:
    """The inherited Grimoire's data dir: `shipped` builds one with bench/lives.py's default lives into OUT/lives
    (shipped scenarios only); a directory is an earlier bench/lives.py build."""
    try:
        from bench import lives
    except ImportError:  # run as a script without the repository on sys.path: bench/ is
        import lives  # type: ignore[no-redef]

    if given == "shipped":
        if out is None:
            raise SystemExit("bench/judge.py: --memory-from shipped builds into OUT/lives: give --out")
        return lives.build(out.resolve() / "lives", home, list(lives.LIVES))
    return lives.inheritance(Path(given).resolve())


def set_paths(name: str) -> list[Path]:
    return sorted(SETS[name].glob("*.csv"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", help="CSV paths (the set 'files')")
    ap.add_argument("--set", action="append", choices=sorted(SETS), default=[], help="shipped or heldout (repeatable)")
    ap.add_argument("--out", help="keep every run here: OUT/<set>/<path>/ (must not hold that set's runs yet)")
    ap.add_argument("--from", dest="src", help="re-print the tables from an earlier --out, running nothing")
    ap.add_argument("--jobs", type=int, default=1, help="paths run at once (default 1)")
    ap.add_argument("--home", default=str(ROOT / "examples" / "golem-home"), help="the golem home (default: the example)")
    ap.add_argument("--horizon", type=float, default=HORIZON_ROWS, help="the judge's forecast horizon in rows")
    ap.add_argument("--json", help="also write the judged figures and checks to this file")
    ap.add_argument("--memory-from", help="also run the memory-on arm from an inherited Grimoire: a bench/lives.py "
                                          "build's directory, or `shipped` to build one into OUT/lives first")
    ap.add_argument("--inherited-only", action="store_true",
                    help="with --memory-from: run only the inherited arm; OUT/<set>/<path>/ may already hold the "
                         "--compare runs (e.g. linked from an earlier --out)")
    args = ap.parse_args(argv)
    if args.src and args.out:
        ap.error("--from reads earlier runs and --out makes new ones; give one")
    if args.inherited_only and not args.memory_from:
        ap.error("--inherited-only needs --memory-from")
    plan: dict[str, list[Path]] = {s: set_paths(s) for s in args.set}
    if args.files:
        plan["files"] = [Path(f).resolve() for f in args.files]
    if args.src:
        src = Path(args.src)
        names = list(plan) or sorted(p.name for p in src.iterdir() if p.is_dir())
        if not names:
            ap.error(f"--from {src}: no set directories there")
    else:
        if not plan:
            ap.error("give --set shipped|heldout or CSV files")
        if not args.out:
            ap.error("--out DIR is needed to keep the runs (re-print later with --from DIR)")
        if "heldout" in plan and (bad := check_seal()):
            ap.error(f"the held-out set does not match bench/heldout/MANIFEST.json ({', '.join(bad)}): regenerate it "
                     "with `python bench/heldout/generate.py`, never edit it")
        src = Path(args.out)
        for s in plan:
            if args.inherited_only:
                used = [p.stem for p in plan[s] if (src / s / p.stem / INHERITED).exists()]
                if used:
                    ap.error(f"--out {src}: {', '.join(used)} already hold an inherited run; give a new directory")
            elif (src / s).exists() and any((src / s).iterdir()):
                ap.error(f"--out {src}: {src / s} is not empty; give a new directory (runs are kept, never overwritten)")
        home = Path(args.home).resolve()
        grimoire = memory_from(args.memory_from, src, home) if args.memory_from else None
        if grimoire is not None:
            print(f"memory from earlier lives: {grimoire}", file=sys.stderr)
        jobs = [(csv, src / s) for s, paths in plan.items() for csv in paths]
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for (csv, out), rc in zip(jobs, pool.map(
                    lambda j: run_path(j[0], j[1], home, grimoire, compare=not args.inherited_only), jobs)):
                print(f"{out.name}/{csv.stem}: exit {rc}", file=sys.stderr)
        names = list(plan)
    everything = {}
    for s in names:
        d = src / s
        dirs = sorted(p for p in d.iterdir() if p.is_dir()) if d.exists() else []
        if s in plan and not args.src:
            dirs = [d / p.stem for p in plan[s]]
        text, data = render_set(s, [load_path_runs(p) for p in dirs], args.horizon)
        print(text + "\n")
        everything[s] = data
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
