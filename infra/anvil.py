"""Anvil, the local EVM of the dev world (pinned via npm: @foundry-rs/anvil-linux-amd64).

`AnvilProcess` runs one anvil on a port; with `state_path` it uses `--state` so the chain
(deployed world, balances, blocks) is loaded at start and dumped when stopped with SIGTERM. A crash
(SIGKILL, OOM) dumps nothing, so `checkpoint()` saves the live chain beside it atomically (anvil's own
`--state-interval` writes the file in place: a kill mid-write leaves truncated JSON it cannot load), and
`restore_checkpoint()` puts the newer of the two back before a restart.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

# The public dev accounts live in the domain (the deployer and simulator fall back to them); re-exported here.
from golem.world.devchain import ANVIL_ADDRESSES, ANVIL_CHAIN_ID, ANVIL_KEYS  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parent.parent
ANVIL_NPM_PATH = Path("node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil")


class AnvilError(RuntimeError):
    """Anvil could not be found, started or stopped."""


def anvil_binary() -> Path:
    """The anvil executable: `$ANVIL_BIN` if set, else the npm-pinned binary in the repo."""
    env = os.environ.get("ANVIL_BIN")
    if env:
        path = Path(env)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise AnvilError(f"ANVIL_BIN={env} is not an executable file; fix or unset it")
        return path
    path = REPO_ROOT / ANVIL_NPM_PATH
    if not path.is_file():
        raise AnvilError(
            f"anvil binary not found at {path}; run `npm ci` in {REPO_ROOT} "
            "(installs the pinned @foundry-rs/anvil) or set ANVIL_BIN to an anvil executable"
        )
    return path


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rpc_chain_id(url: str, timeout: float) -> int | None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return int(json.loads(resp.read())["result"], 16)
    except (OSError, urllib.error.URLError, ValueError, KeyError):
        return None


# Blocks whose state an Anvil keeps readable (see AnvilProcess.command): a tick reads at most a few blocks back.
HISTORY_STATES = 1024

class AnvilProcess:
    """One anvil process. Use `start()`/`stop()` or as a context manager."""

    def __init__(
        self,
        port: int,
        state_path: Path | None = None,
        block_time: float | None = None,
        chain_id: int = ANVIL_CHAIN_ID,
        log_path: Path | None = None,
        host: str = "127.0.0.1",
        extra_args: list[str] | None = None,
        history_states: int = HISTORY_STATES,
        new_session: bool = False,
    ) -> None:
        if history_states < 1:
            raise AnvilError(f"history_states must be >= 1 (blocks whose state stays readable), got {history_states}")
        if block_time is not None and block_time <= 0:
            raise AnvilError(f"block_time must be > 0 seconds (or None for automine), got {block_time}")
        self.port = port
        self.state_path = Path(state_path) if state_path is not None else None
        self.block_time = block_time
        self.chain_id = chain_id
        self.log_path = Path(log_path) if log_path is not None else None
        self.host = host
        self.extra_args = list(extra_args or [])
        self.history_states = history_states
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: BinaryIO | None = None
        # `golem run`: out of the terminal's process group, so Ctrl-C reaches Anvil through the ordered stop (after
        # the worker that reads it), not at once (tests keep it in theirs: an interrupted pytest takes it along)
        self.new_session = new_session

    @property
    def rpc_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def exit_code(self) -> int | None:
        """The exit code of a started anvil that has exited (negative: the signal), else None."""
        return self._proc.poll() if self._proc is not None else None

    @property
    def checkpoint_path(self) -> Path | None:
        return self.state_path.with_name(self.state_path.stem + ".checkpoint.json") if self.state_path else None

    def checkpoint(self, timeout: float = 10.0) -> Path:
        """Save the running chain (anvil_dumpState, gzipped JSON) as a `--state` file, atomically."""
        if self.checkpoint_path is None:
            raise AnvilError("checkpoint needs a state_path")
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "anvil_dumpState", "params": []}).encode()
        req = urllib.request.Request(self.rpc_url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            dump = json.loads(resp.read())["result"]
        state = gzip.decompress(bytes.fromhex(dump.removeprefix("0x")))
        tmp = self.checkpoint_path.with_suffix(".tmp")
        tmp.write_bytes(state)
        os.replace(tmp, self.checkpoint_path)
        return self.checkpoint_path

    def restore_checkpoint(self) -> bool:
        """Before restarting a crashed anvil: if the checkpoint is newer than the state file (or the state
        file does not parse), start from the checkpoint. Returns whether it was used."""
        ckpt, state = self.checkpoint_path, self.state_path
        if ckpt is None or state is None or not ckpt.exists():  # a checkpoint exists only beside a state file
            return False
        if state.exists() and state.stat().st_mtime >= ckpt.stat().st_mtime:
            try:
                json.loads(state.read_bytes())
                return False
            except ValueError:
                pass  # a dump cut short: the checkpoint is the last good chain
        tmp = state.with_suffix(".tmp")
        tmp.write_bytes(ckpt.read_bytes())
        os.replace(tmp, state)
        return True

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        cmd = [
            str(anvil_binary()),
            "--host", self.host,
            "--port", str(self.port),
            "--chain-id", str(self.chain_id),
        ]  # fmt: skip
        if self.state_path is not None:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            cmd += ["--state", str(self.state_path)]
        if self.block_time is not None:
            cmd += ["--block-time", f"{self.block_time:g}"]
        # Historical states: the newest `history_states` blocks' states stay in memory and readable (eth_call at a
        # past block, a revert reason replayed on the parent block); older ones are dropped, none go to disk.
        # Left to Anvil, states moved out of memory were written to disk without bound — ~380 KB per block, 2.3 GB
        # per 100 soak ticks (and 65 GB of killed Anvils' folders in ~/.foundry/anvil/tmp). In memory a state costs
        # ~70 KB here (RSS 93 MB at 256 states, 136 MB at 700). The cache folder stays as the target of a
        # user's own --max-persisted-states in extra_args.
        cmd += ["--prune-history", str(self.history_states), "--cache-path", str(self.cache_path)]
        return cmd + self.extra_args

    @property
    def cache_path(self) -> Path:
        """Where this Anvil keeps states it moved out of memory: beside the state file, or in the system temp."""
        base = self.state_path.parent if self.state_path is not None else Path(tempfile.gettempdir())
        return base / f"anvil-cache-{self.port}"

    def start(self, timeout: float = 15.0, on_spawn: Callable[[int], None] | None = None) -> "AnvilProcess":
        """Spawn anvil and wait until it answers eth_chainId. `on_spawn(pid)` runs as soon as the process exists,
        before it answers (a dream fork is registered there, so a caller killed while waiting leaves no orphan
        the registry does not know)."""
        if self.running:
            raise AnvilError(f"anvil already running on port {self.port} (pid {self.pid})")
        cmd = self.command()
        shutil.rmtree(self.cache_path, ignore_errors=True)  # left by a killed Anvil on this port
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "ab")
            out: BinaryIO | int = self._log_file
        else:
            out = subprocess.DEVNULL
        self._proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=self.new_session)
        if on_spawn is not None:
            try:
                on_spawn(self._proc.pid)
            except BaseException:
                self.stop()
                raise
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._close_log()
                self._proc = None
                where = f"; see {self.log_path}" if self.log_path else ""
                raise AnvilError(f"anvil exited with code {code} during start (port {self.port}){where}")
            chain_id = _rpc_chain_id(self.rpc_url, timeout=0.5)
            if chain_id is not None:
                if chain_id != self.chain_id:
                    self.stop()
                    raise AnvilError(
                        f"anvil on port {self.port} answers chain id {chain_id}, expected {self.chain_id}"
                        " (is another node on that port, or does the state file belong to another chain?)"
                    )
                return self
            time.sleep(0.05)
        self.stop()
        raise AnvilError(f"anvil did not answer eth_chainId on {self.rpc_url} within {timeout:.0f}s")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (anvil dumps `--state` on the way out), then SIGKILL if it hangs."""
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        finally:
            self._proc = None
            self._close_log()
            shutil.rmtree(self.cache_path, ignore_errors=True)

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> "AnvilProcess":
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"AnvilProcess(port={self.port}, state_path={self.state_path}, running={self.running})"
