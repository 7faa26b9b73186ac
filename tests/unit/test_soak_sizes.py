"""The soak's data-dir buckets (infra/soak.py data_sizes): the dev stack's logs count with their parts, not as the
golem's own files; the golem's worker log and traces do. And the fleet figure: RSS over all golems' ticks."""

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


def test_the_fleet_figure_is_the_slope_over_all_golems_ticks():
    """Four golems, one at half the others' pace: the worker's RSS grows 0.02 MB per tick of any golem (plus noise),
    i.e. 20 MB per golem per 1,000 ticks. The least-squares slope over all golems' ticks says so; the endpoints over
    the slowest golem's ticks divided by four said 38."""
    from infra.soak import SoakOptions, SoakReport, judge

    samples = []
    for k in range(12):
        slow, others = 60 + 5 * k, 120 + 10 * k  # the slowest golem, and each of the other three
        all_ticks = slow + 3 * others
        samples.append(Sample(tick=slow, seconds=float(k), rss_mb=400.0 + 0.02 * all_ticks + (0.3 if k % 2 else -0.3),
                              data_mb={"temporal": 0.0}, all_ticks=all_ticks))
    report = SoakReport(golems=4, samples=samples)
    judge(report, SoakOptions(golems=4, warmup_ticks=60, max_rss_per_golem_mb=25.0, ticks=10))
    assert report.rss_growth_mb_per_1k_per_golem is not None
    assert abs(report.rss_growth_mb_per_1k_per_golem - 20.0) < 1.0, report.rss_growth_mb_per_1k_per_golem
    assert not [p for p in report.problems if "per golem" in p]  # within 25


def test_the_later_half_shows_growth_that_levels_off():
    """Two golems; the worker's RSS climbs 60 MB over the first 400 of all their ticks (caches filling) and then 0.005
    MB a tick: the whole span's slope mixes the two, the later half's is the 5 MB per golem per 1,000 ticks left."""
    from infra.soak import SoakOptions, SoakReport, judge

    samples = []
    for k in range(21):
        all_ticks = 50 * k + 40
        rss = 400.0 + (0.15 * all_ticks if all_ticks < 400 else 60.0 + 0.005 * (all_ticks - 400))
        samples.append(Sample(tick=all_ticks // 2, seconds=float(k), rss_mb=rss, data_mb={"temporal": 0.0},
                              all_ticks=all_ticks))
    report = SoakReport(golems=2, samples=samples)
    judge(report, SoakOptions(golems=2, warmup_ticks=20, ticks=10))
    assert report.rss_growth_mb_per_1k_per_golem is not None and report.rss_late_mb_per_1k_per_golem is not None
    assert report.rss_growth_mb_per_1k_per_golem > 40.0, report.rss_growth_mb_per_1k_per_golem
    assert abs(report.rss_late_mb_per_1k_per_golem - 5.0) < 0.5, report.rss_late_mb_per_1k_per_golem
    assert "(later half 5.0)" in report.summary()
