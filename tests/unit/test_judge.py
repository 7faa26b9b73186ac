"""bench/judge.py's acceptance checks on small report.json files built here: each check passes a run that keeps
it and fails one that breaks it, and the table reads back from a run directory (`--from`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import judge

STRATEGY = """## Rules
- WHEN health_factor < 1.3 THEN repay 50% debt
- WHEN health_factor < 1.6 THEN repay 25% debt
- WHEN price_change_bps <= -300 THEN swap 10% WETH to USDC
## Constraints
- MUST keep health_factor >= 1.3
- MUST keep balance.USDC >= 500
"""
LINES = [1.3, 1.6]


def mark(row: int, hf: float | None = 2.0, *, row_hf: float | None = None, tier: str | None = "T0",
         price: float = 2000.0, actions=(), blocked=(), liquidations=(), gas: float = 0.0) -> dict:
    return {"row": row, "timestamp": 1_772_409_600 + 60 * row, "oracle_price": price, "pool_price": price,
            "health_factor": hf, "row_health_factor": hf if row_hf is None else row_hf,
            "tick": row if tier else None, "tier": tier, "actions": list(actions), "blocked": list(blocked),
            "liquidations": list(liquidations), "gas_usd": gas}


def report(marks: list[dict], *, ret: float = 0.0, dd: float = 0.0, sortino: float | None = 0.0) -> dict:
    return {"report": {"figures": {"total_return": ret, "max_drawdown": dd, "sortino_per_tick": sortino,
                                   "min_health_factor": min((m["health_factor"] for m in marks
                                                             if m["health_factor"] is not None), default=None),
                                   "liquidations": sum(len(m["liquidations"]) for m in marks),
                                   "tier_counts": {"T0": len(marks)}, "transactions": 0, "gas_usd": 0.0,
                                   "inference_usd": 0.0, "blocked": {}},
                       "blocked_reasons": []},
            "marks": marks}


# ---- the home ------------------------------------------------------------------------------------------
def test_strategy_lines_read_the_floor_and_every_hf_line():
    assert judge.strategy_lines(STRATEGY) == (1.3, [1.3, 1.6])
    # a rule that needs a steer as well is not a line the position crosses (the example home has one at 2.5)
    steer = STRATEGY + '- WHEN steer contains "reduce exposure" AND health_factor < 2.5 THEN repay 10% debt\n'
    assert judge.strategy_lines(steer) == (1.3, [1.3, 1.6])
    assert judge.strategy_lines("- WHEN price_change_bps <= -300 THEN swap 10% WETH to USDC") == (None, [])


def test_gas_ceilings_found_by_key_and_absent_without_one():
    assert judge.gas_ceilings({"config": {"heartbeat": {"cost_soft_cap_threshold": 0.9},
                                          "probes": {"gas_ratio_high": 5.0}}}) == {}
    found = judge.gas_ceilings({"config": {"gas": {"urgent_ceiling_usd": 20.0, "daily_ceiling_usd": 50.0,
                                                   "ceiling_share_of_value": 0.01}}})
    assert found == {"action": ("config.gas.urgent_ceiling_usd", 20.0), "day": ("config.gas.daily_ceiling_usd", 50.0)}
    # the shape the spend work gives them ([policy] gas_ceiling_*): per action and per day, the share left out
    spend = judge.gas_ceilings({"config": {"policy": {"gas_ceiling_per_action_usd": 20.0,
                                                      "gas_ceiling_share_of_protected": 0.02,
                                                      "gas_ceiling_per_day_usd": 30.0}}})
    assert spend == {"action": ("config.policy.gas_ceiling_per_action_usd", 20.0),
                     "day": ("config.policy.gas_ceiling_per_day_usd", 30.0)}


# ---- each check: a pass and a fail ----------------------------------------------------------------------
def test_liquidation():
    assert judge.check_liquidation([mark(0), mark(1)]).status == "pass"
    bad = judge.check_liquidation([mark(0), mark(1, 0.98, liquidations=[{"tx_hash": "0x1"}])])
    assert bad.status == "FAIL" and "rows 1" in bad.figure


def test_floor_holds_fails_and_forgives_a_one_row_gap():
    assert judge.check_floor([mark(0, 2.0), mark(1, 1.45)], 1.3, LINES).cell() == "pass 1.450"
    # stayed under the floor after the row: no gap excuses that
    sank = judge.check_floor([mark(0, 1.5), mark(1, 1.35), mark(2, 1.25), mark(3, 1.2)], 1.3, LINES)
    assert sank.status == "FAIL" and "rows 2, 3" in sank.figure
    # one row from 1.45 to 1.25 is not a gap: at 1.45 the repay line had already asked for a repay
    late = judge.check_floor([mark(0, 1.45), mark(1, 1.25), mark(2, 1.8)], 1.3, LINES)
    assert late.status == "FAIL" and "rows 1" in late.figure
    # a gap through the floor in one row, repaid on that row's tick: passes, and names the row
    gap = judge.check_floor([mark(0, 1.8), mark(1, 1.9, row_hf=1.25), mark(2, 1.9)], 1.3, LINES)
    assert gap.status == "pass" and "rows 1" in gap.figure and "1.250" in gap.figure
    # the same gap left unrepaired: the rows after it fail
    left = judge.check_floor([mark(0, 1.8), mark(1, 1.25), mark(2, 1.24)], 1.3, LINES)
    assert left.status == "FAIL" and "rows 2" in left.figure and "gap rows 1" in left.figure
    assert judge.check_floor([mark(0, None)], 1.3).status == "n/a"
    assert judge.check_floor([mark(0)], None).status == "n/a"


def _bleed(tiers: list[str], start: float = 1.9, step: float = -0.03) -> list[dict]:
    return [mark(i, start + step * i, tier=t) for i, t in enumerate(tiers)]


def test_forecast_counts_rows_to_the_nearest_line():
    fc = judge.forecast_rows(_bleed(["T0"] * 8), LINES)
    assert fc[0] is None  # no move yet
    assert fc[1] == pytest.approx((1.87 - 1.6) / 0.03)
    assert fc[7] == pytest.approx((1.69 - 1.6) / 0.03)
    assert judge.forecast_rows([mark(0, 1.55)], LINES) == [0.0]  # under a line: a rule would fire


def test_forecast_ignores_the_golems_own_repay():
    """A repay lifts the HF after the row; the next row's market move is measured from there, so the slope stays
    the market's (a slope through the repay would read as a rise and mute the forecast)."""
    marks = [mark(0, 2.0), mark(1, 1.97), mark(2, 1.94), mark(3, 1.91), mark(4, 2.3, row_hf=1.88),
             mark(5, 2.29), mark(6, 2.28), mark(7, 2.27)]
    fc = judge.forecast_rows(marks, LINES)
    slope = (4 * 0.03 + 3 * 0.01) / 7  # the market's seven moves; the repay's +0.42 is not one of them
    assert fc[7] == pytest.approx((2.27 - 1.6) / slope)


