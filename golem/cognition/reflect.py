"""Step 9 REFLECT as pure functions: assemble the DecisionCycleRecord, the tick's
episode text, and the TickResult GolemWorkflow folds into its state."""

from __future__ import annotations

from datetime import datetime

from golem.cognition.fold import rejections_for_record
from golem.inference.strategies import StrategySet, after_actions
from golem.models.strategy_runs import StrategyActivity
from golem.models.interventions import summarize
from golem.models.record import ContextBundleSummary, DecisionCycleRecord, TickRun
from golem.models.observation import Observation
from golem.models.tick import ReflectInput, TickResult, whole


def retrieval_query(inp_observation: Observation) -> str:
    """The text an escalated tick searches the Grimoire with: what is happening, in words."""
    snap = inp_observation.snapshot
    parts = [f"regime {inp_observation.regime.value}", f"price {snap.pool.price:.2f}"]
    hf = inp_observation.min_health_factor()
    if hf is not None:
        parts.append(f"health factor {hf:.2f}")
    parts += [a.description for a in inp_observation.anomalies]
    return "; ".join(parts)


def build_record(inp: ReflectInput, timestamp: str) -> DecisionCycleRecord:
    obs = whole(inp.observation, "observation")
    analysis, gate = whole(inp.analysis, "analysis"), whole(inp.gate, "gate")
    state = inp.ctx.state
    delib = inp.deliberation.record if inp.deliberation else None
    inference_cost = delib.cost if delib else 0.0
    gas_cost = sum(a.gas_cost for a in inp.records)
    run = inp.run or TickRun(run_id=inp.run_id, original_run_id=inp.run_id)
    rec = DecisionCycleRecord(
        tick=inp.ctx.tick,
        timestamp=timestamp,
        golem_id=inp.ctx.golem_id,
        workflow_id=inp.workflow_id,
        run_id=inp.run_id,
        rerun_of=inp.ctx.rerun_of,
        run_kind=run.kind,
        run_label=run.label,
        original_run_id=run.original_run_id or None,
        reset_reason=run.reset_reason,
        reset_from_run_id=run.reset_from_run_id,
        observation=obs,
        regime=obs.regime,
        probe_results=obs.probes,
        anomalies=obs.anomalies,
        pad_before=state.pad,
        prediction_error=analysis.prediction_error,
        prediction_error_sources=analysis.sources,
        deliberation_threshold=gate.threshold,
        tier=gate.tier,
        gating_reason=gate.reason,
        wake=gate.wake,
        context_bundle_summary=(
            inp.deliberation.context if inp.deliberation and inp.deliberation.context
            else inp.retrieved.summary if inp.retrieved else ContextBundleSummary()
        ),
        retrieved_entries=inp.retrieved.entries if inp.retrieved else [],
        active_interventions=[summarize(x) for x in inp.steers] + [summarize(x) for x in inp.followups],
        rejected_interventions=rejections_for_record(state, inp.ctx.tick),
        deliberation=delib,
        actions=inp.records,
        outcome=inp.outcome,
        vitality=state.vitality,
        phase=state.phase,
        inference_cost=inference_cost,
        gas_cost=gas_cost,
        total_cost=inference_cost + gas_cost,
        step_timings=inp.step_timings,
        fsm_trace=[*inp.fsm_trace, "Reflecting"] if inp.fsm_trace[-1:] != ["Reflecting"] else inp.fsm_trace,
        errors=inp.errors,
        config_version=inp.ctx.config_version,
        config_change=inp.ctx.config_change,
    )
    return rec


def tick_result(rec: DecisionCycleRecord, record_path: str, episode_id: str | None, *, wire: int = 0) -> TickResult:
    """What the tick hands its parent. Wire 2 leaves out what the parent never reads (the record's path and the
    episode id: `CycleStore.path_for(tick, run_label)` and the episode store name them), three copies fewer."""
    if wire >= 2:
        record_path, episode_id = "", None
    snap = rec.observation.snapshot
    return TickResult(
        tick=rec.tick,
        tier=rec.tier,
        regime=rec.regime.value,
        prediction_error=rec.prediction_error,
        threshold=rec.deliberation_threshold,
        price=snap.pool.price,
        gas_price_gwei=snap.gas_price_gwei,
        tvl=snap.pool.tvl,
        oracle_price=snap.oracle_price,
        position_health={p.id: p.health_factor for p in snap.positions if p.health_factor is not None},
        actions_executed=sum(1 for a in rec.actions if a.status.value == "executed"),
        tx_hashes=[a.tx_hash for a in rec.actions if a.tx_hash],
        inference_cost=rec.inference_cost,
        gas_cost=rec.gas_cost,
        episode_id=episode_id,
        record_path=record_path,
        run_label=rec.run_label,
        errors=rec.errors,
        phase=rec.phase.value,
    )


def strategies_after(rec: DecisionCycleRecord, strategies: StrategySet, timestamp: str) -> StrategyActivity | None:
    """The strategies after the tick: observe's view, with the executed actions the decision credited to a strategy
    (its rules, its MAY tools, the model's naming it) counted and the completions that makes
    (golem.inference.strategies.after_actions)."""
    seen = rec.observation.strategies
    if seen is None:
        return None
    executed = {a.action_index for a in rec.actions if a.status.value == "executed"}
    credited = [c for c in (rec.deliberation.credits if rec.deliberation else []) if c.action_index in executed]
    return after_actions(seen, strategies, credited, rec.tick, datetime.fromisoformat(timestamp))
