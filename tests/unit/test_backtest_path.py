"""The market-path CSV: every refusal names its line and column; round trips; seeded scenarios; `golem sim export`."""

from __future__ import annotations

import importlib.util
import io
import itertools
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.backtest.models import DEFAULT_ROW_SECONDS, PATH_REGIMES, PathRow
from golem.backtest.path import PATH_EPOCH, PathError, load_path, parse_path, write_path_csv
from golem.backtest.scenarios import SHIPPED, SHIPPED_SEEDS, export_rows, shipped_rows
from cli.main import main as golem_main
from golem.models.config import ProbeThresholds
from golem.world.deploy import GOLEM_BORROW_USDC, GOLEM_SUPPLY_WETH, ORACLE_START_PRICE
from golem.world.simulator.paths import CRASH_STEPS, oracle_path

HEADER = "tick,pool_price,oracle_price,gas_gwei,volume_usd"
SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
LIQUIDATION_THRESHOLD = 0.80  # Lending.vy: liquidation_threshold_bps = 8000
PROBE = ProbeThresholds()


# ---- refusals --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, where", [
    ("tick,pool_price,gas_gwei,volume_usd\n0,1,1,1\n", "line 1: missing column oracle_price"),
    (f"{HEADER},tick\n0,2000,2000,1,1,0\n", "line 1: column tick appears twice"),
    (f"{HEADER}\n0,2000,2000,1,1\n1,2000,abc,1,1\n", "line 3, column oracle_price"),
    (f"{HEADER}\n0,2000,2000,1,1\n1,2000,nan,1,1\n", "line 3, column oracle_price"),
    (f"{HEADER}\n0,inf,2000,1,1\n", "line 2, column pool_price"),
    (f"{HEADER}\n0,2000,2000,1,-inf\n", "line 2, column volume_usd"),
    (f"{HEADER}\n0,2000,2000,1,1\n0,2000,2000,1,1\n", "line 3, column tick"),
    (f"{HEADER}\n5,2000,2000,1,1\n3,2000,2000,1,1\n", "line 3, column tick"),
    (f"{HEADER}\n0,2000,2000,1,1\n1.5,2000,2000,1,1\n", "line 3, column tick"),
    (f"{HEADER}\n0,2000,2000,1,1\n\n1,2000,x,1,1\n", "line 4, column oracle_price"),  # a blank line still counts
    (f"{HEADER}\n0,0,2000,1,1\n", "line 2, column pool_price"),
    (f"{HEADER}\n0,2000,-1,1,1\n", "line 2, column oracle_price"),
    (f"{HEADER}\n0,2000,2000,-1,1\n", "line 2, column gas_gwei"),
    (f"{HEADER}\n0,2000,2000,1,-5\n", "line 2, column volume_usd"),
    (f"{HEADER},timestamp\n0,2000,2000,1,1,100\n1,2000,2000,1,1,100\n", "line 3, column timestamp"),
    (f"{HEADER},timestamp\n0,2000,2000,1,1,100\n1,2000,2000,1,1,90\n", "line 3, column timestamp"),
    (f"{HEADER},timestamp\n0,2000,2000,1,1,100.5\n", "line 2, column timestamp"),
    (f"{HEADER},timestamp\n0,2000,2000,1,1,-60\n", "line 2, column timestamp"),
    (f"{HEADER},timestamp\n0,2000,2000,1,1,soon\n", "line 2, column timestamp"),
    (f"{HEADER},regime\n0,2000,2000,1,1,sideways\n", "line 2, column regime"),
    (f"{HEADER}\n0,2000,2000,1\n", "line 2: 4 fields"),
    (f"{HEADER}\n0,2000,2000,1,1,7\n", "line 2: 6 fields"),
    (f"{HEADER}\n", "no rows"),
    ("", "empty file"),
])
def test_refusals_name_line_and_column(text, where):
    with pytest.raises(PathError) as err:
        parse_path(text, "p.csv")
    msg = str(err.value)
    assert msg.startswith("p.csv") and where in msg
    assert " — " in msg and "\n" not in msg  # one line that says what to fix


def test_missing_file_is_a_path_error(tmp_path):
    with pytest.raises(PathError, match="not found"):
        load_path(tmp_path / "nope.csv")


