"""The market-path CSV a backtest replays: read, validate (every refusal names its line and column), write.

    tick,pool_price,oracle_price,gas_gwei,volume_usd[,timestamp][,regime]

One row per tick; `timestamp` is unix seconds (default: PATH_EPOCH + 60 s per row); `regime` is an optional
label from PATH_REGIMES; other columns are ignored. A bad file is refused before anything starts.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from golem.backtest.models import DEFAULT_ROW_SECONDS, PATH_REGIMES, PathRow

REQUIRED = ("tick", "pool_price", "oracle_price", "gas_gwei", "volume_usd")
OPTIONAL = ("timestamp", "regime")
PATH_EPOCH = 1_767_225_600  # 2026-01-01T00:00:00Z: paths without timestamps start here, so runs repeat exactly
COLUMNS = ("tick", "timestamp", "pool_price", "oracle_price", "gas_gwei", "volume_usd", "regime")


class PathError(ValueError):
    """A market path that cannot be replayed; the message names the file, line and column and the fix."""


def _number(source: str, line: int, col: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise PathError(f"{source} line {line}, column {col}: {text!r} is not a number — write a decimal number") from None
    if not math.isfinite(v):
        raise PathError(f"{source} line {line}, column {col}: {text!r} is not a finite number — write a decimal number")
    return v


def parse_path(text: str, source: str = "<path>") -> list[PathRow]:
    """The rows of a market-path CSV, or a PathError naming the first bad line and column (line 1 = the header)."""
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff")))  # a spreadsheet's UTF-8 BOM is not part of `tick`
    try:
        header = next(reader)
    except StopIteration:
        raise PathError(f"{source}: empty file — the first line must be the header {','.join(REQUIRED)}") from None
    except csv.Error as err:
        raise PathError(f"{source} line 1: not CSV ({err})") from None
    names = [h.strip().lower() for h in header]
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise PathError(f"{source} line 1: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} — "
                        f"the header needs {','.join(REQUIRED)} (timestamp and regime are optional)")
    dupes = sorted({n for n in names if names.count(n) > 1 and n in REQUIRED + OPTIONAL})
    if dupes:
        raise PathError(f"{source} line 1: column {', '.join(dupes)} appears twice — keep one")
    idx = {n: names.index(n) for n in REQUIRED + OPTIONAL if n in names}
    rows: list[PathRow] = []
    prev_tick: float | None = None
    prev_ts: int | None = None
    line = 1
    try:
        for fields in reader:
            line = reader.line_num
            if not fields or all(not f.strip() for f in fields):
                continue
            if len(fields) != len(names):
                raise PathError(f"{source} line {line}: {len(fields)} fields, the header has {len(names)} — "
                                "one value per column")
            val = {n: fields[i].strip() for n, i in idx.items()}
            num = {c: _number(source, line, c, val[c]) for c in REQUIRED}
            tick = num["tick"]
            if tick != int(tick):
                raise PathError(f"{source} line {line}, column tick: {val['tick']!r} is not a whole number — "
                                "number the rows 0, 1, 2, ...")
            if prev_tick is not None and tick <= prev_tick:
                raise PathError(f"{source} line {line}, column tick: {int(tick)} does not increase "
                                f"(previous {int(prev_tick)}) — ticks must be strictly increasing")
            for c in ("pool_price", "oracle_price"):
                if num[c] <= 0:
                    raise PathError(f"{source} line {line}, column {c}: {val[c]} — a price must be > 0")
            for c in ("gas_gwei", "volume_usd"):
                if num[c] < 0:
                    raise PathError(f"{source} line {line}, column {c}: {val[c]} — must be >= 0")
            if "timestamp" in idx:
                t = _number(source, line, "timestamp", val["timestamp"])
                if t != int(t) or t < 0:
                    raise PathError(f"{source} line {line}, column timestamp: {val['timestamp']!r} — "
                                    "write unix seconds as a whole number")
                ts = int(t)
                if prev_ts is not None and ts <= prev_ts:
                    raise PathError(f"{source} line {line}, column timestamp: {ts} does not increase "
                                    f"(previous {prev_ts}) — timestamps must be strictly increasing")
            else:
                ts = PATH_EPOCH + DEFAULT_ROW_SECONDS * len(rows)
            regime = None
            if "regime" in idx and val["regime"]:
                regime = val["regime"].lower()
                if regime not in PATH_REGIMES:
                    raise PathError(f"{source} line {line}, column regime: {val['regime']!r} is not a regime — "
                                    f"use one of {', '.join(PATH_REGIMES)} or leave it blank")
            rows.append(PathRow(tick=int(tick), timestamp=ts, pool_price=num["pool_price"],
                                oracle_price=num["oracle_price"], gas_gwei=num["gas_gwei"],
                                volume_usd=num["volume_usd"], regime=regime))
            prev_tick, prev_ts = tick, ts
    except csv.Error as err:
        raise PathError(f"{source} line {line + 1}: not CSV ({err})") from None
    if not rows:
        raise PathError(f"{source}: no rows after the header — a path needs at least one row")
    return rows


def load_path(path: str | Path) -> list[PathRow]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PathError(f"{p}: not found — give the path of a CSV market path") from None
    except (OSError, UnicodeDecodeError) as err:
        raise PathError(f"{p}: cannot be read as UTF-8 text ({err})") from None
    return parse_path(text, source=p.name)


def _fixed(x: float, places: int) -> str:
    """`places` decimals when they hold the value exactly (the shipped files' look), else the shortest exact form."""
    text = f"{x:.{places}f}"
    return text if float(text) == x else repr(x)


def write_path_csv(rows: Iterable[PathRow], stream: TextIO) -> None:
    """The rows as CSV with every column (timestamp and regime included); parse_path reads back the same rows."""
    w = csv.writer(stream, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([r.tick, r.timestamp, _fixed(r.pool_price, 6), _fixed(r.oracle_price, 6), _fixed(r.gas_gwei, 4),
                    _fixed(r.volume_usd, 2), r.regime or ""])