def test_wake_fails_a_t0_tick_inside_the_horizon():
    ok = judge.check_wake(_bleed(["T0"] * 4 + ["T1"] * 5), LINES)
    assert ok.status == "pass", ok.figure
    bad = judge.check_wake(_bleed(["T0"] * 9), LINES)
    # rows 4.. are within 5 rows of 1.6 at −0.03/row (1.78 − 1.6 = 0.18 → 6 rows at row 4; 5 at row 5)
    assert bad.status == "FAIL" and "rows 5, 6, 7, 8" in bad.figure
    # a row without a tick (theta) is not a T0 tick
    assert judge.check_wake([*_bleed(["T0"] * 4), mark(4, 1.78, tier=None)], LINES).status == "pass"
    assert judge.check_wake([mark(0, None)], LINES).status == "n/a"
    assert judge.check_wake(_bleed(["T0"] * 3), []).status == "n/a"


def test_wake_counts_the_worst_single_move():
    """A flat average can hide a −0.15 row: at that pace the line is 2 rows away."""
    hfs = [2.0, 2.05, 1.90, 1.95, 1.92]
    marks = [mark(i, h) for i, h in enumerate(hfs)]
    bad = judge.check_wake(marks, LINES, horizon=5)
    assert bad.status == "FAIL" and "rows 2, 3, 4" in bad.figure


