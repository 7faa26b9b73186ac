"""A learned rule pays for itself: the keep/demote rule on a trial's figures (each side of each threshold), the path
exported from decision records, and the trial history in heuristics.sqlite that `golem grimoire playbook effects`
prints (docs/design/learning.md)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

from golem.backtest.path import parse_path, write_path_csv
from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.grimoire.playbook.compile import playbook_line, rewrite_playbook
from golem.inference.strategy import parse_strategy, rules_in
from golem.learning.trial import TrialFigures, TrialResult, judge, path_rows, playbook_pair
from golem.models.config import LearningSection
from tests.unit.test_learning import _record
from golem.models.record import OutcomeRecord

RULE = "WHEN health_factor < 1.76 AND regime == volatile THEN repay 25% debt"
LIMITS = LearningSection()


def fig(ret=-0.10, dd=0.20, sortino=-0.10, hf=1.6, liq=0, actions=("3:repay",), gas=1.0) -> TrialFigures:
    return TrialFigures(total_return=ret, max_drawdown=dd, sortino_per_tick=sortino, min_health_factor=hf,
                        liquidations=liq, transactions=len(actions), gas_usd=gas, actions=list(actions))


BASE = fig(actions=())  # the run without the rule: it never acted


def test_a_rule_that_changed_nothing_has_no_effect():
    same = fig(actions=())
    assert judge(same, BASE, LIMITS)[0] == "no effect"
    # same actions but a different return (another size): measured
    assert judge(fig(actions=(), ret=-0.09, sortino=-0.05), BASE, LIMITS)[0] == "kept"


def test_the_crash_case_is_demoted_gas_spent_for_no_outcome():
    # issue figures: with the rule DD 32.31 %, return -20.44 %; without 32.26 %, -20.39 %
    verdict, why = judge(fig(ret=-0.2044, dd=0.3231, sortino=-0.1021, hf=1.7),
                         fig(ret=-0.2039, dd=0.3226, sortino=-0.1019, hf=1.6, actions=()), LIMITS)
    assert verdict == "demoted"
    assert any(w.startswith("max drawdown +32.310% vs +32.260%") for w in why) and any("Sortino" in w for w in why)


def test_sortino_threshold_each_side():
    assert judge(fig(sortino=-0.0999), BASE, LIMITS)[0] == "kept"  # better
    assert judge(fig(sortino=-0.10), BASE, LIMITS)[0] == "demoted"  # equal is not better
    margin = LearningSection(sortino_margin=0.01)
    assert judge(fig(sortino=-0.0899), BASE, margin)[0] == "kept"
    assert judge(fig(sortino=-0.0901), BASE, margin)[0] == "demoted"


def test_drawdown_threshold_each_side():
    better = dict(sortino=-0.05)
    assert judge(fig(dd=0.20, **better), BASE, LIMITS)[0] == "kept"  # not worse
    assert judge(fig(dd=0.2001, **better), BASE, LIMITS)[0] == "demoted"
    tol = LearningSection(drawdown_tolerance=0.001)
    assert judge(fig(dd=0.2009, **better), BASE, tol)[0] == "kept"
    assert judge(fig(dd=0.2011, **better), BASE, tol)[0] == "demoted"


def test_health_factor_threshold_each_side():
    better = dict(sortino=-0.05)
    assert judge(fig(hf=1.6, **better), BASE, LIMITS)[0] == "kept"
    verdict, why = judge(fig(hf=1.59, **better), BASE, LIMITS)
    assert verdict == "demoted" and why == ["min HF 1.5900 vs 1.6000 without"]
    assert judge(fig(hf=1.59, **better), BASE, LearningSection(health_factor_tolerance=0.02))[0] == "kept"
    assert judge(fig(hf=None, **better), BASE, LIMITS)[0] == "kept"  # no debt left: nothing to liquidate


def test_liquidations_are_never_traded_for_return():
    verdict, why = judge(fig(sortino=0.5, liq=1), BASE, LIMITS)
    assert verdict == "demoted" and why[0] == "liquidated 1× vs 0× without"


def test_holding_the_must_floor_outranks_the_gas_it_cost():
    below = fig(hf=1.25, actions=())
    kept = judge(fig(hf=1.31, sortino=-0.2, dd=0.25), below, LIMITS, floor=1.3)
    assert kept[0] == "kept" and "MUST floor 1.3" in kept[1][0]
    assert judge(fig(hf=1.29, sortino=-0.2, dd=0.25), below, LIMITS, floor=1.3)[0] == "demoted"  # still under it
    assert judge(fig(hf=1.31, sortino=-0.2, dd=0.25), below, LIMITS, floor=None)[0] == "demoted"  # no floor named


def test_undefined_sortino_ranks_by_the_return():
    never_lost = fig(sortino=None, ret=0.01)
    assert judge(never_lost, fig(sortino=-0.1, actions=()), LIMITS)[0] == "kept"
    assert judge(fig(sortino=None, ret=-0.01), fig(sortino=-0.1, actions=()), LIMITS)[0] == "demoted"


def test_path_rows_from_records_round_trip_through_the_csv():
    recs = []
    for tick, (price, oracle, gas, ts) in enumerate([(2000.0, 2001.0, 3.0, 100), (1900.0, 1950.0, 1.5, 160),
                                                     (1800.0, 1800.0, 0.5, 160), (1850.0, 1840.0, 2.0, 220)]):
        r = _record(OutcomeRecord(verified=True), tick=tick)
        snap = r.observation.snapshot.model_copy(update={
            "block_timestamp": ts, "oracle_price": oracle, "gas_price_gwei": gas,
            "pool": r.observation.snapshot.pool.model_copy(update={"price": price})})
        recs.append(r.model_copy(update={"observation": r.observation.model_copy(update={"snapshot": snap})}))
    rerun = recs[1].model_copy(update={"run_label": "r2", "tick": 1})
    rows = path_rows(reversed([*recs, rerun]), last=10)
    # tick 2 repeats tick 1's block time (dropped), the rerun is left out, gas is the base fee (less the tip)
    assert [(r.tick, r.timestamp, r.pool_price, r.oracle_price, r.gas_gwei) for r in rows] == [
        (0, 100, 2000.0, 2001.0, 2.0), (1, 160, 1900.0, 1950.0, 0.5), (2, 220, 1850.0, 1840.0, 1.0)]
    assert [r.tick for r in path_rows(recs, last=2)] == [0, 1] and path_rows(recs, last=2)[0].timestamp == 160
    buf = io.StringIO()
    write_path_csv(rows, buf)
    assert parse_path(buf.getvalue()) == rows


def test_playbook_pair_differs_by_the_one_rule(tmp_path):
    store = HeuristicStore(tmp_path / "h.sqlite")
    for i in range(5):
        h = store.add_or_reinforce(RULE, "global", f"ep-{i}")
    other = "WHEN price_change_bps <= -200 THEN swap 5% WETH to USDC"
    for i in range(5):
        store.add_or_reinforce(other, "global", f"ep-o{i}")
    rewrite_playbook(store, tmp_path / "PLAYBOOK.md")
    text = (tmp_path / "PLAYBOOK.md").read_text()
    with_rule, without_rule = playbook_pair(text, h.id, playbook_line(h))
    strategy = parse_strategy("## Settings\n- collateral: WETH\n- debt: USDC\n\n## Rules\n")
    assert [r.text for r in rules_in(without_rule, "PLAYBOOK.md", strategy)] == [other]
    assert sorted(r.text for r in rules_in(with_rule, "PLAYBOOK.md", strategy)) == sorted([other, RULE])
    # a rule not in PLAYBOOK.md yet (just ADDed): "without" is the file as it stands
    assert playbook_pair(without_rule, h.id, playbook_line(h)) == (with_rule, without_rule)


def _result(hid: str, tick: int, verdict: str, occasion="add") -> str:
    return TrialResult(heuristic_id=hid, text=RULE, tick=tick, occasion=occasion, rows=60, verdict=verdict,
                       with_rule=fig(), without_rule=BASE).model_dump_json()


def test_the_history_carries_the_figures_and_the_verdict_moves_the_rule(tmp_path):
    store = HeuristicStore(tmp_path / "h.sqlite")
    for i in range(5):
        h = store.add_or_reinforce(RULE, "global", f"ep-{i}")
    assert h.status == "active" and h.confidence == 0.9
    h = store.record_trial(h.id, 50, "add", "demoted", _result(h.id, 50, "demoted"))
    assert (h.status, h.trial_verdict, h.confidence, h.importance) == ("candidate", "demoted", 0.75, 1)
    rewrite_playbook(store, tmp_path / "PLAYBOOK.md")
    assert h.id not in (tmp_path / "PLAYBOOK.md").read_text()  # held back although confidence >= 0.7
    # a retried step records nothing twice
    assert store.record_trial(h.id, 50, "add", "demoted", _result(h.id, 50, "demoted")).confidence == 0.75
    # votes cannot bring it back: only a trial can
    assert store.vote(h.id, 2, 60, key="curator:60").status == "candidate"
    (row,) = store.trials(h.id)
    assert row["verdict"] == "demoted" and row["result"]["with_rule"]["max_drawdown"] == 0.2
    assert row["result"]["without_rule"]["actions"] == []
    # a later re-judgement that changed nothing leaves it held; one that pays brings it back
    assert store.record_trial(h.id, 100, "rejudge", "no effect", _result(h.id, 100, "no effect", "rejudge")).held
    h = store.record_trial(h.id, 150, "rejudge", "kept", _result(h.id, 150, "kept", "rejudge"))
    assert (h.status, h.trial_verdict) == ("active", "kept")
    assert [t["tick"] for t in store.trials(h.id)] == [150, 100, 50]
    # each demotion costs one importance (3 after the votes): at 0 it is retired, its row and history kept
    for tick in (200, 250, 300):
        assert h.status != "retired"
        h = store.record_trial(h.id, tick, "rejudge", "demoted", _result(h.id, tick, "demoted", "rejudge"))
    assert h.status == "retired" and h.retired_tick == 300 and len(store.trials(h.id)) == 6


def test_another_run_at_the_same_tick_records_its_own_trial(tmp_path):
    """A backtest's second pass inherits heuristics.sqlite: its cycle at tick 50 is not a retry of the first pass's."""
    store = HeuristicStore(tmp_path / "h.sqlite")
    for i in range(5):
        h = store.add_or_reinforce(RULE, "global", f"ep-{i}")
    store.record_trial(h.id, 50, "add", "demoted", _result(h.id, 50, "demoted"), run="pass-1")
    assert store.record_trial(h.id, 50, "add", "demoted", _result(h.id, 50, "demoted"), run="pass-1").importance == 1
    h = store.record_trial(h.id, 50, "rejudge", "demoted", _result(h.id, 50, "demoted", "rejudge"), run="pass-2")
    assert h.importance == 0 and h.status == "retired"
    assert [t["run"] for t in store.trials(h.id)] == ["pass-2", "pass-1"]


def test_no_effect_at_add_holds_a_rule_back_but_not_a_promoted_one(tmp_path):
    store = HeuristicStore(tmp_path / "h.sqlite")
    for i in range(5):
        h = store.add_or_reinforce(RULE, "global", f"ep-{i}")
    promoted = store.record_trial(h.id, 50, "rejudge", "no effect", _result(h.id, 50, "no effect", "rejudge"))
    assert promoted.status == "active" and promoted.trial_verdict is None
    held = store.record_trial(h.id, 100, "add", "no effect", _result(h.id, 100, "no effect"))
    assert held.status == "candidate" and held.held


def test_effects_cli_prints_the_figures(tmp_path, capsys):
    from cli.grimoire import _effects, _playbook

    (tmp_path / "grimoire").mkdir()
    store = HeuristicStore(tmp_path / "grimoire" / "heuristics.sqlite")
    for i in range(5):
        h = store.add_or_reinforce(RULE, "global", f"ep-{i}")
    store.record_trial(h.id, 50, "add", "demoted", _result(h.id, 50, "demoted"))
    assert _effects(SimpleNamespace(data=tmp_path, json=False)) == 0
    out = capsys.readouterr().out
    assert h.id in out and "candidate" in out and "tick 50 add: demoted on 60 rows" in out and "max DD +20.00%" in out
    assert _effects(SimpleNamespace(data=tmp_path, json=True)) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["id"] == h.id and row["trials"][0]["result"]["verdict"] == "demoted"
    # `playbook log`: the revision the cycle compiled, with the verdicts it followed
    rewrite_playbook(store, tmp_path / "PLAYBOOK.md", tick=50)
    assert _playbook(SimpleNamespace(data=tmp_path, json=False, playbook_cmd="log")) == 0
    assert f"trial {h.id} (add): demoted" in capsys.readouterr().out


def test_a_rule_that_loses_less_with_less_downside_is_kept_where_the_plain_ratio_would_demote_it():
    """On a falling path both arms lose. The crash_recovery figures: with the de-risking rule mean -5.53 bp/row and
    downside 60.7 bp, without it -5.78 bp and 74.2 bp: better on both, yet its plain Sortino (-0.091) is below the
    other's (-0.078). The verdict reads the loss-aware one (mean × downside when the mean is negative)."""
    mean_w, down_w, mean_o, down_o = -5.53e-4, 60.7e-4, -5.78e-4, 74.2e-4
    with_rule = fig(ret=-0.128, dd=0.256, sortino=mean_w / down_w, actions=("60:swap", "113:swap"))
    with_rule.sortino_loss_aware_per_tick = mean_w * down_w
    without = fig(ret=-0.135, dd=0.325, sortino=mean_o / down_o, actions=())
    without.sortino_loss_aware_per_tick = mean_o * down_o
    assert with_rule.sortino_per_tick < without.sortino_per_tick  # the plain ratio ranks it below
    assert judge(with_rule, without, LIMITS) == ("kept", [])
    # the other way round it is demoted, naming the figure it compared
    verdict, why = judge(without.model_copy(update={"actions": ["3:repay"]}), with_rule, LIMITS)
    assert verdict == "demoted" and any(w.startswith("loss-aware Sortino") for w in why)
    # trials stored before the loss-aware figure existed compare the plain one
    old_w = with_rule.model_copy(update={"sortino_loss_aware_per_tick": None})
    assert judge(old_w, without, LIMITS)[0] == "demoted"


