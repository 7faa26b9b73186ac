"""ActionPermit lifecycle and the tx journal on real SQLite files."""

from __future__ import annotations

import pytest

from golem.chain.journal import IntentStatus, JournalError, TxJournal
from golem.chain.permits import PermitError, PermitStatus, PermitStore


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(tmp_path, clock):
    return PermitStore(tmp_path / "permits.sqlite", clock=clock)


def issue(store, **kw):
    args = dict(golem_id="g1", tick=3, action_index=0, tool="swap", value_limit_usd=2000.0, policy_hash="h" * 64)
    args.update(kw)
    return store.issue(**args)


def test_permit_is_single_use(store):
    p = issue(store)
    assert p.status is PermitStatus.CREATED and p.id.startswith("permit-")
    used = store.consume(p.id, "swap", 2000.0)
    assert used.status is PermitStatus.COMMITTED
    assert store.get(p.id).status is PermitStatus.COMMITTED
    with pytest.raises(PermitError, match="committed"):
        store.consume(p.id, "swap", 2000.0)


def test_unknown_permit_refused(store):
    with pytest.raises(PermitError, match="unknown permit"):
        store.consume("permit-nope", "swap", 1.0)


def test_permit_expires(store, clock):
    p = issue(store, ttl_s=60)
    clock.t += 61
    with pytest.raises(PermitError, match="expired"):
        store.consume(p.id, "swap", 100.0)
    # the expiry is persisted, and the permit stays unusable
    assert store.get(p.id).status is PermitStatus.EXPIRED
    with pytest.raises(PermitError, match="expired"):
        store.consume(p.id, "swap", 100.0)


def test_wrong_tool_and_over_value_refused_without_burning(store):
    p = issue(store, value_limit_usd=1000.0)
    with pytest.raises(PermitError, match="for tool 'swap', not 'borrow'"):
        store.consume(p.id, "borrow", 10.0)
    with pytest.raises(PermitError, match=r"allows \$1,000.00.*\$1,500.00"):
        store.consume(p.id, "swap", 1500.0)
    assert store.get(p.id).status is PermitStatus.CREATED
    assert store.consume(p.id, "swap", 999.0).status is PermitStatus.COMMITTED


def test_cancel_and_audit_trail(store):
    p = issue(store)
    store.cancel(p.id, "steer: halt trading")
    got = store.get(p.id)
    assert got.status is PermitStatus.CANCELLED and got.reason == "steer: halt trading"
    with pytest.raises(PermitError, match="cancelled"):
        store.consume(p.id, "swap", 1.0)
    trail = store.audit(p.id)
    assert [(e.from_status, e.to_status) for e in trail] == [(None, "created"), ("created", "cancelled")]
    with pytest.raises(PermitError, match="only created permits"):
        store.cancel(p.id, "again")


def test_issue_is_idempotent_for_a_retried_validation(store):
    a = issue(store)
    b = issue(store)
    assert a.id == b.id
    # different terms replace the live permit (the old one is cancelled)
    c = issue(store, value_limit_usd=1500.0)
    assert c.id != a.id and store.get(a.id).status is PermitStatus.CANCELLED
    store.consume(c.id, "swap", 1500.0)
    assert issue(store, value_limit_usd=1500.0).id == c.id  # committed: handed back, not re-issued
    with pytest.raises(PermitError, match="already committed"):
        issue(store, value_limit_usd=10.0)


def test_expire_stale(store, clock):
    a = issue(store, ttl_s=10)
    b = issue(store, action_index=1, ttl_s=100)
    clock.t += 50
    assert store.expire_stale() == 1
    assert store.get(a.id).status is PermitStatus.EXPIRED
    assert store.get(b.id).status is PermitStatus.CREATED


def test_permits_persist_across_instances(tmp_path, clock):
    p = issue(PermitStore(tmp_path / "p.sqlite", clock=clock))
    assert PermitStore(tmp_path / "p.sqlite", clock=clock).consume(p.id, "swap", 1.0).status is PermitStatus.COMMITTED


# ── journal ──────────────────────────────────────────────────────────────────────────────────


def test_journal_round_trip(tmp_path):
    j = TxJournal(tmp_path / "journal.sqlite")
    key = ("g1", 3, 0, 1)
    assert j.get(*key) is None
    intent = j.record_intent(*key, nonce=7, raw_tx="0x02f8aa", tx_hash="0xabc", label="swap")
    assert intent.status is IntentStatus.SIGNED and intent.nonce == 7 and intent.raw_tx == "0x02f8aa"
    assert j.mark_sent(*key).status is IntentStatus.SENT
    mined = j.mark_mined(*key, block_number=42, gas_used=51_000, effective_gas_price=10**9)
    assert mined.status is IntentStatus.MINED and mined.block_number == 42 and mined.gas_used == 51_000

    reopened = TxJournal(tmp_path / "journal.sqlite")
    got = reopened.get(*key)
    assert got.model_dump(exclude={"updated_at"}) == mined.model_dump(exclude={"updated_at"})
    assert reopened.mark_sent(*key).status is IntentStatus.MINED  # settled intents never move back
    assert [i.call_index for i in reopened.intents_for("g1", 3, 0)] == [1]


def test_journal_refuses_a_second_transaction_for_the_same_call(tmp_path):
    j = TxJournal(tmp_path / "journal.sqlite")
    j.record_intent("g1", 3, 0, 0, nonce=1, raw_tx="0x01", tx_hash="0xaa")
    assert j.record_intent("g1", 3, 0, 0, nonce=1, raw_tx="0x01", tx_hash="0xAA").tx_hash == "0xaa"
    with pytest.raises(JournalError, match="refusing a second transaction"):
        j.record_intent("g1", 3, 0, 0, nonce=2, raw_tx="0x02", tx_hash="0xbb")


def test_journal_failed_and_pending(tmp_path):
    j = TxJournal(tmp_path / "journal.sqlite")
    j.record_intent("g1", 1, 0, 0, nonce=1, raw_tx="0x01", tx_hash="0x01")
    j.record_intent("g1", 1, 1, 0, nonce=2, raw_tx="0x02", tx_hash="0x02")
    j.mark_mined("g1", 1, 1, 0, block_number=5, gas_used=1, effective_gas_price=1, success=False, error="slippage")
    assert j.get("g1", 1, 1, 0).status is IntentStatus.FAILED and j.get("g1", 1, 1, 0).error == "slippage"
    assert [i.tx_hash for i in j.pending("g1")] == ["0x01"]
    with pytest.raises(JournalError, match="no intent"):
        j.mark_sent("g1", 9, 9, 9)


def test_plan_is_frozen(tmp_path):
    j = TxJournal(tmp_path / "journal.sqlite")
    first = j.record_plan("g1", 1, 0, "permit-a", [{"to": "0x1", "data": "0x"}])
    second = j.record_plan("g1", 1, 0, "permit-b", [{"to": "0x2", "data": "0x"}])
    assert second == first and second.permit_id == "permit-a" and second.calls[0]["to"] == "0x1"
    assert j.mark_plan_failed("g1", 1, 0, "swap would revert: slippage").failed_reason.endswith("slippage")
    assert j.get_plan("g1", 1, 0).failed_reason == "swap would revert: slippage"
    assert j.get_plan("g1", 2, 0) is None
