"""Re-run the daimon over a recorded run (a backtest's data dir): what its after_turn saw each tick, folded with
this build's appraisal. `--export FILE` writes the appraisal inputs (tests/unit/data/daimon_crash_paths.json is
made this way; tests/unit/test_life_daimon.py folds it).

    python -m bench.daimon_replay /work/bt/RUN/crash_recovery [...] [--export FILE]
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import sys

from golem.life.after_turn import acted_of, drawdown_pct, marked_to_market
from golem.life.daimon import BASELINE, AppraisalInput, appraise, octant, regime_shift, update_pad
from golem.models.record import DecisionCycleRecord
from golem.safety.limits import RiskLimits
from golem.safety.risk import net_value_usd


def inputs_of(data_dir: str, max_dd_pct: float = RiskLimits().max_drawdown_pct) -> list[AppraisalInput]:
    """The daimon's inputs tick by tick, as golem.life.after_turn.daimon_after_turn builds them from the record
    and the state the tick started from (the previous record)."""
    out, prev, top = [], None, 0.0
    for f in sorted(glob.glob(f"{data_dir}/cycles/cycle-*.json")):
        r = DecisionCycleRecord.model_validate_json(open(f).read())
        obs = r.observation
        nav = net_value_usd(obs.snapshot)
        out.append(AppraisalInput(
            prediction_error=r.prediction_error, regime_changed=regime_shift(prev.regime if prev else None, r.regime),
            pnl_usd=r.outcome.pnl_impact if r.outcome else None,
            equity_change=marked_to_market(obs, prev.observation.snapshot.pool.price if prev else None),
            hf_before=prev.observation.min_health_factor() if prev else None, hf_now=obs.min_health_factor(),
            liquidated=bool(obs.liquidations), vitality=r.vitality.composite,
            drawdown_used=round(drawdown_pct(nav, top) / max_dd_pct, 6),
            proposed=len(r.actions), blocked=sum(a.status.value == "blocked" for a in r.actions),
            failed=sum(a.status.value == "failed" for a in r.actions),
            somatic_strength=(r.appraisal or {}).get("somatic", 0.0), **acted_of(r, r.reflexion)))
        top, prev = max(top, nav), r
    return out


def fold(inputs: list[AppraisalInput]) -> list[str]:
    pad, seen = BASELINE, []
    for x in inputs:
        pad = update_pad(pad, appraise(x))
        seen.append(octant(pad))
    return seen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="backtest output dirs (holding data/cycles)")
    ap.add_argument("--export", help="write {run name: [appraisal inputs]} as JSON")
    a = ap.parse_args(argv)
    exported = {}
    for run in a.runs:
        inputs = inputs_of(f"{run}/data")
        seen = collections.Counter(fold(inputs))
        print(run.rstrip("/").split("/")[-1], len([k for k in seen if k != "neutral"]), dict(seen.most_common()))
        exported[run.rstrip("/").split("/")[-1]] = [x.model_dump(exclude_defaults=True) for x in inputs]
    if a.export:
        with open(a.export, "w") as fh:
            json.dump(exported, fh, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
