"""The clade's pheromone field as the golem's activities use it: lay a tick's deposits (a signal that starts the
field if the clade has none yet), deposit with an answer (an update, refused when malformed) and read the field on
the golem's entities (a query). Async, on the worker's
Temporal client; the pure parts are golem.clade.field. Design: docs/design/pheromones.md.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from golem import ids
from golem.clade import field
from golem.models.pheromones import DepositBatch, DepositReceipt, FieldInput, FieldState, PheromoneReadings

# by name: activities/ does not import workflows/ (the workflows import the activities)
FIELD_WORKFLOW = "PheromoneFieldWorkflow"


class PheromoneLink:
    def __init__(self, client: Client) -> None:
        self.client = client

    async def state(self, clade: str, timeout_s: float) -> FieldState | None:
        """The field as laid; None when the clade has no field yet (nobody laid anything)."""
        handle = self.client.get_workflow_handle(ids.pheromone_field_id(clade))
        try:
            state: FieldState = await handle.query("field", result_type=FieldState,
                                                   rpc_timeout=timedelta(seconds=timeout_s))
            return state
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise

    async def read(self, clade: str, entities: list[str], me: str, timeout_s: float) -> PheromoneReadings:
        """What golem `me` reads on its entities now; a field that cannot be reached gives no readings and says why
        (the tick goes on: the term then adds nothing)."""
        try:
            state = await self.state(clade, timeout_s)
        except Exception as err:  # any failure to reach the field: the tick does not wait on the clade
            return PheromoneReadings(clade=clade, entities=sorted(entities),
                                     error=f"pheromone field of clade {clade!r} not read: {str(err)[:200]}")
        if state is None:
            return PheromoneReadings(clade=clade, entities=sorted(entities))
        return field.read(state, entities, me, time.time())

    async def lay(self, clade: str, batch: DepositBatch, timeout_s: float) -> None:
        """A tick's batch, as a signal (with start): the server keeps it even while no member's worker serves the
        field, which takes it when one is back; so a tick never waits on the clade's workers. The batch is a
        validated model already; a retried send is dropped by its id."""
        await self.client.start_workflow(
            FIELD_WORKFLOW, FieldInput(state=FieldState(clade=clade)), id=ids.pheromone_field_id(clade),
            task_queue=ids.clade_queue(clade), id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            start_signal="lay", start_signal_args=[batch], rpc_timeout=timedelta(seconds=timeout_s))

    async def deposit(self, clade: str, batch: DepositBatch) -> DepositReceipt:
        """Lay a batch, starting the clade's field if it does not run yet. A batch id already applied is a no-op
        (a retried reflect); a malformed batch raises WorkflowUpdateFailedError with the reason."""
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            FIELD_WORKFLOW, FieldInput(state=FieldState(clade=clade)), id=ids.pheromone_field_id(clade),
            task_queue=ids.clade_queue(clade), id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
        result: DepositReceipt = await self.client.execute_update_with_start_workflow(
            "deposit", batch, start_workflow_operation=start, result_type=DepositReceipt)
        return result
