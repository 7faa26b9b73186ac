"""Supervision for the embedded stack: restart a crashed Temporal dev server, Anvil, simulator, worker or dashboard.

`golem run` polls `Supervisor.check()`; a child that exited is reported (which one, its exit code or signal,
the last lines of its log) and restarted after a backoff that doubles with each recent crash. After
`crash_limit` crashes within `window_seconds` the supervisor gives up with `SupervisionGaveUp`. Nothing durable
lives in the processes but the dev server's SQLite and Anvil's `--state` file, both reopened on a restart. The
stop is ordered and bounded; `sweep_children` kills what is left, naming it. See docs/design/supervision.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from infra.anvil import AnvilProcess
from infra.console import ignore_sigpipe
from infra.console import say as console_say
from infra.temporal import TemporalDevServer, port_open

T = TypeVar("T")

CRASH_LIMIT = 5  # crashes of one process ...
CRASH_WINDOW_SECONDS = 600.0  # ... within this many seconds: give up
BACKOFF_INITIAL_SECONDS = 1.0  # first restart after this; doubles per recent crash
BACKOFF_MAX_SECONDS = 30.0
LOG_TAIL_LINES = 5
LOG_LINE_CHARS = 240
ANVIL_CHECKPOINT_SECONDS = 5.0  # a crashed Anvil comes back with the chain as of at most this long ago
STOP_BUDGET_SECONDS = 15.0  # the ordered stop of the whole stack; then what is left is killed
LEFTOVER_GRACE_SECONDS = 3.0  # a child still running this long after its stop is killed (with its process group)


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

    def __init__(self, name: str, spawn: Callable[[], subprocess.Popen[bytes]], log_path: Path | None,
                 stop_timeout: float = 10.0) -> None:
        self.name = name
        self._spawn = spawn
        self.log_path = log_path
        self.stop_timeout = stop_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = self._spawn()

    def exit_code(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def stop(self, timeout: float | None = None) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=self.stop_timeout if timeout is None else min(timeout, self.stop_timeout))
        except subprocess.TimeoutExpired:
            _kill(proc.pid, signal.SIGKILL, group=True)  # with what it started (its own session: its group)
            proc.wait(timeout=5)


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
            ckpt = self.anvil.checkpoint_path  # set: restore_checkpoint used it
            if not self._started and ckpt is not None:
                console_say(f"anvil: starting from the checkpoint {ckpt.name} (newer than the "
                            "state file, or the state file was cut short)")
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

    def stop(self, timeout: float | None = None) -> None:
        self.anvil.stop() if timeout is None else self.anvil.stop(timeout=max(timeout, 1.0))


class TemporalChild:
    """The Temporal dev server under supervision: a restart reopens the same SQLite file on the same ports, so the
    golem's workflows, timers and pending activities are where the dead server left them; the worker's and the
    dashboard's clients reconnect on their own (the SDK retries an unavailable server)."""

    def __init__(self, server: TemporalDevServer, name: str = "temporal", port_wait_seconds: float = 10.0) -> None:
        self.name = name
        self.server = server
        self.log_path = server.log_path
        self.port_wait_seconds = port_wait_seconds
        self._started = False

    def start(self) -> None:
        if self._started:
            self.server.stop()  # reaps the dead process; a no-op when none
            # the dead server's listening socket is gone at once, but a stray server on the port must not be taken
            # for ours: wait for the port to be free, then start (which refuses a port in use)
            deadline = time.monotonic() + self.port_wait_seconds
            while port_open(self.server.ip, self.server.port) and time.monotonic() < deadline:
                time.sleep(0.2)
        self.server.start()
        self._started = True

    def exit_code(self) -> int | None:
        proc = self.server.proc
        return proc.poll() if self._started and proc is not None else None

    @property
    def pid(self) -> int | None:
        return self.server.proc.pid if self.server.proc is not None else None

    def stop(self, timeout: float | None = None) -> None:
        self.server.stop() if timeout is None else self.server.stop(timeout=max(timeout, 1.0))


