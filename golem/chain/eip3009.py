"""EIP-3009 authorizations over a token's EIP-712 domain: the typed data, local signing, the nonce.

A payer signs "move `value` from me to `to`, valid between two times, once (nonce)"; anyone may submit it
(transferWithAuthorization) and the token refuses a reused or cancelled nonce. The golem derives its nonces from
what the payment is for, so a retried activity signs the same nonce and cannot pay twice
(docs/design/payments.md#idempotence). Signing is pure: the key is an argument and never stored here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import keccak, to_checksum_address

_FIELDS = [
    {"name": "from", "type": "address"}, {"name": "to", "type": "address"}, {"name": "value", "type": "uint256"},
    {"name": "validAfter", "type": "uint256"}, {"name": "validBefore", "type": "uint256"},
    {"name": "nonce", "type": "bytes32"},
]
_DOMAIN_FIELDS = [
    {"name": "name", "type": "string"}, {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"},
]
PRIMARY_TRANSFER, PRIMARY_RECEIVE, PRIMARY_CANCEL = (
    "TransferWithAuthorization", "ReceiveWithAuthorization", "CancelAuthorization")


@dataclass(frozen=True)
class TokenDomain:
    """The EIP-712 domain a token signs under (Circle's USDC: its name, version "2")."""

    name: str
    version: str
    chain_id: int
    verifying_contract: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "chainId": self.chain_id,
                "verifyingContract": to_checksum_address(self.verifying_contract)}


@dataclass(frozen=True)
class Authorization:
    """One EIP-3009 transfer authorization (amount in the token's base units)."""

    from_address: str
    to: str
    value: int
    valid_after: int
    valid_before: int
    nonce: bytes  # 32 bytes

    def message(self) -> dict[str, Any]:
        return {"from": to_checksum_address(self.from_address), "to": to_checksum_address(self.to),
                "value": self.value, "validAfter": self.valid_after, "validBefore": self.valid_before,
                "nonce": self.nonce}


@dataclass(frozen=True)
class Signed:
    v: int
    r: bytes
    s: bytes

    @property
    def signature(self) -> str:
        """The 65-byte r‖s‖v signature, 0x-hex (what x402 payloads carry)."""
        return "0x" + (self.r + self.s + bytes([self.v])).hex()


def _sign(private_key: str, domain: TokenDomain, primary: str, fields: list[dict[str, str]],
          message: dict[str, Any]) -> Signed:
    typed = {"types": {"EIP712Domain": _DOMAIN_FIELDS, primary: fields}, "primaryType": primary,
             "domain": domain.as_dict(), "message": message}
    sig = Account.sign_message(encode_typed_data(full_message=typed), private_key)
    return Signed(v=sig.v, r=sig.r.to_bytes(32, "big"), s=sig.s.to_bytes(32, "big"))


def sign_authorization(private_key: str, domain: TokenDomain, auth: Authorization,
                       primary: str = PRIMARY_TRANSFER) -> Signed:
    """Sign `auth` as a transfer (or, with PRIMARY_RECEIVE, a receive) authorization. Pure."""
    return _sign(private_key, domain, primary, _FIELDS, auth.message())


def sign_cancel(private_key: str, domain: TokenDomain, authorizer: str, nonce: bytes) -> Signed:
    fields = [{"name": "authorizer", "type": "address"}, {"name": "nonce", "type": "bytes32"}]
    return _sign(private_key, domain, PRIMARY_CANCEL, fields,
                 {"authorizer": to_checksum_address(authorizer), "nonce": nonce})


def derive_nonce(*parts: object) -> bytes:
    """A 32-byte nonce fixed by what the payment is for (golem, tick, run, call, payee, amount): the same
    request retried signs the same nonce, which the token accepts once. Pure."""
    return keccak(("golem-x402-nonce|" + "|".join(str(p) for p in parts)).encode())
