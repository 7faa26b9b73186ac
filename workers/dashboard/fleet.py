"""The dashboard of a fleet's data dir: the fleet page at / (one row per golem, the rows of `golem list`) and each
placed golem's own page under /golems/<id>/, the same page and API as a lone golem's (docs/how-to/fleet.md).
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from golem.fleet import FleetRegistry
from workers.dashboard.server import DEFAULT_TEMPORAL_UI, ROUTES, STATIC, UPLOT, Dashboard, _one_line

if TYPE_CHECKING:
    from temporalio.client import Client


class FleetDashboard:
    """The fleet page, and one Dashboard per placed golem, made at its page's first request."""

    def __init__(self, data: Path, *, client: Client | None = None, temporal_ui: str = DEFAULT_TEMPORAL_UI,
                 namespace: str = "default", backtests: Path | None = None) -> None:
        self.registry = FleetRegistry(data)
        self.client, self.temporal_ui, self.namespace, self.backtests = client, temporal_ui, namespace, backtests
        self._boards: dict[str, Dashboard] = {}
        self._lock = threading.Lock()
        self._reading: asyncio.Future[list[dict[str, Any]]] | None = None  # the fleet read in flight (api/fleet)

    def board(self, golem_id: str) -> Dashboard:
        """The golem's page; a golem not placed in this data dir is a 404 naming the fleet's golems."""
        with self._lock:
            if golem_id in self._boards:
                return self._boards[golem_id]
        placed = self.registry.get(golem_id) if self.registry.path.exists() else None
        if placed is None:
            here = ", ".join(p.golem_id for p in self.registry.all()) if self.registry.path.exists() else "none"
            raise web.HTTPNotFound(text=json.dumps({"error": f"golem {golem_id} is not placed in {self.registry.root} "
                                                             f"(placed here: {here})"}),
                                   content_type="application/json")
        board = Dashboard(self.registry.layout(golem_id).root, golem_id, client=self.client,
                          temporal_ui=self.temporal_ui, namespace=self.namespace,
                          home=self.registry.home(golem_id), backtests=self.backtests)
        board.fleet_link = "../../"
        with self._lock:
            return self._boards.setdefault(golem_id, board)

    def warm(self) -> None:
        """Nothing to read ahead: each golem's page reads its history at its first request."""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self.index)
        app.router.add_get("/api/fleet", self.rows)
        app.router.add_static("/static/", STATIC)
        for name in ("uPlot.iife.min.js", "uPlot.min.css"):
            app.router.add_get(f"/assets/{name}", self._asset(UPLOT / name))
        app.router.add_get("/golems/{gid}", self.slash)
        app.router.add_get("/golems/{gid}/", self._routed("index"))
        for method, path, name in ROUTES:
            app.router.add_route(method, "/golems/{gid}" + path, self._routed(name))
        return app

    @staticmethod
    def _asset(path: Path) -> Any:
        async def handler(request: web.Request) -> web.FileResponse:
            return web.FileResponse(path, headers={"Cache-Control": "max-age=86400"})

        return handler

    def _routed(self, name: str) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            board = self.board(request.match_info["gid"])
            return await getattr(board, name)(request)  # type: ignore[no-any-return]

        return handler

    async def slash(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(f"/golems/{request.match_info['gid']}/")  # the page's API paths are relative to it

    async def index(self, request: web.Request) -> web.Response:
        html = (STATIC / "fleet.html").read_text()
        config = json.dumps({"data": str(self.registry.root), "temporalUi": self.temporal_ui,
                             "namespace": self.namespace})
        return web.Response(text=html.replace("/*CONFIG*/", f"window.FLEET = {config};"), content_type="text/html")

    async def rows(self, request: web.Request) -> web.Response:
        """/api/fleet: `golem list`'s rows; without Temporal the placements alone, said as such."""
        from workers.fleet_view import COLUMNS, fleet_rows

        if self.client is None:
            placed = self.registry.all() if self.registry.path.exists() else []
            return web.json_response({"columns": COLUMNS, "error": "Temporal not reachable from the dashboard: "
                                      "placements only", "rows": [
                {"id": p.golem_id, "host": p.host, "state": p.status, "local": p.status == "placed"} for p in placed]})
        if self._reading is None or self._reading.done():  # one read at a time, shared by every page asking meanwhile
            self._reading = asyncio.ensure_future(fleet_rows(self.client, self.registry.root))
        try:
            found = await asyncio.shield(self._reading)
        except Exception as err:
            return web.json_response({"columns": COLUMNS, "error": f"fleet not read: {_one_line(err)}", "rows": []},
                                     status=503)
        return web.json_response({"columns": COLUMNS, "rows": found})