Child = ProcessChild | AnvilChild | TemporalChild


@dataclass
class _Watch:
    child: Child
    crashes: deque[float] = field(default_factory=deque)  # monotonic times of recent crashes
    restart_at: float | None = None  # a restart is due at this time
    restarts: int = 0
    down_since: float | None = None  # monotonic time the crash was seen (the outage, for the log and events)


class Supervisor:
    """Watches started children; `check()` is one non-blocking pass (call it every half second)."""

    def __init__(
        self,
        children: list[Child],
        *,
        crash_limit: int = CRASH_LIMIT,
        window_seconds: float = CRASH_WINDOW_SECONDS,
        backoff_initial: float = BACKOFF_INITIAL_SECONDS,
        backoff_max: float = BACKOFF_MAX_SECONDS,
        say: Callable[[str], object] = console_say,
        clock: Callable[[], float] = time.monotonic,
        notify: Callable[[str, dict[str, Any]], None] | None = None,
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
        self._notify = notify  # ("died" | "restarted" | "gave_up", details): the status file and the Event Fabric
        self.seen: dict[int, str] = {}  # every pid a child ran as (restarts included): what the final sweep names

    def restarts(self, name: str) -> int:
        return self._watches[name].restarts

    def children(self) -> list[Child]:
        return [w.child for w in self._watches.values()]

    def _tell(self, kind: str, **details: Any) -> None:
        if self._notify is not None:
            try:
                self._notify(kind, details)
            except Exception as err:  # a full disk must not stop supervision
                self._say(f"(supervision could not record {kind} of {details.get('name')}: {err})")

    def _note_pids(self) -> None:
        for w in self._watches.values():
            if w.child.pid is not None:
                self.seen.setdefault(w.child.pid, w.child.name)

    def check(self) -> None:
        now = self._clock()
        self._note_pids()
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
        if w.down_since is None:
            w.down_since = now
        if len(w.crashes) >= self.crash_limit:
            self._tell("gave_up", name=name, cause=cause, crashes=len(w.crashes), crash_limit=self.crash_limit,
                       log=str(w.child.log_path or ""))
            raise SupervisionGaveUp(
                f"{name} crashed {len(w.crashes)} times in {minutes:g} minutes; giving up. Last: {cause}{where}"
                f"{lines}\nFix the cause and run `golem run` again: the golem resumes from its last tick."
            )
        delay = min(self.backoff_initial * 2 ** (len(w.crashes) - 1), self.backoff_max)
        self._say(f"{name} died: {cause}{where}; last log lines:{lines or ' (none)'}\n"
                  f"  restarting {name} in {delay:g}s (crash {len(w.crashes)} of {self.crash_limit} allowed "
                  f"in {minutes:g} min)")
        w.restart_at = now + delay
        self._tell("died", name=name, cause=cause, crash=len(w.crashes), crash_limit=self.crash_limit,
                   restart_in_seconds=delay, log=str(w.child.log_path or ""))

    def _restart(self, w: _Watch, now: float) -> None:
        w.restart_at = None
        try:
            w.child.start()
        except Exception as err:  # a failed start counts as a crash and backs off again
            self._crashed(w, None, now, why=f"restart failed: {err}")
            return
        w.restarts += 1
        self._note_pids()
        down = self._clock() - w.down_since if w.down_since is not None else 0.0
        w.down_since = None
        self._say(f"{w.child.name} restarted (pid {w.child.pid}, restart {w.restarts}; down {down:.1f}s)")
        self._tell("restarted", name=w.child.name, pid=w.child.pid, restart=w.restarts, down_seconds=round(down, 1))

    def stop(self, budget_seconds: float = STOP_BUDGET_SECONDS) -> list[str]:
        """Stop every child in reverse order of the list (the dashboard and the worker before the chain they read,
        the dev server last), each within what is left of `budget_seconds`. A child whose stop fails does not keep
        the next from stopping; the failures are returned (sweep_children kills what they left)."""
        deadline = time.monotonic() + budget_seconds
        problems = []
        self._note_pids()
        for w in reversed(list(self._watches.values())):
            w.restart_at = None  # a restart that was due never comes now
            running, t0 = w.child.exit_code() is None and w.child.pid is not None, time.monotonic()
            try:
                w.child.stop(timeout=max(deadline - time.monotonic(), 0.5))
            except Exception as err:
                problems.append(f"{w.child.name}: {type(err).__name__}: {err}")
                continue
            if running:
                self._say(f"  {w.child.name} stopped ({time.monotonic() - t0:.1f}s)")
        return problems


def sweep_children(names: dict[int, str] | None = None, grace: float = LEFTOVER_GRACE_SECONDS,
                   say: Callable[[str], object] = console_say, parent: int | None = None) -> list[str]:
    """The final check after a stop: every live child of this process (every one it started, restarted ones
    included: their parent is us) and every live member of the process groups in `names` (pid -> name of each
    child the supervisor saw; the stack starts each in a session of its own, so what a child started — a worker's
    dream fork, orphaned when the worker was SIGKILLed — is in its group) is terminated, killed if it is still
    there after `grace` seconds, and named. Returns what was found."""
    parent = os.getpid() if parent is None else parent
    names = names or {}
    left = _leftovers(parent, set(names))
    if not left:
        return []
    found = {pid: f"{names.get(pid) or (f'started by {names[pgid]}' if pgid in names else None) or _cmdline(pid)} "
                  f"(pid {pid})" for pid, pgid in sorted(left.items())}
    for pid in left:
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = {p: g for p, g in left.items() if _alive(p)}
    for pid in left:
        _kill(pid, signal.SIGKILL)
    for pid in found:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)  # ours: reap it (a grandchild is init's to reap)
    killed = f"; still there after {grace:g}s, killed: {', '.join(found[p] for p in left)}" if left else ""
    say(f"still running after the stop, terminated: {', '.join(found.values())}{killed}")
    return list(found.values())


