"""Pydantic models shared by every room."""

from golem.models.config import ConfigError, GolemConfig, load_config
from golem.models.enums import (
    ActionStatus,
    BehavioralPhase,
    DeliveryWindow,
    HeartbeatState,
    MarketRegime,
    PlutchikLabel,
    ProbeSeverity,
    SteerSeverity,
    Tier,
)
from golem.models.interventions import FollowUp, InterventionSummary, RejectedIntervention, Steer, parse_intervention
from golem.models.observation import Anomaly, ChainSnapshot, Observation, PoolState, PositionState, ProbeResult
from golem.models.record import (
    ActionRecord,
    ContextBundleSummary,
    DecisionCycleRecord,
    DeliberationRecord,
    OutcomeRecord,
    RetrievedEntrySummary,
    StepTiming,
    TickRun,
    ToolCallRecord,
)
from golem.models.state import FsmState, GolemState, PADVector, TickSummary, VitalityState

__all__ = [
    "ActionRecord",
    "ActionStatus",
    "Anomaly",
    "BehavioralPhase",
    "ChainSnapshot",
    "ConfigError",
    "ContextBundleSummary",
    "DecisionCycleRecord",
    "DeliberationRecord",
    "DeliveryWindow",
    "FollowUp",
    "FsmState",
    "GolemConfig",
    "GolemState",
    "HeartbeatState",
    "InterventionSummary",
    "MarketRegime",
    "Observation",
    "OutcomeRecord",
    "PADVector",
    "PlutchikLabel",
    "PoolState",
    "PositionState",
    "ProbeResult",
    "ProbeSeverity",
    "RejectedIntervention",
    "RetrievedEntrySummary",
    "Steer",
    "SteerSeverity",
    "StepTiming",
    "TickRun",
    "TickSummary",
    "Tier",
    "ToolCallRecord",
    "VitalityState",
    "load_config",
    "parse_intervention",
]
