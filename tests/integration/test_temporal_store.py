"""The dev server's SQLite store as `golem run` starts it: the visibility indexes no
Golem query uses are dropped before any workflow exists, stay dropped across restarts, and every list query the
owner uses still answers — a query on a dropped column too, by a scan."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.worker import Worker

from bench.floor import FloorWorkflow, noop
from infra.anvil import free_port
from infra.temporal import KEEP_VISIBILITY_INDEXES, TemporalDevServer, prune_visibility_indexes
from workers.client import connect


def _indexes(db: Path) -> set[str]:
    con = sqlite3.connect(db)
    try:
        return {n for (n,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility' "
            "AND sql IS NOT NULL")}
    finally:
        con.close()


async def _run_and_query(address: str) -> None:
    client = await connect(address)
    queue = f"store-{uuid.uuid4().hex[:6]}"
    attrs = TypedSearchAttributes([SearchAttributePair(SearchAttributeKey.for_keyword("GolemId"), "g1"),
                                   SearchAttributePair(SearchAttributeKey.for_keyword("Tier"), "T0"),
                                   SearchAttributePair(SearchAttributeKey.for_int("Tick"), 7)])
    async with Worker(client, task_queue=queue, workflows=[FloorWorkflow], activities=[noop]):
        assert await client.execute_workflow(FloorWorkflow.run, 3, id=f"golem-g1-tick-7-{queue}", task_queue=queue,
                                             search_attributes=attrs) == 3
    queries = [
        'GolemId = "g1" AND Tier = "T0" AND Tick = 7',  # the README's and the UI's filters (kept indexes)
        'WorkflowType = "FloorWorkflow" AND ExecutionStatus = "Completed"',
        f'TaskQueue = "{queue}"',
        "HistoryLength > 3",  # a dropped index: answered by a scan
    ]
    for q in queries:
        for _ in range(50):  # visibility is written just after the workflow closes
            found = [w.id async for w in client.list_workflows(q)]
            if f"golem-g1-tick-7-{queue}" in found:
                break
            await asyncio.sleep(0.1)
        assert f"golem-g1-tick-7-{queue}" in found, q
        assert all(f.startswith("golem-g1-tick-7-") for f in found), (q, found)


def test_new_store_has_only_the_indexes_golem_uses_and_every_query_answers(tmp_path):
    db = tmp_path / "temporal.sqlite"
    server = TemporalDevServer(db, port=free_port(), ui_port=free_port(), headless=True)
    server.start()
    try:
        kept = _indexes(db)
        assert kept <= KEEP_VISIBILITY_INDEXES and {"default_idx", "by_keyword_01", "by_int_01"} <= kept
        asyncio.run(_run_and_query(server.address))
    finally:
        server.stop()
    # A restart leaves the file as it is, and finds the workflow again.
    server = TemporalDevServer(db, port=free_port(), ui_port=free_port(), headless=True)
    server.start()
    try:
        assert _indexes(db) == kept
        asyncio.run(_run_and_query(server.address))
    finally:
        server.stop()


def test_a_store_from_before_is_pruned_when_the_server_starts(tmp_path):
    """A temporal.sqlite written before the pruning (all 57 indexes) loses the unused ones at the next start."""
    db = tmp_path / "temporal.sqlite"
    server = TemporalDevServer(db, port=free_port(), ui_port=free_port(), headless=True)
    server._launch(60)  # the server alone, as before: its full schema
    server.stop()
    full = _indexes(db)
    assert len(full) > 50
    dropped = prune_visibility_indexes(db)
    assert set(dropped) == full - KEEP_VISIBILITY_INDEXES and len(dropped) >= 30
    assert prune_visibility_indexes(db) == []  # idempotent