def _leftovers(parent: int, groups: set[int]) -> dict[int, int]:
    """Live processes (pid -> process group) that are children of `parent` or members of one of `groups`."""
    out = {}
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, state, ppid, pgrp = int(stat.parent.name), fields[0], int(fields[1]), int(fields[2])
        if state != "Z" and pid != me and (ppid == parent or pgrp in groups):
            out[pid] = pgrp
    return out


def _cmdline(pid: int) -> str:
    try:
        parts = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "a child process"
    return " ".join(p.decode(errors="replace") for p in parts if p)[:80] or "a child process"


class SupervisionJournal:
    """What supervision saw, for those who were not watching the console: `<data>/supervision.json` (which process
    is down since when, restarts, the last cause; `golem status` reads it) and the Event Fabric (alerts.process_*,
    `golem events`, the dashboard)."""

    FILE = "supervision.json"

    def __init__(self, data_dir: Path, golem_id: str) -> None:
        self.path = Path(data_dir) / self.FILE
        self.data_dir = Path(data_dir)
        self.golem_id = golem_id
        self.state: dict[str, Any] = {"run_pid": os.getpid(), "processes": {}}
        self._write()

    def __call__(self, kind: str, details: dict[str, Any]) -> None:
        from datetime import datetime, timezone

        now = datetime.now(timezone.utc).isoformat()
        name = details["name"]
        proc = self.state["processes"].setdefault(name, {"restarts": 0})
        if kind == "died":
            proc.update(state="down", since=proc.get("since") if proc.get("state") == "down" else now,
                        cause=details["cause"], crash=details["crash"], crash_limit=details["crash_limit"],
                        restart_in_seconds=details["restart_in_seconds"])
        elif kind == "restarted":
            proc.update(state="up", since=now, restarts=details["restart"], pid=details["pid"],
                        last_outage_seconds=details["down_seconds"])
        elif kind == "gave_up":
            proc.update(state="gave_up", since=now, cause=details["cause"])
        self._write()
        self._event(kind, now, details)

    def stopped(self) -> None:
        self.state["stopped"] = True
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        tmp.replace(self.path)

    def _event(self, kind: str, now: str, details: dict[str, Any]) -> None:
        from golem.events.models import make_event
        from golem.events.store import EventStore

        ev = {"died": "alerts.process_died", "restarted": "alerts.process_restarted",
              "gave_up": "alerts.supervision_gave_up"}[kind]
        EventStore(self.data_dir).append([make_event(self.golem_id, None, now, ev, f"{details['name']}:{now}",
                                                     **{k: v for k, v in details.items() if k != "log"})])


