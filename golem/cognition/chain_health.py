"""Chain RPC health: is the golem able to read its chain, and what it does when it cannot.

A tick's observe step is the golem's chain read; a tick that fails there means the RPC is down (or hangs
past the step timeout). After CHAIN_ALERT_TICKS such ticks in a row the golem raises an alert and backs
off its theta (doubling per further failed read, capped at theta_max_seconds) so an outage is not
hammered every theta; the first good read clears the alert and the adaptive clock takes theta back.
"""

from __future__ import annotations

from typing import Any

from golem.models.state import ChainHealth, GolemState

CHAIN_ALERT_TICKS = 3  # consecutive ticks that could not read the chain before the alert
CHAIN_BACKOFF_FACTOR = 2.0  # theta multiplier per further failed read once alerted
CHAIN_READ_STEPS = ("observe",)  # steps whose failure means the chain could not be read
MAX_CHAIN_ERROR_CHARS = 300


def is_chain_read_failure(step: str | None) -> bool:
    return step in CHAIN_READ_STEPS


def fold_chain_read(state: GolemState, tick: int, now_iso: str) -> GolemState:
    """A tick read the chain: health is good again, any alert is cleared."""
    chain = ChainHealth(last_good_read_at=now_iso, last_good_tick=tick)
    return state.model_copy(update={"chain": chain})


def fold_chain_failure(
    state: GolemState, error: str, theta_max_seconds: float, alert_ticks: int = CHAIN_ALERT_TICKS
) -> tuple[GolemState, str | None]:
    """A tick could not read the chain. Returns the new state and, when this failure reaches (or extends)
    the alert, the alert line to log; theta backs off once alerted."""
    old = state.chain
    errors = old.errors_in_row + 1
    chain = old.model_copy(update={"errors_in_row": errors, "last_error": error[:MAX_CHAIN_ERROR_CHARS]})
    update: dict[str, Any] = {}
    alert = None
    if errors >= alert_ticks:
        theta = min(state.theta_seconds * CHAIN_BACKOFF_FACTOR, max(theta_max_seconds, state.theta_seconds))
        since = f"at {old.last_good_read_at} (tick {old.last_good_tick})" if old.last_good_read_at else "never (since start)"
        alert = (f"CHAIN UNREADABLE: {errors} ticks in a row could not read the chain, last good read {since}; "
                 f"backing off theta to {theta:.1f}s. Cause: {error[:MAX_CHAIN_ERROR_CHARS]}")
        chain = chain.model_copy(update={"alert": alert})
        update["theta_seconds"] = theta
    update["chain"] = chain
    return state.model_copy(update=update), alert
