"""The dream cycle's phases: NREM replay, REM imagination on forks, Tier 1 threat rehearsal, integration.

Each phase writes its part of the cycle's DreamJournal (`<data>/dreams/cycle-<tick>.json`, keyed by the cycle's
tick, so a retried phase rewrites its own part) and returns a small summary. Forks are Anvil processes of the
golem's own chain (infra/forks.py): each phase sweeps what a killed worker or an earlier attempt left, and every
scenario's fork is stopped when the scenario ends. The real chain is only read (eth_call / eth_simulateV1).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timezone
from typing import Any, Protocol

from temporalio import activity

from activities import ActivitySet
from golem.grimoire.dreams import rehearsal
from golem.chain.web3client import make_web3
from golem.events import bridge as events
from golem.grimoire.dreams.replay import run_dream_replay
from golem.grimoire.dreams.tags import DreamTags
from golem.grimoire.dreams.staging import DreamJournal, StagingBuffer, journals, load_journal, save_journal, threat_coverage
from golem.grimoire.dreams.threats import PositionView, Scenario, judge, rem_scenarios, tier1_threats
from golem.grimoire.dreams.integration import (
    deviation_context,
    compress,
    integrate_results,
    merge_groups,
    promote_with_waking_evidence,
    recent_tvls,
    waking_facts,
)
from golem.cognition.dream_scheduler import thin_liquidity
from golem.inference.offline import OfflineDeliberator
from golem.life.cycle_store import CycleStore
from golem.learning.curator import focus_of
from golem.life.owner_notes import deliver_followups
from golem.models.enums import SteerSeverity, Tier
from golem.models.golem import DreamPhaseInput, DreamPhaseResult, DreamResult
from golem.models.interventions import Steer
from golem.models.state import GolemState
from golem.models.config import GolemConfig
from golem.models.observation import Observation
from golem.models.tick import DecideInput, ProposedAction, TickContext
from golem.safety.limits import SafetyLimits
from golem.services import Services


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Forks(Protocol):
    """Anvil forks of the golem's chain, registered so none outlives its scenario (infra/forks.py's ForkRegistry,
    handed in by the worker: activities start no processes of their own)."""

    def sweep(self) -> list[int]: ...

    def fork(self, fork_url: str, block: int | None = None, label: str = "") -> AbstractContextManager[Any]: ...


class DreamActivities(ActivitySet):
    def __init__(self, services: Services, forks: Forks) -> None:
        self.s = services
        self.forks = forks
        self.staging = StagingBuffer(services.layout.dream_staging)

    def _config(self, inp: DreamPhaseInput) -> GolemConfig:
        return self.s.config_for(inp.config_version) if inp.config_version else self.s.config

    def _past(self, inp: DreamPhaseInput) -> bool:
        return bool(inp.deadline) and _now() >= datetime.fromisoformat(inp.deadline)

    # ---- phase 1: NREM ---------------------------------------------------------------------------------
    @activity.defn(name="dream_nrem")
    def nrem(self, inp: DreamPhaseInput) -> DreamPhaseResult:
        activity.heartbeat("nrem")
        cfg = self._config(inp)
        tags = DreamTags(self.s.layout.dream_staging)
        tagged = {t.episode: t.reason for t in tags.open()}
        # A next-dream follow-up naming a regime or a tool: that situation's episodes replay first, by
        # utility, after the curator's dream_priority tags.
        regimes, tools, focus = focus_of([(f.id, f.message) for f in inp.followups], "replay")
        focused = sorted((e for e in self.s.episodes.all() if e.id not in tagged and
                          (e.regime.value in regimes or (e.tool is not None and e.tool in tools))),
                         key=lambda e: -e.utility)[:inp.replay_count] if focus else []
        report = run_dream_replay(self.s.episodes, self.s.heuristics, inp.replay_count, inp.tick,
                                  tick_seconds=cfg.clock.theta_base_seconds,
                                  first=[*tagged, *(e.id for e in focused)])
        tags.dreamed([i for i in report.replayed if i in tagged], inp.tick)
        activity.heartbeat("nrem: journal")
        chosen = [e for e in self.s.episodes.all() if e.id in set(report.replayed)]
        journal = load_journal(self.s.data_dir, inp.golem_id, inp.tick)
        journal.started_at = journal.started_at or _now().isoformat()
        journal.urgency, journal.reasons, journal.focus = inp.urgency, list(inp.reasons), focus
        strengthened = set(report.strengthened)
        # each replayed episode with the deviations its verification measured.
        journal.replayed = [{"episode": e.id, "tick": e.tick, "utility": round(e.utility, 4),
                             "strengthened": e.id in strengthened, **deviation_context(self.s.cycles, e.tick),
                             **({"dream_priority": tagged[e.id]} if e.id in tagged else {})}
                            for e in sorted(chosen, key=lambda e: report.replayed.index(e.id))]
        journal.merged = merge_groups(chosen)
        # compression: observation groups become one row (audit: merged_episodes beside the staging buffer)
        journal.compressed = compress(self.s.episodes, journal.merged, inp.tick, self.s.layout.dream_staging)
        _done(journal, "nrem")
        save_journal(self.s.data_dir, journal)
        return DreamPhaseResult(phase="nrem", items=len(report.replayed))

    # ---- phase 2: REM imagination, and Tier 1 threat rehearsal -------------------------------------------
    @activity.defn(name="dream_rem")
    def rem(self, inp: DreamPhaseInput) -> DreamPhaseResult:
        if not inp.forks:  # imagination perturbs a fork; without one there is nothing to imagine on
            return self._rehearse(inp, "rem", [], "imagined")
        episodes = self.s.episodes.all()
        health, blocks = {}, {}
        for e in episodes:
            hf, block = _record_health(self.s.cycles, e.tick)
            if hf is not None:
                health[e.id] = hf
            if block is not None:
                blocks[e.id] = block
        scenarios = rem_scenarios(episodes, health, inp.rem_scenarios, blocks)
        return self._rehearse(inp, "rem", scenarios, "imagined")

    @activity.defn(name="dream_threats")
    def threats(self, inp: DreamPhaseInput) -> DreamPhaseResult:
        obs = rehearsal.observe(self.s.w3, self.s.deployment, self.s.account)
        snap = obs.snapshot
        lending = [p for p in snap.positions if p.kind == "lending"]
        lp = [p for p in snap.positions if p.kind != "lending"]
        pos = PositionView(health_factor=obs.min_health_factor(), debt=sum(p.debt for p in lending),
                           collateral=sum(p.collateral for p in lending),
                           weth=float(snap.balances.get("WETH", 0.0)), lp_shares=sum(p.collateral for p in lp))
        journal = load_journal(self.s.data_dir, inp.golem_id, inp.tick)
        rehearsals = inp.threat_rehearsals
        thin = thin_liquidity(snap.pool.tvl, recent_tvls(self.s.cycles))
        if thin:  # thin liquidity doubles Tier 1 rehearsal as a volatile regime does
            rehearsals = 2
            journal.reasons = [*journal.reasons, thin]
        scenarios = tier1_threats(pos, rehearsals) if inp.rehearse_threats else []
        journal.threats_due = sorted({s.threat.value for s in scenarios if s.threat})
        save_journal(self.s.data_dir, journal)
        return self._rehearse(inp, "threats", scenarios, "rehearsed")

    def _rehearse(self, inp: DreamPhaseInput, phase: str, scenarios: list[Scenario], field: str) -> DreamPhaseResult:
        self.forks.sweep()  # what a killed worker or an earlier attempt of this phase left running
        cfg = self._config(inp)
        risk = SafetyLimits.from_config(cfg).risk
        allowance = risk.gas_budget_usd_per_day * risk.gas_emergency_fraction  # the gas partition's emergency slice
        partition = risk.gas_budget_usd_per_day
        max_slip = cfg.policy.max_slippage_bps
        live_obs = rehearsal.observe(self.s.w3, self.s.deployment, self.s.account)
        decide = self._decider(inp, cfg)
        results, forks, stopped = [], 0, False
        for i, sc in enumerate(scenarios):
            if self._past(inp):
                stopped = True
                break
            activity.heartbeat(f"{phase} {i + 1}/{len(scenarios)}: {sc.name}")
            fork_chk, actions = None, list[ProposedAction]()
            at = live_obs.snapshot.block_number
            if inp.forks:
                at = self._fork_block(sc, at)
                with self.forks.fork(cfg.chain.rpc_url, at, label=sc.name) as anvil:
                    forks += 1
                    fork_chk, actions = rehearsal.run_on_fork(
                        make_web3(anvil.rpc_url), self.s.deployment, self.s.account, sc.crisis, decide, sc.steer,
                        gas_allowance_usd=allowance, max_slippage_bps=max_slip, gas_partition_usd=partition)
            else:  # no fork: the response the golem would give to today's chain under the steer
                actions = decide(live_obs, live_obs.snapshot.pool.price, sc.steer)
            # the same response against the live chain today (simulated only: nothing is sent)
            live_chk = rehearsal.check(self.s.w3, self.s.deployment, self.s.account, actions, live_obs,
                                       where="live", gas_allowance_usd=allowance, max_slippage_bps=max_slip,
                                       gas_partition_usd=partition)
            results.append(judge(sc, live_chk, fork_chk).model_copy(update={"fork_block": at if inp.forks else None}))
        journal = load_journal(self.s.data_dir, inp.golem_id, inp.tick)
        setattr(journal, field, [r.model_dump(mode="json") for r in results])
        if phase == "threats":
            journal.threats_rehearsed = sorted({r.threat.value for r in results if r.threat})
        journal.forks = (journal.forks or 0) + forks
        _done(journal, phase)
        save_journal(self.s.data_dir, journal)
        return DreamPhaseResult(phase=phase, items=len(results), broken=sum(not r.ok for r in results), forks=forks,
                                stopped_early=stopped)

    def _fork_block(self, sc: Scenario, head: int) -> int:
        """Where a scenario's fork starts: a REM scenario at its episode's block (the episode's position and
        market), when the node still serves that block's state; otherwise, and for threats, today's head."""
        if sc.block is None or sc.block >= head:
            return head
        try:
            self.s.w3.eth.get_balance(self.s.account, block_identifier=sc.block)
        except Exception:  # pruned (a non-archive node, or Anvil past --prune-history): today's position instead
            return head
        return sc.block

    def _decider(self, inp: DreamPhaseInput,
                 cfg: GolemConfig) -> Callable[[Observation, float, str | None], list[ProposedAction]]:
        """The golem's own decision on a crisis observation: the offline deliberator over STRATEGY.md and
        PLAYBOOK.md (deterministic and free; a dream spends no inference budget)."""
        strategy, playbook = self.s.load_strategy(None), self.s.playbook_text()
        deliberator = OfflineDeliberator()

        def decide(obs: Observation, prev_price: float, steer: str | None) -> list[ProposedAction]:
            ctx = TickContext(golem_id=inp.golem_id, tick=inp.tick, config=cfg,
                              state=GolemState(golem_id=inp.golem_id, price_history=[prev_price]))
            steers = [Steer(id=f"dream-{inp.tick}", message=steer, severity=SteerSeverity.HIGH)] if steer else []
            di = DecideInput(ctx=ctx, observation=obs, tier=Tier.T2, prediction_error=1.0, steers=steers)
            return deliberator.decide_now(di, strategy, playbook).actions

        return decide

    # ---- phase 3: integration ----------------------------------------------------------------------------
    @activity.defn(name="dream_integrate")
    def integrate(self, inp: DreamPhaseInput) -> DreamResult:
        activity.heartbeat("integrate")
        journal = load_journal(self.s.data_dir, inp.golem_id, inp.tick)
        journal.stopped_at, journal.stop_reason = inp.stopped_at, inp.stop_reason
        staged = integrate_results(self.staging, self.s.semantic, inp.golem_id, inp.tick,
                                   journal.imagined + journal.rehearsed, self.s.heuristics)
        promoted = promote_with_waking_evidence(self.staging, self.s.semantic, inp.golem_id, inp.tick,
                                                waking_facts(self.s.cycles), self.s.heuristics)
        journal.staged = staged.staged
        journal.promoted = staged.promoted + promoted
        _done(journal, "integrate")
        journal.dream_yield = self.staging.dream_yield()
        journal.threat_coverage = threat_coverage([*[j for j in journals(self.s.data_dir) if j.tick != inp.tick],
                                                   journal])
        path = save_journal(self.s.data_dir, journal)
        rehearsals = journal.imagined + journal.rehearsed
        result = DreamResult(
            tick=inp.tick, replayed=[r["episode"] for r in journal.replayed],
            report_path=str(path),
            followups_delivered=deliver_followups(self.s.layout, inp.followups, "next-dream", inp.tick),
            focus=journal.focus,
            phases_done=journal.phases_done, stopped_at=inp.stopped_at, stop_reason=inp.stop_reason,
            imagined=len(journal.imagined), rehearsed=len(journal.rehearsed),
            broken=sum(not r["ok"] for r in rehearsals), forks=journal.forks, staged=len(journal.staged),
            promoted=len(journal.promoted), dream_yield=journal.dream_yield, threat_coverage=journal.threat_coverage,
        )
        self.s.events.emit(events.dream_events(inp.golem_id, _now().isoformat(), result))
        return result


def _done(journal: DreamJournal, phase: str) -> None:
    if phase not in journal.phases_done:
        journal.phases_done.append(phase)


def _record_health(cycles: CycleStore, tick: int) -> tuple[float | None, int | None]:
    """The health factor and the block a tick's record observed."""
    try:
        obs = cycles.load(tick).observation
    except Exception:  # an episode without a record (imported, archived past retention): not a REM source
        return None, None
    return obs.min_health_factor(), obs.snapshot.block_number