def supervision_note(data_dir: Path) -> str | None:
    """One line on what `golem run`'s supervision saw, for `golem status` (None: no running `golem run` here)."""
    path = Path(data_dir) / SupervisionJournal.FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if state.get("stopped") or not _alive(int(state.get("run_pid", 0))):
        return None
    parts = []
    for name, p in sorted(state.get("processes", {}).items()):
        if p.get("state") == "down":
            parts.append(f"{name} DOWN since {str(p.get('since', ''))[11:19]} UTC ({p.get('cause')}; restart "
                         f"{p.get('restarts', 0) + 1} due, crash {p.get('crash')} of {p.get('crash_limit')} allowed)")
        elif p.get("state") == "gave_up":
            parts.append(f"{name} GAVE UP ({p.get('cause')})")
        elif p.get("restarts"):
            parts.append(f"{name} restarted {p['restarts']}x (last outage {p.get('last_outage_seconds')}s, back at "
                         f"{str(p.get('since', ''))[11:19]} UTC)")
    return "; ".join(parts) if parts else "every process up, none restarted"


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # SIGHUP: the terminal went away
_grace_seconds: float | None = None  # set by stop_on_signals: the net a signalled clean-up runs under


def stop_on_signals(grace_seconds: float = 20.0) -> None:
    """SIGTERM, SIGINT and SIGHUP stop the run cleanly: each raises KeyboardInterrupt (asyncio.run then cancels the
    run, whose `finally` stops the stack it started). Explicit, because a shell starts a background job with SIGINT
    ignored, and `kill PID` must not leave Temporal, Anvil, the simulator and the worker running as orphans (chaos,
    soak, `golem backtest`). SIGPIPE is ignored: a console piped into a `tee` that died first costs nothing (see
    infra.console). A clean-up that hangs is cut short after `grace_seconds`: the process's own children are
    killed, named, and it exits 130. A run with an in-process Temporal worker must not take the KeyboardInterrupt
    inside its event loop: run it with `run_stoppable` (below)."""
    global _grace_seconds
    _grace_seconds = grace_seconds
    ignore_sigpipe()

    def _interrupt(signum: int, frame: object) -> None:
        begin_stop()
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in STOP_SIGNALS:
        signal.signal(sig, _interrupt)


def begin_stop() -> None:
    """A stop signal arrived: ignore the next one (a second `kill` must not cut the clean-up short) and, when
    `stop_on_signals` is in force, arm its net: after its grace the children are killed and the process exits."""
    import threading

    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    grace = _grace_seconds
    if grace is None:
        return

    def _force() -> None:
        children = child_pids(os.getpid())
        for pid in children:  # SIGTERM first (Anvil dumps its state), each with its process group
            _kill(pid, signal.SIGTERM, group=True)
        sweep_children(grace=5.0)  # what ignored it is killed, and named
        console_say(f"stopped: clean-up took over {grace:.0f}s; terminated {len(children)} child process(es)")
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


def _kill(pid: int, sig: int, group: bool = False) -> None:
    try:
        if group and os.getpgid(pid) == pid:  # a child in a session of its own: its group holds what it started
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
