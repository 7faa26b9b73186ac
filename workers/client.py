"""Temporal client construction: the one place that connects (pydantic data converter everywhere)."""

from __future__ import annotations

import os

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

DEFAULT_ADDRESS = "127.0.0.1:7233"
NAMESPACE = "default"


def temporal_address() -> str:
    return os.environ.get("GOLEM_TEMPORAL_ADDRESS", DEFAULT_ADDRESS)


async def connect(address: str | None = None, *, interceptors=(), runtime=None) -> Client:
    return await Client.connect(
        address or temporal_address(),
        namespace=NAMESPACE,
        data_converter=pydantic_data_converter,
        interceptors=list(interceptors),
        runtime=runtime,  # None: the SDK's default Runtime; the worker's serves the SDK's metrics
    )