def test_a_bad_loaded_file_names_the_file(tmp_path):
    (tmp_path / "crash.csv").write_text(f"{HEADER}\n0,2000,abc,1,1\n")
    with pytest.raises(PathError, match=r"^crash\.csv line 2, column oracle_price: 'abc' is not a number"):
        load_path(tmp_path / "crash.csv")


# ---- what is accepted ------------------------------------------------------------------------------------
def test_defaults_extras_and_round_trip():
    rows = parse_path(f"{HEADER},note,regime\n3,2000,1990,1.5,100,x,Calm\n7,1900,1990,1.5,0,y,\n", "p.csv")
    assert [r.timestamp for r in rows] == [PATH_EPOCH, PATH_EPOCH + DEFAULT_ROW_SECONDS]
    assert rows[0].regime == "calm" and rows[1].regime is None
    buf = io.StringIO()
    write_path_csv(rows, buf)
    assert parse_path(buf.getvalue()) == rows


def test_columns_in_any_order_with_a_bom_and_given_timestamps():
    text = "\ufeffRegime, volume_usd ,gas_gwei,timestamp,oracle_price,pool_price,tick\nCRASH,5,2,1000,1900,1800,0\n"
    [row] = parse_path(text)
    assert row == PathRow(tick=0, timestamp=1000, pool_price=1800, oracle_price=1900, gas_gwei=2, volume_usd=5,
                          regime="crash")


@st.composite
def _paths(draw):
    n = draw(st.integers(1, 8))
    ticks = sorted(draw(st.sets(st.integers(0, 10**9), min_size=n, max_size=n)))
    stamps = sorted(draw(st.sets(st.integers(0, 10**11), min_size=n, max_size=n)))
    pos = st.floats(min_value=5e-324, max_value=1e12, allow_nan=False, allow_infinity=False)
    nonneg = st.floats(min_value=0.0, max_value=1e15, allow_nan=False, allow_infinity=False)
    return [PathRow(tick=t, timestamp=s, pool_price=draw(pos), oracle_price=draw(pos), gas_gwei=draw(nonneg),
                    volume_usd=draw(nonneg), regime=draw(st.sampled_from((None, *PATH_REGIMES))))
            for t, s in zip(ticks, stamps)]


@settings(max_examples=300, deadline=None)
@given(_paths())
def test_write_then_parse_gives_the_same_rows(rows):
    buf = io.StringIO()
    write_path_csv(rows, buf)
    assert parse_path(buf.getvalue()) == rows


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=st.sampled_from(list('0123456789.,-+e"\n\r\x00 nafitcalm_')), max_size=300)),
       st.sampled_from(["", HEADER + "\n", HEADER + ",timestamp,regime\n"]))
def test_the_parser_only_ever_raises_path_error(text, header):
    try:
        parse_path(header + text)
    except PathError:
        pass


# ---- the simulator's regimes as paths ----------------------------------------------------------------------
def test_export_is_seeded_and_matches_what_the_simulator_posts():
    a, b, c = export_rows("crash", 40, 1), export_rows("crash", 40, 1), export_rows("crash", 40, 2)
    assert a == b and a != c
    assert [r.oracle_price for r in a] == pytest.approx(oracle_path("crash", ORACLE_START_PRICE, 40, seed=1))
    assert len(export_rows("volatile")) == 400  # the default length


def test_export_labels_follow_the_simulator_regime():
    crash = export_rows("crash", 30, 1, crash_after=10)
    assert [r.regime for r in crash] == ["calm"] * 10 + ["crash"] * CRASH_STEPS + ["calm"] * (20 - CRASH_STEPS)
    for scenario, label in (("calm", "calm"), ("trending", "trending_up"), ("volatile", "volatile")):
        assert {r.regime for r in export_rows(scenario, 30, 3)} == {label}


def test_export_pool_gas_and_volume_look_like_the_dev_world():
    rows = export_rows("volatile", 400, 7)
    assert max(abs(r.pool_price / r.oracle_price - 1) for r in rows) < 0.003  # the arbitraged pool: a few bps off
    assert 0.8 < min(r.gas_gwei for r in rows) and max(r.gas_gwei for r in rows) < 1.25  # ~1 gwei, < gas probe's 2×
    assert len({r.volume_usd for r in rows}) > 300 and min(r.volume_usd for r in rows) > 0


