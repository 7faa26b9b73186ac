"""`golem doctor` reports the worker's view, on the real dev server with a real worker: the shell
that runs the CLI has an API key and the worker does not, and doctor says what the worker sees; with no
worker serving the golem, it says so and falls back to the shell's view."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from tests.integration.golem_rig import REPO, in_process_worker, make_rig

pytestmark = pytest.mark.integration


def _doctor(temporal_env, rig, **env):
    return subprocess.run(
        [sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir), "doctor"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
        env=dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host, **env),
    )


async def test_doctor_asks_the_worker(temporal_env, tmp_path, request, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # the worker's environment has no key
    gid = f"doc-{abs(hash(request.node.name)) % 10**6}"
    rig = make_rig(tmp_path, gid, "calm", inference={"provider": "anthropic"})
    try:
        async with in_process_worker(temporal_env.client, rig):
            proc = await asyncio.to_thread(_doctor, temporal_env, rig, ANTHROPIC_API_KEY="sk-shell-only")
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout
        assert out.startswith("seen by the worker: pid "), out[:200]
        assert f"pid {os.getpid()}" in out  # this process hosts the in-process worker
        assert "$ANTHROPIC_API_KEY is not set" in out and "OfflineDeliberator" in out, out
        assert "sk-shell-only" not in out
        # no worker: said, then the shell's own view (which has the key)
        proc = await asyncio.to_thread(_doctor, temporal_env, rig, ANTHROPIC_API_KEY="sk-shell-only")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"no worker answered on task queue golem-{gid}")
        assert "$ANTHROPIC_API_KEY is set" in proc.stdout
    finally:
        rig.stop()
