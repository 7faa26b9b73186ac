"""The root cause of a failed step, for records, `golem ticks` and `golem status`.

Temporal wraps an activity's exception as ChildWorkflowError → ActivityError → ApplicationError; the outer
messages ("Child Workflow execution failed", "Activity task failed") say nothing an operator can act on.
"""

from __future__ import annotations

from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    FailureError,
    TimeoutError as StepTimeoutError,
)

MAX_CAUSE_CHARS = 500


def root_cause(err: BaseException) -> tuple[str | None, str]:
    """(the activity that failed or None, "step: what went wrong") — the message the activity raised, with
    the deepest distinct cause appended, or the timeout that ended the step."""
    step: str | None = None
    message: str | None = None
    cur: BaseException | None = err
    while cur is not None:
        if isinstance(cur, ActivityError) and step is None:
            step = cur.activity_type
        elif isinstance(cur, ApplicationError):
            text = cur.message if not cur.type or cur.type in cur.message else f"{cur.type}: {cur.message}"
            if message is None:
                message = text
            elif cur.message and cur.message not in message:
                message = f"{message} (caused by {text})"
        elif isinstance(cur, StepTimeoutError):
            text = f"timed out ({cur.type.name if cur.type is not None else 'timeout'})"
            message = text if message is None else f"{message} ({text})"
        elif not isinstance(cur, (ActivityError, ChildWorkflowError)) and message is None:
            message = str(cur) or type(cur).__name__
        cur = cur.cause if isinstance(cur, FailureError) else cur.__cause__
    message = (message or str(err))[:MAX_CAUSE_CHARS]
    return step, f"{step}: {message}" if step else message
