"""Delta-consolidation activities (the curator pass: one activity per step) and the one-shot dream replay.

DeltaConsolidationWorkflow runs the steps in order (DELTA_STEPS), so the Web UI shows each and a retry redoes
one. The steps are async: the future-utility calls (golem/inference/admission_utility.py) go through the async router,
the blocking LanceDB / SQLite work runs on threads (`blocking`), and `auto_heartbeat` beats from the event loop
meanwhile (heartbeating from a worker thread is not allowed in an async activity).
"""

from __future__ import annotations

import asyncio
import functools
import json
import shutil
import sqlite3
import time
from collections import Counter
from datetime import datetime, timedelta
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from temporalio import activity

from activities import ActivitySet
from activities.heartbeat import auto_heartbeat, blocking, step
from golem.events import bridge as events
from golem.events.quality import (
    WINDOW_DAYS,
    ExternalTrend,
    ReflectionConsistency,
    consistency_due,
    external_trend,
    reflection_consistency,
)
from golem.grimoire.semantic.admission import (
    AdmissionAction,
    QuarantineAssessment,
    admit,
    apply_quarantine_review,
    assess,
    assess_quarantine,
)
from golem.grimoire.dreams.replay import run_dream_replay
from golem.grimoire.dreams.integration import promote_with_waking_evidence, waking_facts
from golem.grimoire.dreams.tags import DreamTags
from golem.grimoire.dreams.staging import StagingBuffer
from golem.grimoire.store.embeddings import scheduled_drift_check
from golem.grimoire.semantic.graph import CausalGraph
from golem.grimoire.playbook.heuristics import Heuristic, derive_heuristics_from_episodes, is_rule
from golem.grimoire.integrity import apply_drift_report, drift_reference_path
from golem.grimoire.playbook import view as playbook_view
from golem.grimoire.playbook.compile import PlaybookRevision, compiled_entries, playbook_line, rewrite_playbook
from golem.grimoire.playbook.survival import revisions, survival
from golem.grimoire.playbook.view import AdmittedView
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry
from golem.grimoire.upkeep import maintain
from golem.inference.admission_utility import FutureUtilityScorer, UtilityBatch
from golem.inference.strategies import unbundle
from golem.inference.strategy import parse_strategy
from golem.learning import causal, curator, cybernetics, regime_eval, settlement
from golem.learning.ledger import LearningChange
from golem.backtest.models import PathRow
from golem.learning.trial import StartPosition, TrialResult, TrialRunner, judge, path_rows, playbook_pair, start_position
from golem.learning.loop import allocation_defaults
from golem.life.owner_notes import deliver_followups
from golem.life.retention import compact
from golem.models.golem import (
    AdmissionStats,
    ConsolidationInput,
    ConsolidationResult,
    DeltaReport,
    DeltaStep,
    DreamInput,
    DreamResult,
    QuarantineReviewStats,
)
from golem.safety.attribution import PERSISTENT_WINDOWS, window_report
from golem.events.models import make_event
from golem.models.config import ViabilitySection
from golem.models.config_version import strategy_sha256
from golem.safety import experience
from golem.safety.experience import ViabilityStore
from golem.safety.limits import check_playbook_delta
from golem.services import Services


def _now_iso() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat()

MIN_TRIAL_ROWS = 5  # fewer recorded ticks measure nothing


KEEP_TRIAL_DIRS = 20  # each holds two backtests (reports, Temporal SQLite); the figures live on in heuristics.sqlite


def _prune_trials(root: Path) -> None:
    """Only the newest trials' run directories stay (names start with the zero-padded cycle tick)."""
    if root.is_dir():
        for old in sorted(p for p in root.iterdir() if p.is_dir())[:-KEEP_TRIAL_DIRS]:
            shutil.rmtree(old, ignore_errors=True)


def _hf_floor(strategy_text: str) -> float | None:
    """STRATEGY.md's MUST floor on the health factor (`MUST keep health_factor >= X`), if it names one."""
    try:
        strategy = parse_strategy(unbundle(strategy_text)[0])  # STRATEGY.md's own lines, not a scheduled file's
    except ValueError:
        return None
    floors = [c.value for c in strategy.constraints
              if c.kind == "keep" and c.metric == "health_factor" and c.op in (">=", ">") and c.value is not None]
    return max(floors) if floors else None


@dataclass
class Distilled:
    """What the distill step hands on: the candidates (one per supporting episode, as before), the quarantine
    rows due for review, and which distinct texts need a future-utility score."""

    heuristics_derived: int = 0
    candidates: list[GrimoireEntry] = field(default_factory=list)
    review: list[QuarantineAssessment] = field(default_factory=list)
    to_score: list[GrimoireEntry] = field(default_factory=list)
    processed: list[str] = field(default_factory=list)  # episodes seen for the first time (→ consolidated)


