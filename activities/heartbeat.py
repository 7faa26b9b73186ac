"""One heartbeat helper at the activity boundary, after the SDK samples' auto-heartbeater.

An async activity decorated with `@auto_heartbeat` heartbeats from the event loop every half of its
heartbeat timeout for as long as it runs (a cancel reaches an activity only through a heartbeat), with the
step it is in as the details the Temporal UI shows (`step("...")`). Blocking work runs on a thread with
`blocking(...)`; the beats go on meanwhile. Domain code never receives a heartbeat callback.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from temporalio import activity

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_EVERY_S = 5.0  # when the activity has no heartbeat timeout (the beats are then only progress details)
# The running activity's current step, shared (a mutable holder) with its beat task.
_step: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("golem_activity_step", default=None)


def step(name: str) -> None:
    """Name what the activity does now: this beat and the next ones carry it."""
    now = _step.get()
    if now is not None:
        now.update(name=name, since=time.perf_counter())
    if activity.in_activity():
        activity.heartbeat(name)


def _details(now: dict[str, Any]) -> str:
    return f"{now['name']} ({time.perf_counter() - now['since']:.0f}s)"


async def _beat(every_s: float, now: dict[str, Any]) -> None:
    while True:
        await asyncio.sleep(every_s)
        activity.heartbeat(_details(now))


def auto_heartbeat(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Heartbeat an async activity every half of its heartbeat timeout while it runs."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        if not activity.in_activity():  # called as a plain method (a test, a composite step): nothing to beat
            return await fn(*args, **kwargs)
        timeout = activity.info().heartbeat_timeout
        every = timeout.total_seconds() / 2 if timeout else DEFAULT_EVERY_S
        now = {"name": "running", "since": time.perf_counter()}
        token = _step.set(now)
        beats = asyncio.create_task(_beat(every, now))
        try:
            return await fn(*args, **kwargs)
        finally:
            beats.cancel()
            _step.reset(token)

    return wrapper


async def blocking(name: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking step (LanceDB, SQLite, web3) on a thread, named in the beats meanwhile."""
    step(name)
    return await asyncio.to_thread(fn, *args, **kwargs)
