"""The root cause of a failed step: what the activity raised, not Temporal's wrapper messages."""

from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, RetryState, TimeoutError, TimeoutType

from workflows.errors import root_cause


def _activity_error(cause: BaseException, activity_type: str = "observe") -> ActivityError:
    err = ActivityError("Activity task failed", scheduled_event_id=5, started_event_id=6, identity="w",
                        activity_type=activity_type, activity_id="1", retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED)
    err.__cause__ = cause
    return err


def _child_error(cause: BaseException) -> ChildWorkflowError:
    err = ChildWorkflowError("Child Workflow execution failed", namespace="default", workflow_id="golem-g-tick-3",
                             run_id="r", workflow_type="ThetaTickWorkflow", initiated_event_id=1, started_event_id=2,
                             retry_state=RetryState.NON_RETRYABLE_FAILURE)
    err.__cause__ = cause
    return err


def test_unwraps_child_and_activity_errors_to_the_application_message():
    app = ApplicationError("chain read batch of 16 calls failed: Connection refused", type="ChainReadError")
    step, msg = root_cause(_child_error(_activity_error(app)))
    assert step == "observe" and msg == "observe: ChainReadError: chain read batch of 16 calls failed: Connection refused"
    assert "Activity task failed" not in msg and "Child Workflow" not in msg


def test_a_deeper_distinct_cause_is_appended():
    inner = ApplicationError("[Errno 111] Connection refused", type="ConnectionRefusedError")
    outer = ApplicationError("read failed", type="ChainReadError")
    outer.__cause__ = inner
    _, msg = root_cause(_activity_error(outer))
    assert msg == "observe: ChainReadError: read failed (caused by ConnectionRefusedError: [Errno 111] Connection refused)"


def test_a_step_timeout_names_the_timeout():
    step, msg = root_cause(_activity_error(TimeoutError("activity StartToClose timeout", type=TimeoutType.START_TO_CLOSE,
                                                        last_heartbeat_details=[]), "simulate"))
    assert step == "simulate" and msg == "simulate: timed out (START_TO_CLOSE)"
