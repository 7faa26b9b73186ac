"""The soak's data-dir buckets (infra/soak.py data_sizes): the dev stack's logs count with their parts, not as the
golem's own files; the golem's worker log and traces do."""

from __future__ import annotations

from infra.soak import Sample, data_sizes


def test_dev_stack_logs_are_not_the_golems(tmp_path):
    sizes = {"temporal.sqlite": 1, "anvil-state.json": 2, "grimoire/episodes.lance/x": 3, "cycles/c.json": 4,
             "logs/worker.log": 5, "traces.jsonl": 6, "logs/anvil.log": 7, "logs/simulator.log": 8,
             "logs/temporal.log": 9, "tx_journal.sqlite": 10}
    for name, mb in sizes.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * mb * 1_000_000)
    parts = data_sizes(tmp_path)
    assert parts == {"temporal": 1 + 9, "chain": 2 + 7 + 8, "grimoire": 3, "cycles": 4, "logs": 5 + 6, "other": 10}
    assert Sample(tick=1, seconds=0.0, rss_mb=0.0, data_mb=parts).golem_data_mb == 3 + 4 + 5 + 6 + 10


def test_a_fleets_golems_count_in_their_parts(tmp_path):
    sizes = {"temporal.sqlite": 1, "fleet.sqlite": 2, "golems/a/grimoire/x": 3, "golems/b/cycles/c.json": 4,
             "golems/b/logs/worker.log": 5, "golems/a/home/golem.toml": 6}
    for name, mb in sizes.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * mb * 1_000_000)
    parts = data_sizes(tmp_path)
    assert parts == {"temporal": 1, "chain": 0, "grimoire": 3, "cycles": 4, "logs": 5, "other": 2 + 6}
