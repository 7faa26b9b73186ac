"""Activity options of every step, named in one place.

Each function returns the keyword arguments of `workflow.execute_activity_method` / `start_activity_method`
for one kind of step, so timeouts and retries are read and changed here, not at each call. Options are not
part of the replayed command sequence: changing them never breaks the committed histories.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.common import RetryPolicy

# Transient I/O (RPC hiccup, file lock) retries with backoff; bad input is raised non-retryable.
IO_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=5,
)
# A cycle's step (delta consolidation, a dream phase): a retry redoes one step, each idempotent by cycle tick.
CYCLE_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
# Perception between ticks (gamma) and diagnosis: one more try, then the next pulse or the owner tries again.
ONE_RETRY = RetryPolicy(maximum_attempts=2)
MONITOR_RETRY = RetryPolicy(maximum_attempts=3)

# A cancel reaches an activity only through a heartbeat: decide's router and reflect's wording beat every 5 s.
DECIDE_HEARTBEAT = timedelta(seconds=10)
EXECUTE_HEARTBEAT = timedelta(seconds=15)
# A dream phase with forks heartbeats per scenario; a short timeout keeps the SDK's heartbeat throttle (0.8×)
# short, so a wake's cancel reaches the phase within seconds.
DREAM_PHASE_HEARTBEAT = timedelta(seconds=15)
CYCLE_HEARTBEAT = timedelta(seconds=60)
RECORD_TIMEOUT = timedelta(seconds=30)

Options = dict[str, Any]


def tick_step(step_timeout_s: float, heartbeat: timedelta | None = None) -> Options:
    """One of the tick's nine steps: [heartbeat] step_timeout_seconds each, transient I/O retried."""
    out: Options = {"start_to_close_timeout": timedelta(seconds=step_timeout_s), "retry_policy": IO_RETRY}
    if heartbeat is not None:
        out["heartbeat_timeout"] = heartbeat
    return out


def local_step(step_timeout_s: float) -> Options:
    """A step run as a local activity (TickContext.local_steps): the same timeout and retries, no heartbeat (the
    worker keeps the workflow task alive while it runs)."""
    return {"start_to_close_timeout": timedelta(seconds=step_timeout_s), "retry_policy": IO_RETRY}


def record_failure() -> Options:
    """Writing a failed tick's record: small, retried like I/O (best effort: the failure is in history too)."""
    return {"start_to_close_timeout": RECORD_TIMEOUT, "retry_policy": IO_RETRY}


def audit() -> Options:
    """Putting the owner's answer (or an expiry) on the audit trail: small, retried like I/O."""
    return {"start_to_close_timeout": RECORD_TIMEOUT, "retry_policy": IO_RETRY}


def gamma(step_timeout_s: float) -> Options:
    """The gamma pulse's chain read."""
    return {"start_to_close_timeout": timedelta(seconds=step_timeout_s), "retry_policy": ONE_RETRY}


def cycle_step(minutes: float = 5) -> Options:
    """A step of delta consolidation or a dream cycle's integration."""
    return {"start_to_close_timeout": timedelta(minutes=minutes), "heartbeat_timeout": CYCLE_HEARTBEAT,
            "retry_policy": CYCLE_RETRY}


def trial_step(budget_seconds: float) -> Options:
    """The delta cycle's trial step: its own time budget (it gives up on the rules left when it is spent) plus the
    minute it needs to record what it measured."""
    return {"start_to_close_timeout": timedelta(seconds=budget_seconds + 60), "heartbeat_timeout": CYCLE_HEARTBEAT,
            "retry_policy": CYCLE_RETRY}


def dream_phase(minutes: float) -> Options:
    """A dream phase (NREM, REM, threats): bounded by the cycle's budget, cancelled on a wake."""
    return {"start_to_close_timeout": timedelta(minutes=minutes), "heartbeat_timeout": DREAM_PHASE_HEARTBEAT,
            "retry_policy": CYCLE_RETRY}


def doctor() -> Options:
    return {"start_to_close_timeout": RECORD_TIMEOUT, "retry_policy": ONE_RETRY}


def monitor() -> Options:
    """The heartbeat-monitor's reads and alert deliveries."""
    return {"start_to_close_timeout": RECORD_TIMEOUT, "retry_policy": MONITOR_RETRY}


def thanatopsis() -> Options:
    """Death's reflection and legacy export: reads the records and exports the Grimoire once."""
    return {"start_to_close_timeout": timedelta(minutes=5), "retry_policy": CYCLE_RETRY}
