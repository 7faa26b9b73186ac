"""CladeExchangeWorkflow: a clade's bus for Grimoire entries, one per clade (id clade-<clade>-exchange, on the clade's
task queue beside its pheromone field). Members share with a signal (kept by the server while no worker serves the
bus); an entry already carried (origin and entry id) is dropped, warnings go on first; siblings read what came
after their cursor with a query. It continues as new with what it still offers. Design: docs/design/clade.md.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from golem.clade.bus import apply_share, parse_share, since
    from golem.models.clade import BusEntry, BusInput, BusState, SinceQuery


@workflow.defn
class CladeExchangeWorkflow:
    @workflow.init
    def __init__(self, inp: BusInput) -> None:
        self._state = inp.state

    @workflow.query
    def state(self) -> BusState:
        return self._state

    @workflow.query
    def since(self, q: SinceQuery) -> list[BusEntry]:
        """What came after a sibling's cursor, from golems other than itself, oldest first."""
        return since(self._state, q)

    @workflow.signal
    def share(self, raw: Any) -> None:
        """A member's entries. A signal cannot be refused: a malformed one (sent by hand) is logged and dropped."""
        try:
            batch = parse_share(raw)
        except ValueError as err:
            workflow.logger.warning("clade share dropped: %s", err)
            return
        self._state, _ = apply_share(self._state, batch)

    @workflow.run
    async def run(self, inp: BusInput) -> None:
        await workflow.wait_condition(
            lambda: workflow.info().get_current_history_length() >= inp.continue_after_events
            or workflow.info().is_continue_as_new_suggested())
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(BusInput(state=self._state, continue_after_events=inp.continue_after_events))
