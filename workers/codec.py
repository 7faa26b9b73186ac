"""Encrypted payloads: an AES-GCM PayloadCodec so histories hold no readable records or strategy text.

Off unless GOLEM_PAYLOAD_KEYS ("k2:<base64 32 bytes>,k1:...") is set for every process that talks to the golem's
workflows; GOLEM_PAYLOAD_KEY_ID picks the sealing key (default: the first). Each payload names its key id, so
rotation is: add the new key first, keep the old ones until no open history needs them. The key never enters a
payload, a log line or a record. How to run it: docs/operations/encryption.md.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from collections.abc import Mapping, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12  # AES-GCM's standard nonce (NIST SP 800-38D)
KEYS_ENV = "GOLEM_PAYLOAD_KEYS"
KEY_ID_ENV = "GOLEM_PAYLOAD_KEY_ID"


class CodecConfigError(ValueError):
    """A bad GOLEM_PAYLOAD_KEYS / GOLEM_PAYLOAD_KEY_ID; the message says what to fix (never the key)."""


def parse_keys(text: str) -> dict[str, bytes]:
    keys: dict[str, bytes] = {}
    for i, item in enumerate(p.strip() for p in text.split(",") if p.strip()):
        kid, sep, b64 = item.partition(":")
        if not sep or not kid.strip():
            raise CodecConfigError(f"{KEYS_ENV} entry {i + 1} is not 'key-id:base64-key'")
        try:
            key = base64.b64decode(b64.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise CodecConfigError(f"{KEYS_ENV} key {kid.strip()!r} is not valid base64") from None
        if len(key) not in (16, 24, 32):
            raise CodecConfigError(f"{KEYS_ENV} key {kid.strip()!r} is {len(key)} bytes; AES needs 16, 24 or 32 "
                                   "(make one with: python -c \"import os,base64;print(base64.b64encode(os.urandom(32)).decode())\")")
        keys[kid.strip()] = key
    if not keys:
        raise CodecConfigError(f"{KEYS_ENV} names no key")
    return keys


class EncryptionCodec(PayloadCodec):
    def __init__(self, keys: Mapping[str, bytes], current: str | None = None) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not keys:
            raise CodecConfigError("no encryption key")
        self._ciphers = {kid: AESGCM(key) for kid, key in keys.items()}
        self.key_id = current or next(iter(keys))
        if self.key_id not in self._ciphers:
            raise CodecConfigError(f"{KEY_ID_ENV}={self.key_id!r} is not one of the ids in {KEYS_ENV} "
                                   f"({', '.join(self._ciphers)})")

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.seal(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.open(p) for p in payloads]

    def seal(self, p: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        data = nonce + self._ciphers[self.key_id].encrypt(nonce, p.SerializeToString(), None)
        return Payload(metadata={"encoding": ENCODING, KEY_ID: self.key_id.encode()}, data=data)

    def open(self, p: Payload) -> Payload:
        if p.metadata.get("encoding") != ENCODING:
            return p  # written before encryption was turned on: left as it is
        kid = p.metadata.get(KEY_ID, b"").decode()
        cipher = self._ciphers.get(kid)
        if cipher is None:
            raise CodecConfigError(f"payload sealed with key id {kid!r}, which {KEYS_ENV} does not hold "
                                   f"(it has {', '.join(self._ciphers)}); add that key to decode it")
        plain = cipher.decrypt(p.data[:NONCE_BYTES], p.data[NONCE_BYTES:], None)
        out = Payload()
        out.ParseFromString(plain)
        return out


def codec_from_env(env: Mapping[str, str] | None = None) -> EncryptionCodec | None:
    env = os.environ if env is None else env
    text = env.get(KEYS_ENV, "").strip()
    if not text:
        return None
    return EncryptionCodec(parse_keys(text), env.get(KEY_ID_ENV) or None)


def with_codec(converter: DataConverter, codec: PayloadCodec | None) -> DataConverter:
    return converter if codec is None else dataclasses.replace(converter, payload_codec=codec)
