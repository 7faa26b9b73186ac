"""Exactly once across a killed worker: SIGKILL the executor process between sign and broadcast, and
again after broadcast, on a real Anvil. The account nonce rises by exactly one per intent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from web3 import Web3

from golem.chain.contracts import Deployment
from golem.chain.journal import IntentStatus, TxJournal
from golem.chain.permits import PermitStatus, PermitStore
from golem.models.enums import ActionStatus
from golem.models.record import ActionRecord
from golem.models.tick import ProposedAction
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS

pytestmark = pytest.mark.integration

GOLEM = ANVIL_ADDRESSES[2]
REPO = Path(__file__).resolve().parents[2]


def _proc(rpc: str, data: Path, tick: int, action: ProposedAction, permit: str, pause: str | None):
    cmd = [sys.executable, "-m", "golem.chain.execute_proc", "--rpc", rpc, "--data", str(data), "--golem-id", "g1",
           "--tick", str(tick), "--action", action.model_dump_json(), "--permit", permit]
    if pause:
        cmd += ["--pause-after", pause]
    env = {**os.environ, "GOLEM_PRIVATE_KEY": ANVIL_KEYS[2]}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)


def _run_to_pause(rpc, data, tick, action, permit, pause) -> str:
    proc = _proc(rpc, data, tick, action, permit, pause)
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"PAUSED {pause} "), (line, proc.stderr.read() if proc.poll() is not None else "")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    return line.split()[2]


def _run_to_end(rpc, data, tick, action, permit) -> ActionRecord:
    proc = _proc(rpc, data, tick, action, permit, None)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert ANVIL_KEYS[2][2:].lower() not in (out + err).lower()  # the key never reaches output
    return ActionRecord.model_validate_json(out.strip().splitlines()[-1])


def test_sigkill_between_sign_and_broadcast_and_after_broadcast(
    w3: Web3, world_snapshot: Deployment, anvil, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    world_snapshot.save(data / "deployment.json")
    permits = PermitStore(data / "permits.sqlite")
    journal = TxJournal(data / "tx_journal.sqlite")
    borrow = ProposedAction(action_index=0, tool="borrow", arguments={"amount": 10})  # one call: one intent

    # 1. killed after the intent is journaled, before the node saw it
    p1 = permits.issue("g1", 1, 0, "borrow", 10.0, "h" * 64)
    n0 = w3.eth.get_transaction_count(GOLEM)
    signed_hash = _run_to_pause(anvil.rpc_url, data, 1, borrow, p1.id, "signed")
    assert w3.eth.get_transaction_count(GOLEM) == n0
    intent = journal.get("g1", 1, 0, 0)
    assert intent.status is IntentStatus.SIGNED and intent.tx_hash == signed_hash
    assert permits.get(p1.id).status is PermitStatus.COMMITTED  # spent before signing; the retry may reuse it

    rec = _run_to_end(anvil.rpc_url, data, 1, borrow, p1.id)
    assert rec.status is ActionStatus.EXECUTED and rec.tx_hash == signed_hash  # the same bytes went out
    assert w3.eth.get_transaction_count(GOLEM) == n0 + 1

    # 2. killed after the node accepted the tx (Anvil mines at once), before the receipt was recorded
    p2 = permits.issue("g1", 2, 0, "borrow", 10.0, "h" * 64)
    sent_hash = _run_to_pause(anvil.rpc_url, data, 2, borrow, p2.id, "broadcast")
    assert w3.eth.get_transaction_count(GOLEM) == n0 + 2
    assert journal.get("g1", 2, 0, 0).status is IntentStatus.SENT

    rec2 = _run_to_end(anvil.rpc_url, data, 2, borrow, p2.id)
    assert rec2.status is ActionStatus.EXECUTED and rec2.tx_hash == sent_hash
    assert w3.eth.get_transaction_count(GOLEM) == n0 + 2  # looked up by hash, not sent again
    assert journal.get("g1", 2, 0, 0).status is IntentStatus.MINED
    # a third run of either intent is still a no-op
    assert _run_to_end(anvil.rpc_url, data, 1, borrow, p1.id).tx_hash == signed_hash
    assert w3.eth.get_transaction_count(GOLEM) == n0 + 2
