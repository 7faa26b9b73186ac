"""The tick's activities: thin wrappers that call golem.* services and do the I/O.

Each is a method of TickActivities, which receives its clients (web3, LanceDB, SQLite, deliberator)
from the worker. Activities never decide what runs next; ThetaTickWorkflow does.
Bad input raises a non-retryable ApplicationError whose message says what to fix.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from datetime import datetime, timezone

from temporalio import activity
from temporalio.exceptions import ApplicationError

from golem.cognition.budget import apply_budget, daily_spend_on
from golem.cognition.prediction_error import compute_prediction_error
from golem.cognition.probes import anomalies_from, run_probes
from golem.cognition.regime import detect_regime
from golem.cognition.threshold import compute_adaptive_threshold, gate
from golem.inference.router import InferenceRejected, InferenceRetryable
from golem.life.reflect import build_record, retrieval_query, tick_result
from golem.models.enums import ActionStatus
from golem.models.golem import TickFailure
from golem.models.observation import Observation
from golem.models.record import ActionRecord, ContextBundleSummary, RetrievedEntrySummary
from golem.models.tick import (
    AnalyzeInput,
    AnalyzeResult,
    DecideInput,
    Deliberation,
    ExecuteInput,
    ExecuteResult,
    GateInput,
    GateResult,
    ObserveInput,
    ReflectInput,
    RetrieveInput,
    RetrievedKnowledge,
    SimulateInput,
    SimulationResult,
    TickResult,
    ValidateInput,
    ValidationResult,
    VerifyInput,
)
from workers.services import GolemServices

# Episodes below this cosine similarity are not "relevant" enough to show the deliberator.
RETRIEVAL_MIN_SCORE = 0.2
RETRIEVAL_K = 5


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def bad_input(message: str, kind: str = "BadInput") -> ApplicationError:
    return ApplicationError(message, type=kind, non_retryable=True)


class TickActivities:
    def __init__(self, services: GolemServices) -> None:
        self.s = services

    @activity.defn(name="observe")
    def observe(self, inp: ObserveInput) -> Observation:
        t0 = time.perf_counter()
        ctx = inp.ctx
        snapshot = self.s.read_snapshot()
        probes = run_probes(
            snapshot, ctx.state, ctx.config.probes, kill_switch_triggered=os.path.exists(ctx.config.probes.kill_switch_path)
        )
        regime, _ = detect_regime(
            [*ctx.state.price_history, snapshot.pool.price], ctx.state.range_bound_run, ctx.state.regime
        )
        return Observation(
            snapshot=snapshot,
            probes=probes,
            anomalies=anomalies_from(probes),
            regime=regime,
            observed_at=_now_iso(),
            read_ms=round((time.perf_counter() - t0) * 1000, 3),
        )

    @activity.defn(name="analyze")
    def analyze(self, inp: AnalyzeInput) -> AnalyzeResult:
        pe, sources = compute_prediction_error(inp.ctx.state, inp.observation)
        return AnalyzeResult(prediction_error=pe, sources=sources)

    @activity.defn(name="gate")
    def gate(self, inp: GateInput) -> GateResult:
        cfg = inp.ctx.config.heartbeat
        threshold = compute_adaptive_threshold(inp.ctx.state, cfg.base_deliberation_threshold)
        tier, reason, forced = gate(inp.prediction_error, threshold, inp.ctx.state, inp.steers)
        capped, why = apply_budget(tier, daily_spend_on(inp.ctx.state, inp.ctx.started_at), cfg)
        if why:
            reason = f"{reason}; {why}"
        return GateResult(tier=capped, threshold=threshold, reason=reason, forced=forced)

    @activity.defn(name="retrieve")
    def retrieve(self, inp: RetrieveInput) -> RetrievedKnowledge:
        query = retrieval_query(inp.observation)
        hits = self.s.episodes.search(query, k=RETRIEVAL_K, min_score=RETRIEVAL_MIN_SCORE)
        hits = [(ep, score) for ep, score in hits if ep.tick != inp.ctx.tick]
        if hits:
            self.s.episodes.mark_accessed([ep.id for ep, _ in hits], inp.ctx.tick)
        entries = [
            RetrievedEntrySummary(id=ep.id, kind="episode", summary=ep.summary, score=round(score, 4))
            for ep, score in hits
        ]
        tokens = sum(len(e.summary) // 4 for e in entries)
        return RetrievedKnowledge(
            query=query,
            entries=entries,
            summary=ContextBundleSummary(categories={"episodes": tokens}, total_tokens=tokens),
        )

    @activity.defn(name="decide")
    async def decide(self, inp: DecideInput) -> Deliberation:
        try:
            strategy = self.s.load_strategy()
        except ValueError as err:
            raise bad_input(str(err), "StrategyError") from None
        try:
            return await self.s.deliberator.decide(inp, strategy, self.s.playbook_text())
        except InferenceRetryable as err:  # rate limit, overload, timeout: Temporal retries with backoff
            delay = timedelta(seconds=err.retry_after_s) if err.retry_after_s else None
            raise ApplicationError(err.reason, type="InferenceRetryable", next_retry_delay=delay) from None
        except InferenceRejected as err:  # a bad request will not get better by retrying
            raise bad_input(err.reason, "InferenceRejected") from None

    @activity.defn(name="simulate")
    def simulate(self, inp: SimulateInput) -> SimulationResult:
        return self.s.simulate(inp.actions, inp.observation)

    @activity.defn(name="validate")
    def validate(self, inp: ValidateInput) -> ValidationResult:
        return self.s.validate(inp.ctx, inp.actions, inp.simulation, inp.observation)

    @activity.defn(name="execute")
    def execute(self, inp: ExecuteInput) -> ExecuteResult:
        activity.heartbeat("executing")
        records: list[ActionRecord] = []
        verdicts = {v.action_index: v for v in inp.validation.actions}
        for action in inp.actions:
            verdict = verdicts.get(action.action_index)
            base = dict(action_index=action.action_index, action_type=action.tool, tool_name=action.tool)
            if verdict is None or not verdict.approved or not verdict.permit_id:
                reason = verdict.reason if verdict else "not validated"
                records.append(ActionRecord(**base, status=ActionStatus.BLOCKED, block_reason=reason))
                continue
            if inp.cancelled_reason:
                self.s.permits.cancel(verdict.permit_id, inp.cancelled_reason)
                records.append(
                    ActionRecord(**base, permit_id=verdict.permit_id, status=ActionStatus.CANCELLED,
                                 block_reason=f"cancelled before sending: {inp.cancelled_reason}")
                )
                continue
            if not self.s.live:
                records.append(
                    ActionRecord(**base, permit_id=verdict.permit_id, status=ActionStatus.DEFERRED,
                                 block_reason="dry-run: external RPC and not started with --live")
                )
                continue
            records.append(self.s.execute(inp.ctx, action, verdict.permit_id, inp.observation))
            activity.heartbeat(f"action {action.action_index} done")
        return ExecuteResult(records=records)

    @activity.defn(name="verify")
    def verify(self, inp: VerifyInput):
        return self.s.verify(inp.ctx, inp.actions, inp.simulation, inp.records, inp.observation)

    @activity.defn(name="reflect")
    async def reflect(self, inp: ReflectInput) -> TickResult:
        record = build_record(inp, _now_iso())
        if record.outcome is not None and inp.deliberation is not None:
            spend = daily_spend_on(inp.ctx.state, inp.ctx.started_at)
            evaluation = await self.s.evaluate(record, inp.deliberation.actions, spend)
            if evaluation is not None:
                record.evaluation = evaluation.model_dump(mode="json")
                record.inference_cost += evaluation.cost
                record.total_cost += evaluation.cost
        return await asyncio.to_thread(self._persist, record)

    def _persist(self, record) -> TickResult:
        episode = self.s.write_episode(record)
        record.episodes_written = [episode]
        record.grimoire_mutations = [f"upsert episode {episode}"]
        path = self.s.cycles.persist(record)
        return tick_result(record, str(path), episode)

    @activity.defn(name="record_failure")
    def record_failure(self, inp: TickFailure) -> None:
        self.s.cycles.record_failure(inp)
