"""Two compactions of one LanceDB table at once preempt each other ("Retryable commit conflict"): a store's own upkeep
after its writes and the delta cycle's upkeep, on two threads of one worker, hit it. golem.grimoire.store.lance's
optimize takes the table's lock, so they run one after the other."""

from __future__ import annotations

import threading
from datetime import timedelta

import lancedb
import pyarrow as pa

from golem.grimoire.store.lance import VersionRetention, optimize, upkeep_lock


def _connect(path: object) -> lancedb.DBConnection:
    return lancedb.connect(str(path), read_consistency_interval=timedelta(0))  # as the stores connect: always current


def test_two_upkeeps_of_one_table_at_once_both_succeed(tmp_path):
    retention = VersionRetention(every_writes=0)
    for trial in range(3):  # without the lock, 5 of 5 such pairs conflicted here
        path = tmp_path / f"t{trial}"
        table = _connect(path).create_table("x", pa.table({"id": ["a0"], "v": [0.0]}))
        for i in range(1, 60):  # 60 small fragments: work for both compactions
            table.add(pa.table({"id": [f"a{i}"], "v": [float(i)]}))
        other = _connect(path).open_table("x")  # another handle on it
        errors: list[BaseException] = []
        start = threading.Barrier(2)

        def upkeep(t: object) -> None:
            start.wait()
            try:
                optimize(t, retention)
            except Exception as err:  # noqa: BLE001 — collected and asserted below
                errors.append(err)

        threads = [threading.Thread(target=upkeep, args=(t,)) for t in (table, other)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, errors
        assert table.count_rows() == 60 and len(table.to_arrow()["id"].unique()) == 60


def test_one_lock_per_table(tmp_path):
    a = lancedb.connect(str(tmp_path)).create_table("a", pa.table({"v": [1]}))
    b = lancedb.connect(str(tmp_path)).create_table("b", pa.table({"v": [1]}))
    same = lancedb.connect(str(tmp_path)).open_table("a")
    assert upkeep_lock(a) is upkeep_lock(same)  # two handles of one table: one lock
    assert upkeep_lock(a) is not upkeep_lock(b)  # other tables (other golems') compact in parallel
