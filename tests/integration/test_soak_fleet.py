"""The soak's fleet mode, briefly (`python -m infra.soak --golems N` is the long one): golems in one host worker on
their own dev server, Anvil and simulator; every golem's ticks are counted, none lost or doubled, and the worker's
RSS is sampled on the golems' tick axis so the per-golem growth is computed (infra/soak.py)."""

from __future__ import annotations

import pytest

from infra.soak import SoakOptions, soak

pytestmark = [pytest.mark.integration]


async def test_fleet_soak_counts_every_golems_ticks(tmp_path):
    opts = SoakOptions(ticks=10, golems=2, sample_every=3, warmup_ticks=3, inspect_ticks=2, max_rss_growth_mb=0,
                       max_data_growth_mb=0, max_rss_per_golem_mb=0, timeout_seconds=420)
    report = await soak(opts, tmp_path)
    print(report.summary())
    assert not report.problems, report.summary()
    assert report.golems == 2 and len(report.ticks_by_golem) == 2
    assert all(n >= 10 for n in report.ticks_by_golem.values()), report.ticks_by_golem
    assert not report.lost_ticks and not report.doubled_ticks
    assert sum(report.tiers.values()) == sum(report.ticks_by_golem.values()) - report.failed_ticks
    assert report.rss_growth_mb_per_1k_per_golem is not None and len(report.samples) >= 2
    assert report.samples[-1].data_mb["cycles"] + report.samples[-1].data_mb["grimoire"] > 0  # golems/<id>/ counted