def test_the_trial_starts_from_the_position_read_at_its_first_row():
    """start_position: the loan and wallet of the first record path_rows keeps (a rerun and a row whose block time
    does not advance are left out the same way), as that tick read them before acting."""
    from golem.learning.trial import start_position
    from golem.models.observation import PositionState

    recs = []
    for tick, (ts, debt, weth) in enumerate([(100, 8000.0, 20.0), (160, 7000.0, 16.0), (220, 6500.0, 12.0)]):
        r = _record(OutcomeRecord(verified=True), tick=tick)
        snap = r.observation.snapshot.model_copy(update={
            "block_timestamp": ts, "balances": {"weth": weth, "USDC": 9000.0},
            "positions": [PositionState(id="lending:x", collateral=10.0 - tick, debt=debt, health_factor=2.0),
                          PositionState(id="lp:x", kind="lp", collateral=99.0)]})
        recs.append(r.model_copy(update={"observation": r.observation.model_copy(update={"snapshot": snap})}))
    rerun = recs[1].model_copy(update={"run_label": "r2"})
    held = start_position([rerun, *recs], last=2)  # the window is ticks 1 and 2
    assert (held.collateral, held.debt, held.balances) == (9.0, 7000.0, {"WETH": 16.0, "USDC": 9000.0})
    assert path_rows(recs, last=2)[0].timestamp == 160
    assert start_position([], last=5) is None


