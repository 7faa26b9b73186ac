"""Anvil forks of the golem's own chain for dream rehearsal, and their cleanup.

Every fork is written to `<data>/dream-forks.json` before it is used and `sweep()` stops what that file names; the
dream activities sweep at their start and the worker when it starts, so an orphan of a killed worker lives at most
until the next phase or start. A pid is only killed when /proc says it is still an anvil forking the golem's RPC on
the registered port: a recycled pid is left alone. See docs/concepts/dreams.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from golem.layout import DataLayout
from infra.anvil import AnvilProcess, free_port

REGISTRY_NAME = "dream-forks.json"


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [p.decode(errors="replace") for p in raw.split(b"\0") if p]


def _is_our_fork(pid: int, port: int, fork_url: str) -> bool:
    cmd = _cmdline(pid)
    if not cmd or not Path(cmd[0]).name.startswith("anvil"):
        return False
    return "--fork-url" in cmd and fork_url in cmd and str(port) in cmd


class ForkRegistry:
    """The forks one golem's worker started, on its data dir (one file; one worker owns the dir)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / REGISTRY_NAME
        self.work_dir = DataLayout(self.data_dir).dream_forks

    def entries(self) -> list[dict]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []

    def _write(self, entries: list[dict]) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries, indent=1))
        os.replace(tmp, self.path)

    def _add(self, entry: dict) -> None:
        self._write([*self.entries(), entry])

    def _remove(self, pid: int | None) -> None:
        self._write([e for e in self.entries() if e.get("pid") != pid])

    def live(self) -> list[dict]:
        """Registered forks whose process is still running."""
        return [e for e in self.entries() if _is_our_fork(e["pid"], e["port"], e["fork_url"])]

    def sweep(self) -> list[int]:
        """Stop every registered fork still running (left by a killed worker or a retried activity); returns
        the pids stopped and empties the file."""
        stopped = []
        for e in self.entries():
            pid = e.get("pid")
            if pid and _is_our_fork(pid, e["port"], e["fork_url"]):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    stopped.append(pid)
            if e.get("cache_path"):
                import shutil

                shutil.rmtree(e["cache_path"], ignore_errors=True)
        deadline = time.monotonic() + 5
        while stopped and time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() and
                                                              _cmdline(p) for p in stopped):
            time.sleep(0.05)
        self._write([])
        return stopped

    @contextlib.contextmanager
    def fork(self, fork_url: str, block: int | None = None, label: str = "") -> Iterator[AnvilProcess]:
        """An Anvil fork of `fork_url` at `block` (None: latest), registered while it runs, stopped after."""
        port = free_port()
        # --auto-impersonate: the fork takes unsigned sends from any account, so no key is used on a fork.
        args = ["--fork-url", fork_url, "--auto-impersonate"]
        if block is not None:
            args += ["--fork-block-number", str(block)]
        self.work_dir.mkdir(parents=True, exist_ok=True)
        proc = AnvilProcess(port=port, log_path=self.work_dir / "forks.log", extra_args=args)
        # Registered the moment the process exists, before it answers: a worker killed while the fork loads its
        # state (start() waiting) leaves a fork the next sweep knows.
        spawned: list[int] = []

        def register(pid: int) -> None:
            spawned.append(pid)
            self._add({"pid": pid, "port": port, "fork_url": fork_url, "block": block, "label": label,
                       "started_at": time.time(), "cache_path": str(proc.cache_path)})

        try:
            proc.start(timeout=30, on_spawn=register)
        except BaseException:
            for pid in spawned:  # start() stopped it (or it exited): its entry goes too
                self._remove(pid)
            raise
        try:
            yield proc
        finally:
            pid = proc.pid
            proc.stop(timeout=5)
            self._remove(pid)
