"""Privileged requests over their life, as pure folds over GolemState: asked → pending → approved | denied | expired,
approved → ran (through the whole validate chain on the next tick). Approval widens the grant for one action; it
never touches a limit (docs/design/safety.md#privileged-tools).
"""

from __future__ import annotations

from typing import Any

from golem.models.approvals import ApprovalAnswer, ApprovalDecision, ApprovalStatus, PrivilegedRequest
from golem.models.record import ActionRecord
from golem.models.state import GolemState
from golem.models.tick import ProposedAction

KEEP_DECIDED = 10  # decided requests kept in the state for `status` (the audit trail keeps them all)


def add_requests(state: GolemState, asked: list[PrivilegedRequest], ttl_ticks: int) -> GolemState:
    """The tick's requests, pending until `ttl_ticks` ticks after the one that asked; an id already held (another
    run of the same tick) is not added twice."""
    held = {a.id for a in state.approvals}
    new = [a.model_copy(update={"status": ApprovalStatus.PENDING, "expires_at_tick": a.tick + 1 + ttl_ticks})
           for a in asked if a.id not in held]
    return state.model_copy(update={"approvals": _trimmed([*state.approvals, *new])}) if new else state


def check_decision(state: GolemState | None, req: ApprovalDecision) -> PrivilegedRequest:
    """The approve / deny updates' validator: a refusal is one line naming what to do, and nothing enters history."""
    if state is None:
        raise ValueError("the golem has not started yet; retry in a moment")
    if len(req.note) > 500:
        raise ValueError(f"the note is {len(req.note)} characters; keep it under 500")
    found = next((a for a in state.approvals if a.id == req.id), None)
    pending = [a.id for a in state.approvals if a.status == ApprovalStatus.PENDING]
    if found is None:
        raise ValueError(f"no privileged request {req.id!r}; pending: {', '.join(pending) or 'none'} (`golem status`)")
    if found.status != ApprovalStatus.PENDING:
        raise ValueError(f"request {req.id} is already {found.status.value}"
                         + (f" ({found.outcome})" if found.outcome else "") + "; only a pending request can be decided")
    return found


def decide(state: GolemState, req: ApprovalDecision, approve: bool, now_iso: str) -> tuple[GolemState, ApprovalAnswer]:
    """The owner's answer to a pending request (check_decision passed)."""
    status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
    found = check_decision(state, req)
    decided = found.model_copy(update={"status": status, "decided_by": req.source or "?", "decided_at": now_iso,
                                       "note": req.note})
    state = state.model_copy(update={"approvals": _trimmed([decided if a.id == req.id else a
                                                             for a in state.approvals])})
    what = (f"approved: {found.tool} runs on tick {state.tick} (or the next one to start), through every safety check"
            if approve else f"denied: {found.tool} will not run")
    return state, ApprovalAnswer(request=decided, message=f"request {req.id} {what}")


def expire(state: GolemState) -> tuple[GolemState, list[PrivilegedRequest]]:
    """Pending requests whose time is up before the next tick (state.tick) become expired."""
    expired = [a.model_copy(update={"status": ApprovalStatus.EXPIRED, "decided_by": "expiry",
                                    "outcome": f"no answer by tick {a.expires_at_tick}"})
               for a in state.approvals if a.status == ApprovalStatus.PENDING and a.expires_at_tick <= state.tick]
    if not expired:
        return state, []
    done = {a.id: a for a in expired}
    return state.model_copy(update={"approvals": _trimmed([done.get(a.id, a) for a in state.approvals])}), expired


def approved(state: GolemState) -> list[PrivilegedRequest]:
    return [a for a in state.approvals if a.status == ApprovalStatus.APPROVED]


def with_approved(actions: list[ProposedAction], requests: list[PrivilegedRequest]) -> list[ProposedAction]:
    """The decision's actions plus each approved request, after them, carrying its approval id (the cage's grant
    check reads it); sizing, the limits and the simulation judge it like any other action."""
    out = list(actions)
    for a in requests:
        if a.status == ApprovalStatus.APPROVED:
            out.append(ProposedAction(action_index=len(out), tool=a.tool, arguments=dict(a.arguments),
                                      rationale=f"approved by the owner ({a.id}): {a.reason}"[:300], approval_id=a.id))
    return out


def mark_ran(state: GolemState, ran: dict[str, str], tick: int) -> GolemState:
    """Approved requests the tick took through the act path: ran, with what came of them."""
    if not ran:
        return state
    updated = [a.model_copy(update={"status": ApprovalStatus.RAN, "ran_on_tick": tick, "outcome": ran[a.id]})
               if a.id in ran and a.status == ApprovalStatus.APPROVED else a for a in state.approvals]
    return state.model_copy(update={"approvals": _trimmed(updated)})


def approvals_ran(proposed: list[ProposedAction], records: list[ActionRecord]) -> dict[str, str]:
    """approval id → what the act path made of that action: executed (its tx), blocked or deferred (the reason)."""
    by_index = {r.action_index: r for r in records}
    out: dict[str, str] = {}
    for action in proposed:
        if action.approval_id is None:
            continue
        rec = by_index.get(action.action_index)
        if rec is None:
            out[action.approval_id] = "not run: the tick stopped before acting (see its record)"
        else:
            out[action.approval_id] = f"{rec.status.value}" + (f" tx {rec.tx_hash}" if rec.tx_hash else "") + (
                f": {rec.block_reason}" if rec.block_reason else "")
    return out


def grant_refusal(action: ProposedAction, privileged: list[str], approvals: dict[str, str]) -> str | None:
    """The grant: a privileged tool runs only as an approved request for that very tool (`approvals`: id → tool)."""
    if action.tool not in privileged:
        return None
    if action.approval_id is not None and approvals.get(action.approval_id) == action.tool:
        return None
    return (f"privileged: {action.tool} is outside this golem's grant ([policy] privileged_tools) and needs the "
            "owner's approval: the model may ask with request_privileged")


def audit_payload(request: PrivilegedRequest) -> dict[str, Any]:
    return request.model_dump(mode="json", exclude_defaults=True)


def _trimmed(requests: list[PrivilegedRequest]) -> list[PrivilegedRequest]:
    """Open requests all, decided ones only the last KEEP_DECIDED."""
    decided = [a for a in requests if not a.status.open]
    keep = {id(a) for a in decided[-KEEP_DECIDED:]}
    return [a for a in requests if a.status.open or id(a) in keep]
