"""Committed histories replayed in CI (tests/integration/test_replay_histories.py) and the scripts that record them
(`make histories`)."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment


async def recording_server() -> WorkflowEnvironment:
    """A local dev server with the golem's search attributes and data converter, to record a history on."""
    from infra.temporal import search_attribute_keys, temporal_cli
    from workers.converter import data_converter

    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_cli()), search_attributes=search_attribute_keys(),
        data_converter=data_converter,
    )