def test_gas_ceiling():
    cfg = {"config": {"gas": {"urgent_ceiling_usd": 10.0, "daily_ceiling_usd": 12.0}}}
    sent = [mark(0, actions=[{"tool": "repay", "status": "executed", "gas_usd": 6.0}], gas=6.0)]
    assert judge.check_gas_ceiling(sent, cfg).status == "pass"
    over = [mark(0, actions=[{"tool": "repay", "status": "executed", "gas_usd": 52.64}], gas=52.64)]
    bad = judge.check_gas_ceiling(over, cfg)
    assert bad.status == "FAIL" and "$52.64" in bad.figure
    # each action under the ceiling, the day over it
    day = [mark(i, actions=[{"tool": "repay", "status": "executed", "gas_usd": 5.0}], gas=5.0) for i in range(3)]
    assert judge.check_gas_ceiling(day, cfg).status == "FAIL"
    # a blocked action paid nothing
    blocked = [mark(0, actions=[{"tool": "repay", "status": "blocked", "gas_usd": 99.0}])]
    assert judge.check_gas_ceiling(blocked, cfg).status == "pass"
    assert judge.check_gas_ceiling(sent, {"config": {}}).status == "n/a"


def test_clip():
    refused = {"tool": "swap", "category": "policy",
               "reason": "safety: trade value $5,938.00 exceeds max_trade_size_usd $5,000.00"}
    dropped = judge.check_clip([mark(0), mark(1, blocked=[refused])])
    assert dropped.status == "FAIL" and "rows 1" in dropped.figure
    # the same refusal with a smaller swap sent on the row: a clip, not a drop
    clipped = [mark(1, blocked=[refused], actions=[{"tool": "swap", "status": "executed", "gas_usd": 1.0}])]
    assert judge.check_clip(clipped).status == "pass"
    # refusals that no size would pass are not drops
    others = [{"tool": "swap", "category": "gate", "reason": "gas gate: estimated gas $2.55 is over 2× the usual"},
              {"tool": "swap", "category": "policy", "reason": "hard shield: pool price deviates 775 bps"},
              {"tool": "swap", "category": "policy",
               "reason": "safety: clipped to $40.00, below the minimum worth doing; exceeds the cap 3"}]
    assert judge.check_clip([mark(0, blocked=others)]).status == "pass"
    cap = {"tool": "swap", "category": "policy",
           "reason": "safety: MUST (STRATEGY.md line 30: `MUST NOT swap more than 30% WETH`): swap of 4 WETH "
                     "(+0 earlier this tick) exceeds the cap 3"}
    assert judge.check_clip([mark(0, blocked=[cap])]).status == "FAIL"
    # clipped first, then refused for something no size passes (the gas left today, no edge): not a drop
    after_clip = [{"tool": "swap", "category": "budget",
                   "reason": "clipped from 4,750 ($4,750.00) to 2,500 ($2,500.00) by consecutive losses: 10 losing "
                             "bets in a row halve the size cap; risk: gas gate: defer: estimated gas $0.43 exceeds the "
                             "partition's $0.39 left today for routine actions"},
                  {"tool": "swap", "category": "policy",
                   "reason": "clipped from 4,750 ($4,750.00) to 2,500 ($2,500.00) by somatic marker: sm-1 shrinks the "
                             "size cap to 0.5×; risk: Kelly sizing: no edge over the last 10 bets; no new exposure"}]
    assert judge.check_clip([mark(0, blocked=after_clip)]).status == "pass"
    # … but a clipped size refused on size again is still a drop
    again = {"tool": "swap", "category": "policy",
             "reason": "clipped from 4,750 to 2,500 by the size cap; safety: trade value $6,000.00 exceeds "
                       "max_trade_size_usd $5,000.00"}
    assert judge.check_clip([mark(0, blocked=[again])]).status == "FAIL"