def test_golem_sim_export_writes_the_path_to_stdout(capsys):
    assert golem_main(["sim", "export", "--scenario", "crash", "--steps", "40", "--seed", "1"]) == 0
    assert parse_path(capsys.readouterr().out) == export_rows("crash", 40, 1)


def test_golem_sim_export_of_a_shipped_name_is_its_csv(capsys):
    assert golem_main(["sim", "export", "--scenario", "oracle_lag"]) == 0
    assert capsys.readouterr().out == (SCENARIOS / "oracle_lag.csv").read_text()


@pytest.mark.parametrize("argv", [["--scenario", "sideways"], ["--steps", "0"], ["--steps", "x"],
                                  ["--crash-after", "-1"], ["--bogus"]])
def test_golem_sim_export_refuses_bad_arguments_in_one_line(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        golem_main(["sim", "export", *argv])
    assert stop.value.code == 2
    err = capsys.readouterr()
    assert err.out == "" and err.err.startswith("golem sim export: ") and err.err.count("\n") == 1


# ---- the shipped scenarios -------------------------------------------------------------------------------
def _moves_bps(prices: list[float]) -> list[float]:
    return [(b / a - 1) * 10_000 for a, b in itertools.pairwise(prices)]


def _idle_hf(oracle_price: float) -> float:
    """The golem's health factor at this oracle price had it done nothing (deploy.py's position, Lending.vy's HF)."""
    return GOLEM_SUPPLY_WETH * oracle_price * LIQUIDATION_THRESHOLD / GOLEM_BORROW_USDC


def _csv(rows) -> str:
    buf = io.StringIO()
    write_path_csv(rows, buf)
    return buf.getvalue()


@pytest.mark.parametrize("name", list(SHIPPED))
def test_shipped_csvs_load_labelled_and_match_the_generator(name):
    rows = load_path(SCENARIOS / f"{name}.csv")
    assert all(r.regime for r in rows)
    assert 150 <= len(rows) <= 300  # the CI budget (ours)
    assert [r.tick for r in rows] == list(range(len(rows)))
    assert rows[0].oracle_price == pytest.approx(ORACLE_START_PRICE, rel=0.01)
    assert (SCENARIOS / f"{name}.csv").read_text() == _csv(shipped_rows(name))
    assert shipped_rows(name, SHIPPED_SEEDS[name] + 1) != rows  # the seed matters


def test_make_scenarios_regenerates_every_csv_byte_for_byte(tmp_path):
    spec = importlib.util.spec_from_file_location("make_scenarios", SCENARIOS / "make_scenarios.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main([str(tmp_path)])
    assert sorted(p.name for p in tmp_path.glob("*.csv")) == sorted(p.name for p in SCENARIOS.glob("*.csv"))
    for p in tmp_path.glob("*.csv"):
        assert p.read_text() == (SCENARIOS / p.name).read_text(), p.name


def _rows(name):
    rows = shipped_rows(name)
    return rows, [r.oracle_price for r in rows], [r.pool_price for r in rows]


def test_calm_never_trips_the_price_probe():
    rows, _, pool = _rows("calm")
    assert {r.regime for r in rows} == {"calm"}
    assert max(abs(m) for m in _moves_bps(pool)) < PROBE.price_delta_low_bps


def test_trend_up_rises_and_never_threatens_the_loan():
    _, oracle, _ = _rows("trend_up")
    assert oracle[-1] / oracle[0] > 1.5 and min(_idle_hf(p) for p in oracle) > 1.95


def test_crash_recovery_drops_a_third_then_recovers_without_reaching_liquidation():
    rows, oracle, _ = _rows("crash_recovery")
    crash = [i for i, r in enumerate(rows) if r.regime == "crash"]
    assert crash == list(range(crash[0], crash[0] + 8))
    assert oracle[crash[-1]] / oracle[crash[0] - 1] < 0.7
    assert 1.0 < min(_idle_hf(p) for p in oracle) < 1.3  # under STRATEGY.md's MUST line unless the golem repays
    assert oracle[-1] > 1.2 * min(oracle)


def test_v_recovery_crashes_as_crash_recovery_then_takes_it_all_back():
    rows, oracle, _ = _rows("v_recovery")
    _, partial, _ = _rows("crash_recovery")
    crash = [i for i, r in enumerate(rows) if r.regime == "crash"]
    assert crash == list(range(60, 68))  # the same crash rows as crash_recovery ...
    assert oracle[crash[-1]] / oracle[crash[0] - 1] < 0.7 and 1.0 < min(_idle_hf(p) for p in oracle) < 1.4
    pre_crash = max(oracle[:crash[0]])
    assert max(oracle[crash[-1]:]) > 0.99 * pre_crash  # ... then a full retracement: back to the pre-crash high
    assert partial[-1] < 0.9 * max(partial[:60])  # where crash_recovery's recovery stops short (~84 %)
    assert rows[-1].regime == "calm" and oracle[-1] > 0.98 * pre_crash
    squeezes = [i + 1 for i, m in enumerate(_moves_bps(oracle)) if m >= 300]  # STRATEGY.md's buy-back line
    assert len(squeezes) == 3 and all(rows[i].regime == "trending_up" for i in squeezes)


def test_slow_bleed_is_never_surprising_tick_by_tick_yet_crosses_the_repay_line():
    rows, oracle, pool = _rows("slow_bleed")
    assert max(abs(m) for m in _moves_bps(pool)) < PROBE.price_delta_low_bps  # price probe Low: > 0.5 %
    assert max(abs(m) for m in _moves_bps(oracle)) < PROBE.price_delta_low_bps
    hf = [_idle_hf(p) for p in oracle]
    first_under = next(i for i, h in enumerate(hf) if h < 1.6)  # STRATEGY.md: repay 25 % at HF < 1.6
    assert first_under < len(rows) - 100  # ... with room left to act on it
    assert hf[-1] < 1.3  # and would pass STRATEGY.md's MUST line if nothing acted


def test_oracle_lag_oracle_follows_the_pool_three_rows_late():
    _, oracle, pool = _rows("oracle_lag")
    moves = _moves_bps(pool)
    fall = next(i + 1 for i, m in enumerate(moves) if m <= -300)
    assert pool[fall + 3] / pool[fall - 1] < 0.9  # the pool falls > 10 % in 4 rows
    assert oracle[fall:fall + 3] == [oracle[fall - 1]] * 3  # the oracle has not moved yet ...
    assert oracle[fall + 3:fall + 6] == pool[fall:fall + 3]  # ... then answers the pool's price of 3 rows before
    deviation = max(abs(p / o - 1) * 10_000 for p, o in zip(pool, oracle))
    assert deviation > PROBE.oracle_deviation_high_bps  # the circuit breaker's halt line


def test_gas_spike_puts_a_swap_worthy_dip_inside_a_10x_spike_and_one_after():
    rows, oracle, _ = _rows("gas_spike")
    base = statistics.median(r.gas_gwei for r in rows)
    spike = [i for i, r in enumerate(rows) if r.gas_gwei >= 8 * base]
    assert 3 <= len(spike) <= 10 and spike == list(range(spike[0], spike[-1] + 1))
    assert max(r.gas_gwei for r in rows) / base >= 9.5
    dips = [i + 1 for i, m in enumerate(_moves_bps(oracle)) if m <= -300]  # STRATEGY.md: swap on <= -300 bps
    assert any(i in spike for i in dips)
    assert any(i > spike[-1] and rows[i].gas_gwei < 2 * base for i in dips)
    assert any(i < spike[0] for i in dips)


def test_whipsaw_alternates_large_moves_and_goes_nowhere():
    rows, oracle, _ = _rows("whipsaw")
    wild = [i for i, r in enumerate(rows) if r.regime == "volatile"]
    moves = _moves_bps(oracle[wild[0] - 1:wild[-1] + 1])
    assert len(moves) >= 50 and all(a * b < 0 for a, b in itertools.pairwise(moves))
    assert statistics.median(abs(m) for m in moves) >= 300
    assert abs(oracle[wild[-1]] / oracle[wild[0] - 1] - 1) < 0.10


def test_busy_day_crash_whipsaws_then_crashes():
    rows, oracle, _ = _rows("busy_day_crash")
    wild = [i for i, r in enumerate(rows) if r.regime == "volatile"]
    crash = [i for i, r in enumerate(rows) if r.regime == "crash"]
    assert len(wild) >= 100 and crash[0] > wild[-1]
    assert sum(m <= -300 for m in _moves_bps(oracle[wild[0] - 1:wild[-1] + 1])) >= 50
    assert min(_idle_hf(p) for p in oracle) < 1.3
