"""Privileged requests: a write outside the golem's grant that the model asked the owner for, and the owner's answer.

A request waits in GolemState (pending), the owner approves or denies it (`golem approve | deny ID`), an unanswered
one expires; an approved one runs on a later tick through the whole validate chain (docs/design/safety.md#privileged-tools).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, Field


class ApprovalStatus(str, Enum):
    PENDING = "pending"  # waiting for the owner
    APPROVED = "approved"  # runs on the next tick
    DENIED = "denied"
    EXPIRED = "expired"  # nobody answered within [policy] approval_ttl_ticks
    RAN = "ran"  # went through the act path; `outcome` says what the cage and the chain made of it

    @property
    def open(self) -> bool:
        return self in (ApprovalStatus.PENDING, ApprovalStatus.APPROVED)


class PrivilegedRequest(BaseModel):
    """One `request_privileged` call, checked (tool, arguments, approved assets) before it was kept."""

    id: str  # apr-<tick>-<n>
    tick: int  # the tick whose deliberation asked
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""  # the model's, for the owner
    status: ApprovalStatus = ApprovalStatus.PENDING
    expires_at_tick: int = 0  # pending at the start of this tick: expired
    decided_by: str = ""  # cli | dashboard | ... (expiry: "expiry")
    decided_at: str = ""
    note: str = ""  # the owner's note
    ran_on_tick: int | None = None
    outcome: str = ""  # executed (tx), blocked by ... (the cage's reason), deferred ...


class ApprovalDecision(BaseModel):
    """The input of GolemWorkflow's approve / deny updates."""

    id: str
    note: str = ""
    source: str = "cli"


class ApprovalAnswer(BaseModel):
    request: PrivilegedRequest
    message: str


class ApprovalAudit(BaseModel):
    """Requests whose state changed outside a tick (an owner's answer, an expiry), for the audit trail."""

    golem_id: str
    requests: list[PrivilegedRequest] = Field(default_factory=list)