class ConsolidationActivities(ActivitySet):
    def __init__(self, services: Services, trials: TrialRunner | None = None) -> None:
        """`trials`: what runs a learned rule's trial (workers/trial.py); None: rules are promoted unmeasured."""
        self.s = services
        self.trials = trials

    # ---- delta consolidation: one activity per step, ordered by DeltaConsolidationWorkflow ----------------
    # Each returns the fields of the cycle's ConsolidationResult it fills; a retry redoes one step, and every
    # step is idempotent by cycle tick (decay by date, the curator, causal graph and context policy by their
    # ledger rows, follow-ups by id).
    @activity.defn(name="delta_decay")
    @auto_heartbeat
    async def decay(self, inp: ConsolidationInput) -> DeltaStep:
        report = await blocking("decay", self.s.episodes.apply_decay, now_tick=inp.tick,
                                tick_seconds=inp.config.clock.theta_base_seconds)
        return DeltaStep(fields={"episodes_scanned": report.scanned, "episodes_decayed": report.decayed,
                                 "below_prune_floor": report.below_prune_floor})

    @activity.defn(name="delta_settle")
    @auto_heartbeat
    async def settle(self, inp: ConsolidationInput) -> DeltaStep:
        """Hindsight settlement (docs/design/learning.md#hindsight-settlement): every acted tick at least
        `settle_ticks` old is judged by what its exposure change was worth since, before the distillation and the
        Curator read the ledger. Once per row (a retried step settles nothing twice); prices from the records only."""
        return DeltaStep(fields={"settlement": await blocking("settle", self._settle, inp),
                                 "attribution": await blocking("attribution", self._attribution, inp)})

    @activity.defn(name="delta_distill")
    @auto_heartbeat
    async def distill(self, inp: ConsolidationInput) -> DeltaStep:
        """ExpeL distillation → future utility (every candidate that needs one rated before any is
        admitted) → quarantine review → the admission gate; the episodes seen are marked consolidated."""
        distilled = await blocking("distill", self._distill, inp)
        step("score")
        batch = await FutureUtilityScorer(self.s.router).score_many(distilled.to_score, inp.daily_spend_usd)
        review = await blocking("quarantine review", self._review, inp, distilled, batch)
        admission = await blocking("admit", self._admit, inp, distilled, batch)
        # grimoire Episode.consolidated: "true after ExpeL has processed this episode"
        await blocking("mark consolidated", self.s.episodes.mark_consolidated, distilled.processed)
        step("reflection consistency")
        consistency = await self._reflection_consistency(inp.tick, inp.daily_spend_usd + batch.cost_usd)
        fields: dict[str, Any] = {"heuristics_derived": distilled.heuristics_derived,
                                  "admission": batch.fill(admission).model_dump(mode="json"),
                                  "quarantine_review": review.model_dump(mode="json"),
                                  "inference_cost_usd": round(batch.cost_usd + (consistency.cost_usd if consistency
                                                                                else 0.0), 8)}
        if consistency is not None:
            fields["reflection_consistency"] = consistency.model_dump(mode="json")
        return DeltaStep(fields=fields)

    async def _reflection_consistency(self, tick: int, daily_spend: float) -> ReflectionConsistency | None:
        """Weekly: the LLM-worded Reflexions of the last 7 days worded again and compared (cosine). None
        when the last measurement is less than a week old (<data>/quality/reflection-consistency.json)."""
        path = self.s.data_dir / "quality" / "reflection-consistency.json"
        now = _now_iso()
        stored = json.loads(path.read_text()) if path.exists() else {}
        if stored.get("tick") == tick:  # a retried step: the measurement this cycle already made
            return ReflectionConsistency.model_validate(stored)
        if not consistency_due(stored.get("measured_at"), now):
            return None
        records = await blocking("acted records", self._acted_records)
        embed = self.s.episodes.embedder.embed
        result = await reflection_consistency(records, now, router=self.s.router, embed=embed, daily_spend=daily_spend)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**result.model_dump(mode="json"), "tick": tick}, indent=1))
        return result

    def _acted_records(self, scan: int = 2000, keep: int = 50) -> list[Any]:
        """The newest acted ticks' records (a Reflexion follows only an acted tick)."""
        out = []
        for row in self.s.cycles.recent(scan):
            if row.get("has_action"):
                try:
                    out.append(self.s.cycles.load(row["tick"]))
                except (LookupError, ValueError):
                    continue
                if len(out) >= keep:
                    break
        return out

    @activity.defn(name="delta_upkeep")
    @auto_heartbeat
    async def upkeep(self, inp: ConsolidationInput) -> DeltaStep:
        await blocking("curator decay", self.s.semantic.curator_decay, inp.tick, inp.config.clock.theta_base_seconds)
        await blocking("upkeep", maintain, self.s.episodes, self.s.semantic)  # FTS fold-in, compaction, versions
        return DeltaStep()

    @activity.defn(name="delta_dream_promotion")
    @auto_heartbeat
    async def dream_promotion(self, inp: ConsolidationInput) -> DeltaStep:
        """The curator accelerates dream promotion when waking ticks corroborate staged dream outputs."""
        await blocking("dream promotion", self._dream_promotion, inp)
        tags = await blocking("dream tags", DreamTags(self.s.layout.dream_staging).tag, self.s.episodes.all(), inp.tick)
        return DeltaStep(fields={"dream_tags": len(tags)})

    @activity.defn(name="delta_learn")
    @auto_heartbeat
    async def learn(self, inp: ConsolidationInput) -> DeltaStep:
        """The earlier learning changes judged in matched regimes (a harmful one rolled back), then ExpeL operations by
        credited outcomes, the causal graph, cybernetics loop 2."""
        judged = await blocking("regime evaluation", self._regime_eval, inp)
        curator = await blocking("curator", self._curate, inp)
        curator["causal_edges"] = await blocking("causal graph", self._causal, inp)
        curator["context_policy"] = await blocking("context policy", self._retune, inp)
        return DeltaStep(fields={"curator": curator, "regime_eval": judged})

    @activity.defn(name="delta_trial")
    @auto_heartbeat
    async def trial(self, inp: ConsolidationInput) -> DeltaStep:
        """A learned rule pays for itself (docs/design/learning.md): the rules the Curator ADDed this cycle, and every
        k-th cycle the promoted and held-back ones, replayed on the golem's own last rows with and without the rule;
        the verdict keeps or demotes each, its figures in heuristics.sqlite's trial history."""
        cfg = inp.config.learning
        if not inp.config.grimoire.memory:
            return DeltaStep(fields={"trials": {"skipped": "memory off ([grimoire] memory = false)"}})
        if not cfg.trial or self.trials is None:
            return DeltaStep(fields={"trials": {"skipped": "trials off ([learning] trial = false)" if not cfg.trial
                                                else "no trial runner on this worker"}})
        due = await blocking("trial candidates", self._trial_candidates, inp)
        if not due:
            return DeltaStep(fields={"trials": {"judged": []}})
        # the judged window is the last trial_rows; the warm-up rows before it let the trial golem's probes, regime
        # and baselines start where the live golem's were (a cold start read the first rows differently)
        span = cfg.trial_rows + cfg.trial_warmup_rows
        records = await blocking("trial rows", self.s.cycles.recent_records, span)
        # the trial's world opens the loan and wallet the golem had at the first row, not the dev world's
        # (docs/design/learning.md#the-trial-starts-where-the-golem-was)
        rows, position = path_rows(records, span), start_position(records, span)
        strategy_text = self.s.strategy_text()
        floor = _hf_floor(strategy_text)
        deadline = time.monotonic() + cfg.trial_timeout_seconds
        run = activity.info().workflow_run_id or ""  # a retry keeps it; a second pass inheriting the history does not
        judged = []
        for h, occasion in due:
            step(f"trial {h.id}")
            done = [t for t in self.s.heuristics.trials(h.id) if t["tick"] == inp.tick and t["run"] == run]
            if done:  # a retried step: this cycle's verdict is recorded
                result = TrialResult.model_validate(done[0]["result"])
            else:
                result = await self._trial_one(inp, h, occasion, rows, strategy_text, floor, deadline, position)
                await blocking("trial verdict", self.s.heuristics.record_trial, h.id, inp.tick, occasion,
                               result.verdict, result.model_dump_json(by_alias=True), run)
            judged.append({"id": h.id, "occasion": occasion, "verdict": result.verdict, "summary": result.summary()})
        await blocking("trial dirs", _prune_trials, self.s.data_dir / "trials")
        demoted = [j["id"] for j in judged if j["verdict"] == "demoted"]
        await blocking("trial votes", playbook_view.follow_votes, self.s.heuristics, self.s.semantic, demoted, inp.tick)
        return DeltaStep(fields={"trials": {"judged": judged, "rows": len(rows)}})

    async def _trial_one(self, inp: ConsolidationInput, h: Heuristic, occasion: str, rows: list[PathRow], strategy_text: str,
                         floor: float | None, deadline: float, position: StartPosition | None = None) -> TrialResult:
        base: dict[str, Any] = {"heuristic_id": h.id, "text": h.text, "tick": inp.tick, "occasion": occasion,
                                "rows": len(rows)}

        def none_ran(why: str) -> TrialResult:
            return TrialResult.model_validate({**base, "verdict": "no trial", "reasons": [why]})

        if len(rows) - max(0, len(rows) - inp.config.learning.trial_rows) < MIN_TRIAL_ROWS:
            return none_ran(f"only {len(rows)} recorded ticks; a trial needs {MIN_TRIAL_ROWS}")
        budget = inp.config.learning.trial_timeout_seconds
        left = deadline - time.monotonic()
        if left <= 0:
            return none_ran(f"this cycle's trial time ({budget:g} s) was spent; next cycle")
        playbooks = playbook_pair(self.s.playbook_text(), h.id, playbook_line(h))
        out = self.s.data_dir / "trials" / f"{inp.tick:06d}-{h.id}"
        started = time.monotonic()
        assert self.trials is not None
        try:
            with_rule, without_rule = await asyncio.wait_for(
                self.trials.run(rows, inp.config, strategy_text, playbooks, out,
                                warmup=max(0, len(rows) - inp.config.learning.trial_rows), position=position), left)
        except asyncio.TimeoutError:
            return none_ran(f"ran past this cycle's trial time ({budget:g} s); next cycle")
        verdict, reasons = judge(with_rule, without_rule, inp.config.learning, floor)
        return TrialResult.model_validate({**base, "with_rule": with_rule, "without_rule": without_rule,
                                           "verdict": verdict, "reasons": reasons,
                                           "wall_seconds": round(time.monotonic() - started, 1)})

    def _trial_candidates(self, inp: ConsolidationInput) -> list[tuple[Heuristic, str]]:
        """The rules ADDed this cycle (judged before they reach PLAYBOOK.md), and on every `trial_every`-th cycle the
        rules in PLAYBOOK.md and those a trial held back (a held-back rule can earn its way in again)."""
        done = self.s.learning.cycle(inp.tick) or {}
        added = {op.get("entry_id") for op in done.get("operations", []) if op.get("op") == "ADD"}
        cycle = inp.tick // max(1, inp.config.clock.delta_theta_ticks)
        rejudge = cycle % inp.config.learning.trial_every == 0
        out: list[tuple[Heuristic, str]] = []
        for h in self.s.heuristics.list():
            if h.status == "retired" or not is_rule(h.text):
                continue
            if h.id in added and h.trial_verdict is None:
                out.append((h, "add"))
            # a rule promoted without ever being measured (votes, a dream) is judged at once, not on the k-th cycle
            elif (rejudge or h.trial_verdict is None) and (h.status == "active" or h.held):
                out.append((h, "rejudge"))
        return out

    @activity.defn(name="delta_playbook")
    @auto_heartbeat
    async def playbook(self, inp: ConsolidationInput) -> DeltaStep:
        before = await blocking("playbook entries", self._compiled)
        revision, view = await blocking("playbook", self._playbook, inp)
        changes = await blocking("playbook changes", self._playbook_changes, inp.tick, before, self._compiled())
        return DeltaStep(fields={"playbook_revision": revision.revision, "playbook_path": str(revision.path),
                                 "playbook_view": view.summary(), "playbook_changes": changes})

    @activity.defn(name="delta_followups")
    @auto_heartbeat
    async def followups(self, inp: ConsolidationInput) -> DeltaStep:
        delivered = await blocking("follow-ups", deliver_followups, self.s.layout, inp.followups, "next-curator",
                                   inp.tick)
        return DeltaStep(fields={"followups_delivered": delivered})

    @activity.defn(name="delta_retention")
    @auto_heartbeat
    async def retention(self, inp: ConsolidationInput) -> DeltaStep:
        """[retention]: records, outcome files and trace days older than `days` go into daily archives."""
        kept = await blocking("retention", compact, self.s.layout, inp.config.retention.days, time.time(),
                              index=self.s.cycles)
        return DeltaStep(fields={"retention": kept.as_dict()})

    @activity.defn(name="delta_drift")
    @auto_heartbeat
    async def drift(self, inp: ConsolidationInput) -> DeltaStep:
        grimoire = self.s.layout.grimoire
        drift = await blocking("drift check", scheduled_drift_check, self.s.episodes.embedder,
                               drift_reference_path(grimoire))
        # vectors queue until `golem grimoire reembed`
        pause = await blocking("drift pause", apply_drift_report, drift, grimoire)
        if not drift.ok or pause["paused"]:
            activity.logger.warning("embedding drift %s: %s; writes paused: %s", drift.status, drift.as_dict(),
                                    pause["paused"])
        return DeltaStep(fields={"embedding_drift": {**drift.as_dict(), "write_pause": {
            "paused": pause["paused"], "reasons": sorted(pause["reasons"]), "pending": pause["pending"]}}})

    @activity.defn(name="delta_viability")
    @auto_heartbeat
    async def viability(self, inp: ConsolidationInput) -> DeltaStep:
        """The strategy judged by what it achieved over the last `[viability] window_ticks` records: a critical
        finding restricts the golem until it stops binding or the owner acknowledges it (golem.safety.experience)."""
        cfg = inp.config.viability
        if not cfg.enabled:
            return DeltaStep()
        return DeltaStep(fields={"viability": await blocking("viability", self._viability, inp.tick, cfg)})

    def _viability(self, tick: int, cfg: ViabilitySection) -> dict[str, Any]:
        records = [r for r in self.s.cycles.recent_records(cfg.window_ticks) if r.tick <= tick]
        settled = {row.tick: row.settled_pnl for row in self.s.learning.outcomes() if row.settled_pnl is not None
                   and not row.run_label}
        sha = strategy_sha256(self.s.strategy_text())
        state, fresh = ViabilityStore(self.s.layout.viability).record(
            experience.assess(records, cfg, tick=tick, settled=settled), sha)
        now, a = _now_iso(), state.assessment
        assert a is not None
        self.s.events.emit([
            make_event(self.s.config.golem.id, tick, now,
                       "safety.strategy_unviable" if f.severity == "critical" else "safety.strategy_warning", f.kind,
                       finding=f.kind, message=f.message, fix=f.fix, figures=f.figures,
                       acknowledged=f.kind in state.acknowledged)
            for f in a.findings])
        url = self.s.config.alerts.webhook_url
        if url and fresh:  # the operator hears of a new restriction once (idempotent by the cycle's tick)
            body = {"golem": self.s.config.golem.id, "tick": tick, "status": a.status, "id": f"viability-{tick}",
                    "findings": [f.model_dump() for f in fresh],
                    "acknowledge": "golem strategy-check --ack (or change STRATEGY.md)"}
            httpx.post(url, json=body, timeout=5.0).raise_for_status()  # a failing receiver: Temporal retries
        ViabilityStore(self.s.layout.viability).notified(fresh)
        return experience.summary(state, sha)

    @activity.defn(name="delta_report")
    def report(self, inp: DeltaReport) -> None:
        """The finished cycle on the Event Fabric, with the external trend measured over the ticks'
        equity in the last 30 days."""
        now = _now_iso()
        self.s.events.emit(events.consolidation_events(inp.golem_id, now, inp.result))
        self.s.events.emit(events.trend_events(inp.golem_id, inp.result.tick, now, self._external_trend(now)))
        self.s.events.emit(events.survival_events(inp.golem_id, inp.result.tick, now,
                                                  self._heuristic_survival(inp.result.tick)))

    def _heuristic_survival(self, tick: int) -> dict[str, Any] | None:
        """The share of PLAYBOOK heuristics still in force 100 ticks after they entered."""
        db = self.s.layout.grimoire / "heuristics.sqlite"
        try:
            return survival(revisions(db), tick) if db.exists() else None
        except sqlite3.Error as err:  # best effort: the next cycle measures it again
            activity.logger.warning("heuristic survival not measured: %s", err)
            return None

    def _external_trend(self, now: str) -> ExternalTrend | None:
        since = (datetime.fromisoformat(now) - timedelta(days=WINDOW_DAYS)).isoformat()
        try:
            points = self.s.events.store.series("heartbeat.tick_finished", "equity_usd", since=since)
        except sqlite3.Error as err:  # best effort: the next cycle measures it again
            activity.logger.warning("external trend not measured: %s", err)
            return None
        return external_trend(points, now)

    # The steps in the order DeltaConsolidationWorkflow runs them.
    DELTA_STEPS = ("decay", "distill", "upkeep", "dream_promotion", "learn", "playbook", "followups", "retention",
                   "drift")
    # since the trial step: it runs after the Curator and before PLAYBOOK.md is compiled (workflow.patched("delta-trial"))
    DELTA_STEPS_TRIAL = ("decay", "distill", "upkeep", "dream_promotion", "learn", "trial", "playbook", "followups",
                         "retention", "drift")
    # since hindsight settlement: it runs before the distillation and the Curator read the ledger
    # (workflow.patched("delta-settle"))
    DELTA_STEPS_SETTLE = ("decay", "settle", "distill", "upkeep", "dream_promotion", "learn", "trial", "playbook",
                          "followups", "retention", "drift")
    # since a strategy is judged by experience: the last step reads the window's records (workflow.patched("delta-viability"))
    DELTA_STEPS_VIABILITY = (*DELTA_STEPS_SETTLE, "viability")

    @activity.defn(name="delta_consolidate")
    @auto_heartbeat
    async def consolidate(self, inp: ConsolidationInput) -> ConsolidationResult:
        """The whole cycle in one activity: what DeltaConsolidationWorkflow ran before its steps were activities
        (kept for cycles started by that code; see workflow.patched("delta-steps"))."""
        fields: dict[str, Any] = {"tick": inp.tick}
        for name in self.DELTA_STEPS:
            fields.update((await getattr(self, name)(inp)).fields)
        result = ConsolidationResult.model_validate(fields)
        self.report(DeltaReport(golem_id=inp.golem_id, result=result))
        return result

    # ---- steps (blocking; run on threads) ----------------------------------------------------
    def _settle(self, inp: ConsolidationInput) -> dict[str, Any]:
        try:
            token = self.s.load_strategy(None).collateral_token
        except ValueError as err:  # a broken STRATEGY.md names no collateral token; the rows wait for a fixed one
            return {"skipped": f"STRATEGY.md: {err}"}

        @functools.lru_cache(maxsize=None)  # a tick's record is read once per step, however many rows it settles
        def snapshot_of(tick: int, run: str) -> Any:
            try:
                return self.s.cycles.load(tick, run or None).observation.snapshot
            except (LookupError, ValueError):
                return None

        return settlement.settle_due(self.s.learning, snapshot_of, k=inp.config.learning.settle_ticks,
                                     cycle_tick=inp.tick, token=token)

    def _attribution(self, inp: ConsolidationInput) -> dict[str, Any] | None:
        """The return since the last cycle split into market, strategy, knowledge and noise, with the loop that
        should answer a loss (golem.safety.attribution), from the records of the last windows."""
        window = inp.config.clock.delta_theta_ticks
        records = []
        for row in reversed(self.s.cycles.recent(PERSISTENT_WINDOWS * window + 1)):
            if row["tick"] <= inp.tick:
                try:
                    records.append(self.s.cycles.load(row["tick"], row.get("run") or None))
                except (LookupError, ValueError):
                    continue  # an archived or unreadable record: the window spans the gap
        return window_report(records, window)

    def _distill(self, inp: ConsolidationInput) -> Distilled:
        scanned = self.s.episodes.all()
        if not inp.config.grimoire.memory:  # memory off: nothing is distilled or admitted
            return Distilled(processed=[e.id for e in scanned if not e.consolidated])
        # an acted episode's pnl as settled in hindsight where its tick is settled (its fee alone otherwise)
        settled = {o.episode_id: o.settled_pnl for o in self.s.learning.outcomes()
                   if o.episode_id and o.settled_verdict is not None and o.settled_pnl is not None}
        derived = derive_heuristics_from_episodes(scanned, settled=settled)
        out = Distilled(heuristics_derived=len(derived), processed=[e.id for e in scanned if not e.consolidated])
        for text, scope, episode_id in derived:
            self.s.heuristics.add_or_reinforce(text, scope, episode_id)
            # Distilled knowledge enters the semantic store through the admission gate (A-MAC).
            out.candidates.append(GrimoireEntry(
                category=EntryType.HEURISTIC, content=text, parent_episode_ids=[episode_id], created_tick=inp.tick,
                valid_from=inp.tick, tags=[scope], source=EntrySource(golem_id=inp.golem_id),
            ))
        out.review = assess_quarantine(self.s.semantic, inp.tick)
        # One rating per distinct text, and only where it can change the outcome (no merge, no quarantine).
        seen: set[str] = set()
        for c in out.candidates:
            if c.content not in seen:
                seen.add(c.content)
                if assess(self.s.semantic, c).needs_utility:
                    out.to_score.append(c)
        out.to_score += [qa.entry for qa in out.review if qa.releasable and assess(self.s.semantic, qa.entry).needs_utility]
        return out

    def _review(self, inp: ConsolidationInput, distilled: Distilled, batch: UtilityBatch) -> QuarantineReviewStats:
        """Quarantined at an earlier cycle → released, kept or dropped now (grimoire "reviewed next Curator cycle")."""
        outcomes = apply_quarantine_review(self.s.semantic, distilled.review, inp.tick, utility_fn=batch.utility_fn())
        n = Counter(o.outcome for o in outcomes)
        return QuarantineReviewStats(reviewed=len(outcomes), released=n["released"], kept=n["kept"],
                                     dropped=n["dropped"], outcomes=outcomes[:50])

    def _admit(self, inp: ConsolidationInput, distilled: Distilled, batch: UtilityBatch) -> AdmissionStats:
        actions: Counter[str] = Counter()
        for c in distilled.candidates:
            actions[admit(self.s.semantic, c, tick=inp.tick, utility_fn=batch.utility_fn()).action.value] += 1
        return AdmissionStats.model_validate({
            "candidates": len(distilled.candidates), "distinct": len({c.content for c in distilled.candidates}),
            **{a.value: actions[a.value] for a in AdmissionAction},
        })

    def _curate(self, inp: ConsolidationInput) -> dict[str, Any]:
        """ADD / UPVOTE / DOWNVOTE / EDIT over the learning ledger; a next-curator follow-up focuses it. Once per
        cycle tick: a retried activity returns the report it wrote."""
        if not inp.config.grimoire.memory:
            return {"skipped": "memory off ([grimoire] memory = false)"}
        done = self.s.learning.cycle(inp.tick)
        if done is not None:
            return curator.CuratorReport(**done).model_dump(mode="json", exclude={"operations": {"__all__": {"support"}}})
        try:
            strategy = self.s.load_strategy(None)
        except ValueError as err:  # a broken STRATEGY.md: no rule can be learned from it this cycle
            return {"skipped": f"STRATEGY.md: {err}"}
        report = curator.plan(inp.tick, self.s.learning.outcomes(), self.s.heuristics.list(),
                              self.s.learning.uncurated(inp.tick), strategy,
                              [(f.id, f.message) for f in inp.followups],
                              market=self._market(inp, strategy.collateral_token),
                              settle_ticks=inp.config.learning.settle_ticks)
        report = curator.apply(report, self.s.heuristics)
        voted = [op.entry_id for op in report.operations if op.op in ("UPVOTE", "DOWNVOTE") and op.entry_id]
        playbook_view.follow_votes(self.s.heuristics, self.s.semantic, voted, inp.tick)
        # the ledger keeps the supporting episode ids; the workflow history gets the operations without them
        self.s.learning.close_cycle(inp.tick, report.model_dump(mode="json"))
        return report.model_dump(mode="json", exclude={"operations": {"__all__": {"support"}}})

    def _market(self, inp: ConsolidationInput, token: str) -> list[curator.MarketTick]:
        """The cycle window's ticks (plus k before it, so its first ticks settle) as the market read them: the
        Curator's evidence of what holding lost in each regime (docs/design/learning.md#learning-from-what-holding-lost)."""
        span = inp.config.clock.delta_theta_ticks + inp.config.learning.settle_ticks
        out = []
        for row in self.s.cycles.recent(span + 1):
            if row["tick"] > inp.tick:
                continue
            try:
                record = self.s.cycles.load(row["tick"], row.get("run") or None)
            except (LookupError, ValueError):
                continue  # an archived or unreadable record: the window spans the gap
            snap = record.observation.snapshot
            out.append(curator.MarketTick(tick=record.tick, regime=record.observation.regime.value,
                                          price=settlement.price_of(snap), exposure=settlement.exposure(snap, token)))
        return out

    def _causal(self, inp: ConsolidationInput) -> int:
        """Edges from this window's records (plus k ticks of overlap) into the causal graph, once per cycle tick."""
        if not inp.config.grimoire.memory:
            return 0
        done = self.s.learning.causal_cycle_done(inp.tick)
        if done is not None:
            return done
        window = inp.config.clock.delta_theta_ticks + causal.CAUSAL_WINDOW_TICKS
        records = [self.s.cycles.load(r["tick"]) for r in self.s.cycles.recent(window) if r["tick"] < inp.tick]
        edges = causal.causal_edges(causal.events_of(records))
        graph = CausalGraph(self.s.semantic.db_path)
        for e in edges:
            graph.add_edge(e.source, e.target, weight=e.weight, tick=inp.tick)
        self.s.learning.record_edges(inp.tick, edges)
        return len(edges)

    def _retune(self, inp: ConsolidationInput) -> dict[str, Any]:
        """Cybernetics loop 2: a bounded shift of token allocations by what went with good outcomes (a new
        ContextPolicy revision), or the revision in force when nothing moves."""
        policy = self.s.learning.context_policy(allocation_defaults(inp.config))
        if policy.tick == inp.tick and policy.reason.startswith("loop 2"):  # a retried delta: already retuned
            return {"revision": policy.revision, "changed": True, "reason": policy.reason}
        fresh = cybernetics.retune(policy, self.s.learning.context_samples(), inp.tick)
        if fresh is not None:
            self.s.learning.save_policy(fresh)
            # judged later in matched regimes; a rollback restores these allocations
            self.s.learning.record_change(LearningChange(
                id=f"context_policy:{fresh.revision}", tick=inp.tick, kind="context_policy", ref=str(fresh.revision),
                op="retune", description=fresh.reason,
                before={"revision": policy.revision, "allocations": policy.allocations}))
            policy = fresh
        return {"revision": policy.revision, "changed": fresh is not None, "reason": policy.reason}

    def _dream_promotion(self, inp: ConsolidationInput) -> list[str]:
        staging = StagingBuffer(self.s.layout.dream_staging)
        if not staging.open_items():
            return []
        return promote_with_waking_evidence(staging, self.s.semantic, inp.golem_id, inp.tick,
                                            waking_facts(self.s.cycles), self.s.heuristics)

    def _compiled(self) -> dict[str, str]:
        """The rules PLAYBOOK.md holds now: heuristic id → text."""
        path = self.s.playbook_path
        return compiled_entries(path.read_text(encoding="utf-8")) if path.exists() else {}

    def _playbook(self, inp: ConsolidationInput) -> tuple[PlaybookRevision, AdmittedView]:
        """PLAYBOOK.md as a view of the admitted semantic store: eligible heuristics not yet offered go
        through the admission gate, then only admitted, in-force, undecayed ones are compiled."""
        limits = self.s.safety.limits_for(inp.config)  # the version the golem runs on, not the worker's file
        view = AdmittedView()
        if inp.config.grimoire.memory:
            view.offered = playbook_view.offer(self.s.heuristics, self.s.semantic, inp.golem_id, inp.tick)
        keep = playbook_view.admitted_filter(self.s.heuristics, self.s.semantic, inp.tick,
                                             inp.config.clock.theta_base_seconds, view)
        revision = rewrite_playbook(
            self.s.heuristics, self.s.playbook_path,
            guard=lambda old, new: check_playbook_delta(old, new, limits).refused, tick=inp.tick, keep=keep,
        )
        return revision, view

    def _playbook_changes(self, tick: int, old: dict[str, str], new: dict[str, str]) -> list[dict[str, Any]]:
        """Each rule that entered, was revised in or left PLAYBOOK.md this cycle, recorded for its regime-matched
        evaluation (docs/design/learning.md#regime-matched-evaluation); a rollback's own undoing is not a change."""
        undone = {c.ref for c in self.s.learning.changes("rolled_back") if c.judged_tick == tick}
        out = []
        for hid in sorted(set(old) | set(new)):
            if hid in undone or old.get(hid) == new.get(hid):
                continue
            op = "entered" if hid not in old else "left" if hid not in new else "revised"
            before = {"in_playbook": False} if op == "entered" else {"in_playbook": True, "text": old[hid]}
            change = LearningChange(id=f"heuristic:{hid}:{tick}", tick=tick, kind="heuristic", ref=hid, op=op,
                                    description=f"{op}: {new.get(hid) or old.get(hid)}", before=before)
            self.s.learning.record_change(change)
            out.append({"id": change.id, "op": op, "heuristic": hid})
        return out

    def _regime_eval(self, inp: ConsolidationInput) -> dict[str, Any]:
        """The outcomes' change points, then every pending learning change whose windows are ready judged in matched
        regimes; a harmful one is rolled back. Once per cycle tick (a retried step returns its report)."""
        done = self.s.learning.regime_eval_cycle(inp.tick)
        if done is not None:
            return done
        cfg = inp.config.learning
        window = cfg.regime_window_ticks
        pending = [c for c in self.s.learning.changes("pending") if c.tick < inp.tick]
        lookback = max([regime_eval.CHANGE_POINT_LOOKBACK * window, *(inp.tick - c.tick + window for c in pending)])
        series = regime_eval.outcomes_of(self._records_upto(inp.tick, lookback + 1))
        found = regime_eval.change_points(series)
        fresh = self.s.learning.add_change_points([p.model_dump() for p in found], inp.tick)
        points = [regime_eval.ChangePoint.model_validate(p) for p in self.s.learning.change_points()]
        judged = []
        for c in pending:
            j = regime_eval.judge(series, c.tick, inp.tick, window, cfg.regime_min_matched, points)
            if j.status == "pending":
                continue
            status = j.status
            if status == "rolled_back":
                if cfg.regime_rollback:
                    self._roll_back(inp, c, j.reason)
                else:
                    status = "harmful"  # [learning] regime_rollback = false: judged, not undone
            self.s.learning.judge_change(c.id, status, inp.tick, j.reason, j.model_dump(mode="json"))
            judged.append({"id": c.id, "kind": c.kind, "ref": c.ref, "op": c.op, "status": status, "reason": j.reason,
                           "made_tick": c.tick})
        report = {"judged": judged, "pending": len(pending) - len(judged), "outcomes": len(series),
                  "change_points": fresh, "last_change_point": points[-1].tick if points else None}
        self.s.learning.close_regime_eval(inp.tick, report)
        return report

    def _roll_back(self, inp: ConsolidationInput, change: LearningChange, reason: str) -> None:
        """Undo a harmful change through its own mechanism: a new ContextPolicy revision with the allocations before
        it, or the heuristic restored and PLAYBOOK.md recompiled by this cycle's playbook step."""
        if change.kind == "context_policy":
            current = self.s.learning.context_policy(allocation_defaults(inp.config))
            self.s.learning.save_policy(cybernetics.ContextPolicy(
                revision=current.revision + 1, tick=inp.tick, allocations=change.before["allocations"],
                reason=f"rollback of loop-2 revision {change.ref}: {reason}"))
        elif change.kind == "heuristic":
            self.s.heuristics.restore(change.ref, change.before, inp.tick)
            playbook_view.follow_votes(self.s.heuristics, self.s.semantic, [change.ref], inp.tick)

    def _records_upto(self, tick: int, n: int) -> list[Any]:
        """The last `n` recorded ticks up to `tick`, in tick order (an archived or unreadable record leaves a gap)."""
        out = []
        for row in self.s.cycles.recent(n):
            if row["tick"] > tick:
                continue
            try:
                out.append(self.s.cycles.load(row["tick"], row.get("run") or None))
            except (LookupError, ValueError):
                continue
        return out[::-1]

    # ---- dream ----------------------------------------------------------------------------------
    @activity.defn(name="dream_replay")
    def dream(self, inp: DreamInput) -> DreamResult:
        activity.heartbeat("replay")
        report = run_dream_replay(
            self.s.episodes, self.s.heuristics, inp.replay_count, inp.tick,
            tick_seconds=inp.config.clock.theta_base_seconds,
        )
        result = DreamResult(
            tick=inp.tick,
            replayed=list(report.replayed),
            heuristics_touched=len(report.heuristics_touched),
            followups_delivered=deliver_followups(self.s.layout, inp.followups, "next-dream", inp.tick),
        )
        self.s.events.emit(events.dream_events(inp.golem_id, _now_iso(), result))
        return result