def test_loss_aware_sortino_passes_a_golem_that_lost_less_with_less_downside():
    def equity(rets: list[float]) -> list[dict]:
        eq, out = 100.0, [dict(mark(0), equity_usd=100.0)]
        for i, x in enumerate(rets, 1):
            eq *= 1 + x
            out.append(dict(mark(i), equity_usd=eq))
        return out
    g = report(equity([-0.05, 0.01, -0.05, 0.01]), sortino=-0.566)  # sold some: falls less, gains less
    h = report(equity([-0.10, 0.05, -0.10, 0.05]), sortino=-0.354)
    assert judge.check_sortino(g, h).status == "FAIL"  # the plain ratio ranks the smaller loss below
    assert judge.check_loss_aware(g, h).status == "pass"
    assert judge.check_loss_aware(h, g).status == "FAIL"
    assert judge.check_loss_aware(g, None).status == "n/a"


def test_sortino_and_drawdown_against_hold():
    g = report([mark(0)], sortino=-0.05, dd=0.20)
    h = report([mark(0)], sortino=-0.10, dd=0.30)
    assert judge.check_sortino(g, h).status == "pass"
    assert judge.check_sortino(h, g).status == "FAIL"
    assert judge.check_sortino(report([mark(0)], sortino=None), h).status == "n/a"
    dd = judge.check_drawdown(g, h)
    assert dd.status == "pass" and dd.figure.startswith("0.67×")
    worse = judge.check_drawdown(report([mark(0)], dd=0.29), h)
    assert worse.status == "FAIL" and worse.figure.startswith("0.97×")


def test_memory_on_against_off():
    off = report([mark(0)], ret=-0.20, dd=0.30)
    assert judge.check_memory(report([mark(0)], ret=-0.20, dd=0.30), off).cell() == "pass return +0.000 pp, DD +0.000 pp"
    assert not judge.strictly_better(report([mark(0)], ret=-0.20, dd=0.30), off)
    better = report([mark(0)], ret=-0.18, dd=0.30)
    assert judge.check_memory(better, off).figure.endswith("(better)") and judge.strictly_better(better, off)
    # the crash path: memory on lost 0.05 pp and drew down 0.05 pp more
    worse = report([mark(0)], ret=-0.2044, dd=0.3231)
    bad = judge.check_memory(worse, report([mark(0)], ret=-0.2039, dd=0.3226))
    assert bad.status == "FAIL" and "-0.050 pp" in bad.figure and "+0.050 pp" in bad.figure
    # better return bought with a deeper drawdown is not "on ≥ off"
    assert judge.check_memory(report([mark(0)], ret=-0.10, dd=0.35), off).status == "FAIL"


# ---- a run directory end to end (--from) ------------------------------------------------------------------
def _write_path(root: Path, name: str, variants: dict[str, dict], strategy: str = STRATEGY) -> None:
    d = root / name
    for v, rep in variants.items():
        (d / v).mkdir(parents=True)
        (d / v / "report.json").write_text(json.dumps(rep))
    (d / "golem" / "home").mkdir(parents=True, exist_ok=True)
    (d / "golem" / "home" / "STRATEGY.md").write_text(strategy)


def _crash_marks(hfs: list[float], tiers: list[str]) -> list[dict]:
    prices = [2000 - 150 * i for i in range(len(hfs))]  # −30 % over the path: a crash path
    return [mark(i, h, tier=t, price=p) for i, (h, t, p) in enumerate(zip(hfs, tiers, prices))]


