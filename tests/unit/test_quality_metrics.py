"""Cognitive quality on /metrics: the worker's GolemMetrics counts them from the Event Fabric's
events and reads the Grimoire's size and average quality on each tick."""

from __future__ import annotations

from golem.events.bridge import dream_events
from golem.events.models import make_event
from golem.models.golem import DreamResult
from workers.metrics import GolemMetrics

T = "2026-11-24T00:00:00+00:00"


def _tick(n: int, tier: str = "T0", **extra) -> object:
    return make_event("q", n, T, "heartbeat.tick_finished", tier=tier, regime="volatile", prediction_error=0.1,
                      threshold=0.3, equity_usd=1000.0, vitality=0.9, pool_price=2000.0, oracle_price=2001.0, **extra)


def _quality(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("golem_cognitive_quality{"):
            metric = line.split('metric="', 1)[1].split('"', 1)[0]
            out[metric] = float(line.rsplit(" ", 1)[1])
    return out


def test_quality_gauges_follow_the_events_and_the_grimoire():
    sizes, qualities = iter([3, 4]), iter([0.62, 0.7])
    m = GolemMetrics("q", grimoire_size=lambda: next(sizes), grimoire_quality=lambda: next(qualities))
    try:
        m.on_event(_tick(1))
        m.on_event(_tick(2, "T2", retrieved=2, model="claude"))
        m.on_event(make_event("q", 2, T, "grimoire.admitted", "delta", admitted=1, admitted_low=1, candidates=4))
        for e in dream_events("q", T, DreamResult(tick=2, dream_yield=0.25, threat_coverage=1.0)):
            m.on_event(e)
        text = m.exposition().decode()
        q = _quality(text)
        assert q["average_quality"] == 0.7, q  # read again on the second tick
        assert q["admission_rate"] == 0.5 and q["retrieval_hit_rate"] == 1.0 and q["decision_cache_hit_rate"] == 0.0
        assert q["dream_yield"] == 0.25 and q["threat_coverage"] == 1.0
        assert 'golem_grimoire_size{golem="q"' in text and "4.0" in text
    finally:
        m.shutdown()


def test_a_dream_without_measurements_sets_no_gauge():
    m = GolemMetrics("q")
    try:
        for e in dream_events("q", T, DreamResult(tick=3)):
            assert "dream_yield" not in e.payload
            m.on_event(e)
        assert "dream_yield" not in _quality(m.exposition().decode())
    finally:
        m.shutdown()
