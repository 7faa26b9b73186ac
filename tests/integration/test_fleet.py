"""Many golems, one worker, on real parts: Temporal dev server, Anvil, LanceDB, SQLite (docs/design/fleet.md)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest
from eth_account import Account

from golem.fleet import FleetRegistry, prepare_home
from golem.grimoire.episodes import index as episode_index
from golem.grimoire.semantic import index as entry_index
from golem.life.cycle_store import CycleStore
from golem.world.devchain import dev_key
from tests.integration.golem_rig import write_golem_home
from workers.fleet import serving, start_placed
from workers.metrics import free_port

pytestmark = pytest.mark.integration

FIRST_KEY = 20  # dev accounts 20+ : no other test's account (0-6 are the world's and the rig's)


def make_fleet(tmp: Path, rpc_url: str, world, ids: list[str], host: str, monkeypatch, w3,
               root: Path | None = None) -> FleetRegistry:
    """A host data dir with `ids` spawned on it: each its own home (golem.toml with its id and its key's env var),
    its own funded wallet (dev account FIRST_KEY + i, i + 1 ETH: its reads show whose wallet it is)."""
    template = tmp / "template" / "home"
    if not template.exists():
        (tmp / "template").mkdir(parents=True)
        write_golem_home(tmp / "template", "template", rpc_url, world, theta=0.3)
    registry = FleetRegistry(root or tmp / f"host-{host}")
    registry.root.mkdir(parents=True, exist_ok=True)
    world.save(registry.root / "deployment.json")
    for gid in ids:
        i = int(gid[1:])
        key = dev_key(FIRST_KEY + i)
        monkeypatch.setenv(f"GOLEM_TEST_KEY_{i}", key)
        w3.provider.make_request("anvil_setBalance", [Account.from_key(key).address, hex((i + 1) * 10**18)])
        prepare_home(registry, gid, template, key_env=f"GOLEM_TEST_KEY_{i}")
        registry.place(gid, host)
    return registry


async def test_ten_golems_tick_concurrently_in_one_worker(temporal_client, anvil, w3, world_snapshot, tmp_path,
                                                          monkeypatch):
    ids = [f"g{i}" for i in range(10)]
    registry = make_fleet(tmp_path, anvil.rpc_url, world_snapshot, ids, "solo", monkeypatch, w3)
    ticks = 4
    async with serving(temporal_client, registry.root, "solo") as fleet:
        handles = [await start_placed(temporal_client, registry, gid, max_ticks=ticks) for gid in ids]
        finals = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=300)
        assert sorted(fleet.open_ids()) == ids, "one worker opened every golem's services"
        assert len({id(fleet._open[g].services.episodes.embedder) for g in ids}) == 1, "one embedder"
        assert len({id(fleet._open[g].services.w3) for g in ids}) == 1, "one web3 pool for the one RPC URL"
        # bounded: past the cap the least recently used idle golems close first
        recent = fleet.open_ids()[-4:]
        fleet.max_open = 4
        fleet._evict_over_cap()
        assert fleet.open_ids() == recent
        # idle: closed once the idle time has passed since each one's last activity
        root = str(registry.layout(recent[0]).root)
        assert episode_index.episode_index(fleet._open[recent[0]].services.episodes) is not None
        assert entry_index.entry_index(fleet._open[recent[0]].services.semantic) is not None
        cached = lambda: [k for k in [*episode_index._CACHE, *entry_index._CACHE] if k.startswith(root + "/")]  # noqa: E731
        assert len(cached()) == 2
        assert fleet.close_idle(now=time.monotonic() + fleet.idle_seconds - 5) == []
        assert sorted(fleet.close_idle(now=time.monotonic() + fleet.idle_seconds + 1)) == sorted(recent)
        assert fleet.open_ids() == []
        assert cached() == [], "a closed golem's in-memory Grimoire indexes go with it"
    assert [f.tick for f in finals] == [ticks] * 10
    spans = []
    for i, gid in enumerate(ids):
        store = CycleStore(registry.layout(gid).root)
        rows = {r["tick"]: r for r in store.recent(50)}
        assert sorted(rows) == list(range(ticks)), f"{gid}: its own records, every tick once"
        recs = [store.load(t) for t in range(ticks)]
        assert {r.golem_id for r in recs} == {gid}
        assert all(r.workflow_id == f"golem-{gid}-tick-{r.tick}" for r in recs)
        # its own wallet: the balance this test gave its account, nobody else's
        assert {round(r.observation.snapshot.native_balance_eth, 3) for r in recs} == {float(i + 1)}, gid
        assert (registry.layout(gid).episodes).exists(), f"{gid}: its own Grimoire under golems/{gid}/"
        spans.append((recs[0].timestamp, recs[-1].timestamp))
    # concurrently: every golem's first tick started before any golem's last tick
    assert max(s for s, _ in spans) < min(e for _, e in spans), spans


def _golem(argv: list[str]) -> int:
    from cli.main import main

    return main(argv)


async def _cli(capsys, *argv: str) -> str:
    """A `golem` command run in-process (on a thread: it runs its own event loop); its stdout."""
    capsys.readouterr()
    code = await asyncio.to_thread(_golem, list(argv))
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def _ticks(registry: FleetRegistry, gid: str) -> list[int]:
    layout = registry.layout(gid)
    return sorted(r["tick"] for r in CycleStore(layout).recent(200)) if layout.cycle_index.exists() else []


async def test_spawn_list_stop_and_start_again(temporal_client, temporal_env, anvil, w3, world_snapshot, tmp_path,
                                               monkeypatch, capsys):
    from temporalio.client import WorkflowExecutionStatus

    from tests.integration.golem_rig import wait_for

    registry = make_fleet(tmp_path, anvil.rpc_url, world_snapshot, [], "h", monkeypatch, w3)
    template = tmp_path / "template" / "home"
    monkeypatch.setenv("GOLEM_TEMPORAL_ADDRESS", temporal_env.client.service_client.config.target_host)
    monkeypatch.setenv("GOLEM_TEST_KEY_1", dev_key(FIRST_KEY + 1))
    w3.provider.make_request("anvil_setBalance", [Account.from_key(dev_key(FIRST_KEY + 1)).address, hex(2 * 10**18)])
    data = ["--home", str(template), "--data", str(registry.root)]
    async with serving(temporal_client, registry.root, "h", reap_every=0.5) as fleet:
        out = await _cli(capsys, *data, "spawn", "s1", "--host", "h", "--key-env", "GOLEM_TEST_KEY_1")
        assert "placed on host h" in out and "started on golem-host-h" in out, out
        await wait_for(lambda: len(_ticks(registry, "s1")) >= 3, 90, "s1's first ticks")
        rows = {r["id"]: r for r in json.loads(await _cli(capsys, *data, "list", "--json"))}
        row = rows["s1"]
        assert row["host"] == "h" and isinstance(row["tick"], int) and row["tick"] >= 2, row
        assert row["tier"] in ("T0", "T1", "T2") and row["phase"] != "-" and row["equity"].startswith("$"), row
        assert row["spend_today"].startswith("$") and row["alerts"] != "-", row
        # --golem: a golem command reads the placed golem's own data dir
        out = await _cli(capsys, "--data", str(registry.root), "--golem", "s1", "ticks")
        assert "T0" in out or "T1" in out, out

        out = await _cli(capsys, *data, "stop", "s1")
        assert "stopped before tick" in out, out
        stopped_at = json.loads((registry.layout("s1").root / "carried-state.json").read_text())["state"]["tick"]
        desc = await temporal_client.get_workflow_handle("golem-s1").describe()
        assert desc.status == WorkflowExecutionStatus.TERMINATED
        assert registry.get("s1").status == "stopped"
        await wait_for(lambda: "s1" not in fleet.open_ids(), 10, "the host closing a stopped golem's services")
        rows = {r["id"]: r for r in json.loads(await _cli(capsys, *data, "list", "--json"))}
        assert rows["s1"]["state"] == "stopped", rows
        assert _ticks(registry, "s1") == list(range(stopped_at)), "no tick after the stop"

        first_run = CycleStore(registry.layout("s1")).load(0).run_id
        await _cli(capsys, *data, "spawn", "s1", "--host", "h")  # again: it goes on from where it stopped
        status = await temporal_client.get_workflow_handle("golem-s1").query("status")
        assert status["tick"] >= stopped_at, (status["tick"], stopped_at)
        await wait_for(lambda: len(_ticks(registry, "s1")) >= stopped_at + 2, 90, "s1 ticking again")
        await _stop_quietly(temporal_client, registry, "s1")
    assert _ticks(registry, "s1")[: stopped_at + 2] == list(range(stopped_at + 2)), "its tick numbers went on"
    assert CycleStore(registry.layout("s1")).load(0).run_id == first_run, "tick 0 was not run again"


async def _stop_quietly(client, registry, gid):
    from workers.fleet import stop_golem

    await stop_golem(client, registry, gid, "test over")


def _host_worker(root: Path, host: str, address: str, log: Path, metrics_port: int = 0):
    import os
    import subprocess
    import sys

    from tests.integration.golem_rig import REPO

    return subprocess.Popen([sys.executable, "-m", "cli", "--data", str(root), "worker", "--host", host],
                            stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=REPO,
                            env=dict(os.environ, GOLEM_TEMPORAL_ADDRESS=address, GOLEM_METRICS_PORT=str(metrics_port)))


def _scrape(port: int) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


async def test_two_hosts_split_a_fleet_and_a_golem_moves_between_them(temporal_client, temporal_env, anvil, w3,
                                                                      world_snapshot, tmp_path, monkeypatch, capsys):
    from tests.integration.golem_rig import wait_for

    address = temporal_env.client.service_client.config.target_host
    monkeypatch.setenv("GOLEM_TEMPORAL_ADDRESS", address)
    a = make_fleet(tmp_path, anvil.rpc_url, world_snapshot, ["m2", "m3"], "a", monkeypatch, w3)
    b = make_fleet(tmp_path, anvil.rpc_url, world_snapshot, ["m4"], "b", monkeypatch, w3)
    port_a = free_port()
    procs = [_host_worker(a.root, "a", address, tmp_path / "host-a.log", port_a),
             _host_worker(b.root, "b", address, tmp_path / "host-b.log")]
    try:
        for registry, gid in ((a, "m2"), (a, "m3"), (b, "m4")):
            await start_placed(temporal_client, registry, gid)
        for registry, gid in ((a, "m2"), (a, "m3"), (b, "m4")):
            await wait_for(lambda: len(_ticks(registry, gid)) >= 3, 120, f"{gid} ticking on its host")
        for registry, gid, host in ((a, "m2", "a"), (a, "m3", "a"), (b, "m4", "b")):
            seen = await temporal_client.get_workflow_handle(f"golem-{gid}-tick-1").describe()
            assert seen.task_queue == f"golem-host-{host}", (gid, seen.task_queue)
            assert not (b if host == "a" else a).layout(gid).root.exists(), "its data is on its host only"
        rows = {r["id"]: r for r in json.loads(await _cli(capsys, "--data", str(a.root), "list", "--json"))}
        assert {g: rows[g]["host"] for g in ("m2", "m3", "m4")} == {"m2": "a", "m3": "a", "m4": "b"}, rows
        # host a's /metrics: each of its golems' figures under its own label, its step latency by the activity's golem
        scraped = await asyncio.to_thread(_scrape, port_a)
        for gid in ("m2", "m3"):
            assert re.search(r'golem_ticks_total\{[^}]*golem="%s"' % gid, scraped), (gid, scraped[:3000])
            assert re.search(r'golem_step_latency_seconds_count\{[^}]*golem="%s"[^}]*step="observe"' % gid, scraped), gid
        assert 'golem="m4"' not in scraped and 'golem_worker_memory_bytes{host="a"' in scraped, scraped[:3000]

        bundle = tmp_path / "m2.golem.tar.gz"
        out = await _cli(capsys, "--data", str(a.root), "export", "m2", "--out", str(bundle))
        assert "exported" in out, out
        left_at = json.loads((a.layout("m2").root / "carried-state.json").read_text())["state"]["tick"]
        assert a.get("m2").status == "moved"
        first_run = CycleStore(a.layout("m2")).load(0).run_id
        out = await _cli(capsys, "--data", str(b.root), "import", str(bundle), "--host", "b")
        assert "imported to host b" in out, out
        status = await temporal_client.get_workflow_handle("golem-m2").query("status")
        assert status["tick"] >= left_at, (status["tick"], left_at)
        await wait_for(lambda: len(_ticks(b, "m2")) >= left_at + 2, 120, "m2 ticking on host b")
        assert _ticks(b, "m2")[: left_at + 2] == list(range(left_at + 2)), "its tick numbers went on"
        moved = await temporal_client.get_workflow_handle(f"golem-m2-tick-{left_at}").describe()
        assert moved.task_queue == "golem-host-b", moved.task_queue
        assert len(_ticks(a, "m2")) == left_at, "host a ran no tick of m2 after the export"
        assert CycleStore(b.layout("m2")).load(0).run_id == first_run, "tick 0 was not run again on host b"
        rows = {r["id"]: r for r in json.loads(await _cli(capsys, "--data", str(b.root), "list", "--json"))}
        # the status names the tick running now: the newest record (left_at + 1) may be that tick's, just written
        assert rows["m2"]["host"] == "b" and rows["m2"]["tick"] >= left_at + 1, rows["m2"]
        for registry, gid in ((b, "m2"), (a, "m3"), (b, "m4")):
            await _stop_quietly(temporal_client, registry, gid)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
