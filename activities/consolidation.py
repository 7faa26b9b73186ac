"""Delta-consolidation and dream activities (the curator pass and episode replay)."""

from __future__ import annotations

from temporalio import activity

from golem.grimoire.admission import admit
from golem.grimoire.dream import run_dream_replay
from golem.grimoire.embeddings import scheduled_drift_check
from golem.grimoire.heuristics import derive_heuristics_from_episodes
from golem.grimoire.playbook import rewrite_playbook
from golem.grimoire.semantic import EntrySource, EntryType, GrimoireEntry
from golem.grimoire.upkeep import maintain
from golem.models.golem import ConsolidationInput, ConsolidationResult, DreamInput, DreamResult
from golem.safety.limits import check_playbook_delta
from workers.services import GolemServices


class ConsolidationActivities:
    def __init__(self, services: GolemServices) -> None:
        self.s = services

    @activity.defn(name="delta_consolidate")
    def consolidate(self, inp: ConsolidationInput) -> ConsolidationResult:
        activity.heartbeat("decay")
        report = self.s.episodes.apply_decay(now_tick=inp.tick, tick_seconds=inp.config.clock.theta_base_seconds)
        activity.heartbeat("distill")
        derived = derive_heuristics_from_episodes(self.s.episodes.all())
        for text, scope, episode_id in derived:
            self.s.heuristics.add_or_reinforce(text, scope, episode_id)
            # Distilled knowledge enters the semantic store through the admission gate (A-MAC).
            admit(self.s.semantic, GrimoireEntry(
                category=EntryType.HEURISTIC, content=text, parent_episode_ids=[episode_id], created_tick=inp.tick,
                valid_from=inp.tick, tags=[scope], source=EntrySource(golem_id=inp.golem_id),
            ), tick=inp.tick)
        activity.heartbeat("upkeep")
        self.s.semantic.curator_decay(inp.tick, inp.config.clock.theta_base_seconds)
        maintain(self.s.episodes, self.s.semantic)  # FTS fold-in, compaction, version cleanup
        limits = self.s.safety.limits
        revision = rewrite_playbook(
            self.s.heuristics, self.s.playbook_path,
            guard=lambda old, new: check_playbook_delta(old, new, limits).refused, tick=inp.tick,
        )
        delivered = self.s.deliver_followups(inp.followups, "next-curator", inp.tick)
        drift = scheduled_drift_check(self.s.episodes.embedder, self.s.data_dir / "grimoire" / "drift-reference.npy")
        if not drift.ok:
            activity.logger.warning("embedding drift %s: %s", drift.status, drift.as_dict())
        return ConsolidationResult(
            tick=inp.tick,
            episodes_scanned=report.scanned,
            episodes_decayed=report.decayed,
            below_prune_floor=report.below_prune_floor,
            heuristics_derived=len(derived),
            playbook_revision=revision.revision,
            playbook_path=str(revision.path),
            followups_delivered=delivered,
            embedding_drift=drift.as_dict(),
        )

    @activity.defn(name="dream_replay")
    def dream(self, inp: DreamInput) -> DreamResult:
        activity.heartbeat("replay")
        report = run_dream_replay(
            self.s.episodes, self.s.heuristics, inp.replay_count, inp.tick,
            tick_seconds=inp.config.clock.theta_base_seconds,
        )
        return DreamResult(
            tick=inp.tick,
            replayed=list(report.replayed),
            heuristics_touched=len(report.heuristics_touched),
            followups_delivered=self.s.deliver_followups(inp.followups, "next-dream", inp.tick),
        )
