"""The reflect step's learning, over the stores it is handed: Reflexion on an acted tick, its insight offered
to the admission gate, and the verified outcome's credit to the entries that were in the decision's workspace."""

from __future__ import annotations

from golem.grimoire.semantic.admission import admit
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, SemanticStore
from golem.inference.config import InferenceConfig
from golem.learning import cybernetics
from golem.models.config import GolemConfig
from golem.models.enums import Tier
from golem.learning.expectation import expect
from golem.learning.ledger import LearningLedger
from golem.learning.reflexion import INSIGHT_CONFIDENCE, credit_for, reflect_on
from golem.models.record import DecisionCycleRecord, Reflexion
from golem.models.tick import ProposedAction


def reflexion_of(record: DecisionCycleRecord, proposed: list[ProposedAction],
                 half_simulated: tuple[float | None, str] | None = None) -> Reflexion | None:
    """The deterministic Reflexion of an acted tick (None when it did not act or has no outcome)."""
    if record.deliberation is None or record.outcome is None or not proposed:
        return None
    expected = record.deliberation.expected or expect(proposed, record.observation)
    return reflect_on(record, expected, expect(proposed, record.observation, scale=0.5), half_simulated)


def learn_from_outcome(record: DecisionCycleRecord, proposed: list[ProposedAction], semantic: SemanticStore,
                       ledger: LearningLedger, *, memory: bool = True,
                       reflexion: Reflexion | None = None) -> DecisionCycleRecord:
    """Fills record.reflexion and record.credit (and writes what they imply) when the tick acted and was verified.
    `reflexion`: the tick's Reflexion when the caller already has it (with its simulated counterfactual, or the
    model's wording); else the deterministic one with the projected counterfactual."""
    delib = record.deliberation
    if delib is None or record.outcome is None or not proposed:
        return record
    reflexion = reflexion or reflexion_of(record, proposed)
    if reflexion is None:
        return record
    if memory:  # memory off: nothing is admitted ([grimoire] memory = false)
        decision = admit(semantic, GrimoireEntry(
            category=EntryType.INSIGHT, content=reflexion.insight, confidence=INSIGHT_CONFIDENCE,
            parent_episode_ids=list(record.episodes_written), created_tick=record.tick, valid_from=record.tick,
            market_regime=record.regime.value, tags=["reflexion", reflexion.verdict],
            regime_tag=record.observation.regime_tag.cell if record.observation.regime_tag is not None else None,
            source=EntrySource(golem_id=record.golem_id),
        ), tick=record.tick)
        reflexion.insight_admission, reflexion.insight_entry_id = decision.action.value, decision.entry_id
    credit = credit_for(record, reflexion.verdict)
    fresh = ledger.record(record, reflexion, credit)  # a retried reflect credits nothing twice
    entries = [c for c in fresh if c.kind == "entry"]
    semantic.reinforce([c.entry_id for c in entries if c.delta > 0], record.tick, positive_outcome=True)
    for times in range(max((-c.delta for c in entries), default=0)):  # a weight-2 loss weakens twice
        semantic.weaken([c.entry_id for c in entries if -c.delta > times], record.tick)
    record.reflexion, record.credit = reflexion, credit
    return record


def tune_context(record: DecisionCycleRecord, ledger: LearningLedger, defaults: dict[str, dict[str, int]], *,
                 regime_changed: bool) -> int:
    """Cybernetics loops 1 and 3 after a tick; returns the ContextPolicy revision in force (on the record)."""
    policy = ledger.context_policy(defaults)
    if regime_changed and policy.revision > 0:  # loop 3: nothing to reset before loop 2 ever tuned
        policy = cybernetics.partial_reset(policy, defaults, record.tick, record.regime.value)
        ledger.save_policy(policy, keep_samples=cybernetics.RESET_KEEP)
    categories = record.context_bundle_summary.categories
    if record.reflexion is not None and categories:  # loop 1: what the workspace held vs the outcome's quality
        ledger.add_context_sample(record.tick, record.run_label, cybernetics.ContextSample(
            tick=record.tick, tier=record.tier.value, categories=dict(categories),
            quality=cybernetics.QUALITY[record.reflexion.verdict]))
    return policy.revision


def allocation_defaults(config: GolemConfig) -> dict[str, dict[str, int]]:
    """The configured token allocations per tier (ContextPolicy revision 0)."""
    cfg = InferenceConfig.from_config(config)
    return {t.value: dict(cfg.allocations(t)) for t in (Tier.T1, Tier.T2)}
