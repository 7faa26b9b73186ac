"""Self-steers: the golem's own systems steering it through the owner's steer pathway (docs/design/tick.md#self-steers).

The risk daemon steers when the drawdown enters a higher band of the risk layer's max drawdown, the mortality engine
when the behavioural phase worsens, the PolicyCage when its refusals run on for several ticks. Each fires once on
its edge (a band entered, a phase entered, a streak reached), never every tick it holds. Pure: after_turn's risk
member computes them into the record, the reflect activity signals them to the golem's workflow.
"""

from __future__ import annotations

from golem.models.enums import ActionStatus, BehavioralPhase, SteerSeverity
from golem.models.interventions import Steer
from golem.models.record import DecisionCycleRecord

# drawdown as a share of the max drawdown: entering band 1 steers at medium severity, band 2 at high
RISK_BANDS = ((0.5, SteerSeverity.MEDIUM), (0.8, SteerSeverity.HIGH))
# the phases that steer when entered, and how hard (thriving and stable never do)
PHASE_SEVERITY = {BehavioralPhase.CONSERVATION: SteerSeverity.MEDIUM, BehavioralPhase.DECLINING: SteerSeverity.HIGH,
                  BehavioralPhase.TERMINAL: SteerSeverity.CRITICAL}
REFUSAL_STREAK = 3  # consecutive ticks with a refused action before the cage steers


def risk_band(drawdown_used: float) -> int:
    """0 below the first band, else the index + 1 of the highest band reached."""
    return sum(1 for bound, _ in RISK_BANDS if drawdown_used >= bound)


def refused(record: DecisionCycleRecord) -> list[str]:
    """The reasons the cage refused this tick's actions (blocked, not deferred or cancelled)."""
    return [a.block_reason or a.tool_name for a in record.actions if a.status == ActionStatus.BLOCKED]


def self_steers(record: DecisionCycleRecord, *, band_before: int, band_now: int, streak_now: int,
                phase_before: BehavioralPhase) -> list[Steer]:
    """The steers this tick's record calls for, in a fixed order (risk, mortality, cage); ids are stable per tick so a
    retried reflect or a reset tick sends the same ones (the golem drops a repeated id)."""
    out: list[Steer] = []
    at = record.timestamp
    if band_now > band_before and record.risk is not None:
        bound, severity = RISK_BANDS[band_now - 1]
        out.append(Steer(id=f"self-risk-{record.tick}", source="risk-daemon", severity=severity, created_at=at,
                         message=(f"risk daemon: drawdown {record.risk['drawdown_pct']:.1f}% is "
                                  f"{record.risk['drawdown_used']:.0%} of the {record.risk['max_drawdown_pct']:g}% "
                                  f"limit (band {bound:.0%} entered at tick {record.tick})")))
    phase_severity = PHASE_SEVERITY.get(record.phase)
    if phase_severity is not None and record.phase != phase_before and _worse(record.phase, phase_before):
        out.append(Steer(id=f"self-phase-{record.tick}", source="mortality-engine", severity=phase_severity,
                         created_at=at,
                         message=(f"mortality engine: phase {phase_before.value} -> {record.phase.value} at tick "
                                  f"{record.tick} (vitality {record.vitality.composite:.2f})")))
    if streak_now == REFUSAL_STREAK:
        reasons = refused(record)
        out.append(Steer(id=f"self-cage-{record.tick}", source="policy-cage", severity=SteerSeverity.LOW,
                         created_at=at,
                         message=(f"policy cage: an action was refused on {REFUSAL_STREAK} ticks running, the last: "
                                  + (reasons[0][:300] if reasons else "no reason given"))))
    return out


_ORDER = list(BehavioralPhase)


def _worse(now: BehavioralPhase, before: BehavioralPhase) -> bool:
    return _ORDER.index(now) > _ORDER.index(before)
