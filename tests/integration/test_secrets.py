"""Secrets: a golem signs real transactions with a sentinel key and has a sentinel Anthropic API key in
its environment; afterwards no workflow history (fetched through the Temporal client, payloads decoded), log,
trace, record, audit row, SQLite database or LanceDB table holds either sentinel (nor the key's hex without 0x).

The sentinel account is a fresh one: the world is deployed with it as the golem (it opens its own Aave position),
so every transaction it sends is signed by the sentinel key, supplied the way `golem run` supplies it — the
worker process's environment (`[chain] key_env`, GOLEM_PRIVATE_KEY)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import lancedb
import pytest
from eth_account import Account
from temporalio.client import Client

from golem.chain.web3client import make_web3
from golem.life.cycle_store import CycleStore
from golem.models.config import load_config
from golem.models.enums import ActionStatus
from golem.world.deploy import deploy_world
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS, AnvilProcess, free_port
from tests.integration.golem_rig import REPO, GolemRig, write_golem_home

pytestmark = pytest.mark.integration

SENTINEL_KEY_HEX = ("5ec2e7c0de" * 7)[:64]  # a valid secp256k1 key nobody else uses
SENTINEL_KEY = "0x" + SENTINEL_KEY_HEX
SENTINEL_API_KEY = "sk-ant-api03-SENTINEL-9d1e6c0a7b4f-golem-secrets-scan-AA"
NEEDLES = (SENTINEL_KEY_HEX, SENTINEL_API_KEY.lower(), "sentinel-9d1e6c0a7b4f")  # matched case-insensitively


# ---- the scanner --------------------------------------------------------------------------------------
def _hits(text: str, where: str) -> list[str]:
    low = text.lower()
    return [f"{where}: {n[:16]}…" for n in NEEDLES if n in low]


def _decoded_payloads(obj) -> list[str]:
    """Every payload `data` in a history's JSON, base64-decoded (payloads are base64 in the JSON form)."""
    out: list[str] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "data" and isinstance(v, str):
                try:
                    out.append(base64.b64decode(v).decode("utf-8", "replace"))
                except ValueError:
                    pass
            else:
                out += _decoded_payloads(v)
    elif isinstance(obj, list):
        for v in obj:
            out += _decoded_payloads(v)
    return out


def scan_dir(root: Path) -> tuple[list[str], dict[str, int]]:
    """Every file under root as bytes; every SQLite database row by row; every LanceDB table row by row."""
    hits: list[str] = []
    counts = {"files": 0, "sqlite_rows": 0, "lance_rows": 0}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        counts["files"] += 1
        raw = path.read_bytes()
        hits += _hits(raw.decode("latin-1"), str(path.relative_to(root)))
        if raw[:16] == b"SQLite format 3\x00":
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                for t in tables:
                    for row in conn.execute(f'SELECT * FROM "{t}"'):
                        counts["sqlite_rows"] += 1
                        hits += _hits(repr(row), f"{path.relative_to(root)} table {t}")
            finally:
                conn.close()
    for table_dir in sorted(p for p in root.rglob("*.lance") if (p / "_versions").is_dir()):  # a LanceDB table
        table = lancedb.connect(str(table_dir.parent)).open_table(table_dir.stem)
        for row in table.to_arrow().to_pylist():
            counts["lance_rows"] += 1
            hits += _hits(repr({k: v for k, v in row.items() if k != "vector"}),
                          f"lance {table_dir.relative_to(root)}")
    return hits, counts


async def scan_histories(client: Client, prefix: str, public_marker: str) -> tuple[list[str], int, int]:
    """All runs of every workflow whose id starts with prefix: hits, how many histories and events; asserts the
    decoding works by finding public_marker (a sent transaction's hash, which only a payload carries) in them."""
    hits: list[str] = []
    n_hist = n_events = 0
    marker_seen = False
    async for wf in client.list_workflows():
        if not wf.id.startswith(prefix):
            continue
        history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        n_hist += 1
        n_events += len(history.events)
        as_json = history.to_json()
        texts = [as_json, *_decoded_payloads(json.loads(as_json))]
        for text in texts:
            hits += _hits(text, f"history {wf.id}/{wf.run_id}")
            marker_seen = marker_seen or public_marker.lower() in text.lower()
    assert marker_seen, "the decoded histories never show a sent tx hash: the scan would not see a key either"
    return hits, n_hist, n_events


