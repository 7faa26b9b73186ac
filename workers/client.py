"""Temporal client construction: the one place that connects (the project's data converter everywhere)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from temporalio.client import Client, Interceptor
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.runtime import Runtime

from workers.converter import data_converter as lean_converter

DEFAULT_ADDRESS = "127.0.0.1:7233"
NAMESPACE = "default"


def temporal_address() -> str:
    return os.environ.get("GOLEM_TEMPORAL_ADDRESS", DEFAULT_ADDRESS)


def data_converter(codec: PayloadCodec | None = None) -> DataConverter:
    """Pydantic JSON without default-valued fields (workers/converter.py), sealed with AES-GCM when
    GOLEM_PAYLOAD_KEYS is set (workers/codec.py; off by default)."""
    from workers.codec import codec_from_env, with_codec

    return with_codec(lean_converter, codec if codec is not None else codec_from_env())


async def connect(address: str | None = None, *, interceptors: Sequence[Interceptor] = (),
                  runtime: Runtime | None = None, codec: PayloadCodec | None = None) -> Client:
    return await Client.connect(
        address or temporal_address(),
        namespace=NAMESPACE,
        data_converter=data_converter(codec),
        interceptors=list(interceptors),
        runtime=runtime,  # None: the SDK's default Runtime; the worker's serves the SDK's metrics
    )
