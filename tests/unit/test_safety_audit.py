"""The hash-chained audit trail on a real SQLite file: appends chain, verify catches edits and removals."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from golem.safety.audit import GENESIS_HASH, AuditLog, redact


def _log(tmp_path, n=5) -> AuditLog:
    log = AuditLog(tmp_path / "audit.sqlite")
    for i in range(n):
        log.append("g1", "permit.created", {"tick": i, "permit_id": f"permit-{i}", "value_usd": 100.0 * i})
    return log


def _sql(log: AuditLog, sql: str, *params) -> None:
    with sqlite3.connect(log.path) as db:
        db.execute(sql, params)


def test_entries_chain_and_verify(tmp_path):
    log = _log(tmp_path)
    entries = log.entries()
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    assert entries[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.hash for a, b in zip(entries, entries[1:]))
    report = log.verify()
    assert report.ok and report.entries == 5 and report.head_hash == entries[-1].hash


def test_edited_payload_fails(tmp_path):
    log = _log(tmp_path)
    _sql(log, "UPDATE audit_log SET payload = ? WHERE seq = 3", '{"permit_id":"permit-2","tick":2,"value_usd":1.0}')
    report = log.verify()
    assert not report.ok and report.first_bad_seq == 3
    assert any("entry 3" in p and "edited" in p for p in report.problems)


def test_edited_and_rehashed_entry_breaks_the_next_link(tmp_path):
    """Recomputing the edited entry's own hash is not enough: entry 4 still points at the old one."""
    from golem.safety.audit import entry_hash

    log = _log(tmp_path)
    e3 = log.entries()[2]
    forged = '{"permit_id":"permit-2","tick":2,"value_usd":1.0}'
    _sql(log, "UPDATE audit_log SET payload = ?, hash = ? WHERE seq = 3", forged,
         entry_hash(e3.prev_hash, 3, e3.at, e3.golem_id, e3.kind, forged))
    report = log.verify()
    assert not report.ok and report.first_bad_seq == 4


def test_removed_middle_entry_fails(tmp_path):
    log = _log(tmp_path)
    _sql(log, "DELETE FROM audit_log WHERE seq = 2")
    report = log.verify()
    assert not report.ok and report.first_bad_seq == 3
    assert any("removed" in p for p in report.problems)


def test_removed_tail_entry_fails(tmp_path):
    log = _log(tmp_path)
    _sql(log, "DELETE FROM audit_log WHERE seq = 5")
    report = log.verify()
    assert not report.ok and any("removed from the end" in p for p in report.problems)


def test_appends_continue_after_reopen(tmp_path):
    _log(tmp_path, 2)
    log = AuditLog(tmp_path / "audit.sqlite")
    assert log.append("g1", "outcome.verified", {"tick": 9}).seq == 3
    assert log.verify().ok


def test_secrets_are_redacted_before_hashing(tmp_path):
    log = AuditLog(tmp_path / "audit.sqlite")
    e = log.append("g1", "tx.executed", {"private_key": "0xdeadbeef", "nested": {"api_key": "sk-1"}, "tx": "0xabc"})
    assert e.payload["private_key"] == "<redacted>" and e.payload["nested"]["api_key"] == "<redacted>"
    assert "deadbeef" not in log.path.read_bytes().decode("latin-1")
    assert redact([{"secret": 1}]) == [{"secret": "<redacted>"}]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(min_value=1, max_value=8), victim=st.integers(min_value=0, max_value=7),
       op=st.sampled_from(["edit", "delete"]))
def test_any_single_edit_or_removal_is_detected(tmp_path_factory, n, victim, op):
    log = _log(tmp_path_factory.mktemp("audit"), n)
    seq = victim % n + 1
    if op == "edit":
        _sql(log, "UPDATE audit_log SET kind = 'permit.tampered' WHERE seq = ?", seq)
    else:
        _sql(log, "DELETE FROM audit_log WHERE seq = ?", seq)
    assert not log.verify().ok