def test_the_scanner_finds_a_planted_sentinel(tmp_path):
    """The scan can fail: a sentinel in a SQLite row, a LanceDB row, a log line and a payload is found."""
    conn = sqlite3.connect(tmp_path / "a.sqlite")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.execute("INSERT INTO t VALUES (?)", (f"key={SENTINEL_KEY}",))
    conn.commit()
    conn.close()
    db = lancedb.connect(str(tmp_path / "g" / "episodes.lance"))
    db.create_table("episodes", data=[{"summary": f"Owner said: {SENTINEL_API_KEY}", "vector": [0.0, 1.0]}])
    (tmp_path / "worker.log").write_text(f"boom {SENTINEL_KEY_HEX.upper()}\n")
    hits, counts = scan_dir(tmp_path)
    assert any("a.sqlite table t" in h for h in hits) and any(h.startswith("lance g/episodes.lance") for h in hits)
    assert any("worker.log" in h for h in hits) and counts["sqlite_rows"] == 1 and counts["lance_rows"] == 1
    payload = {"events": [{"input": {"payloads": [{"data": base64.b64encode(SENTINEL_KEY.encode()).decode()}]}}]}
    assert any(_hits(t, "p") for t in _decoded_payloads(payload))


# ---- the golem ------------------------------------------------------------------------------------------
@pytest.fixture
def sentinel_rig(tmp_path, request):
    account = Account.from_key(SENTINEL_KEY)
    golem_id = "secrets-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    anvil = AnvilProcess(port=free_port(), log_path=tmp_path / "anvil.log")
    anvil.start()
    w3 = make_web3(anvil.rpc_url)
    w3.provider.make_request("anvil_setBalance", [account.address, hex(10_000 * 10**18)])
    # The world with the sentinel account as the golem: it opens its Aave position with the sentinel key.
    dep = deploy_world(w3, ANVIL_KEYS[0], account.address, ANVIL_ADDRESSES[1], golem_key=SENTINEL_KEY,
                       rpc_url=anvil.rpc_url)
    assert dep.golem_account == account.address
    home, data = write_golem_home(tmp_path, golem_id, anvil.rpc_url, dep, theta=0.25)
    rig = GolemRig(golem_id, anvil, dep, home, data, load_config(home / "golem.toml"), "crash")
    yield rig
    rig.stop()


async def test_no_sentinel_key_anywhere_after_the_golem_signed_and_sent(temporal_env, temporal_client, sentinel_rig):
    rig = sentinel_rig
    w3 = rig.w3
    account = Account.from_key(SENTINEL_KEY).address
    nonce_before = w3.eth.get_transaction_count(account)
    env = {k: v for k, v in os.environ.items() if k not in ("GOLEM_PRIVATE_KEY", "ANTHROPIC_API_KEY")}
    env.update(GOLEM_PRIVATE_KEY=SENTINEL_KEY, ANTHROPIC_API_KEY=SENTINEL_API_KEY,
               GOLEM_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host)
    log_path = rig.data_dir / "worker.log"
    with log_path.open("ab") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir), "worker"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
        )
    try:
        rig.start_market(interval=0.3, max_steps=18, per_tick=True, crash_after=9)
        handle = await rig.start_golem(temporal_client, max_ticks=18)
        await asyncio.wait_for(handle.result(), timeout=300)
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        rig._sim_stop.set()

    # It acted: real transactions, signed by the sentinel key (the sender is the sentinel's account).
    store = CycleStore(rig.data_dir)
    executed = [a for t in range(18) for a in store.load(t).actions if a.status == ActionStatus.EXECUTED]
    assert executed, "the golem must act at least once for the scan to mean anything"
    for a in executed:
        assert w3.eth.get_transaction(a.tx_hash)["from"] == account
    assert w3.eth.get_transaction_count(account) > nonce_before

    history_hits, n_hist, n_events = await scan_histories(temporal_client, f"golem-{rig.golem_id}",
                                                          executed[0].tx_hash)
    assert n_hist >= 18, f"expected every tick's history, fetched {n_hist}"
    file_hits, counts = scan_dir(rig.data_dir)
    home_hits, _ = scan_dir(rig.home)
    for kind in ("traces.jsonl", "worker.log"):
        assert (rig.data_dir / kind).stat().st_size > 0, f"{kind} is empty: nothing to scan"
    assert any((rig.data_dir / "cycles").glob("cycle-*.json")) and counts["lance_rows"] > 0
    print(f"secrets scan: {n_hist} histories ({n_events} events), {counts['files']} files, "
          f"{counts['sqlite_rows']} SQLite rows, {counts['lance_rows']} LanceDB rows, {len(executed)} txs signed: "
          f"{len(history_hits) + len(file_hits) + len(home_hits)} hits")
    assert not history_hits + file_hits + home_hits, history_hits + file_hits + home_hits
