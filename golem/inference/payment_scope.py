"""The payment scope of an activity's model calls (x402): which calls a retry repeats, and what they paid.

Kept apart from golem.inference.payment so every activity can open a scope without loading the HTTP client: a worker
on the offline deliberator never imports it. See docs/design/payments.md#idempotence.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from golem.models.record import PaymentRecord


@dataclass
class PaymentScope:
    """One activity's model calls: `key` is the same on every retry of the activity (None: nonces are random)."""

    key: str | None
    calls: int = 0
    payments: list[PaymentRecord] = field(default_factory=list)


@dataclass
class PendingCall:
    """What before_provider_request hands the transport for the next request."""

    model: str
    daily_spend: float
    scope: PaymentScope
    index: int
    payments: list[PaymentRecord] = field(default_factory=list)


_SCOPE: ContextVar[PaymentScope | None] = ContextVar("golem_payment_scope", default=None)
_CALL: ContextVar[PendingCall | None] = ContextVar("golem_payment_call", default=None)


@contextmanager
def payment_scope(key: str | None) -> Iterator[PaymentScope]:
    """Scope the payments of the calls made inside (an activity: `key` = its workflow run and activity id)."""
    scope = PaymentScope(key)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def current_scope() -> PaymentScope | None:
    return _SCOPE.get()