def test_from_dir_prints_one_table_per_set_with_checks(tmp_path, capsys):
    good = _crash_marks([2.0, 1.9, 1.8, 1.7, 1.75], ["T0", "T1", "T1", "T2", "T1"])
    bad = _crash_marks([2.0, 1.8, 1.6, 1.4, 1.25], ["T0", "T0", "T0", "T0", "T0"])
    _write_path(tmp_path / "heldout", "good", {
        "golem": report(good, ret=-0.10, dd=0.12, sortino=-0.1), "hold": report(good, ret=-0.3, dd=0.3, sortino=-0.3),
        "memory-off": report(good, ret=-0.12, dd=0.12), "rules": report(good)})
    _write_path(tmp_path / "heldout", "bad", {
        "golem": report(bad, ret=-0.3, dd=0.3, sortino=-0.4), "hold": report(bad, ret=-0.3, dd=0.3, sortino=-0.3),
        "memory-off": report(bad, ret=-0.29, dd=0.3), "rules": report(bad)})
    (tmp_path / "heldout" / "broken").mkdir()
    out = tmp_path / "judged.json"
    assert judge.main(["--from", str(tmp_path), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "## heldout: 3 paths" in text and "run failed" in text
    data = json.loads(out.read_text())["heldout"]
    g, b = data["paths"]["good"]["checks"], data["paths"]["bad"]["checks"]
    assert all(g[c]["status"] in ("pass", "n/a") for c in judge.CHECKS), g
    for c in ("min HF ≥ floor", "no T0 in horizon", "Sortino ≥ hold", "DD ≤ 0.8×hold", "memory on ≥ off"):
        assert b[c]["status"] == "FAIL", (c, b[c])
    assert g["gas ≤ ceiling"]["status"] == "n/a"  # this build has no ceiling key: said, not passed
    assert data["memory_strictly_better"]["status"] == "pass"  # 1 of 2 crash paths better: half
    assert data["tally"]["no T0 in horizon"] == {"pass": 1, "FAIL": 1, "n/a": 0}


def test_a_calm_path_skips_the_crash_checks(tmp_path, capsys):
    calm = [mark(i, 2.0, price=2000 + i) for i in range(5)]
    _write_path(tmp_path / "shipped", "calm", {"golem": report(calm, dd=0.01, sortino=-1.0),
                                                "hold": report(calm, dd=0.001, sortino=1.0),
                                                "memory-off": report(calm, dd=0.01)})
    judge.main(["--from", str(tmp_path), "--set", "shipped"])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| calm |") and "pass" in line)
    assert row.count("n/a market down 0% ≤ 20%") == 3  # Sortino, loss-aware Sortino, drawdown


def test_run_refuses_a_tampered_heldout_set_and_a_used_out_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(judge, "check_seal", lambda: ["gap_through_line.csv"])
    with pytest.raises(SystemExit):
        judge.main(["--set", "heldout", "--out", str(tmp_path)])
    assert "does not match" in capsys.readouterr().err
    monkeypatch.setattr(judge, "check_seal", lambda: [])
    (tmp_path / "heldout" / "x").mkdir(parents=True)
    with pytest.raises(SystemExit):
        judge.main(["--set", "heldout", "--out", str(tmp_path)])
    assert "not empty" in capsys.readouterr().err


def test_ceilings_come_from_the_report_when_the_config_dump_leaves_defaults_out(tmp_path: Path):
    """The config version omits keys at their defaults; the report's gas_limits still name the ceilings."""
    run = tmp_path / "p" / "golem"
    run.mkdir(parents=True)
    rep = report([mark(0, actions=[{"tool": "repay", "status": "executed", "gas_usd": 25.0}])])
    rep["report"]["info"] = {"gas_limits": {"budget_usd": 10.0, "per_action_usd": 20.0, "per_day_usd": 30.0}}
    (run / "report.json").write_text(json.dumps(rep))
    pr = judge.load_path_runs(tmp_path / "p")
    assert judge.gas_ceilings(pr.config) == {"action": ("policy.gas_ceiling_per_action_usd", 20.0),
                                             "day": ("policy.gas_ceiling_per_day_usd", 30.0)}
    assert judge.check_gas_ceiling(rep["marks"], pr.config).status == "FAIL"


# ---- memory from earlier lives (bench/lives.py, --memory-from) ----------------------------------------------
def _lives_build(root: Path) -> Path:
    """A finished bench/lives.py build's layout: MANIFEST.json naming the last life's data dir, a Grimoire there."""
    data = root / "01-crash_recovery" / "data"
    (data / "grimoire").mkdir(parents=True)
    (data / "grimoire" / "semantic.sqlite").write_bytes(b"")
    (root / "MANIFEST.json").write_text(json.dumps({"inheritance": "01-crash_recovery/data", "lives": []}))
    return data.resolve()


def _calls(monkeypatch) -> list[list[str]]:
    calls: list[list[str]] = []
    monkeypatch.setattr(judge.subprocess, "call", lambda cmd, **kw: calls.append(cmd) or 0)
    return calls


def test_the_inherited_arm_is_handed_the_lives_grimoire(tmp_path, monkeypatch):
    data = _lives_build(tmp_path / "lives")
    calls = _calls(monkeypatch)
    csv = judge.SETS["heldout"] / "gap_through_line.csv"
    judge.main([str(csv), "--out", str(tmp_path / "j"), "--memory-from", str(tmp_path / "lives")])
    compare = [c for c in calls if "--compare" in c]
    inherited = [c for c in calls if "--compare" not in c]
    assert len(compare) == 1 and "--grimoire" not in compare[0]  # today's arms: fresh memory, memory off, hold
    assert len(inherited) == 1
    cmd = inherited[0]
    assert cmd[cmd.index("--grimoire") + 1] == str(data)
    assert cmd[cmd.index("--out") + 1] == str(tmp_path / "j" / "files" / "gap_through_line" / judge.INHERITED)
    assert "--memory" not in cmd  # memory on: the inherited Grimoire is read


def test_inherited_only_runs_the_inherited_arm_beside_runs_already_there(tmp_path, monkeypatch):
    _lives_build(tmp_path / "lives")
    calls = _calls(monkeypatch)
    (tmp_path / "j" / "heldout" / "gap_through_line" / "golem").mkdir(parents=True)  # e.g. linked from an earlier --out
    judge.main(["--set", "heldout", "--out", str(tmp_path / "j"), "--memory-from", str(tmp_path / "lives"),
                "--inherited-only"])
    assert len(calls) == len(judge.set_paths("heldout")) and all("--grimoire" in c and "--compare" not in c
                                                                  for c in calls)
    (tmp_path / "j" / "heldout" / "gap_through_line" / judge.INHERITED).mkdir()
    with pytest.raises(SystemExit):  # an inherited run is kept, never overwritten
        judge.main(["--set", "heldout", "--out", str(tmp_path / "j"), "--memory-from", str(tmp_path / "lives"),
                    "--inherited-only"])


def test_an_unfinished_lives_build_is_refused(tmp_path):
    (tmp_path / "lives").mkdir()
    (tmp_path / "lives" / "MANIFEST.json").write_text(json.dumps({"lives": []}))
    with pytest.raises(SystemExit, match="did not finish"):
        judge.memory_from(str(tmp_path / "lives"), None, tmp_path)


def test_both_memory_lines_and_an_inherited_arm_that_inherited_nothing(tmp_path, capsys):
    marks = _crash_marks([2.0, 1.9, 1.8, 1.7, 1.75], ["T0", "T1", "T1", "T2", "T1"])
    inh = report(marks, ret=-0.10, dd=0.11)
    inh["report"]["info"] = {"grimoire_from": "/lives/01-crash_recovery/data"}
    arms = {"golem": report(marks, ret=-0.12, dd=0.12), "hold": report(marks, ret=-0.3, dd=0.3),
            "memory-off": report(marks, ret=-0.12, dd=0.12)}
    _write_path(tmp_path / "heldout", "a", {**arms, judge.INHERITED: inh})
    fresh = report(marks, ret=-0.10, dd=0.11)  # better figures, but it started from no Grimoire: not counted
    _write_path(tmp_path / "heldout", "b", {**arms, judge.INHERITED: fresh})
    out = tmp_path / "judged.json"
    judge.main(["--from", str(tmp_path), "--json", str(out)])
    text = capsys.readouterr().out
    assert "Memory on strictly better than off on at least half of the crash and bear paths: FAIL 0 of 2" in text
    assert "Memory from earlier lives strictly better than off on at least half of the crash and bear paths: " \
           "pass 1 of 2 (need 1) — a" in text
    assert "started from no Grimoire" in text
    data = json.loads(out.read_text())["heldout"]
    assert data["inherited_strictly_better"]["paths"] == ["a"]
    assert data["inherited_on_every_path"] == {"worse": [], "not_judged": ["b"], "status": "n/a",
                                               "figure": "not judged on b"}
    assert data["paths"]["a"]["checks"][judge.INHERITED_CHECK]["figure"].endswith("(better)")
