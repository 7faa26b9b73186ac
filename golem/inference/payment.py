"""x402-payment, the before_provider_request member: the golem pays for a model call from its wallet.

The gateway answers 402 with a quote; the payer checks it (its asset and chain, the per-call cap, today's budget, the
wallet's balance), signs an EIP-3009 authorization locally with a nonce derived from what is paid for, journals it
before it leaves, and the transport retries the call with it. A retried activity finds the journaled authorization
and presents it again, so one call is paid once. A refused quote is a BudgetRefusal: the offline deliberator answers.
See docs/design/payments.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2

from golem.chain.eip3009 import Authorization, TokenDomain, derive_nonce, sign_authorization
from golem.inference.payment_scope import _CALL, _SCOPE, PaymentScope, PendingCall, current_scope, payment_scope
from golem.inference.router import BudgetRefusal, PaymentRefused
from golem.models.record import PaymentRecord
from golem.storage import connect, init_db

if TYPE_CHECKING:
    from web3 import Web3

__all__ = ["BudgetRefusal", "PaymentRefused", "PaymentJournal", "PaymentScope", "PendingCall", "X402Payer",
           "X402Transport", "current_scope", "payment_scope"]

PAYMENT_REQUIRED_HEADER, PAYMENT_SIGNATURE_HEADER, PAYMENT_RESPONSE_HEADER = (
    "PAYMENT-REQUIRED", "PAYMENT-SIGNATURE", "PAYMENT-RESPONSE")


_JOURNAL = """
CREATE TABLE IF NOT EXISTS x402_payments (
    nonce TEXT PRIMARY KEY,
    scope TEXT,
    header TEXT NOT NULL,
    model TEXT NOT NULL,
    amount INTEGER NOT NULL,
    pay_to TEXT NOT NULL,
    signed_at REAL NOT NULL,
    valid_before INTEGER NOT NULL,
    settlement_tx TEXT
);
"""


class PaymentJournal:
    """Signed authorizations, written before they are sent (the key is never here; a signature authorizes only
    its one transfer). A retry looks its nonce up and presents the same authorization again."""

    def __init__(self, path: Path) -> None:
        self.path = init_db(path, _JOURNAL)

    def get(self, nonce: str) -> dict[str, Any] | None:
        with closing(connect(self.path, rows=True)) as db:
            row = db.execute("SELECT * FROM x402_payments WHERE nonce = ?", (nonce,)).fetchone()
        return dict(row) if row else None

    def put(self, nonce: str, scope: str | None, header: str, model: str, amount: int, pay_to: str,
            valid_before: int) -> None:
        with closing(connect(self.path)) as db, db:
            db.execute("INSERT OR REPLACE INTO x402_payments VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                       (nonce, scope, header, model, amount, pay_to, time.time(), valid_before))

    def settled(self, nonce: str, tx: str) -> None:
        with closing(connect(self.path)) as db, db:
            db.execute("UPDATE x402_payments SET settlement_tx = ? WHERE nonce = ?", (tx, nonce))

    def all(self) -> list[dict[str, Any]]:
        with closing(connect(self.path, rows=True)) as db:
            return [dict(r) for r in db.execute("SELECT * FROM x402_payments ORDER BY signed_at")]


@dataclass(frozen=True)
class Quote:
    """The gateway's requirement the golem would pay: exact scheme, its asset, its chain."""

    requirement: dict[str, Any]  # the accepted entry, as the gateway sent it
    resource: dict[str, Any] | None
    amount: int
    pay_to: str
    max_timeout_seconds: int
    name: str
    version: str


def choose_quote(required: dict[str, Any], asset: str, network: str) -> Quote:
    """The `accepts` entry to pay: scheme "exact" in the golem's USDC on its chain. PaymentRefused otherwise,
    naming what the gateway offered. Pure."""
    offers = required.get("accepts") or []
    for req in offers:
        if (req.get("scheme") == "exact" and str(req.get("network")) == network
                and str(req.get("asset", "")).lower() == asset.lower()):
            extra = req.get("extra") or {}
            try:
                amount = int(req["amount"])
            except (KeyError, ValueError):
                raise PaymentRefused(f"x402: the gateway's quote has no integer amount: {req}") from None
            return Quote(requirement=req, resource=required.get("resource"), amount=amount, pay_to=str(req["payTo"]),
                         max_timeout_seconds=int(req.get("maxTimeoutSeconds") or 300),
                         name=str(extra.get("name", "")), version=str(extra.get("version", "")))
    offered = ", ".join(f"{o.get('scheme')} {o.get('asset')} on {o.get('network')}" for o in offers) or "nothing"
    raise PaymentRefused(f"x402: the gateway offered {offered}; the golem pays only exact {asset} on {network}")


