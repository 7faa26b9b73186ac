"""Restricted{constraint}: a safety constraint hit during execution blocks the rest of the batch (docs/design/tick.md#steers).

A batch is planned and validated as a whole: when one of its actions fails on chain (reverted, or not sent because
the chain moved past its arguments), the actions after it were sized for a state that did not happen, so none of
them is sent. Pure: ThetaTickWorkflow reads it after each execute activity.
"""

from __future__ import annotations

from golem.models.enums import ActionStatus
from golem.models.record import ActionRecord


def restriction(records: list[ActionRecord]) -> str | None:
    """The constraint one action's execution hit, worded for the records of the actions it blocks; None if none."""
    for r in records:
        if r.status == ActionStatus.FAILED:
            return f"action {r.action_index} ({r.tool_name}) failed: {(r.block_reason or 'reverted on chain')[:200]}"
    return None
