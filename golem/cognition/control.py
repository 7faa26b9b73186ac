"""The owner's stop buttons (after Freqtrade's /stopentry and /stop), as pure folds over GolemState.

pause          no new ticks (the running one finishes); state, steers and follow-ups are kept
resume         ticking again, at once
stop_entries   no new positions: validate refuses what opens exposure (golem.safety.policy.opens_exposure);
               risk-reducing actions and steers still run
allow_entries  new positions allowed again
"""

from __future__ import annotations

from golem.models.golem import ControlRequest, ControlState
from golem.models.state import GolemState

CONTROLS = ("pause", "resume", "stop_entries", "allow_entries")
_FIELD = {"pause": ("paused", True), "resume": ("paused", False),
          "stop_entries": ("entries_stopped", True), "allow_entries": ("entries_stopped", False)}
_ALREADY = {"pause": "already paused: `golem resume` resumes it",
            "resume": "not paused: nothing to resume (`golem pause` pauses it)",
            "stop_entries": "entries are already stopped: `golem allow-entries` allows them again",
            "allow_entries": "entries are not stopped: nothing to allow (`golem stop-entries` stops them)"}


def check_control(state: GolemState | None, what: str, req: ControlRequest) -> None:
    """The update's validator: a refusal is a one-line reason, and nothing enters history."""
    if what not in _FIELD:
        raise ValueError(f"unknown control {what!r}: use one of {', '.join(CONTROLS)}")
    if state is None:
        raise ValueError("the golem has not started yet; retry in a moment")
    field, value = _FIELD[what]
    if getattr(state, field) == value:
        raise ValueError(_ALREADY[what])


def apply_control(state: GolemState, what: str, req: ControlRequest, now_iso: str) -> tuple[GolemState, ControlState]:
    field, value = _FIELD[what]
    note = f"{what.replace('_', '-')} at {now_iso[:19]}Z by {req.source or '?'}" + (f": {req.reason}" if req.reason else "")
    state = state.model_copy(update={field: value, "control_note": note})
    return state, control_state(state)


def control_state(state: GolemState) -> ControlState:
    return ControlState(paused=state.paused, entries_stopped=state.entries_stopped, tick=state.tick,
                        note=state.control_note)