def check_quote(price_usd: float, model: str, daily_spend: float, max_payment_usd: float, daily_cap_usd: float,
                balance_usd: float | None) -> None:
    """The golem's refusals, in order: the per-call cap, today's budget, the wallet. Pure."""
    if price_usd > max_payment_usd:
        raise PaymentRefused(f"x402: the gateway asks ${price_usd:.4f} for a {model} call, above [inference] "
                             f"max_payment_usd = ${max_payment_usd:.4f}; not paid")
    if daily_spend + price_usd > daily_cap_usd:
        raise PaymentRefused(f"x402: paying ${price_usd:.4f} for a {model} call would take today's spend "
                             f"${daily_spend:.4f} past the ${daily_cap_usd:.2f} daily cap; not paid")
    if balance_usd is not None and balance_usd < price_usd:
        raise PaymentRefused(f"x402: cannot pay for this thought: the wallet holds ${balance_usd:.4f} USDC, the "
                             f"{model} call costs ${price_usd:.4f}")


def body_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class X402Payer:
    """Holds the golem's signing account (never shown, never serialised) and pays quotes for it."""

    def __init__(self, private_key: str, *, w3: Web3, asset: str, journal: PaymentJournal, max_payment_usd: float,
                 daily_cap_usd: float, decimals: int = 6,
                 on_paid: Callable[[PaymentRecord, str | None], None] | None = None) -> None:
        from eth_account import Account

        self._account = Account.from_key(private_key)
        self.w3, self.asset, self.journal, self.on_paid = w3, asset, journal, on_paid
        self.max_payment_usd, self.daily_cap_usd, self.decimals = max_payment_usd, daily_cap_usd, decimals
        self.chain_id = int(w3.eth.chain_id)
        self.network = f"eip155:{self.chain_id}"

    def __repr__(self) -> str:
        return f"X402Payer(address={self.address}, asset={self.asset}, network={self.network})"

    @property
    def address(self) -> str:
        return str(self._account.address)

    def before_provider_request(self, model: str, daily_spend: float) -> PendingCall:
        """The hook member: the next request of this scope may be paid for; the transport pays when asked."""
        scope = _SCOPE.get() or PaymentScope(None)
        call = PendingCall(model=model, daily_spend=daily_spend, scope=scope, index=scope.calls)
        scope.calls += 1
        _CALL.set(call)
        return call

    def _chain_reads(self) -> tuple[float, int]:
        from golem.chain.contracts import at

        usdc = at(self.w3, self.asset, "ERC20")
        balance = int(usdc.functions.balanceOf(self.address).call())
        return balance / 10**self.decimals, int(self.w3.eth.get_block("latest")["timestamp"])

    def _lapsed(self, row: dict[str, Any], nonce: str, chain_now: int) -> bool:
        """A journaled authorization that can no longer settle: past its window (the facilitator wants 6 s of it
        left) and its nonce unused on chain."""
        if row["settlement_tx"] or int(row["valid_before"]) >= max(int(time.time()), chain_now) + 6:
            return False
        from golem.chain.contracts import at

        token = at(self.w3, self.asset, "FiatToken")  # an EIP-3009 token: Circle's USDC
        return not bool(token.functions.authorizationState(self.address, bytes.fromhex(nonce[2:])).call())

    def paid(self, record: PaymentRecord, scope_key: str | None) -> None:
        """A call went through paid: its settlement into the journal, the payment onto the audit trail."""
        if record.settlement_tx:
            self.journal.settled(record.nonce, record.settlement_tx)
        if self.on_paid is not None:
            self.on_paid(record, scope_key)

    async def authorize(self, required: dict[str, Any], body: bytes, call: PendingCall) -> tuple[str, PaymentRecord]:
        """The PAYMENT-SIGNATURE header for this quote and its record; PaymentRefused when the golem will not pay."""
        quote = choose_quote(required, self.asset, self.network)
        price = quote.amount / 10**self.decimals
        scope = call.scope
        nonce = "0x" + (derive_nonce(scope.key, call.index, body_digest(body), quote.pay_to, quote.amount, self.address)
                        if scope.key is not None else uuid.uuid4().bytes * 2).hex()
        record = PaymentRecord(model=call.model, price_usd=price, amount=quote.amount, asset=self.asset,
                               pay_to=quote.pay_to, network=self.network, nonce=nonce)
        known = await asyncio.to_thread(self.journal.get, nonce)
        balance, chain_now = await asyncio.to_thread(self._chain_reads)
        if known is not None:  # a retry of a call already authorized: the same authorization, paid at most once
            if not await asyncio.to_thread(self._lapsed, known, nonce, chain_now):
                return known["header"], record.model_copy(update={"reused": True})
            # it expired unused: signed again under the same nonce, so at most one of the two can ever settle
            record = record.model_copy(update={"reused": True})
        check_quote(price, call.model, call.daily_spend, self.max_payment_usd, self.daily_cap_usd, balance)
        if not quote.name or not quote.version:
            raise PaymentRefused("x402: the gateway's quote lacks the token's EIP-712 name and version")
        # valid from now (0) until the quote's timeout past the later of the wall clock and the chain's clock: the
        # facilitator checks the first, the token the second
        valid_before = max(int(time.time()), chain_now) + quote.max_timeout_seconds
        auth = Authorization(self.address, quote.pay_to, quote.amount, 0, valid_before, bytes.fromhex(nonce[2:]))
        domain = TokenDomain(quote.name, quote.version, self.chain_id, self.asset)
        signature = sign_authorization(self._account.key.hex(), domain, auth).signature
        payload = {"x402Version": 2, "accepted": quote.requirement, "payload": {
            "authorization": {"from": self.address, "to": quote.pay_to, "value": str(quote.amount),
                              "validAfter": "0", "validBefore": str(valid_before), "nonce": nonce},
            "signature": signature}}
        if quote.resource is not None:
            payload["resource"] = quote.resource
        header = encode_header(payload)
        await asyncio.to_thread(self.journal.put, nonce, scope.key, header, call.model, quote.amount, quote.pay_to,
                                valid_before)
        return header, record


