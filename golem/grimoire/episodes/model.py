"""The episode: one per tick.

The model (`Episode` and its vocabularies: type, outcome, importance, the PAD-octant emotional tag) and the mapping
from a tick's DecisionCycleRecord to its episode (`episode_from_record`, `importance_of`). Pure: no storage here —
episodes/store.py keeps them in LanceDB, and modules that only read or build episodes (heuristics, threats, dreams)
import this one without the store.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, field_validator, model_validator

from golem.grimoire.decay import DecayClass, replay_gain
from golem.grimoire.regimes import normalise_regime
from golem.models.enums import ActionStatus, MarketRegime, ProbeSeverity, Tier

if TYPE_CHECKING:
    from golem.models.record import DecisionCycleRecord


def episode_id(golem_id: str, tick: int) -> str:
    return f"{golem_id}:tick:{tick}"


class EpisodeType(str, Enum):
    """Episode types: the three this runtime produces (clade_alert,
    replicant_report and coordination_intent need peers it does not have)."""

    OBSERVATION = "observation"  # market snapshot, every tick
    ACTION = "action"  # execution with outcome data
    REGIME_SHIFT = "regime_shift"  # regime change detection


class EpisodeOutcome(str, Enum):
    """An episode's outcome: Positive | Negative | Neutral | Descriptive(String) — the
    descriptive text is the episode's summary."""

    POSITIVE = "positive"
    NEGATIVE = "negative"
    NEUTRAL = "neutral"
    DESCRIPTIVE = "descriptive"


class Importance(str, Enum):
    """How much an episode matters; see `importance_of` for the rule."""

    ROUTINE = "routine"
    NOTABLE = "notable"
    CRITICAL = "critical"
    EMERGENCY = "emergency"


NEUTRAL_PNL_USD = 0.01  # ours: |pnl| under a cent is rounding and gas dust, not a result

# PAD octants after Mehrabian (1996), "Pleasure-arousal-dominance: a general framework for describing and
# measuring individual differences in temperament", Current Psychology 14(4): 261–292 — the eight temperament
# types named by the signs of (pleasure, arousal, dominance). A zero component counts as +.
PAD_OCTANTS = {
    (1, 1, 1): "exuberant", (-1, -1, -1): "bored",
    (1, 1, -1): "dependent", (-1, -1, 1): "disdainful",
    (1, -1, 1): "relaxed", (-1, 1, -1): "anxious",
    (1, -1, -1): "docile", (-1, 1, 1): "hostile",
}
PAD_NEUTRAL_RADIUS = 0.1  # ours: an affect vector shorter than this (in the [-1, 1]^3 cube) is "neutral"
# ours: a pleasure within ±this has no valence, so the octant is "neutral" — without it
# a calm golem near its baseline flips between relaxed and disdainful on noise. The radius's width, on one axis.
PAD_NEUTRAL_PLEASURE = 0.05
EMOTIONAL_TAGS = frozenset([*PAD_OCTANTS.values(), "neutral"])
_OCTANT_SIGNS = {label: signs for signs, label in PAD_OCTANTS.items()}


def tag_pad(tag: str | None) -> tuple[float, float, float] | None:
    """The PAD direction of an emotional tag (the octant's signs; None for "neutral" or no tag), for the mood
    congruence factor of retrieval."""
    signs = _OCTANT_SIGNS.get(tag or "")
    return (float(signs[0]), float(signs[1]), float(signs[2])) if signs else None


def pad_label(pleasure: float, arousal: float, dominance: float) -> str:
    """The Mehrabian octant of a PAD vector, or "neutral" near the origin or with no valence (|pleasure| below
    PAD_NEUTRAL_PLEASURE)."""
    p, a, d = (float(x) for x in (pleasure, arousal, dominance))
    if not all(math.isfinite(x) for x in (p, a, d)):
        raise ValueError(f"PAD components must be finite, got {(p, a, d)}")
    if math.sqrt(p * p + a * a + d * d) < PAD_NEUTRAL_RADIUS or abs(p) < PAD_NEUTRAL_PLEASURE:
        return "neutral"
    return PAD_OCTANTS[(1 if p >= 0 else -1, 1 if a >= 0 else -1, 1 if d >= 0 else -1)]


