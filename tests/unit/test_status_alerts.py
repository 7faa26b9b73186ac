"""`golem status` names the heartbeat-monitor's recent alerts (a stalled golem says so where the owner looks)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from cli.status import alerts_line
from golem.events.models import make_event
from golem.events.store import EventStore

NOW = datetime(2026, 11, 27, 7, 40, tzinfo=timezone.utc)


def alert(minutes_ago: float, vital: str, severity: str, value: float, threshold: float):
    at = (NOW - timedelta(minutes=minutes_ago)).isoformat()
    return make_event("g", 7, at, "alerts.probe", f"b{minutes_ago}:{vital}", batch_id=f"b{minutes_ago}", vital=vital,
                      severity=severity, value=value, threshold=threshold,
                      detail=f"no tick for {value}s" if vital == "tick_stalled" else "")


def test_the_worst_recent_alert_is_named_and_old_ones_are_not(tmp_path):
    assert alerts_line(tmp_path, NOW) is None  # no event store: a golem that never ran
    store = EventStore(tmp_path)
    store.append([alert(30, "errors", "high", 3, 1)])  # older than the window
    assert alerts_line(tmp_path, NOW) is None
    store.append([alert(4, "tick_stalled", "high", 170.0, 10.0), alert(2, "playbook_stale", "low", 2, 1)])
    line = alerts_line(tmp_path, NOW)
    assert line is not None and line.startswith("  alerts:     2 in the last 10 min; worst tick_stalled 170.0")
    assert "(threshold 10.0, high) at 07:36:00 UTC (no tick for 170.0s) — `golem alerts`" in line


def test_status_prints_the_alerts_line(tmp_path, monkeypatch, capsys):
    """The wire: `golem status` (its Temporal query answered here) prints the line under the chain's."""
    import asyncio
    from argparse import Namespace

    import cli.status as status

    EventStore(tmp_path).append([alert(1, "tick_stalled", "high", 170.0, 10.0)])
    monkeypatch.setattr(status, "datetime", type("D", (), {"now": staticmethod(lambda tz=None: NOW)}))

    class Handle:
        pass

    class Client:
        def get_workflow_handle(self, wid):
            return Handle()

    async def client(args):
        return Client()

    from golem.cognition.fold import new_golem_state
    from golem.models.config import GolemConfig
    from golem.usecases.status import golem_status

    cfg = GolemConfig.model_validate({"golem": {"id": "g"}})

    async def query(args, cfg_, handle, name, cls):  # the workflow's answer, built as GolemWorkflow builds it
        return golem_status(new_golem_state(cfg), cfg, activity="waiting", tick_workflow_id=None, run_ticks=1,
                            config_version="abc")

    monkeypatch.setattr(status, "client", client)
    monkeypatch.setattr(status, "query_golem", query)
    monkeypatch.setattr(status, "golem_config", lambda args: cfg)
    asyncio.run(status._status(Namespace(data=str(tmp_path), json=False)))
    out = capsys.readouterr().out
    assert "  alerts:     1 in the last 10 min; worst tick_stalled 170.0" in out
