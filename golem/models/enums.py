"""Enumerations of the tick, the gate and the life (docs/reference/glossary.md)."""

from __future__ import annotations

from enum import Enum


class Tier(str, Enum):
    """Cognitive tier chosen by the gate."""

    T0 = "T0"  # suppress: no LLM, $0.00
    T1 = "T1"  # analyze: Haiku-class
    T2 = "T2"  # deliberate: Sonnet/Opus-class


class MarketRegime(str, Enum):
    """Market regimes (docs/design/gate.md#regime)."""

    TRENDING_UP = "trending_up"
    TRENDING_DOWN = "trending_down"
    RANGE_BOUND = "range_bound"
    VOLATILE = "volatile"
    UNKNOWN = "unknown"


class ProbeSeverity(str, Enum):
    NONE = "none"
    LOW = "low"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return {"none": 0, "low": 1, "high": 2}[self.value]


class BehavioralPhase(str, Enum):
    """Thriving (>0.7) → Stable (0.5–0.7) → Conservation (0.3–0.5) → Declining (0.1–0.3) → Terminal (<0.1)
    (docs/design/life.md#phases)."""

    THRIVING = "thriving"
    STABLE = "stable"
    CONSERVATION = "conservation"
    DECLINING = "declining"
    TERMINAL = "terminal"


class SteerSeverity(str, Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return ["low", "medium", "high", "critical"].index(self.value)


class DeliveryWindow(str, Enum):
    """When a follow-up is delivered (the intervention queue)."""

    NEXT_DECIDE = "next-decide"
    NEXT_REFLECT = "next-reflect"
    NEXT_CURATOR = "next-curator"
    NEXT_DREAM = "next-dream"


class HeartbeatState(str, Enum):
    """Heartbeat FSM; substates are carried beside it in FsmState."""

    IDLE = "Idle"
    OBSERVING = "Observing"
    RETRIEVING = "Retrieving"
    ANALYZING = "Analyzing"
    GATING = "Gating"
    DECIDING = "Deciding"
    SIMULATING = "Simulating"
    VALIDATING = "Validating"
    EXECUTING = "Executing"
    VERIFYING = "Verifying"
    REFLECTING = "Reflecting"
    DREAMING = "Dreaming"  # the SLEEPING.DREAMING sub-state: heartbeat suspended

    @property
    def accepts_steer(self) -> bool:
        # only while thinking or acting, never while observing or reflecting.
        return self in (
            HeartbeatState.DECIDING,
            HeartbeatState.SIMULATING,
            HeartbeatState.VALIDATING,
            HeartbeatState.EXECUTING,
        )


class ActionStatus(str, Enum):
    EXECUTED = "executed"
    BLOCKED = "blocked"
    DEFERRED = "deferred"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # Another run of the same tick (a reset, a rerun) already sent this very action: not sent again.
    ALREADY_SENT = "already_sent"


class PlutchikLabel(str, Enum):
    JOY = "joy"
    TRUST = "trust"
    FEAR = "fear"
    SURPRISE = "surprise"
    SADNESS = "sadness"
    DISGUST = "disgust"
    ANGER = "anger"
    ANTICIPATION = "anticipation"