def outcome_of(acted: int, verified: bool | None, pnl: float | None, *, failed: bool = False) -> EpisodeOutcome:
    """No action: descriptive. A failed action or an outcome that did not verify: negative. Otherwise the
    sign of the verified P&L (|pnl| < NEUTRAL_PNL_USD, or no P&L measured: neutral)."""
    if acted <= 0:
        return EpisodeOutcome.DESCRIPTIVE
    if failed or verified is False:
        return EpisodeOutcome.NEGATIVE
    if pnl is None or abs(pnl) < NEUTRAL_PNL_USD:
        return EpisodeOutcome.NEUTRAL
    return EpisodeOutcome.POSITIVE if pnl > 0 else EpisodeOutcome.NEGATIVE


class Episode(BaseModel):
    id: str
    golem_id: str
    tick: int = Field(ge=0)
    created_at: str  # ISO 8601
    regime: MarketRegime
    tier: Tier
    summary: str
    prediction_error: float = Field(default=0.0, ge=0.0)
    actions: int = Field(default=0, ge=0)
    pnl_impact: float | None = None
    outcome_verified: bool | None = None
    utility: float = Field(default=0.0, ge=0.0, le=1.0)  # Mattar–Daw gain × need, see dreams/replay.py
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    strength: float = Field(default=1.0, ge=1.0)  # starts at 1
    decay_class: DecayClass = DecayClass.TACTICAL
    quality: float = Field(default=0.5, ge=0.0, le=1.0)
    last_accessed_tick: int | None = None  # defaults to the creation tick (grimoire: "lastAccessed: creation time")
    retention: float = Field(default=1.0, ge=0.0, le=1.0)
    access_count: int = Field(default=0, ge=0)
    strategy: str | None = None  # strategy scope for PLAYBOOK sections; None = global
    dream_validated: bool = False  # demurrage class D modifier
    last_replayed_tick: int | None = None  # makes dream strengthening idempotent per dream
    # The episode's descriptive fields. None = derive from the
    # fields above (episodes built without a record: older exports and tables, hand-written incidents).
    episode_type: EpisodeType | None = None
    tool: str | None = None  # tool that produced it: "heartbeat" for an observation, else the first action's tool
    outcome: EpisodeOutcome | None = None
    chain: str | None = None  # chain id
    token_pair: str | None = None  # e.g. "WETH/USDC"
    timestamp_ms: int | None = None  # unix ms; default: created_at
    importance: Importance | None = None
    consolidated: bool = False  # true once the delta cycle's distillation (ExpeL) has processed it
    action_tools: list[str] = Field(default_factory=list)  # tools called during the tick
    emotional_tag: str | None = None  # PAD-derived (pad_label); None = not recorded
    gain: float | None = Field(default=None, ge=0.0, le=1.0)  # replay gain (decay.replay_gain); default from pnl/PE
    # the tick's regime cell (RegimeTag.cell, e.g. "v3/down/gas-normal/liq-deep"); None on rows from before the tag
    regime_tag: str | None = None

    @field_validator("regime", mode="before")
    @classmethod
    def _regime(cls, v: Any) -> Any:
        # the regime detector's vocabulary; foreign labels (bull, calm, crash, ...) mapped or refused by name
        if isinstance(v, MarketRegime):
            return v
        return normalise_regime(v) or MarketRegime.UNKNOWN.value

    @field_validator("id", "golem_id", "summary")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("must be a non-empty string")
        return v

    @field_validator("created_at")
    @classmethod
    def _iso(cls, v: str) -> str:
        try:
            datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError as e:
            raise ValueError(f"created_at must be an ISO 8601 timestamp, got {v!r}") from e
        return v

    @field_validator("prediction_error", "pnl_impact")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError(f"must be finite, got {v}")
        return v

    @field_validator("emotional_tag")
    @classmethod
    def _tag(cls, v: str | None) -> str | None:
        if v is not None and v not in EMOTIONAL_TAGS:
            raise ValueError(f"emotional_tag must be one of {sorted(EMOTIONAL_TAGS)} (pad_label), got {v!r}")
        return v

    @model_validator(mode="after")
    def _defaults(self) -> Episode:
        if self.last_accessed_tick is None:
            self.last_accessed_tick = self.tick
        if self.episode_type is None:
            self.episode_type = EpisodeType.ACTION if self.actions > 0 else EpisodeType.OBSERVATION
        if self.tool is None:
            self.tool = self.action_tools[0] if self.action_tools else ("heartbeat" if self.actions == 0 else "unknown")
        if self.outcome is None:
            self.outcome = outcome_of(self.actions, self.outcome_verified, self.pnl_impact)
        if self.timestamp_ms is None:
            self.timestamp_ms = _timestamp_ms(self.created_at)
        if self.importance is None:  # the part of importance_of these fields can answer
            self.importance = Importance.NOTABLE if self.actions > 0 or self.tier == Tier.T2 else Importance.ROUTINE
        if self.gain is None:
            self.gain = replay_gain(self.pnl_impact, self.prediction_error)
        return self

    @property
    def acted(self) -> bool:
        return self.actions > 0


