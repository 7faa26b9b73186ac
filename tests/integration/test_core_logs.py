"""The Temporal core's own log lines go through Python's logging (stderr, the worker's log), never onto a command's
stdout: `golem backtest --json` printed a core warning before its JSON on a loaded machine."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.integration.golem_rig import REPO

pytestmark = pytest.mark.integration

# A golem command's process (cli.main.main, which installs the process's Temporal runtime first) whose work is one
# workflow task that blocks 6 s: the core warns "Workflow task duration exceeded 5 seconds" (TMPRL1104).
SCRIPT = textwrap.dedent('''
    import asyncio, sys, time
    import cli.main
    from temporalio import workflow
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    @workflow.defn(name="SlowTaskWorkflow")
    class Slow:
        @workflow.run
        async def run(self) -> str:
            time.sleep(6)
            return "done"

    async def slow(address, queue):
        client = await Client.connect(address)
        async with Worker(client, task_queue=queue, workflows=[Slow], workflow_runner=UnsandboxedWorkflowRunner(),
                          debug_mode=True):
            print(await client.execute_workflow(Slow.run, id=queue, task_queue=queue))
            await asyncio.sleep(1.0)  # forwarded core lines are buffered a few ms

    address, queue = sys.argv[1], sys.argv[2]
    cli.main._run = lambda args: asyncio.run(slow(address, queue)) or 0
    sys.argv = ["golem", "ticks"]
    sys.exit(cli.main.main())
''')


def test_a_core_warning_reaches_stderr_and_never_stdout(temporal_env, tmp_path):
    address = temporal_env.client.service_client.config.target_host
    script = tmp_path / "slow_task.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), address, f"core-logs-{tmp_path.name}"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "done", f"stdout carries more than the command's output: {proc.stdout[-2000:]!r}"
    assert "exceeded 5 seconds" in proc.stderr, proc.stderr[-3000:]
