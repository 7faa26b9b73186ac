"""Owner interventions: steers and follow-ups (docs/design/tick.md#steers)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from golem.models.enums import DeliveryWindow, SteerSeverity

MAX_MESSAGE_CHARS = 2000


class _Intervention(BaseModel):
    model_config = {"extra": "forbid"}

    id: str = Field(min_length=1, max_length=80, description="client-chosen id; signals are deduplicated by it")
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    created_at: str = ""  # ISO-8601, set by the sender

    @field_validator("message")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("message must not be blank")
        return v.strip()


# Who sent a steer: the owner, or one of the golem's own systems steering through the same pathway (a self-steer,
# docs/design/tick.md#self-steers). A signal names its source; the owner's CLI and dashboard never set one.
SELF_STEER_SOURCES = ("risk-daemon", "mortality-engine", "policy-cage")
SteerSource = Literal["owner", "risk-daemon", "mortality-engine", "policy-cage"]


class Steer(_Intervention):
    """A mid-execution interrupt: forces T2 on the next (or running) tick."""

    severity: SteerSeverity = SteerSeverity.MEDIUM
    source: SteerSource = "owner"


class FollowUp(_Intervention):
    """A queued note delivered at a window (next decide, reflect, curator, dream)."""

    window: DeliveryWindow = DeliveryWindow.NEXT_DECIDE


class RejectedIntervention(BaseModel):
    kind: str  # "steer" | "follow_up"
    reason: str
    payload_excerpt: str
    received_at: str = ""
    # The first tick whose snapshot carries it (the tick next to start when it arrived); its record is
    # the one that reports the rejection, and `status` drops it some ticks later. None: kept by an older
    # worker, before rejections were dated by tick.
    tick: int | None = None


class InterventionSummary(BaseModel):
    id: str
    kind: str
    message: str
    severity: str | None = None
    window: str | None = None
    source: str = "owner"


def explain_validation_error(kind: str, err: ValidationError) -> str:
    """A one-paragraph reason a person can act on."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(payload)"
        parts.append(f"{loc}: {e['msg']}")
    allowed = (
        "severity one of low|medium|high|critical"
        if kind == "steer"
        else "window one of next-decide|next-reflect|next-curator|next-dream"
    )
    return (
        f"malformed {kind}: " + "; ".join(parts)
        + f". Send a JSON object with message (1-{MAX_MESSAGE_CHARS} chars), {allowed} and optionally id (non-empty)."
    )


MAX_PAYLOAD_DEPTH = 16  # a steer is a flat object; anything nested deeper is refused before validation


def _too_deep(raw: Any, limit: int = MAX_PAYLOAD_DEPTH) -> bool:
    """Is `raw` nested more than `limit` lists/objects deep? Iterative: a payload 3,000 deep made pydantic's
    error (and json.dumps) raise RecursionError inside the signal handler."""
    stack = [(raw, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list | tuple):
            if depth >= limit:
                return True
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


def parse_intervention(kind: str, raw: Any, received_at: str = "") -> Steer | FollowUp:
    """Validate a raw signal payload; raises ValueError with a helpful message. A flat payload without an id (typed
    into the Web UI's Send Signal) is named from `received_at` and its content: the same payload in the same
    instant is one intervention."""
    model = Steer if kind == "steer" else FollowUp
    if isinstance(raw, (Steer, FollowUp)):
        raw = raw.model_dump(mode="json")
    if not isinstance(raw, dict):
        raise ValueError(
            f"malformed {kind}: expected a JSON object, got {type(raw).__name__}. "
            'Example: {"id": "s-1", "message": "reduce exposure", "severity": "high"}'
        )
    if _too_deep(raw):
        raise ValueError(
            f"malformed {kind}: nested more than {MAX_PAYLOAD_DEPTH} levels deep. "
            'Send a flat JSON object, e.g. {"id": "s-1", "message": "reduce exposure", "severity": "high"}'
        )
    if "id" not in raw:  # only now: the depth check above keeps json.dumps off a payload nested thousands deep
        seed = json.dumps([received_at, raw], sort_keys=True, default=str).encode()
        raw = {**raw, "id": f"auto-{hashlib.sha256(seed).hexdigest()[:12]}"}
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise ValueError(explain_validation_error(kind, e)) from None


def summarize(item: Steer | FollowUp) -> InterventionSummary:
    if isinstance(item, Steer):
        return InterventionSummary(id=item.id, kind="steer", message=item.message, severity=item.severity.value,
                                   source=item.source)
    return InterventionSummary(id=item.id, kind="follow_up", message=item.message, window=item.window.value)
