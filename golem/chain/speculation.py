"""Speculative execution of read tools.

The engine learns which tool tends to follow which from the golem's own history (an EMA:
P(b|a) ← 0.9·P(b|a) + 0.1 when b follows a, ×0.99 for the other followers of a, dropped below 0.01)
and, when a tool is called, fires the likely follow-ups in parallel (p ≥ 0.7, at most 3). Only read
tools are ever run: a write-tool name in the table is skipped, because `ToolRegistry.read_tool`
returns None for it. The table is kept in SQLite under the data dir.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from web3 import Web3

from golem.chain.contracts import Deployment
from golem.chain.read_tools import ToolRegistry
from golem.storage import immediate_tx, init_db

EMA_KEEP = 0.9  # P(b|a) = P(b|a) × 0.9 + 0.1 (docs/design/tick.md#speculative-reads)
EMA_STEP = 0.1
UNSEEN_DECAY = 0.99
NOISE_FLOOR = 0.01
MIN_PROBABILITY = 0.7
MAX_SPECULATIVE = 3


def ema_update(table: dict[str, dict[str, float]], tool_a: str, tool_b: str) -> dict[str, dict[str, float]]:
    """Record that tool_b followed tool_a, on a copy of `table`. Pure."""
    out = {a: dict(bs) for a, bs in table.items()}
    entry = out.setdefault(tool_a, {})
    entry[tool_b] = entry[tool_b] * EMA_KEEP + EMA_STEP if tool_b in entry else EMA_STEP
    for name in list(entry):
        if name != tool_b:
            entry[name] *= UNSEEN_DECAY
            if entry[name] <= NOISE_FLOOR:
                del entry[name]
    return out


def predictions(table: dict[str, dict[str, float]], trigger: str, min_probability: float = MIN_PROBABILITY,
                max_speculative: int = MAX_SPECULATIVE) -> list[tuple[str, float]]:
    pairs = sorted(table.get(trigger, {}).items(), key=lambda kv: (-kv[1], kv[0]))
    return [(n, p) for n, p in pairs if p >= min_probability][:max_speculative]


_SCHEMA = """
CREATE TABLE IF NOT EXISTS co_occurrence (
    tool_a TEXT NOT NULL, tool_b TEXT NOT NULL, p REAL NOT NULL, PRIMARY KEY (tool_a, tool_b)
);
"""


class SpeculationEngine:
    def __init__(self, path: str | Path, registry: ToolRegistry | None = None, *,
                 min_probability: float = MIN_PROBABILITY, max_speculative: int = MAX_SPECULATIVE) -> None:
        if not 0 < min_probability <= 1:
            raise ValueError(f"min_probability must be in (0, 1], got {min_probability}")
        if max_speculative < 0:
            raise ValueError(f"max_speculative must be >= 0, got {max_speculative}")
        self.path = init_db(Path(path), _SCHEMA)
        self.registry = registry or ToolRegistry()
        self.min_probability = min_probability
        self.max_speculative = max_speculative

    def table(self) -> dict[str, dict[str, float]]:
        with immediate_tx(self.path) as db:
            rows = db.execute("SELECT tool_a, tool_b, p FROM co_occurrence").fetchall()
        out: dict[str, dict[str, float]] = {}
        for a, b, p in rows:
            out.setdefault(a, {})[b] = p
        return out

    def record_sequence(self, calls: list[str]) -> None:
        """Learn from one tick's tool calls, in order (each consecutive pair is one observation)."""
        if len(calls) < 2:
            return
        with immediate_tx(self.path) as db:
            table: dict[str, dict[str, float]] = {}
            for a, b, p in db.execute("SELECT tool_a, tool_b, p FROM co_occurrence").fetchall():
                table.setdefault(a, {})[b] = p
            touched = set()
            for a, b in zip(calls, calls[1:]):
                table = ema_update(table, a, b)
                touched.add(a)
            for a in touched:
                db.execute("DELETE FROM co_occurrence WHERE tool_a = ?", (a,))
                db.executemany("INSERT INTO co_occurrence VALUES (?, ?, ?)",
                               [(a, b, p) for b, p in table.get(a, {}).items()])

    def predict(self, trigger: str) -> list[tuple[str, float]]:
        """Follow-ups worth prefetching, read tools only."""
        preds = predictions(self.table(), trigger, self.min_probability, self.max_speculative * 4)
        return [(n, p) for n, p in preds if self.registry.read_tool(n) is not None][: self.max_speculative]

    def speculate(self, trigger: str, w3: Web3, deployment: Deployment, account: str,
                  pool: ThreadPoolExecutor | None = None) -> dict[str, Future[dict[str, Any]]]:
        """Fire the predicted read tools (no arguments) in parallel; the caller takes or drops the
        futures. Tools that need arguments are not speculated."""
        own = pool is None
        pool = pool or ThreadPoolExecutor(max_workers=max(1, self.max_speculative))
        futures: dict[str, Future[dict[str, Any]]] = {}
        try:
            for name, _p in self.predict(trigger):
                tool = self.registry.read_tool(name)
                if tool is None or tool.input_schema.get("required"):
                    continue
                futures[name] = pool.submit(tool, w3, deployment, account, {})
        finally:
            if own:
                pool.shutdown(wait=False)
        return futures


def take(futures: dict[str, Future[dict[str, Any]]], name: str, timeout: float = 10.0) -> Any | None:
    """A speculated result if there is one (None if it was not speculated or failed)."""
    fut = futures.get(name)
    if fut is None:
        return None
    try:
        return fut.result(timeout=timeout)
    except Exception:
        return None
