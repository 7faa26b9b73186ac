"""The external metric trend (30-day Sharpe, drawdown, PnL; the alarm after 14 declining days), from the ticks'
equity, and its gauges on /metrics."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from golem.events.bridge import trend_events
from golem.events.models import make_event
from golem.events.quality import external_trend
from workers.metrics import GolemMetrics

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _points(equity_by_day: list[float], per_day: int = 4) -> list[tuple[str, float]]:
    out = []
    for d, e in enumerate(equity_by_day):
        for i in range(per_day):
            out.append(((T0 + timedelta(days=d, hours=6 * i)).isoformat(), e + i))  # a small intraday rise
    return out


def _now(days: float) -> str:
    return (T0 + timedelta(days=days)).isoformat()


def test_figures_over_the_window_and_only_it():
    pts = _points([1000.0, 1100.0, 900.0, 1000.0])
    t = external_trend(pts, _now(4))
    assert t is not None and t.points == 16
    assert t.pnl_usd == pytest.approx(1003.0 - 1000.0)
    assert t.max_drawdown == pytest.approx((1103.0 - 900.0) / 1103.0, rel=1e-5)
    assert t.sharpe is not None
    # 30 days later the old points have left the window: fewer than two left, no figures
    assert external_trend(pts, _now(4 + 30 + 1)) is None


def test_declining_days_count_and_the_14_day_alarm():
    rising = external_trend(_points([1000.0 + 10 * d for d in range(20)]), _now(20))
    assert rising is not None and rising.declining_days == 0 and not rising.alarm
    # a golem that peaked on day 5 and lost money every day since: the 30-day PnL falls each day
    path = [1000.0 + 50 * d for d in range(6)] + [1250.0 - 30 * d for d in range(1, 20)]
    falling = external_trend(_points(path), _now(len(path)))
    assert falling is not None and falling.declining_days >= 14 and falling.alarm
    events = trend_events("g", 500, _now(len(path)), falling)
    assert [e.kind for e in events] == ["quality.external_trend", "alerts.raised"]
    assert "declined" in events[1].payload["detail"]
    assert [e.kind for e in trend_events("g", 500, _now(20), rising)] == ["quality.external_trend"]


def test_the_trend_reaches_the_metrics_endpoint():
    m = GolemMetrics("q")
    t = external_trend(_points([1000.0, 1010.0, 990.0]), _now(3))
    assert t is not None
    m.on_event(make_event("q", 50, _now(3), "quality.external_trend", "delta", **t.model_dump()))
    text = m.exposition().decode()
    values = {line.split('metric="', 1)[1].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
              for line in text.splitlines() if line.startswith("golem_external_trend{")}
    assert values["pnl_usd"] == t.pnl_usd and values["max_drawdown"] == t.max_drawdown
    assert values["declining_days"] == t.declining_days and values["sharpe"] == t.sharpe


async def test_reflection_consistency_rewords_the_llm_reflections_of_the_week_through_the_sdk():
    """Weekly: each LLM-worded Reflexion of the last 7 days is worded again by the model (the real anthropic
    SDK at its HTTP boundary) from the same numbers; the two wordings are compared by cosine, the shared numbers cut."""
    from golem.events.quality import CONSISTENCY_ALARM, consistency_due, reflection_consistency
    from golem.grimoire.store.embeddings import default_embedder
    from golem.learning.reflexion_llm import worded
    from golem.learning.expectation import expect
    from golem.learning.reflexion import reflect_on
    from golem.models.record import OutcomeRecord
    from tests.unit.inference_fakes import FakeMessagesAPI, message, router, tool_use
    from tests.unit.test_learning import REPAY, _record

    first = "Repaying early in a volatile market bought safety cheaply."
    recs = []
    api = FakeMessagesAPI(*[message([tool_use("reflect", {"insight": first})], model="claude-haiku-4-5")
                            for _ in range(2)])
    rt = router(api)
    for tick in (5, 6):
        rec = _record(OutcomeRecord(verified=True, pnl_impact=-0.4, health_factor_before=1.5, health_factor_after=1.95),
                      tick=tick)
        r = reflect_on(rec, expect(REPAY, rec.observation), expect(REPAY, rec.observation, scale=0.5))
        r, _ = await worded(r, rec, router=rt, regime_changed=False, daily_spend=0.0)
        recs.append(rec.model_copy(update={"reflexion": r}))
    offline = recs[0].model_copy(update={"tick": 4, "reflexion": recs[0].reflexion.model_copy(
        update={"model": "offline", "insight": "numbers only"})})
    now = "2026-01-03T00:00:00+00:00"  # the records are from 2026-01-01
    emb = default_embedder()
    # the model words tick 6 the same way again, and tick 5 about something else entirely
    api2 = FakeMessagesAPI(message([tool_use("reflect", {"insight": first})], model="claude-haiku-4-5"),
                           message([tool_use("reflect", {"insight": "Gas prices on Tuesdays are pleasant."})],
                                   model="claude-haiku-4-5"))
    rc = await reflection_consistency([offline, *recs], now, router=router(api2), embed=emb.embed, daily_spend=0.0)
    assert rc.sampled == [6, 5] and len(api2.requests) == 2  # newest first; the offline one is not reworded
    assert rc.cosines[0] > 0.99 > rc.cosines[1]
    assert rc.mean == round(sum(rc.cosines) / 2, 6) and rc.cost_usd > 0
    assert rc.alarm == (rc.mean < CONSISTENCY_ALARM)
    # offline: nothing to word again, nothing measured, and it says why
    none = await reflection_consistency(recs, now, router=None, embed=emb.embed, daily_spend=0.0)
    assert none.mean is None and none.sampled == [] and "no deliberator" in none.reason
    old = await reflection_consistency(recs, "2026-02-01T00:00:00+00:00", router=router(api2), embed=emb.embed,
                                       daily_spend=0.0)
    assert old.mean is None and "last 7 days" in old.reason
    assert consistency_due(None, now) and not consistency_due("2026-01-01T00:00:00+00:00", now)
    assert consistency_due("2026-01-01T00:00:00+00:00", "2026-01-08T00:00:00+00:00")


def test_heuristic_survival_is_measured_from_the_revisions_and_alerts_outside_the_bounds():
    from golem.events.bridge import survival_events
    from golem.grimoire.playbook.survival import survival

    # h1 enters at 10 and stays; h2 enters at 10 and is gone by 60; h3 enters at 150 (not judged at tick 200)
    revs = [(10, {"h1", "h2"}), (60, {"h1"}), (150, {"h1", "h3"})]
    fig = survival(revs, 200)
    assert fig == {"new": 3, "judged": 2, "survived": 1, "rate": 0.5}
    assert [e.kind for e in survival_events("g", 200, _now(1), fig)] == ["quality.heuristic_survival"]  # 2 judged
    many = {"new": 6, "judged": 6, "survived": 6, "rate": 1.0}  # all of them survive: the > 90 % alarm
    events = survival_events("g", 200, _now(1), many)
    assert [e.kind for e in events] == ["quality.heuristic_survival", "alerts.raised"]
    assert "6 of 6" in events[1].payload["detail"]
    m = GolemMetrics("q")
    m.on_event(events[0])
    line = next(x for x in m.exposition().decode().splitlines() if 'metric="heuristic_survival"' in x)
    assert line.startswith("golem_cognitive_quality{") and line.endswith(" 1.0")
