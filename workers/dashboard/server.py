"""The owner's live dashboard: one page on 127.0.0.1, fed by the Event Fabric and pushed by SSE.

The page, the ticks' columns for the charts, recent events, an SSE stream of new events, the golem's status and
records, steer / follow-up / control posts validated like the CLI's, Grimoire search, PLAYBOOK.md revisions and
backtest reports. Every endpoint: docs/reference/dashboard-api.md.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from datetime import datetime, timezone
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from golem.events.store import EventStore
from golem.ids import golem_workflow_id
from golem.layout import DataLayout

if TYPE_CHECKING:
    from temporalio.client import Client

    from golem.grimoire.episodes.store import EpisodeStore
    from golem.grimoire.playbook.compile import PlaybookHistory
    from golem.grimoire.semantic.store import SemanticStore

log = logging.getLogger("golem.dashboard")

STATIC = Path(__file__).parent / "static"
REPO = Path(__file__).resolve().parents[2]
UPLOT = REPO / "node_modules" / "uplot" / "dist"
DEFAULT_PORT = 8300
DEFAULT_TEMPORAL_UI = "http://127.0.0.1:8233"
HISTORY_TICKS = 10_000  # the page shows this much history (renders < 300 ms with 10,000 ticks)
STREAM_POLL_S = 0.25  # how often the SSE stream looks for new events in the store
# Columns of /api/ticks, from each heartbeat.tick_finished payload (golem.events.bridge.tick_summary).
# The tick's workflow id is golem-<id>-tick-<n> (the page builds it); `run` names a rerun/reset's record.
TICK_COLUMNS = ("tier", "regime", "phase", "prediction_error", "threshold", "pool_price", "oracle_price",
                "health_factor", "equity_usd", "vitality", "inference_today_usd", "gas_today_usd", "executed", "run")
# The golem page's API: (method, path, Dashboard method). A fleet dashboard serves the same under /golems/<id>/.
ROUTES = (("GET", "/api/ticks", "ticks"), ("GET", "/api/events", "events"), ("GET", "/api/stream", "stream"),
          ("GET", "/api/status", "status"), ("GET", "/api/record/{tick}", "record"), ("POST", "/api/steer", "steer"),
          ("POST", "/api/followup", "followup"), ("POST", "/api/control/{what}", "control"),
          ("POST", "/api/approvals/{id}/{answer}", "answer"), ("GET", "/api/grimoire/search", "grimoire_search"),
          ("GET", "/api/playbook", "playbook"), ("GET", "/api/playbook/diff", "playbook_diff"),
          ("GET", "/api/backtests", "backtest_list"), ("GET", "/api/backtests/{name}/report.png", "backtest_png"))
CONTROL_UPDATES = {"pause": "pause", "resume": "resume", "stop-entries": "stop_entries",
                   "allow-entries": "allow_entries"}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class Dashboard:
    def __init__(self, data_dir: Path, golem_id: str, *, client: Client | None = None,
                 temporal_ui: str = DEFAULT_TEMPORAL_UI, namespace: str = "default", home: Path | None = None,
                 backtests: Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.golem_id = golem_id
        self.home = Path(home) if home is not None else None  # the golem home: the embedder the Grimoire uses
        self.backtests = Path(backtests) if backtests is not None else None  # where `golem backtest` wrote reports
        # the Grimoire's stores, opened at the first search (the embedder loads once)
        self._stores: tuple[EpisodeStore, SemanticStore] | None = None
        self._stores_lock = threading.Lock()
        self.store = EventStore(self.data_dir)
        self.client = client  # a Temporal client; None: status and steering answer that Temporal is unreachable
        self.temporal_ui = temporal_ui.rstrip("/")
        self.namespace = namespace
        self.fleet_link: str | None = None  # the fleet page's address, when this page is one golem of a fleet's
        self._lock = threading.Lock()
        self._cols: dict[str, list[Any]] = {c: [] for c in ("tick", "time", *TICK_COLUMNS)}
        self._tick_seq = 0
        self._tick_body: bytes | None = None
        self._budgets: dict[str, Any] = {}
        if not (UPLOT / "uPlot.iife.min.js").exists():
            raise FileNotFoundError(f"{UPLOT}/uPlot.iife.min.js missing: run `npm ci` (uplot is pinned in package.json)")

    # ---- the app ------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self.index)
        app.router.add_static("/static/", STATIC)
        app.router.add_get("/assets/uPlot.iife.min.js", self._file(UPLOT / "uPlot.iife.min.js"))
        app.router.add_get("/assets/uPlot.min.css", self._file(UPLOT / "uPlot.min.css"))
        for method, path, name in ROUTES:
            app.router.add_route(method, path, getattr(self, name))
        return app

    def _file(self, path: Path) -> Callable[[web.Request], Awaitable[web.FileResponse]]:
        async def handler(request: web.Request) -> web.FileResponse:
            return web.FileResponse(path, headers={"Cache-Control": "max-age=86400"})

        return handler

    async def index(self, request: web.Request) -> web.Response:
        html = (STATIC / "index.html").read_text()
        config = json.dumps({"golem": self.golem_id, "temporalUi": self.temporal_ui, "namespace": self.namespace,
                             "fleet": self.fleet_link})
        return web.Response(text=html.replace("/*CONFIG*/", f"window.GOLEM = {config};"), content_type="text/html")

    def warm(self) -> None:
        self.tick_body()  # the history is read before the first page asks for it

    # ---- reads -------------------------------------------------------------------------------
    def tick_body(self) -> bytes:
        """/api/ticks: the newest HISTORY_TICKS ticks as columns, kept in memory and extended with each new
        tick (only events after the last one read are fetched), serialized once per change."""
        with self._lock:
            rows = self.store.payloads("heartbeat.tick_finished", after=self._tick_seq, limit=HISTORY_TICKS)
            if rows or self._tick_body is None:
                cols = self._cols
                for seq, tick, time, p in rows:
                    cols["tick"].append(tick)
                    cols["time"].append(int(datetime.fromisoformat(time).timestamp()))
                    for c in TICK_COLUMNS:
                        cols[c].append(p.get(c))
                    self._tick_seq = seq
                    self._budgets = {k: p.get(k) for k in ("max_daily_cost_usd", "gas_budget_usd_per_day")}
                extra = len(cols["tick"]) - HISTORY_TICKS
                if extra > 0:
                    for column in cols.values():
                        del column[:extra]
                self._tick_body = json.dumps({"columns": cols, "budgets": self._budgets, "tick_seq": self._tick_seq},
                                             separators=(",", ":")).encode()
            return self._tick_body

    async def ticks(self, request: web.Request) -> web.Response:
        body = await asyncio.to_thread(self.tick_body)
        # the page's SSE stream starts after the newest stored event, not just the newest tick
        seq = await asyncio.to_thread(self.store.last_seq)
        return web.Response(body=body[:-1] + f',"last_seq":{seq}}}'.encode(), content_type="application/json")

    async def events(self, request: web.Request) -> web.Response:
        kinds = request.query.get("kinds", "actions,alerts,interventions,control,safety").split(",")
        n = min(int(request.query.get("n", 50)), 1000)
        events = await asyncio.to_thread(self.store.read, kinds=kinds, limit=n, newest=True)
        return web.json_response([e.model_dump(mode="json") for e in events])

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """SSE: every event stored after `after` (the page's last seq, or Last-Event-ID on reconnect)."""
        after = int(request.headers.get("Last-Event-ID") or request.query.get("after") or self.store.last_seq())
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        await resp.write(b": connected\n\n")
        idle = 0.0
        try:
            while True:
                events = await asyncio.to_thread(self.store.read, after=after, limit=500)
                for e in events:
                    after = e.stored_seq()
                    await resp.write(f"id: {e.seq}\nevent: golem\ndata: {e.model_dump_json()}\n\n".encode())
                idle = 0.0 if events else idle + STREAM_POLL_S
                if idle >= 15:  # a comment now and then keeps proxies and the browser from timing out
                    await resp.write(b": keep-alive\n\n")
                    idle = 0.0
                await asyncio.sleep(STREAM_POLL_S)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp

    async def status(self, request: web.Request) -> web.Response:
        from golem.models.golem import GolemStatus

        if self.client is None:
            return web.json_response({"error": "Temporal not reachable from the dashboard"}, status=503)
        try:
            st = await self.client.get_workflow_handle(golem_workflow_id(self.golem_id)).query("status", result_type=GolemStatus)
        except Exception as err:
            return web.json_response({"error": f"status query failed: {_one_line(err)}"}, status=503)
        return web.Response(text=st.model_dump_json(), content_type="application/json")

    async def record(self, request: web.Request) -> web.Response:
        from golem.life.cycle_store import CycleStore

        try:
            tick = int(request.match_info["tick"])
            rec = await asyncio.to_thread(CycleStore(self.data_dir).load, tick, request.query.get("run"))
        except (ValueError, LookupError) as err:
            return web.json_response({"error": _one_line(err)}, status=404)
        return web.Response(text=rec.model_dump_json(indent=2), content_type="application/json")

    # ---- the Grimoire, PLAYBOOK and backtest reports (read-only) ---------------------------------
    def _search(self, query: str, k: int) -> dict[str, Any]:
        from golem.grimoire.access import latest_tick, open_stores, search

        with self._stores_lock:
            if self._stores is None:
                self._stores = open_stores(self.data_dir, self.home, on_model_switch="ignore", reading=True)
            episodes, semantic = self._stores
        res = search(episodes, semantic, query, regime="unknown", tick=latest_tick(episodes), k=k)
        return res.model_dump(mode="json")

    async def grimoire_search(self, request: web.Request) -> web.Response:
        query = request.query.get("q", "").strip()
        if not query:
            return web.json_response({"error": "type a question for the Grimoire (q is empty)"}, status=400)
        try:
            k = int(request.query.get("k", 5))
            if not 1 <= k <= 50:
                raise ValueError
        except ValueError:
            return web.json_response({"error": f"k must be a whole number from 1 to 50, not {request.query.get('k')!r}"},
                                     status=400)
        try:
            return web.json_response(await asyncio.to_thread(self._search, query, k))
        except Exception as err:  # no Grimoire yet, another embedder (a UserError): said, not a 500 page
            return web.json_response({"error": f"the Grimoire cannot be searched: {_one_line(err)}"}, status=503)

    def _playbook_history(self) -> PlaybookHistory | None:
        from golem.grimoire.playbook.compile import PlaybookHistory

        db = DataLayout(self.data_dir).heuristics
        return PlaybookHistory(db) if db.exists() else None

    async def playbook(self, request: web.Request) -> web.Response:
        def read() -> dict[str, Any]:
            path = self.data_dir / "PLAYBOOK.md"
            history = self._playbook_history()
            rows = history.log() if history is not None else []
            return {"text": path.read_text() if path.exists() else None,
                    "revisions": [r.model_dump(mode="json", exclude={"text"}) for r in reversed(rows)]}

        return web.json_response(await asyncio.to_thread(read))

    async def playbook_diff(self, request: web.Request) -> web.Response:
        history = await asyncio.to_thread(self._playbook_history)
        if history is None:
            return web.json_response({"error": "no PLAYBOOK revisions recorded yet"}, status=404)
        try:
            a, b = int(request.query["a"]), int(request.query["b"])
            text = await asyncio.to_thread(history.diff, a, b)
        except (KeyError, ValueError, LookupError) as err:
            return web.json_response({"error": f"diff needs two revision numbers a and b that exist ({_one_line(err)})"},
                                     status=400)
        return web.Response(text=text, content_type="text/plain")

    def _reports(self) -> list[dict[str, Any]]:
        if self.backtests is None or not self.backtests.is_dir():
            return []
        out: list[dict[str, Any]] = []
        for f in self.backtests.glob("*/report.json"):  # one run per folder (`--compare` writes one per variant)
            try:
                report = json.loads(f.read_text()).get("report") or {}
            except (OSError, ValueError) as err:
                out.append({"name": f.parent.name, "error": f"unreadable report.json: {_one_line(err)}",
                            "mtime": f.stat().st_mtime})
                continue
            out.append({"name": f.parent.name, "mtime": f.stat().st_mtime, "info": report.get("info"),
                        "figures": report.get("figures"), "attribution": report.get("attribution"),
                        "png": (f.parent / "report.png").exists()})
        return sorted(out, key=lambda r: -r["mtime"])

    async def backtest_list(self, request: web.Request) -> web.Response:
        return web.json_response({"folder": str(self.backtests) if self.backtests else None,
                                  "reports": await asyncio.to_thread(self._reports)})

    async def backtest_png(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if self.backtests is None or "/" in name or name.startswith("."):
            raise web.HTTPNotFound()
        path = self.backtests / name / "report.png"
        if not path.is_file():
            raise web.HTTPNotFound()
        return web.FileResponse(path)

    # ---- writes: validated like the CLI, then the signal / update -------------------------------
    async def _signal(self, request: web.Request, kind: str, field: str, default: str) -> web.Response:
        from golem.models.interventions import parse_intervention

        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.json_response({"error": "send a JSON object: {\"message\": ..., ...}"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "send a JSON object: {\"message\": ..., ...}"}, status=400)
        prefix = "steer" if kind == "steer" else "followup"
        payload = {"id": body.get("id") or f"{prefix}-{uuid.uuid4().hex[:12]}", "message": body.get("message", ""),
                   field: body.get(field) or default, "created_at": _now()}
        try:
            parse_intervention(kind, payload)  # the same validation `golem steer` and the workflow apply
        except ValueError as err:
            return web.json_response({"error": _one_line(err)}, status=400)
        if self.client is None:
            return web.json_response({"error": "Temporal not reachable from the dashboard"}, status=503)
        try:
            await self.client.get_workflow_handle(golem_workflow_id(self.golem_id)).signal(kind, payload)
        except Exception as err:
            return web.json_response({"error": f"not delivered: {_one_line(err)}"}, status=502)
        return web.json_response({"delivered": payload["id"], "kind": kind})

    async def steer(self, request: web.Request) -> web.Response:
        return await self._signal(request, "steer", "severity", "medium")

    async def followup(self, request: web.Request) -> web.Response:
        return await self._signal(request, "follow_up", "window", "next-decide")

    async def _update(self, request: web.Request, field: str,
                      call: Callable[[str], Awaitable[Any]]) -> web.Response | tuple[Any, str]:
        """The steps both owner updates share: Temporal reachable, the optional JSON body's `field`, the update run
        (`call(value)`); an error response, or (the update's result, the value)."""
        if self.client is None:
            return web.json_response({"error": "Temporal not reachable from the dashboard"}, status=503)
        try:
            body = await request.json() if request.can_read_body else {}
        except json.JSONDecodeError:
            body = {}
        value = str((body or {}).get(field, "") if isinstance(body, dict) else "")
        try:
            return await call(value), value
        except Exception as err:
            return web.json_response({"error": _one_line(_root(err))}, status=409)

    async def control(self, request: web.Request) -> web.Response:
        from golem.models.golem import ControlRequest, ControlState

        what = request.match_info["what"]
        update = CONTROL_UPDATES.get(what)
        if update is None:
            return web.json_response({"error": f"unknown control {what!r}: use {', '.join(CONTROL_UPDATES)}"},
                                     status=404)
        out = await self._update(request, "reason", lambda reason: self._handle().execute_update(
            update, ControlRequest(reason=reason or "from the dashboard", source="dashboard"), result_type=ControlState))
        if isinstance(out, web.Response):
            return out
        result, _ = out
        from golem.events.bridge import control_event

        await asyncio.to_thread(self.store.append, [control_event(self.golem_id, update, result, _now())])
        return web.Response(text=result.model_dump_json(), content_type="application/json")

    async def answer(self, request: web.Request) -> web.Response:
        """Approve or deny a privileged request: GolemWorkflow's approve / deny update, as `golem approve | deny ID`."""
        from golem.models.approvals import ApprovalAnswer, ApprovalDecision

        answer = request.match_info["answer"]
        if answer not in ("approve", "deny"):
            return web.json_response({"error": f"unknown answer {answer!r}: use approve or deny"}, status=404)
        out = await self._update(request, "note", lambda note: self._handle().execute_update(
            answer, ApprovalDecision(id=request.match_info["id"], note=note[:500], source="dashboard"),
            result_type=ApprovalAnswer))
        if isinstance(out, web.Response):
            return out
        return web.Response(text=out[0].model_dump_json(), content_type="application/json")

    def _handle(self) -> Any:
        assert self.client is not None  # _update answered 503 otherwise
        return self.client.get_workflow_handle(golem_workflow_id(self.golem_id))


def _root(err: BaseException) -> BaseException:
    while (cause := getattr(err, "cause", None)) is not None:
        err = cause
    return err


def _one_line(err: BaseException) -> str:
    text = getattr(err, "message", None) or str(err)
    return "; ".join(p.strip() for p in str(text).splitlines() if p.strip())[:300]


class Served(Protocol):
    """A dashboard start_dashboard serves: a golem's (Dashboard) or a fleet's (workers/dashboard/fleet.py)."""

    def app(self) -> web.Application: ...

    def warm(self) -> None: ...


async def start_dashboard(dashboard: Served, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> web.AppRunner:
    """Serve the dashboard on host:port (127.0.0.1 only by default); returns the runner (cleanup() stops it)."""
    await asyncio.to_thread(dashboard.warm)
    runner = web.AppRunner(dashboard.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    return runner


def bound_port(runner: web.AppRunner) -> int:
    host, port = runner.addresses[0][:2]  # a TCP site's (host, port[, ...])
    return int(port)
