"""Console writes that survive a closed pipe: `golem run 2>&1 | tee run.log` and Ctrl-C, where tee dies first.

`say()` writes a line to stdout (or stderr) and, when `mirror_to()` named a file, to that file too. A write to a
pipe whose reader is gone (EPIPE; SIGPIPE is ignored, as Python does by default) marks the stream closed and points
its descriptor at /dev/null, so neither this write nor any later one, nor the interpreter's flush at exit, raises:
the clean-up that follows must not depend on stdout. See docs/design/supervision.md.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

_closed: set[int] = set()  # descriptors whose reader went away
_mirror: Path | None = None
_lock = threading.Lock()


def ignore_sigpipe() -> None:
    """A write to a dead pipe raises BrokenPipeError instead of killing the process mid clean-up."""
    if hasattr(signal, "SIGPIPE") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)


def mirror_to(path: Path | None) -> None:
    """Also append every line said to `path` (the run's own log under the data dir); None stops it."""
    global _mirror
    _mirror = Path(path) if path is not None else None
    if _mirror is not None:
        _mirror.parent.mkdir(parents=True, exist_ok=True)


def say(msg: str, *, err: bool = False) -> bool:
    """Print `msg` and flush; False when the stream is gone (the message still reaches the mirror file)."""
    stream: TextIO = sys.stderr if err else sys.stdout
    with _lock:
        if _mirror is not None:
            try:
                with _mirror.open("a", encoding="utf-8") as f:
                    f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}\n")
            except OSError:
                pass
        return _write(stream, msg + "\n")


def _write(stream: TextIO, text: str) -> bool:
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):  # replaced by a test harness, or closed
        fd = -1
    if fd in _closed or stream is None:  # (None: a process started without a stdout)
        return False
    try:
        stream.write(text)
        stream.flush()
        return True
    except (BrokenPipeError, ConnectionResetError, ValueError):
        _silence(stream, fd)
        return False
    except OSError:  # EIO: the terminal itself went away (a closed ssh session)
        _silence(stream, fd)
        return False


def _silence(stream: TextIO, fd: int) -> None:
    """Point the dead descriptor at /dev/null: Python's own flush at exit (and a print elsewhere) then succeeds."""
    if fd < 0:
        return
    _closed.add(fd)
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass
    try:  # whatever the broken write left in the buffer goes to /dev/null now
        stream.flush()
    except (OSError, ValueError):
        pass
