"""The write path's fault points (golem/chain/faults.py): off without GOLEM_FAULT_DIR, one pause per arm."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from golem.chain import faults

INTENT = SimpleNamespace(tick=4, action_index=0, call_index=1, tx_hash="0x" + "ab" * 32, nonce=9)


def test_unarmed_or_without_the_variable_it_returns_at_once(tmp_path, monkeypatch):
    monkeypatch.delenv(faults.ENV, raising=False)
    faults.arm(tmp_path, "signed")
    faults.fault_point("signed", INTENT)  # no variable: ignores the arm
    assert (tmp_path / "arm-signed").exists()
    monkeypatch.setenv(faults.ENV, str(tmp_path))
    t = time.monotonic()
    faults.fault_point("broadcast", INTENT)  # armed for another event
    assert time.monotonic() - t < 1 and faults.paused(tmp_path, "broadcast") is None


def test_an_armed_point_pauses_once_and_reports_where(tmp_path, monkeypatch):
    monkeypatch.setenv(faults.ENV, str(tmp_path))
    monkeypatch.setattr(faults, "PAUSE_SECONDS", 0.5)
    faults.arm(tmp_path, "signed")
    th = threading.Thread(target=faults.fault_point, args=("signed", INTENT))
    th.start()
    for _ in range(100):
        info = faults.paused(tmp_path, "signed")
        if info:
            break
        time.sleep(0.01)
    th.join()
    assert info["tick"] == 4 and info["nonce"] == 9 and info["tx_hash"] == INTENT.tx_hash and info["pid"] > 0
    assert not (tmp_path / "arm-signed").exists()  # consumed: the next signed tx goes through
    t = time.monotonic()
    faults.fault_point("signed", INTENT)
    assert time.monotonic() - t < 0.4


def test_unknown_event_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown fault event 'mined'"):
        faults.arm(tmp_path, "mined")
