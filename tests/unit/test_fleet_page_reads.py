"""The fleet page's API reads the fleet once at a time: pages asking while a read is in flight share it, so a busy
fleet (status queries waiting on a loaded worker) is not piled on by every refresh of every open page."""

from __future__ import annotations

import asyncio

from aiohttp.test_utils import TestClient, TestServer

import workers.fleet_view as fleet_view
from workers.dashboard.fleet import FleetDashboard


async def test_concurrent_fleet_reads_share_one_read(tmp_path, monkeypatch):
    calls = []

    async def slow_rows(client, data, own_golem=None):
        calls.append(data)
        await asyncio.sleep(0.3)  # a status query waiting on a busy worker
        return [{"id": f"g{len(calls)}"}]

    monkeypatch.setattr(fleet_view, "fleet_rows", slow_rows)
    board = FleetDashboard(tmp_path, client=object())  # type: ignore[arg-type]
    async with TestClient(TestServer(board.app())) as http:
        answers = await asyncio.gather(*(http.get("/api/fleet") for _ in range(5)))
        bodies = [await a.json() for a in answers]
        assert len(calls) == 1, f"{len(calls)} reads for 5 concurrent requests"
        assert all(b["rows"] == [{"id": "g1"}] for b in bodies), bodies
        later = await (await http.get("/api/fleet")).json()
        assert len(calls) == 2 and later["rows"] == [{"id": "g2"}], "a read after the last one ended reads again"
