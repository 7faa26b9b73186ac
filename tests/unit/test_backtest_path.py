"""The market-path CSV: every refusal names its line and column; round trips; seeded scenarios."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from golem.backtest.path import PATH_EPOCH, PathError, load_path, parse_path, write_path_csv
from golem.backtest.scenarios import SHIPPED, export_rows, shipped_rows

HEADER = "tick,pool_price,oracle_price,gas_gwei,volume_usd"
SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


@pytest.mark.parametrize("text, where", [
    ("tick,pool_price,gas_gwei,volume_usd\n0,1,1,1\n", "line 1: missing column oracle_price"),
    (f"{HEADER}\n0,2000,2000,1,1\n1,2000,abc,1,1\n", "line 3, column oracle_price"),
    (f"{HEADER}\n0,2000,2000,1,1\n1,2000,nan,1,1\n", "line 3, column oracle_price"),
    (f"{HEADER}\n0,2000,2000,1,1\n0,2000,2000,1,1\n", "line 3, column tick"),
    (f"{HEADER}\n0,0,2000,1,1\n", "line 2, column pool_price"),
    (f"{HEADER}\n0,2000,-1,1,1\n", "line 2, column oracle_price"),
    (f"{HEADER}\n0,2000,2000,-1,1\n", "line 2, column gas_gwei"),
    (f"{HEADER}\n0,2000,2000,1,-5\n", "line 2, column volume_usd"),
    (f"{HEADER},timestamp\n0,2000,2000,1,1,100\n1,2000,2000,1,1,100\n", "line 3, column timestamp"),
    (f"{HEADER},regime\n0,2000,2000,1,1,sideways\n", "line 2, column regime"),
    (f"{HEADER}\n0,2000,2000,1\n", "line 2: 4 fields"),
    (f"{HEADER}\n", "no rows"),
    ("", "empty file"),
])
def test_refusals_name_line_and_column(text, where):
    with pytest.raises(PathError) as err:
        parse_path(text, "p.csv")
    assert where in str(err.value)


def test_defaults_extras_and_round_trip():
    rows = parse_path(f"{HEADER},note,regime\n3,2000,1990,1.5,100,x,Calm\n7,1900,1990,1.5,0,y,\n", "p.csv")
    assert [r.timestamp for r in rows] == [PATH_EPOCH, PATH_EPOCH + 60]
    assert rows[0].regime == "calm" and rows[1].regime is None
    buf = io.StringIO()
    write_path_csv(rows, buf)
    assert parse_path(buf.getvalue()) == rows


def test_missing_file_is_a_path_error(tmp_path):
    with pytest.raises(PathError, match="not found"):
        load_path(tmp_path / "nope.csv")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789.,-e\nabx tickpoolrace_gswvmu")), max_size=200))
def test_the_parser_only_ever_raises_path_error(text):
    try:
        parse_path(HEADER + "\n" + text)
    except PathError:
        pass


def test_export_is_seeded_and_labelled():
    a, b, c = export_rows("crash", 40, 1), export_rows("crash", 40, 1), export_rows("crash", 40, 2)
    assert a == b and a != c
    assert {r.regime for r in a} == {"calm", "crash"}
    assert [r.regime for r in a].count("crash") == 6
    from golem.world.simulator import oracle_path
    assert [r.oracle_price for r in a] == pytest.approx(oracle_path("crash", 2000.0, 40, seed=1))


@pytest.mark.parametrize("name", list(SHIPPED))
def test_shipped_csvs_match_the_generator(name):
    rows = load_path(SCENARIOS / f"{name}.csv")
    assert all(r.regime for r in rows)
    assert rows == parse_path(_csv(shipped_rows(name)))


def _csv(rows) -> str:
    buf = io.StringIO()
    write_path_csv(rows, buf)
    return buf.getvalue()
