"""The dashboard's fleet page in a real headless Chromium (Debian's `chromium`, driven by Playwright): golems placed
by the fleet machinery tick in one host worker on real Temporal + Anvil; the page shows one row per golem with
`golem list`'s columns, a row clicks through to that golem's own page, and a stopped golem's row says so."""

from __future__ import annotations

import json

import pytest

from golem.life.cycle_store import CycleStore
from tests.integration.golem_rig import wait_for
from tests.integration.test_dashboard import ARTIFACTS, _browser, needs_chromium
from tests.integration.test_fleet import make_fleet
from workers.dashboard.fleet import FleetDashboard
from workers.dashboard.server import bound_port, start_dashboard
from workers.fleet import serving, start_placed, stop_golem

pytestmark = pytest.mark.integration

IDS = ["d5", "d6", "d7"]
COLUMNS = ["id", "host", "state", "tick", "tier", "phase", "equity", "spend today", "alerts today"]


def _ticks(registry, gid: str) -> int:
    layout = registry.layout(gid)
    return CycleStore(layout).count() if layout.cycle_index.exists() else 0


@needs_chromium
async def test_fleet_page_lists_every_golem_and_clicks_through_to_its_page(temporal_client, anvil, w3,
                                                                          world_snapshot, tmp_path, monkeypatch):
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    registry = make_fleet(tmp_path, anvil.rpc_url, world_snapshot, IDS, "dash", monkeypatch, w3)
    runner = await start_dashboard(FleetDashboard(registry.root, client=temporal_client), port=0)
    pw, browser = await _browser()
    try:
        async with serving(temporal_client, registry.root, "dash"):
            for gid in IDS:
                await start_placed(temporal_client, registry, gid)
            for gid in IDS:
                await wait_for(lambda: _ticks(registry, gid) >= 2, 120, f"{gid}'s first ticks")
            base = f"http://127.0.0.1:{bound_port(runner)}/"
            page = await browser.new_page(viewport={"width": 1400, "height": 700})
            await page.goto(base)
            # one row per golem, each with a tick, a tier and its equity (its newest record on this host)
            try:
                # (the page lists every golem running on this Temporal: an earlier test's may be among them)
                await page.wait_for_function(
                    f"(rows => rows.length === 3 && rows.every(r => /^\\d+$/.test(r.cells[3].textContent)"
                    " && /^T[012]$/.test(r.cells[4].textContent) && r.cells[6].textContent.startsWith('$')))"
                    f"([...document.querySelectorAll('#fleet tbody tr')].filter(r => {IDS!r}.includes(r.dataset.golem)))",
                    timeout=60_000)
            except PlaywrightTimeout:  # say what the page showed and what its API answers now
                shown = await page.evaluate("[...document.querySelectorAll('#fleet tbody tr')]"
                                            ".map(r => [...r.cells].map(c => c.textContent))")
                api = await (await page.request.get(base + "api/fleet")).text()
                pytest.fail(f"fleet rows not complete in 60 s: page {shown}, message "
                            f"{await page.inner_text('#fleet-msg')!r}, api/fleet now {api[:2000]}")
            head = [await th.inner_text() for th in await page.locator("#fleet thead th").all()]
            assert head == COLUMNS, head
            rows = {await tr.get_attribute("data-golem"): [await td.inner_text() for td in await tr.locator("td").all()]
                    for tr in await page.locator("#fleet tbody tr").all()}
            rows = {g: r for g, r in rows.items() if g in IDS}
            assert sorted(rows) == IDS, rows
            assert {r[1] for r in rows.values()} == {"dash"}, "the host each golem is placed on"
            assert all(r[8].split()[0].isdigit() for r in rows.values()), rows  # today's alerts counted
            # the rows are `golem list`'s: the same code answers both (the API the page reads)
            api = await (await page.request.get(base + "api/fleet")).json()
            assert [r["id"] for r in api["rows"] if r["id"] in IDS] == IDS and api["columns"][0] == "id"
            others = {r["host"] for r in api["rows"] if r["id"] not in IDS}
            assert f"{len(api['rows'])} golem(s) on {len(others | {'dash'})} host(s)" in \
                await page.inner_text("#fleet-summary")
            await page.screenshot(path=str(ARTIFACTS / "dashboard-fleet.png"), full_page=True)

            # a row clicks through to that golem's page: its id, its own ticks, its status
            await page.locator("#fleet tbody tr[data-golem='d6'] td").nth(2).click()
            await page.wait_for_url(base + "golems/d6/", timeout=20_000)
            await page.wait_for_function("window.__rendered !== undefined", timeout=30_000)
            assert await page.inner_text("#golem-id") == "d6"
            shown = await page.locator("#ticks tbody tr").count()
            assert shown >= 2, shown
            # its own history: the page's API reads d6's Event Fabric under golems/d6/, no other golem's
            events = await (await page.request.get(base + "golems/d6/api/events?kinds=heartbeat&n=20")).json()
            assert events and {e["golem"] for e in events} == {"d6"}, {e["golem"] for e in events}
            await page.wait_for_function("document.getElementById('status').textContent.includes('tick')",
                                         timeout=20_000)
            link = await page.get_attribute("#golem-link", "href")
            assert link.endswith("/workflows/golem-d6"), link
            # back to the fleet
            await page.click("#fleet-link")
            await page.wait_for_url(base, timeout=10_000)
            await page.wait_for_selector("#fleet tbody tr[data-golem='d6']", timeout=20_000)

            # an unknown golem's page is a 404 naming the fleet's golems
            missing = await page.request.get(base + "golems/nobody/api/status")
            assert missing.status == 404 and "d5, d6, d7" in json.loads(await missing.text())["error"]

            # a stopped golem: its row says so
            await stop_golem(temporal_client, registry, "d7", "test: stop one")
            await page.wait_for_function(
                "document.querySelector(\"#fleet tbody tr[data-golem='d7']\")?.cells[2].textContent === 'stopped'",
                timeout=30_000)
            for gid in ("d5", "d6"):
                await stop_golem(temporal_client, registry, gid, "test over")
    finally:
        await browser.close()
        await pw.stop()
        await runner.cleanup()


async def test_a_golem_whose_worker_does_not_answer_keeps_its_newest_record_in_its_row(
        temporal_client, anvil, w3, world_snapshot, tmp_path, monkeypatch):
    """`golem list` and the fleet page beside a worker too busy (here: gone) to answer the status query: the row says
    so and shows the golem's newest record (tick, tier, phase, equity) instead of dashes."""
    import workers.fleet_view as fleet_view

    registry = make_fleet(tmp_path, anvil.rpc_url, world_snapshot, ["d8"], "mute", monkeypatch, w3)
    async with serving(temporal_client, registry.root, "mute"):
        handle = await start_placed(temporal_client, registry, "d8")
        await wait_for(lambda: _ticks(registry, "d8") >= 2, 120, "d8's first ticks")
    try:  # the worker is gone, the workflow runs on: its status query gets no answer
        monkeypatch.setattr(fleet_view, "QUERY_TIMEOUT_S", 1.0)
        [row] = [r for r in await fleet_view.fleet_rows(temporal_client, registry.root) if r["id"] == "d8"]
        newest = CycleStore(registry.layout("d8")).recent(1)[0]
        assert row["state"] == "no answer (record)", row
        assert (row["tick"], row["tier"], row["phase"]) == (newest["tick"], newest["tier"], newest["phase"]), row
        assert row["equity"].startswith("$") and row["spend_today"] == "-", row
    finally:
        await handle.terminate("test over")
