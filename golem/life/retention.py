"""Retention of the data dir's per-tick files (`[retention]` in golem.toml).

A record, an outcome file or a day of trace lines older than `days` is compacted into one gzipped JSON-lines
archive per UTC day (cycles/archive/, outcomes/archive/, traces/<day>.jsonl.gz). Nothing is deleted: the cycle
index says where a record went and `golem show N` reads it back. The day is the file's modification time, so a
backtest's path time does not age its own records. See docs/operations/retention.md.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable

from golem.layout import DataLayout

ARCHIVE_DIR = "archive"


@dataclass
class RetentionReport:
    records_archived: int = 0
    outcomes_archived: int = 0
    trace_days_archived: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    archives: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d")


def _old(paths: Iterable[Path], cutoff: float) -> list[tuple[Path, float]]:
    out = []
    for p in paths:
        try:
            mtime = p.stat().st_mtime
        except FileNotFoundError:
            continue  # written over or archived meanwhile
        if mtime < cutoff:
            out.append((p, mtime))
    return sorted(out)


def _append_lines(archive: Path, lines: list[str]) -> None:
    """Append to a day's archive (gzip members concatenate: one file, read back whole), then fsync."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive, "ab") as raw:
        with gzip.GzipFile(fileobj=raw, mode="ab") as gz:
            gz.write("".join(line + "\n" for line in lines).encode())
        raw.flush()
        os.fsync(raw.fileno())


def _archive_days(data: Path, folder: Path, pattern: str, cutoff: float, report: RetentionReport,
                  line_of: Callable[[Path, Any], Any],
                  on_archived: Callable[[list[str], str], None] | None = None) -> int:
    """Files in `folder` matching `pattern` older than `cutoff` → one JSON line each (line_of(path, document))
    in their day's `folder/archive/<day>.jsonl.gz`, synced before the loose files go. Returns how many."""
    by_day: dict[str, list[Path]] = {}
    for path, mtime in _old(folder.glob(pattern), cutoff):
        by_day.setdefault(_day(mtime), []).append(path)
    for day, files in sorted(by_day.items()):
        archive = folder / ARCHIVE_DIR / f"{day}.jsonl.gz"
        lines = []
        for path in files:
            report.bytes_before += path.stat().st_size
            doc = json.loads(path.read_text(encoding="utf-8"))
            lines.append(json.dumps(line_of(path, doc), separators=(",", ":")))
        _append_lines(archive, lines)  # written and synced before any loose file is removed
        if on_archived is not None:
            on_archived([p.name for p in files], f"{ARCHIVE_DIR}/{day}.jsonl.gz")
        for path in files:
            path.unlink()
        report.archives.append(str(archive.relative_to(data)))
    return sum(len(f) for f in by_day.values())


def compact(where: DataLayout | str | Path, days: float, now: float, *, index: Any = None) -> RetentionReport:
    """Archive what is older than `days` (see the module doc). `index` (a CycleStore) learns where each
    archived record went, so it can still be read."""
    layout = DataLayout.of(where)
    data = layout.root
    cutoff = now - days * 86400.0
    report = RetentionReport()

    # decision records: one JSON line per record; outcome evidence: {"file", "outcome"} lines
    report.records_archived = _archive_days(
        data, layout.cycles, "cycle-*.json", cutoff, report,
        lambda path, doc: doc,
        on_archived=(lambda names, archive: index.mark_archived(names, archive)) if index is not None else None)
    report.outcomes_archived = _archive_days(data, layout.outcomes, "tick-*.json", cutoff, report,
                                             lambda path, doc: {"file": path.name, "outcome": doc})

    # trace days: traces/<day>.jsonl of finished days (workers.telemetry rolls them) older than `days`
    traces = layout.trace_days
    today = _day(now)
    for path, _ in _old(traces.glob("*.jsonl"), cutoff):
        if path.stem >= today:
            continue  # still being written
        archive = path.with_suffix(".jsonl.gz")
        report.bytes_before += path.stat().st_size
        _append_lines(archive, path.read_text(encoding="utf-8").splitlines())
        path.unlink()
        report.trace_days_archived += 1
        report.archives.append(str(archive.relative_to(data)))
    report.bytes_after = sum((data / a).stat().st_size for a in set(report.archives))
    return report


def read_archived(archive: Path, name: str) -> str | None:
    """The JSON text of the archived record that was `name` (cycle-NNNNNN[-label].json), or None."""
    if not archive.exists():
        return None
    stem = name.removesuffix(".json")
    tick_part, _, label = stem.removeprefix("cycle-").partition("-")
    tick = int(tick_part)
    with gzip.open(archive, "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec.get("tick") == tick and (rec.get("run_label") or "") == label:
                return line
    return None
