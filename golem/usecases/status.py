"""`golem status`: GolemWorkflow's status query, built from its state and config version without Temporal."""

from __future__ import annotations

from golem.cognition.decision_cache import hit_rate_report
from golem.cognition.fold import schedule_dream
from golem.models.config import GolemConfig
from golem.models.enums import HeartbeatState
from golem.models.golem import GolemStatus
from golem.models.interventions import summarize
from golem.models.state import FsmState, GolemState
from golem.safety.gas import restore_status, spend_status


def golem_status(s: GolemState, config: GolemConfig | None, *, activity: str, tick_workflow_id: str | None,
                 run_ticks: int, config_version: str) -> GolemStatus:
    """What the owner sees: the state's figures beside the config's budgets; the last 5 rejections, 10 failures."""
    life, v = s.life, s.vitality
    return GolemStatus(
        golem_id=s.golem_id, tick=s.tick, activity=activity, current_tick_workflow_id=tick_workflow_id,
        fsm=FsmState(state=HeartbeatState.DREAMING) if s.dreaming else FsmState(),
        tick_queue=s.tick_queue.model_copy(update={"carried_probes": []}),
        last_tick=s.recent_ticks[-1] if s.recent_ticks else None,
        regime=s.regime.value, phase=s.phase.value, vitality=v.composite, theta_seconds=s.theta_seconds,
        **spend_status(s, config),  # type: ignore[arg-type]  # the keys are GolemStatus fields
        **restore_status(s),  # type: ignore[arg-type]  # gas per 1.0 of health factor restored (golem.safety.gas)
        pending_steers=[summarize(x) for x in s.pending_steers],
        pending_followups=[summarize(x) for x in s.pending_followups],
        rejected_interventions=s.rejected_interventions[-5:],
        approvals=s.approvals,
        failed_ticks=s.failed_ticks[-10:],
        run_ticks=run_ticks,
        decision_cache=s.decision_cache_stats or hit_rate_report(s.decision_cache),
        learned_gating_active=config is not None and s.tick >= config.gating.cold_start_ticks,
        config_version=config_version,
        chain=s.chain, paused=s.paused, entries_stopped=s.entries_stopped, control_note=s.control_note,
        dream_yield=s.dream_yield, threat_coverage=s.threat_coverage, last_dream=s.last_dream,
        dream_urgency=schedule_dream(s, config).urgency if config is not None else None,
        clocks={"economic": v.economic, "epistemic": v.epistemic, "stochastic": v.stochastic},
        credit_remaining_usd=life.credit_remaining_usd, estimated_ttl_ticks=life.estimated_ttl_ticks,
        runway_days=life.runway_days, burn_usd_per_tick=life.burn_ema_usd if life.ticks_lived else None,
        ticks_lived=life.ticks_lived, generation=life.generation, predecessor=life.predecessor,
        hayflick_ticks=config.lifespan.hayflick_ticks if config is not None else None,
        pad={"pleasure": s.pad.pleasure, "arousal": s.pad.arousal, "dominance": s.pad.dominance},
        emotion=life.emotion.value if life.emotion else None, somatic_markers=len(life.markers),
        dying=life.death_cause,
        certificate=life.certificate.model_dump(mode="json") if life.certificate else None,
        strategies=list(s.strategy_runs),
    )
