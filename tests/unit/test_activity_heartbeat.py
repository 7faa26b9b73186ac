"""The heartbeat helper at the activity boundary (activities/heartbeat.py): an async activity beats
every half of its heartbeat timeout while it waits, with the step it is in, and stops when it ends; a
Temporal cancel (delivered through those beats) cancels what it awaits."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import timedelta

import pytest
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from activities.heartbeat import auto_heartbeat, blocking, step


@activity.defn(name="waits")
@auto_heartbeat
async def waits(seconds: float) -> str:
    step("waiting on the model")
    await asyncio.sleep(seconds)
    await blocking("writing", time.sleep, seconds)
    return "done"


def _env(timeout_s: float) -> tuple[ActivityEnvironment, list]:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=timeout_s))
    beats: list = []
    env.on_heartbeat = lambda *details: beats.append(details[0] if details else None)
    return env, beats


async def test_beats_with_the_step_while_the_activity_waits_and_stops_after():
    env, beats = _env(0.04)  # beats every 0.02 s
    assert await env.run(waits, 0.15) == "done"
    named = [b for b in beats if isinstance(b, str)]
    assert named[0] == "waiting on the model"
    assert sum(b.startswith("waiting on the model (") for b in named) >= 3, named
    assert any(b.startswith("writing") for b in named), "the blocking step is named in the beats"
    n = len(beats)
    await asyncio.sleep(0.1)
    assert len(beats) == n, "the beat task ended with the activity"


async def test_a_cancel_reaches_the_await():
    env, beats = _env(0.04)
    task = asyncio.create_task(env.run(waits, 30))
    await asyncio.sleep(0.1)
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert len(beats) >= 3
