"""PheromoneFieldWorkflow: a clade's shared pheromone field, one per clade (id clade-<clade>-pheromones, on the
clade's task queue). A golem's tick lays its batch with a signal (kept by the server while no worker serves the
field); a deposit that wants an answer is an update, a malformed one refused by the validator with the reason (it
never reaches history); golems read the field with a query. It keeps its history short by continuing as new with the
live trails. Why a workflow and the formulas: docs/design/pheromones.md.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from golem.clade.field import apply_batch, parse_batch, pruned
    from golem.models.pheromones import DepositBatch, DepositReceipt, FieldInput, FieldState


@workflow.defn
class PheromoneFieldWorkflow:
    @workflow.init
    def __init__(self, inp: FieldInput) -> None:
        self._state = inp.state

    @workflow.query
    def field(self) -> FieldState:
        """The trails as laid (intensity at their last deposit); readers decay them to their own now."""
        return self._state

    @workflow.signal
    def lay(self, raw: Any) -> None:
        """A golem's tick batch. A signal cannot be refused: a malformed one (sent by hand) is logged and dropped."""
        try:
            batch = parse_batch(raw)
        except ValueError as err:
            workflow.logger.warning("pheromone batch dropped: %s", err)
            return
        self._state, _ = apply_batch(self._state, batch, workflow.now().timestamp())

    @workflow.update
    def deposit(self, raw: Any) -> DepositReceipt:
        batch = _parsed(raw)  # the validator refused a bad batch already; this keeps a bad one from failing the task
        self._state, applied = apply_batch(self._state, batch, workflow.now().timestamp())
        return DepositReceipt(applied=applied, duplicate=applied == 0, trails=len(self._state.trails))

    @deposit.validator
    def _check(self, raw: Any) -> None:
        _parsed(raw)

    @workflow.run
    async def run(self, inp: FieldInput) -> None:
        await workflow.wait_condition(
            lambda: workflow.info().get_current_history_length() >= inp.continue_after_events
            or workflow.info().is_continue_as_new_suggested())
        await workflow.wait_condition(workflow.all_handlers_finished)
        now = workflow.now().timestamp()
        state = self._state.model_copy(update={"trails": pruned(self._state.trails, now)})
        workflow.continue_as_new(FieldInput(state=state, continue_after_events=inp.continue_after_events))


def _parsed(raw: Any) -> DepositBatch:
    """The batch, or an ApplicationError saying what is wrong (a plain exception would fail the workflow task)."""
    try:
        return parse_batch(raw)
    except ValueError as err:
        raise ApplicationError(str(err), type="MalformedDeposit", non_retryable=True) from None