EMERGENCY_PROBES = ("kill_switch", "circuit_breaker")  # a HIGH reading of these halts the golem


def importance_of(record: DecisionCycleRecord) -> Importance:
    """The importance level, derived deterministically from the record (ours):

    emergency  the kill switch or the circuit breaker probe reads HIGH, or the outcome broke an invariant
               (a safety incident)
    critical   any HIGH anomaly, a reorg removed earlier ticks' blocks, or an action failed
    notable    the golem acted, deliberated at T2, or the regime changed
    routine    everything else
    """
    probes = [*record.observation.probes, *record.probe_results]
    high = {p.probe for p in probes if p.severity == ProbeSeverity.HIGH}
    high |= {a.probe for a in record.anomalies if a.severity == ProbeSeverity.HIGH}
    if high & set(EMERGENCY_PROBES) or (record.outcome is not None and record.outcome.invariant_violations):
        return Importance.EMERGENCY
    if high or record.observation.reorged_ticks or any(a.status == ActionStatus.FAILED for a in record.actions):
        return Importance.CRITICAL
    acted = any(a.status in (ActionStatus.EXECUTED, ActionStatus.FAILED) for a in record.actions)
    if acted or record.tier == Tier.T2 or _regime_shift(record):
        return Importance.NOTABLE
    return Importance.ROUTINE


def _regime_shift(record: DecisionCycleRecord) -> bool:
    """The analyze step counted a regime change as surprise (cognition/prediction_error.regime_changed)."""
    return record.prediction_error_sources.get("regime_change", 0.0) > 0.0


def _timestamp_ms(iso: str) -> int:
    ts = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return round(ts.timestamp() * 1000)


