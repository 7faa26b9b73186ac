"""The golem's side of an x402 quote (which offer it pays, what it refuses) and the gateway's price, as pure
functions; the nonce a retry derives is the nonce it signed before."""

from __future__ import annotations

import pytest

from golem.chain.eip3009 import derive_nonce
from golem.inference.config import InferenceConfig
from golem.inference.payment import PaymentRefused, check_quote, choose_quote
from golem.inference.router import worst_case_cost
from infra.x402_gateway import quote_amount

USDC = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
OFFER = {"scheme": "exact", "network": "eip155:31337", "asset": USDC, "amount": "12500", "payTo": "0xabc",
         "maxTimeoutSeconds": 120, "extra": {"name": "USD Coin", "version": "2"}}


def test_the_golem_pays_only_exact_in_its_usdc_on_its_chain():
    q = choose_quote({"accepts": [{**OFFER, "network": "eip155:8453"}, OFFER]}, USDC.lower(), "eip155:31337")
    assert (q.amount, q.pay_to, q.max_timeout_seconds, q.name, q.version) == (12500, "0xabc", 120, "USD Coin", "2")
    with pytest.raises(PaymentRefused, match="pays only exact"):
        choose_quote({"accepts": [{**OFFER, "asset": "0xdead"}]}, USDC, "eip155:31337")
    with pytest.raises(PaymentRefused, match="no integer amount"):
        choose_quote({"accepts": [{**OFFER, "amount": "lots"}]}, USDC, "eip155:31337")


@pytest.mark.parametrize("price, spend, balance, match", [
    (0.30, 0.0, 100.0, "above \\[inference\\] max_payment_usd"),
    (0.10, 4.95, 100.0, "past the \\$5.00 daily cap"),
    (0.10, 0.0, 0.05, "cannot pay for this thought"),
])
def test_the_golem_refuses(price, spend, balance, match):
    with pytest.raises(PaymentRefused, match=match):
        check_quote(price, "claude-sonnet-4-6", spend, 0.25, 5.0, balance)


def test_a_quote_within_every_limit_passes():
    check_quote(0.10, "claude-sonnet-4-6", 4.0, 0.25, 5.0, 0.10)


def test_the_gateway_prices_the_worst_case_of_the_request():
    prices = InferenceConfig().prices
    body = {"model": "claude-haiku-4-5", "max_tokens": 600, "messages": [{"role": "user", "content": "x" * 400}]}
    amount = quote_amount(body, prices, 1.0)
    assert amount == pytest.approx(worst_case_cost(prices["claude-haiku-4-5"], 100, 600) * 1e6, rel=0.2)
    assert quote_amount(body, prices, 2.0) in (2 * amount - 1, 2 * amount, 2 * amount + 1)
    with pytest.raises(ValueError, match="not sold here"):
        quote_amount({**body, "model": "gpt-9"}, prices, 1.0)
    with pytest.raises(ValueError, match="max_tokens"):
        quote_amount({**body, "max_tokens": 0}, prices, 1.0)


def test_a_retry_derives_the_nonce_it_signed_before():
    a = derive_nonce("golem-g-tick-4/run-1/7", 0, "body", "0xabc", 12500)
    assert a == derive_nonce("golem-g-tick-4/run-1/7", 0, "body", "0xabc", 12500) and len(a) == 32
    assert a != derive_nonce("golem-g-tick-4/run-2/7", 0, "body", "0xabc", 12500)  # another run of the tick
    assert a != derive_nonce("golem-g-tick-4/run-1/7", 1, "body", "0xabc", 12500)  # the loop's next call
