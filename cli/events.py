"""`golem events [--follow] [--kind K] [--since T] [--json]`: the Event Fabric as a stream."""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from golem.errors import UserError

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime | None = None) -> str:
    """An ISO-8601 time, or a duration back from now (30s, 10m, 2h, 1d); returned as ISO UTC."""
    m = _RELATIVE.match(text.strip())
    if m:
        delta = timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})
        return ((now or datetime.now(timezone.utc)) - delta).isoformat()
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"--since {text!r} is neither a time (2026-01-31T12:00:00+00:00) nor a duration "
                        "(30s, 10m, 2h, 1d)") from None
    return (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).astimezone(timezone.utc).isoformat()


def check_kinds(kinds: list[str]) -> list[str]:
    from golem.events.models import KINDS, Subsystem

    subsystems = {s.value for s in Subsystem}
    for k in kinds:
        if k not in KINDS and k not in subsystems:
            raise UserError(f"unknown event kind {k!r}: use a subsystem ({', '.join(sorted(subsystems))}) or a "
                            "kind such as actions.blocked (`golem events --kinds` lists them)")
    return kinds


def line(e) -> str:
    """One event as a human line: time, tick, kind, then the payload's short fields."""
    fields = " ".join(f"{k}={_short(v)}" for k, v in e.payload.items() if v not in (None, "", [], {}))
    tick = f"#{e.tick}" if e.tick is not None else "-"
    return f"{e.time[:19].replace('T', ' ')} {tick:>7} {e.kind:32} {fields}"[:400]


def _short(v) -> str:
    text = v if isinstance(v, str) else json.dumps(v, default=str, separators=(",", ":"))
    return text if len(text) <= 60 else text[:57] + "..."


def _events(args) -> int:
    from golem.events.models import KINDS
    from golem.events.store import EventStore

    if args.kinds:
        for k, what in KINDS.items():
            print(f"{k:34} {what}")
        return 0
    if args.n < 0:
        raise UserError(f"-n must be >= 0, got {args.n}")
    data = Path(args.data)
    if not data.is_dir():
        raise UserError(f"no data directory at {data}: point --data (or GOLEM_DATA) at the golem's data dir")
    kinds = check_kinds(args.kind or [])
    since = parse_since(args.since) if args.since else None
    store = EventStore(data)
    events = store.read(kinds=kinds, since=since, limit=1_000_000 if since else args.n, newest=not since)
    after = events[-1].seq if events else store.last_seq()
    show = (lambda e: print(e.model_dump_json())) if args.json else (lambda e: print(line(e)))
    for e in events:
        show(e)
    while args.follow:
        sys.stdout.flush()
        time.sleep(0.5)
        for e in store.read(after=after, kinds=kinds, since=since):
            show(e)
            after = e.seq
    return 0


def _alerts(args) -> int:
    """`golem alerts`: the heartbeat-monitor's ProbeAlerts and the golem's own alerts (the alerts subsystem)."""
    args.kind, args.kinds = ["alerts"], False
    return _events(args)


def register(command) -> None:
    s = command("events", "the Event Fabric: what the golem did, as typed events (--follow streams)")
    s.add_argument("--follow", "-f", action="store_true", help="keep printing new events as they are stored")
    s.add_argument("--kind", action="append", help="a kind (actions.blocked) or a subsystem (actions); repeatable")
    s.add_argument("--since", help="from this time (ISO-8601) or this long ago (30s, 10m, 2h, 1d)")
    s.add_argument("-n", type=int, default=50, help="how many (the newest; all since --since when given)")
    s.add_argument("--json", action="store_true", help="one GolemEvent JSON object per line")
    s.add_argument("--kinds", action="store_true", help="list the event kinds and exit")
    s.set_defaults(fn=_events)
    s = command("alerts", "alerts: the heartbeat-monitor's batched ProbeAlerts and the golem's own (--follow streams)")
    s.add_argument("--follow", "-f", action="store_true")
    s.add_argument("--since", help="from this time (ISO-8601) or this long ago (30s, 10m, 2h, 1d)")
    s.add_argument("-n", type=int, default=50)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=_alerts)
