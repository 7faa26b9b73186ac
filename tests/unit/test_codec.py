"""The AES-GCM payload codec: round trip, rotation by key id, refusals that say what to fix (never the key)."""

from __future__ import annotations

import base64
import os

import pytest
from temporalio.api.common.v1 import Payload

from workers.codec import ENCODING, KEY_ID, CodecConfigError, EncryptionCodec, codec_from_env, parse_keys


def _b64(n: int = 32) -> str:
    return base64.b64encode(os.urandom(n)).decode()


async def test_round_trip_hides_the_plaintext_and_names_the_key():
    codec = codec_from_env({"GOLEM_PAYLOAD_KEYS": f"k1:{_b64()}"})
    p = Payload(metadata={"encoding": b"json/plain"}, data=b'{"prediction_error": 0.42}')
    [sealed] = await codec.encode([p])
    assert sealed.metadata["encoding"] == ENCODING and sealed.metadata[KEY_ID] == b"k1"
    assert b"prediction_error" not in sealed.SerializeToString()
    [back] = await codec.decode([sealed])
    assert back == p
    [again] = await codec.encode([p])
    assert again.data != sealed.data  # a fresh nonce every time


async def test_rotation_decodes_old_key_ids_and_seals_with_the_current():
    k1, k2 = _b64(), _b64()
    old = EncryptionCodec(parse_keys(f"k1:{k1}"))
    [sealed_old] = await old.encode([Payload(data=b"x")])
    new = codec_from_env({"GOLEM_PAYLOAD_KEYS": f"k2:{k2},k1:{k1}"})
    assert new.key_id == "k2"
    assert (await new.decode([sealed_old]))[0].data == b"x"
    [sealed_new] = await new.encode([Payload(data=b"y")])
    assert sealed_new.metadata[KEY_ID] == b"k2"
    with pytest.raises(CodecConfigError, match="key id 'k2'"):
        await old.decode([sealed_new])
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b"{}")
    assert (await new.decode([plain]))[0] == plain  # written before encryption was on


async def test_tampering_fails_and_bad_config_is_one_line_without_the_key():
    codec = EncryptionCodec(parse_keys(f"k1:{_b64()}"))
    [sealed] = await codec.encode([Payload(data=b"secret")])
    tampered = Payload(metadata=sealed.metadata, data=sealed.data[:-1] + bytes([sealed.data[-1] ^ 1]))
    with pytest.raises(Exception):
        await codec.decode([tampered])
    short = _b64(8)
    with pytest.raises(CodecConfigError, match="8 bytes") as err:
        parse_keys(f"k:{short}")
    assert short not in str(err.value)
    with pytest.raises(CodecConfigError, match="not one of the ids"):
        codec_from_env({"GOLEM_PAYLOAD_KEYS": f"k1:{_b64()}", "GOLEM_PAYLOAD_KEY_ID": "k9"})
    assert codec_from_env({}) is None  # off by default


async def test_the_converter_every_client_uses_seals_with_the_owners_key_from_the_environment(monkeypatch):
    """The owner's path: GOLEM_PAYLOAD_KEYS in the environment, no codec passed in (workers.client.connect builds
    the worker's, the CLI's and the dashboard's client this way). Without the key it stays plaintext."""
    from workers.client import data_converter

    monkeypatch.setenv("GOLEM_PAYLOAD_KEYS", f"k7:{_b64()}")
    converter = data_converter()
    assert isinstance(converter.payload_codec, EncryptionCodec) and converter.payload_codec.key_id == "k7"
    [sealed] = await converter.encode([{"prediction_error": 0.42, "record_path": "cycles/cycle-000001.json"}])
    assert sealed.metadata["encoding"] == ENCODING and b"prediction_error" not in sealed.SerializeToString()
    assert await converter.decode([sealed], [dict]) == [{"prediction_error": 0.42,
                                                         "record_path": "cycles/cycle-000001.json"}]
    monkeypatch.delenv("GOLEM_PAYLOAD_KEYS")
    [plain] = await data_converter().encode([{"prediction_error": 0.42}])
    assert plain.metadata["encoding"] != ENCODING and b"prediction_error" in plain.data