def episode_from_record(
    record: DecisionCycleRecord,
    *,
    strategy: str | None = None,
    confidence: float = 0.5,
    quality: float = 0.5,
) -> Episode:
    """The tick's episode, built from its DecisionCycleRecord ("The record IS the episode")."""
    acted = [a for a in record.actions if a.status in (ActionStatus.EXECUTED, ActionStatus.FAILED)]
    parts = [
        f"Tick {record.tick}: {record.regime.value.replace('_', ' ')} regime, gate chose {record.tier.value} "
        f"({record.gating_reason}); prediction error {record.prediction_error:.3f}, "
        f"price {record.observation.primary_price:.4g}."
    ]
    high = [a for a in record.anomalies if a.severity == ProbeSeverity.HIGH]
    if record.anomalies:
        parts.append("Anomalies: " + "; ".join(f"{a.probe} ({a.severity.value}): {a.description}" for a in record.anomalies) + ".")
    hf = record.observation.min_health_factor()
    if hf is not None:
        parts.append(f"Lowest health factor {hf:.3f}.")
    if record.deliberation and record.deliberation.decision:
        parts.append(f"Decision: {record.deliberation.decision}.")
    if record.actions:
        parts.append("Actions: " + ", ".join(f"{a.action_type} {a.status.value}" for a in record.actions) + ".")
    pnl = record.outcome.pnl_impact if record.outcome else None
    if record.outcome is not None:
        verdict = "verified" if record.outcome.verified else "NOT verified"
        pnl_text = f", pnl {pnl:+.2f}" if pnl is not None else ""
        parts.append(f"Outcome {verdict}{pnl_text}.")
    if record.active_interventions:
        parts.append("Owner said: " + "; ".join(i.message for i in record.active_interventions) + ".")
    if record.phase_transition:  # each behavioural phase transition is an episode
        v = record.vitality
        parts.append(f"Phase transition {record.phase_transition}: vitality {v.composite:.3f} (economic "
                     f"{v.economic:.3f}, epistemic {v.epistemic:.3f}, stochastic {v.stochastic:.3f}).")
    if record.somatic_markers_fired:
        parts.append("Somatic markers fired: " + ", ".join(record.somatic_markers_fired) + ".")
    if record.errors:
        parts.append("Errors: " + "; ".join(record.errors) + ".")
    if high:
        decay_class = DecayClass.REGIME_CONDITIONAL
    elif record.tier == Tier.T0 and not acted:
        decay_class = DecayClass.EPHEMERAL  # routine observation: fades within a day
    else:
        decay_class = DecayClass.TACTICAL
    if acted:
        episode_type = EpisodeType.ACTION
    elif _regime_shift(record):
        episode_type = EpisodeType.REGIME_SHIFT
    else:
        episode_type = EpisodeType.OBSERVATION
    tools = [a.tool_name for a in sorted(acted, key=lambda a: a.action_index)]
    snap = record.observation.snapshot
    created_at = record.timestamp or datetime.now(timezone.utc).isoformat()
    gain = replay_gain(pnl, record.prediction_error)
    pad = record.pad_after
    return Episode(
        id=episode_id(record.golem_id, record.tick),
        golem_id=record.golem_id,
        tick=record.tick,
        created_at=created_at,
        regime=record.regime,
        tier=record.tier,
        summary=" ".join(parts),
        prediction_error=max(0.0, record.prediction_error),
        actions=len(acted),
        pnl_impact=pnl,
        outcome_verified=record.outcome.verified if record.outcome else None,
        # At creation need = 1 (nothing fresher exists), so utility = gain.
        utility=gain,
        confidence=confidence,
        decay_class=decay_class,
        quality=quality,
        strategy=strategy,
        episode_type=episode_type,
        tool=tools[0] if tools else "heartbeat",
        outcome=outcome_of(len(acted), record.outcome.verified if record.outcome else None, pnl,
                           failed=any(a.status == ActionStatus.FAILED for a in acted)),
        chain=str(snap.chain_id),
        token_pair=f"{snap.pool.token0}/{snap.pool.token1}",
        timestamp_ms=_timestamp_ms(created_at),
        importance=importance_of(record),
        action_tools=tools,
        # the affect the tick left the golem in; no tag while nothing appraises it (pad_after absent)
        emotional_tag=pad_label(pad.pleasure, pad.arousal, pad.dominance) if pad is not None else None,
        gain=gain,
        regime_tag=record.observation.regime_tag.cell if record.observation.regime_tag is not None else None,
    )