def test_the_world_opens_a_loan_genesis_cannot_carry_at_a_raised_feed():
    from golem.world.deploy import ORACLE_START_PRICE, GolemPosition

    assert GolemPosition().opening_price() == ORACLE_START_PRICE  # the dev world's loan: the genesis price
    assert GolemPosition(collateral=5.0, debt=9000.0).opening_price() == 2400.0  # 9,000 at 75 % LTV on 5 WETH
    assert GolemPosition(collateral=0.0, debt=0.0).opening_price() == ORACLE_START_PRICE
    for bad, why in ((GolemPosition(debt=100.0, collateral=0.0), "no WETH collateral"),
                     (GolemPosition(weth=float("nan")), "weth = nan"), (GolemPosition(usdc=-1.0), "usdc = -1.0")):
        try:
            bad.check()
        except ValueError as err:
            assert why in str(err)
        else:
            raise AssertionError(f"{bad} passed")


def test_a_rule_added_without_a_trial_stays_out_of_the_playbook_until_one_measures_it(tmp_path):
    """The cycle's trial time was spent (or too few ticks were recorded): the rule the Curator ADDed is held back as
    `untried`, whatever its confidence — no rule reaches PLAYBOOK.md unmeasured — and the next trial decides."""
    store = HeuristicStore(tmp_path / "h.sqlite")
    for i in range(5):
        h = store.add_or_reinforce(RULE, "global", f"ep-{i}")
    assert h.status == "active"  # five supports: the votes alone would promote it
    h = store.record_trial(h.id, 150, "add", "no trial", _result(h.id, 150, "no trial"))
    assert h.status == "candidate" and h.held and h.trial_verdict == "untried"
    rewrite_playbook(store, tmp_path / "PLAYBOOK.md", tick=150)
    assert "health_factor < 1.76" not in (tmp_path / "PLAYBOOK.md").read_text()
    # the next cycle cannot run it either: still untried; one that finds it changes nothing holds it as no effect
    assert store.record_trial(h.id, 200, "rejudge", "no trial", _result(h.id, 200, "no trial", "rejudge")).held
    assert store.record_trial(h.id, 250, "rejudge", "no effect",
                              _result(h.id, 250, "no effect", "rejudge")).trial_verdict == "no effect"
    kept = store.record_trial(h.id, 300, "rejudge", "kept", _result(h.id, 300, "kept", "rejudge"))
    assert kept.status == "active" and not kept.held
    rewrite_playbook(store, tmp_path / "PLAYBOOK.md", tick=300)
    assert "health_factor < 1.76" in (tmp_path / "PLAYBOOK.md").read_text()


def test_a_promoted_rule_never_measured_is_held_when_its_first_trial_cannot_run(tmp_path):
    """A rule that reached PLAYBOOK.md by its votes (or a dream's promotion) and was never measured: a cycle whose
    trial cannot run holds it back as untried; a measured rule's standing is untouched by a trial that did not run."""
    store = HeuristicStore(tmp_path / "h.sqlite")
    for i in range(5):
        h = store.add_or_reinforce(RULE, "global", f"ep-{i}")
    assert h.status == "active" and h.trial_verdict is None
    h = store.record_trial(h.id, 50, "rejudge", "no trial", _result(h.id, 50, "no trial", "rejudge"))
    assert h.trial_verdict == "untried" and h.status == "candidate"
    h = store.record_trial(h.id, 100, "rejudge", "kept", _result(h.id, 100, "kept", "rejudge"))
    h = store.record_trial(h.id, 150, "rejudge", "no trial", _result(h.id, 150, "no trial", "rejudge"))
    assert h.trial_verdict == "kept" and h.status == "active"