def encode_header(obj: dict[str, Any]) -> str:
    import base64

    return base64.b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode()


def decode_header(value: str) -> dict[str, Any]:
    import base64

    out = json.loads(base64.b64decode(value.encode()).decode())
    if not isinstance(out, dict):
        raise ValueError("an x402 header must hold a JSON object")
    return out


class X402Transport(httpx2.AsyncBaseTransport):
    """Answers a 402 by paying (X402Payer) and retrying once with the authorization; records what was paid."""

    def __init__(self, payer: X402Payer, inner: httpx2.AsyncBaseTransport) -> None:
        self.payer, self.inner = payer, inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        call = _CALL.get()
        if response.status_code != 402 or call is None:
            return response
        body = await request.aread()
        raw = await response.aread()
        await response.aclose()
        try:
            required = decode_header(response.headers[PAYMENT_REQUIRED_HEADER]) \
                if PAYMENT_REQUIRED_HEADER in response.headers else json.loads(raw)
        except (ValueError, KeyError) as err:
            raise PaymentRefused(f"x402: the gateway's 402 carries no readable payment requirements ({err})") from None
        header, record = await self.payer.authorize(required, body, call)
        paid = await self.inner.handle_async_request(httpx2.Request(
            request.method, request.url, headers=[*request.headers.items(), (PAYMENT_SIGNATURE_HEADER, header)],
            content=body))
        if paid.status_code == 402:
            await paid.aread()
            why = paid.headers.get(PAYMENT_REQUIRED_HEADER)
            reason = (decode_header(why).get("error") if why else None) or paid.text[:200]
            raise PaymentRefused(f"x402: the gateway refused the payment for a {call.model} call: {reason}")
        settled = paid.headers.get(PAYMENT_RESPONSE_HEADER)
        if settled:
            record = record.model_copy(update={"settlement_tx": str(decode_header(settled).get("transaction") or "")
                                               or None})
        if paid.status_code < 400:  # the gateway settles only a call it answered
            call.payments.append(record)
            call.scope.payments.append(record)
            await asyncio.to_thread(self.payer.paid, record, call.scope.key)
        return paid

    async def aclose(self) -> None:
        await self.inner.aclose()
