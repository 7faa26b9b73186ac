"""Supervision for the embedded stack: restart a crashed worker, simulator or Anvil with backoff.

`golem run` polls `Supervisor.check()`; a child that exited is reported (which one, its exit code or signal,
the last lines of its log) and restarted after a backoff that doubles with each recent crash. After
`crash_limit` crashes within `window_seconds` the supervisor gives up with `SupervisionGaveUp`, whose
message names the process, the cause and the log to read. Nothing durable lives in these processes:
the golem's state is in Temporal (the dev server's SQLite), its records on disk, the chain in Anvil's
`--state` file, so a restarted worker picks up the tick where the dead one left it.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from infra.anvil import AnvilProcess

T = TypeVar("T")

CRASH_LIMIT = 5  # crashes of one process ...
CRASH_WINDOW_SECONDS = 600.0  # ... within this many seconds: give up
BACKOFF_INITIAL_SECONDS = 1.0  # first restart after this; doubles per recent crash
BACKOFF_MAX_SECONDS = 30.0
LOG_TAIL_LINES = 5
LOG_LINE_CHARS = 240
ANVIL_CHECKPOINT_SECONDS = 5.0  # a crashed Anvil comes back with the chain as of at most this long ago


class SupervisionGaveUp(RuntimeError):
    """A process kept crashing: the stack stops rather than restart it forever."""


def describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name} (exit code {code})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def log_tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last non-empty lines of a log (read from its end; logs grow for days)."""
    if path is None or not path.exists():
        return []
    with path.open("rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 16384))
        text = f.read().decode("utf-8", "replace")
    return [ln if len(ln) <= LOG_LINE_CHARS else ln[:LOG_LINE_CHARS] + " ..." for ln in text.splitlines() if ln.strip()][-lines:]


class ProcessChild:
    """A supervised subprocess started by `spawn` (a fresh Popen each time)."""

    def __init__(self, name: str, spawn: Callable[[], subprocess.Popen], log_path: Path | None,
                 stop_timeout: float = 10.0) -> None:
        self.name = name
        self._spawn = spawn
        self.log_path = log_path
        self.stop_timeout = stop_timeout
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = self._spawn()

    def exit_code(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class AnvilChild:
    """Anvil under supervision: checkpointed every `checkpoint_seconds` while it runs; a restart loads the
    chain from its `--state` file or the newer checkpoint (AnvilProcess.restore_checkpoint)."""

    def __init__(self, anvil: AnvilProcess, name: str = "anvil",
                 checkpoint_seconds: float | None = ANVIL_CHECKPOINT_SECONDS) -> None:
        self.name = name
        self.anvil = anvil
        self.log_path = anvil.log_path
        self.checkpoint_seconds = checkpoint_seconds if anvil.state_path is not None else None
        self.restored_from_checkpoint = 0
        self._started = False
        self._last_checkpoint = 0.0

    def start(self) -> None:
        self.anvil.stop()  # clears the dead process (and its log handle); a no-op when none
        # Also on the first start: after the whole stack died (kill -9, a full disk) the state file may be older
        # than the last checkpoint, or cut short; the checkpoint is then the newest good chain.
        if self.anvil.restore_checkpoint():
            self.restored_from_checkpoint += 1
            if not self._started:
                print(f"anvil: starting from the checkpoint {self.anvil.checkpoint_path.name} (newer than the state "
                      "file, or the state file was cut short)", flush=True)
        self.anvil.start()
        self._started = True
        self._last_checkpoint = time.monotonic()

    def maintain(self, now: float) -> None:
        """Checkpoint the chain when one is due; a failed checkpoint waits for the next (anvil may be dying)."""
        if self.checkpoint_seconds is None or now - self._last_checkpoint < self.checkpoint_seconds:
            return
        self._last_checkpoint = now
        if self.exit_code() is None and self.anvil.running:
            try:
                self.anvil.checkpoint()
            except (OSError, ValueError, KeyError):
                pass

    def exit_code(self) -> int | None:
        return self.anvil.exit_code if self._started else None

    @property
    def pid(self) -> int | None:
        return self.anvil.pid

    def stop(self) -> None:
        self.anvil.stop()


@dataclass
class _Watch:
    child: ProcessChild | AnvilChild
    crashes: deque = field(default_factory=deque)  # monotonic times of recent crashes
    restart_at: float | None = None  # a restart is due at this time
    restarts: int = 0


class Supervisor:
    """Watches started children; `check()` is one non-blocking pass (call it every half second)."""

    def __init__(
        self,
        children: list,
        *,
        crash_limit: int = CRASH_LIMIT,
        window_seconds: float = CRASH_WINDOW_SECONDS,
        backoff_initial: float = BACKOFF_INITIAL_SECONDS,
        backoff_max: float = BACKOFF_MAX_SECONDS,
        say: Callable[[str], None] = lambda msg: print(msg, flush=True),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if crash_limit < 1 or window_seconds <= 0:
            raise ValueError(f"crash_limit must be >= 1 and window_seconds > 0 (got {crash_limit}, {window_seconds})")
        self._watches = {c.name: _Watch(c) for c in children}
        self.crash_limit = crash_limit
        self.window_seconds = window_seconds
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._say = say
        self._clock = clock

    def restarts(self, name: str) -> int:
        return self._watches[name].restarts

    def check(self) -> None:
        now = self._clock()
        for w in self._watches.values():
            if w.restart_at is not None:
                if now >= w.restart_at:
                    self._restart(w, now)
                continue
            code = w.child.exit_code()
            if code is not None:
                self._crashed(w, code, now)
            elif hasattr(w.child, "maintain"):
                w.child.maintain(now)

    def _crashed(self, w: _Watch, code: int | None, now: float, why: str | None = None) -> None:
        name = w.child.name
        w.crashes.append(now)
        while w.crashes and now - w.crashes[0] > self.window_seconds:
            w.crashes.popleft()
        tail = log_tail(w.child.log_path)
        where = f" (log: {w.child.log_path})" if w.child.log_path else ""
        lines = "".join(f"\n    | {ln}" for ln in tail)
        cause = why or describe_exit(code)
        minutes = self.window_seconds / 60
        if len(w.crashes) >= self.crash_limit:
            raise SupervisionGaveUp(
                f"{name} crashed {len(w.crashes)} times in {minutes:g} minutes; giving up. Last: {cause}{where}"
                f"{lines}\nFix the cause and run `golem run` again: the golem resumes from its last tick."
            )
        delay = min(self.backoff_initial * 2 ** (len(w.crashes) - 1), self.backoff_max)
        self._say(f"{name} died: {cause}{where}; last log lines:{lines or ' (none)'}\n"
                  f"  restarting {name} in {delay:g}s (crash {len(w.crashes)} of {self.crash_limit} allowed "
                  f"in {minutes:g} min)")
        w.restart_at = now + delay

    def _restart(self, w: _Watch, now: float) -> None:
        w.restart_at = None
        try:
            w.child.start()
        except Exception as err:  # a failed start counts as a crash and backs off again
            self._crashed(w, None, now, why=f"restart failed: {err}")
            return
        w.restarts += 1
        self._say(f"{w.child.name} restarted (pid {w.child.pid}, restart {w.restarts})")

    def stop(self) -> None:
        """Stop every child, in reverse order of the list (the worker before the chain it reads)."""
        for w in reversed(list(self._watches.values())):
            w.child.stop()


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_grace_seconds: float | None = None  # set by stop_on_signals: the net a signalled clean-up runs under


def stop_on_signals(grace_seconds: float = 20.0) -> None:
    """SIGTERM and SIGINT stop the run cleanly: both raise KeyboardInterrupt (asyncio.run then cancels the run, whose
    `finally` stops the stack it started). Explicit, because a shell starts a background job with SIGINT ignored, and
    `kill PID` must not leave Temporal, Anvil, the simulator and the worker running as orphans (chaos, soak,
    `golem backtest`). A clean-up that hangs is cut short after `grace_seconds`: the process's own children are
    terminated and it exits 130. A run with an in-process Temporal worker must not take the KeyboardInterrupt inside
    its event loop: run it with `run_stoppable` (below)."""
    global _grace_seconds
    _grace_seconds = grace_seconds

    def _interrupt(signum: int, frame: object) -> None:
        begin_stop()
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)


def begin_stop() -> None:
    """A stop signal arrived: ignore the next one (a second `kill` must not cut the clean-up short) and, when
    `stop_on_signals` is in force, arm its net: after its grace the children are terminated and the process exits."""
    import os
    import threading

    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    grace = _grace_seconds
    if grace is None:
        return

    def _force() -> None:
        children = child_pids(os.getpid())
        for pid in children:
            _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and any(_alive(pid) for pid in children):
            time.sleep(0.1)
        for pid in children:
            _kill(pid, signal.SIGKILL)
        print(f"stopped: clean-up took over {grace:.0f}s; terminated {len(children)} child process(es)", flush=True)
        os._exit(130)

    timer = threading.Timer(grace, _force)
    timer.daemon = True
    timer.start()


def run_stoppable(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` where SIGTERM/SIGINT cancel `main` alone, then raise KeyboardInterrupt("SIGTERM") here.

    Why: a KeyboardInterrupt raised by a Python signal handler lands wherever the main thread happens to be (inside
    the selector, a callback, some task's step) and stops the loop; asyncio.run then cancels *every* task at once.
    With an in-process Temporal worker that includes the worker's own activation and poller tasks: a workflow
    activation whose task was cancelled is never completed to the SDK core, whose `finalize_shutdown` then waits for
    it forever (`golem backtest` hung there after `kill`, with Temporal left running). Here the signal only cancels
    `main`, whose `async with worker` shuts the worker down in order (the SDK's graceful shutdown), then its
    `finally` blocks stop Anvil and Temporal. The handlers are the loop's (`add_signal_handler`): nothing is raised
    inside the loop. Off the main thread (signals cannot be handled there) this is plain asyncio.run."""
    import asyncio
    import threading

    received: list[int] = []

    async def _guarded() -> T:
        task = asyncio.current_task()
        assert task is not None  # asyncio.run runs this as its main task
        loop = asyncio.get_running_loop()
        saved = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

        def _on_signal(signum: int) -> None:
            if received:  # once, as stop_on_signals: a second signal must not cut the clean-up short
                return
            received.append(signum)
            begin_stop()
            task.cancel()

        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, _on_signal, sig)
        try:
            return await main
        finally:
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)  # (it leaves SIG_DFL behind: restore, or ignore after a stop)
                signal.signal(sig, signal.SIG_IGN if received else saved[sig])

    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(main)
    try:
        result = asyncio.run(_guarded())
    except (asyncio.CancelledError, Exception) as err:
        # after a stop, whatever `main` ended with is the cancellation (or a library's wrapping of it: the Temporal
        # client turns a cancelled `execute_update` into WorkflowUpdateRPCTimeoutOrCancelledError)
        if not received:
            raise
        raise KeyboardInterrupt(signal.Signals(received[0]).name) from err
    if received:  # `main` finished as the signal came: the owner still asked for a stop
        raise KeyboardInterrupt(signal.Signals(received[0]).name)
    return result


def child_pids(parent: int) -> list[int]:
    """The live children of `parent`, from /proc (Linux)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill(pid: int, sig: int) -> None:
    import os

    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
