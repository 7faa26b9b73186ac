"""The world's USDC takes EIP-3009 authorizations on real Anvil: the EIP's own cases (a valid transfer, expired,
not yet valid, replayed, wrong signer, wrong amount, cancelled, receive by someone other than the payee) and the
EIP-712 domain (name, version, chain id, verifying contract)."""

from __future__ import annotations

import pytest
from eth_abi import encode
from eth_utils import keccak
from web3.exceptions import ContractLogicError

from golem.chain.contracts import at
from golem.chain.eip3009 import (PRIMARY_RECEIVE, Authorization, TokenDomain, derive_nonce, sign_authorization,
                                 sign_cancel)
from golem.world.deploy import TxSender
from infra.anvil import ANVIL_ADDRESSES, ANVIL_KEYS

pytestmark = pytest.mark.integration

PAYER_KEY, PAYER = ANVIL_KEYS[2], ANVIL_ADDRESSES[2]  # the golem holds USDC in the seeded world
PAYEE, RELAYER_KEY = ANVIL_ADDRESSES[4], ANVIL_KEYS[5]


@pytest.fixture
def usdc(w3, world_snapshot):
    return at(w3, world_snapshot.address("USDC"), "FiatToken")


def _domain(w3, usdc) -> TokenDomain:
    return TokenDomain(usdc.functions.name().call(), usdc.functions.version().call(), w3.eth.chain_id, usdc.address)


def _now(w3) -> int:
    return int(w3.eth.get_block("latest")["timestamp"])


def _auth(w3, value=1_250_000, nonce=b"", after=None, before=None, to=PAYEE) -> Authorization:
    now = _now(w3)
    return Authorization(PAYER, to, value, now - 10 if after is None else after,
                         now + 600 if before is None else before, nonce or derive_nonce("test", value, now))


def _submit(w3, usdc, auth: Authorization, key=PAYER_KEY, fn="transferWithAuthorization", primary=None,
            sender_key=RELAYER_KEY, value=None):
    sig = sign_authorization(key, _domain(w3, usdc), auth, **({"primary": primary} if primary else {}))
    args = (auth.from_address, auth.to, auth.value if value is None else value, auth.valid_after, auth.valid_before,
            auth.nonce, sig.v, sig.r, sig.s)
    getattr(usdc.functions, fn)(*args).call({"from": TxSender.for_key(w3, sender_key).address})  # the revert reason
    tx = TxSender.for_key(w3, sender_key)
    h = tx.call_fn(usdc, fn, *args, gas=200_000)
    return w3.eth.wait_for_transaction_receipt(h)


def test_domain_separator_is_eip712_over_name_version_chain_and_contract(w3, usdc):
    d = _domain(w3, usdc)
    assert (d.name, d.version) == ("USD Coin", "2")
    typehash = keccak(text="EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
    expected = keccak(encode(["bytes32", "bytes32", "bytes32", "uint256", "address"],
                             [typehash, keccak(text=d.name), keccak(text=d.version), d.chain_id, usdc.address]))
    assert usdc.functions.DOMAIN_SEPARATOR().call() == expected


def test_a_valid_authorization_moves_the_funds_once(w3, usdc):
    auth = _auth(w3)
    before_payer, before_payee = (usdc.functions.balanceOf(a).call() for a in (PAYER, PAYEE))
    assert usdc.functions.authorizationState(PAYER, auth.nonce).call() is False
    receipt = _submit(w3, usdc, auth)
    assert receipt.status == 1
    assert usdc.functions.balanceOf(PAYER).call() == before_payer - auth.value
    assert usdc.functions.balanceOf(PAYEE).call() == before_payee + auth.value
    assert usdc.functions.authorizationState(PAYER, auth.nonce).call() is True
    used = usdc.events.AuthorizationUsed().process_receipt(receipt)
    assert [(e.args.authorizer, e.args.nonce) for e in used] == [(PAYER, auth.nonce)]
    with pytest.raises(ContractLogicError, match="authorization is used or canceled"):  # replayed
        _submit(w3, usdc, auth)
    assert usdc.functions.balanceOf(PAYER).call() == before_payer - auth.value


@pytest.mark.parametrize("case, reason", [
    ("expired", "authorization is expired"),
    ("not yet valid", "authorization is not yet valid"),
    ("wrong signer", "invalid signature"),
    ("wrong amount", "invalid signature"),
])
def test_the_token_refuses(w3, usdc, case, reason):
    now = _now(w3)
    kw: dict = {}
    auth = {"expired": lambda: _auth(w3, before=now - 1),
            "not yet valid": lambda: _auth(w3, after=now + 3600),
            "wrong signer": lambda: _auth(w3),
            "wrong amount": lambda: _auth(w3)}[case]()
    if case == "wrong signer":
        kw["key"] = ANVIL_KEYS[3]  # someone else signs a transfer from the golem's wallet
    if case == "wrong amount":
        kw["value"] = auth.value + 1  # the submitter raises the signed amount
    before = usdc.functions.balanceOf(PAYER).call()
    with pytest.raises(ContractLogicError, match=reason):
        _submit(w3, usdc, auth, **kw)
    assert usdc.functions.balanceOf(PAYER).call() == before
    assert usdc.functions.authorizationState(PAYER, auth.nonce).call() is False


def test_a_cancelled_authorization_cannot_be_used(w3, usdc):
    auth = _auth(w3)
    sig = sign_cancel(PAYER_KEY, _domain(w3, usdc), PAYER, auth.nonce)
    tx = TxSender.for_key(w3, RELAYER_KEY)
    receipt = w3.eth.wait_for_transaction_receipt(
        tx.call_fn(usdc, "cancelAuthorization", PAYER, auth.nonce, sig.v, sig.r, sig.s, gas=150_000))
    assert receipt.status == 1 and usdc.functions.authorizationState(PAYER, auth.nonce).call() is True
    assert len(usdc.events.AuthorizationCanceled().process_receipt(receipt)) == 1
    with pytest.raises(ContractLogicError, match="authorization is used or canceled"):
        _submit(w3, usdc, auth)
    forged = sign_cancel(ANVIL_KEYS[3], _domain(w3, usdc), PAYER, derive_nonce("other"))
    with pytest.raises(ContractLogicError, match="invalid signature"):
        usdc.functions.cancelAuthorization(PAYER, derive_nonce("other"), forged.v, forged.r, forged.s).call()


def test_receive_with_authorization_only_by_the_payee(w3, usdc):
    relayer = TxSender.for_key(w3, RELAYER_KEY).address
    auth = _auth(w3, to=relayer)
    with pytest.raises(ContractLogicError, match="caller must be the payee"):
        _submit(w3, usdc, auth, fn="receiveWithAuthorization", primary=PRIMARY_RECEIVE, sender_key=ANVIL_KEYS[3])
    # a transfer-typed signature does not pass as a receive authorization
    with pytest.raises(ContractLogicError, match="invalid signature"):
        _submit(w3, usdc, auth, fn="receiveWithAuthorization")
    before = usdc.functions.balanceOf(relayer).call()
    assert _submit(w3, usdc, auth, fn="receiveWithAuthorization", primary=PRIMARY_RECEIVE).status == 1
    assert usdc.functions.balanceOf(relayer).call() == before + auth.value
