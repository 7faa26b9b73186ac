"""Grimoire Admission Gate (revisions Rev. 3, A-MAC five factors) with write-time conflict handling.

    score = 0.25·future_utility + 0.25·factual_confidence + 0.20·novelty + 0.15·recency + 0.15·type_prior
    score < 0.45 → rejected; 0.45–0.55 → admitted at confidence 0.3; > 0.55 → admitted at its own confidence.

Against the nearest neighbours (the novelty factor's LanceDB search):
- cosine > 0.95, same type and polarity → SKIP as a duplicate, but its evidence merges into the existing entry;
- cosine > 0.90, same type and polarity → MERGE: existing entry +1 validation, +0.1 confidence, parents unioned;
- a contradiction (close neighbour, opposite polarity) of a high-confidence (>= 0.7) entry when the candidate's
  factual confidence < 0.3 → hallucination firewall: quarantined_entries;
- a contradiction the candidate wins (more evidence, and newer — Rev. 7 step 4) → the old entry gets
  `valid_until` and a contradiction (-0.15), the new one is admitted.
Warnings bypass the composite (Rev. 3 "The Bridge": safety-critical, novelty check only).

Future utility: `utility_fn(entry) -> float` when an inference router is configured (one Haiku call in the
spec); otherwise `estimate_future_utility`, a deterministic estimate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from enum import Enum

from pydantic import BaseModel, Field

from golem.grimoire.semantic import EntryType, GrimoireEntry, SemanticStore

WEIGHTS = {"future_utility": 0.25, "factual_confidence": 0.25, "novelty": 0.20, "recency": 0.15, "type_prior": 0.15}
REJECT_BELOW = 0.45  # Rev. 3
LOW_ADMIT_BELOW = 0.55  # Rev. 3: 0.45–0.55 admitted at confidence 0.3
LOW_ADMIT_CONFIDENCE = 0.3
SKIP_COSINE = 0.95  # Rev. 3 novelty: > 0.95 → SKIP
MERGE_COSINE = 0.90  # Rev. 3 novelty: > 0.9 → MERGE; Rev. 7 step 3
OFF_TOPIC_COSINE = 0.5  # Rev. 3 novelty: < 0.5 → flag off-topic
CONTRADICTION_COSINE = 0.75  # ours: how close two statements must be to be "about the same thing"
HIGH_CONFIDENCE = 0.7  # the promotion threshold (grimoire "Curator Cycle") is what "high confidence" means here
FIREWALL_FACTUAL = 0.3  # Rev. 3 hallucination firewall
UPVOTE, DOWNVOTE = 0.1, 0.15  # grimoire "Three-Store Split"
RECENCY_TIME_CONSTANT_TICKS = 1440.0  # ours: one day of 60 s ticks

# Rev. 3 content type priors; DreamJournal is the staging-buffer output, treated as a strategy fragment.
TYPE_PRIORS: dict[EntryType, float] = {
    EntryType.WARNING: 0.9,
    EntryType.CAUSAL_LINK: 0.7,
    EntryType.HEURISTIC: 0.6,
    EntryType.INSIGHT: 0.5,
    EntryType.STRATEGY_FRAGMENT: 0.4,
    EntryType.DREAM_JOURNAL: 0.4,
}
OBSERVATION_PRIOR = 0.2  # Rev. 3 "Observation (ephemeral)"

_NEG = re.compile(
    r"\b(not|no|never|avoid|don't|doesn't|didn't|cannot|fails?|failed|loses?|lost|losing|falls?|fell|drops?|dropped|"
    r"decreases?|decreased|below|lower|worse|unprofitable|negative|bearish|sell)\b", re.I)
_POS = re.compile(
    r"\b(always|prefer|succeeds?|succeeded|gains?|gained|profits?|profitable|rises?|rose|increases?|increased|"
    r"above|higher|better|positive|bullish|buy)\b", re.I)


def polarity(text: str) -> int:
    """+1 / -1 / 0: the direction a statement asserts (deterministic lexicon; ours)."""
    neg = len(_NEG.findall(text))
    pos = len(_POS.findall(text))
    return (pos > neg) - (neg > pos)


def estimate_future_utility(entry: GrimoireEntry) -> float:
    """Deterministic stand-in for the Rev. 3 Haiku question: specific, actionable, conditioned text scores higher."""
    text = entry.content.lower()
    score = 0.3
    if re.search(r"\d", text):
        score += 0.2  # specific: carries a number
    if re.search(r"\b(when|if|during|after|before|whenever)\b", text):
        score += 0.2  # conditioned
    if re.search(r"\b(avoid|prefer|reduce|increase|hold|swap|repay|deposit|withdraw|sell|buy|exit|enter)\b", text):
        score += 0.2  # actionable
    if len(text.split()) < 5:
        score -= 0.2  # too short to act on
    return max(0.0, min(1.0, score))


class ArtifactQuality(BaseModel):
    """Artifact quality scoring (revisions Rev. 5): specificity, actionability, novelty, verifiability,
    consistency, red flags; `score` is their mean minus 0.2 per red flag, clamped to [0, 1]."""

    specificity: float
    actionability: float
    novelty: float
    verifiability: float
    consistency: float
    red_flags: list[str] = Field(default_factory=list)
    score: float


_VACUOUS = re.compile(r"\b(markets? (can|may) be volatile|it depends|be careful|monitor the situation|"
                      r"past performance|things (can|may) change)\b", re.I)


def artifact_quality(content: str, novelty: float, consistency: float) -> ArtifactQuality:
    text = content.lower()
    numbers = len(re.findall(r"\d+(?:\.\d+)?", text))
    specificity = min(1.0, 0.3 + 0.2 * numbers)
    actionability = 1.0 if re.search(r"\b(avoid|prefer|reduce|increase|hold|swap|repay|sell|buy|exit|enter)\b", text) else 0.3
    verifiability = 1.0 if re.search(r"\b(when|if|within|after|below|above|%|gwei|health factor)\b", text) else 0.4
    flags = []
    if _VACUOUS.search(text):
        flags.append("vacuous platitude")
    if len(text.split()) < 5:
        flags.append("too short")
    if re.search(r"\b(guaranteed|always wins|risk[- ]free|can't lose)\b", text):
        flags.append("overclaims certainty")
    base = (specificity + actionability + novelty + verifiability + consistency) / 5
    return ArtifactQuality(specificity=specificity, actionability=actionability, novelty=novelty,
                           verifiability=verifiability, consistency=consistency, red_flags=flags,
                           score=max(0.0, min(1.0, base - 0.2 * len(flags))))


class AdmissionAction(str, Enum):
    ADMITTED = "admitted"
    ADMITTED_LOW = "admitted_low"  # 0.45–0.55: at confidence 0.3
    MERGED = "merged"
    SKIPPED = "skipped"  # duplicate; its evidence still merged into the existing entry
    REJECTED = "rejected"
    QUARANTINED = "quarantined"


class AdmissionDecision(BaseModel):
    action: AdmissionAction
    score: float
    factors: dict[str, float]
    entry_id: str | None = None  # the stored entry (new, or the one merged into)
    superseded: list[str] = Field(default_factory=list)
    conflicts_with: list[str] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)


def composite(factors: dict[str, float]) -> float:
    return sum(WEIGHTS[k] * factors[k] for k in WEIGHTS)


def classify(score: float) -> AdmissionAction:
    """Rev. 3 thresholds, pure."""
    if not math.isfinite(score):
        raise ValueError(f"admission score must be finite, got {score}")
    if score < REJECT_BELOW:
        return AdmissionAction.REJECTED
    if score < LOW_ADMIT_BELOW:
        return AdmissionAction.ADMITTED_LOW
    return AdmissionAction.ADMITTED


def admit(
    store: SemanticStore,
    candidate: GrimoireEntry,
    *,
    tick: int,
    event_tick: int | None = None,
    utility_fn: Callable[[GrimoireEntry], float] | None = None,
    ephemeral_observation: bool = False,
) -> AdmissionDecision:
    """Run the gate and write the outcome. Idempotent for a candidate id already stored (returns MERGED/SKIPPED
    without counting its evidence twice, because parent episode ids are unioned)."""
    vec = store.embedder.embed([candidate.content])[0]
    neighbours = store.nearest(vec, k=5)
    pol = polarity(candidate.content)
    flags: list[str] = []

    best = neighbours[0][1] if neighbours else 0.0
    if not neighbours:
        novelty = 1.0
    elif best > MERGE_COSINE:
        novelty = 1.0 - best
    elif best < OFF_TOPIC_COSINE:
        novelty = 0.7
        flags.append("off-topic: nothing similar stored")
    else:
        novelty = 1.0

    contradicted = [(e, c) for e, c in neighbours
                    if c >= CONTRADICTION_COSINE and polarity(e.content) * pol < 0]
    aligned = [(e, c) for e, c in neighbours if c >= CONTRADICTION_COSINE and polarity(e.content) * pol > 0]
    strong_contra = [e for e, _ in contradicted if e.confidence >= HIGH_CONFIDENCE]
    if strong_contra:
        factual = 0.1
    elif contradicted:
        factual = 0.35
    elif aligned:
        factual = min(1.0, 0.6 + 0.1 * len(aligned))
    else:
        factual = 0.5

    utility = utility_fn(candidate) if utility_fn is not None else estimate_future_utility(candidate)
    if not 0.0 <= utility <= 1.0:
        raise ValueError(f"utility_fn returned {utility}, expected a value in [0, 1]")
    age = max(0, tick - (event_tick if event_tick is not None else candidate.created_tick))
    recency = math.exp(-age / RECENCY_TIME_CONSTANT_TICKS)
    prior = OBSERVATION_PRIOR if ephemeral_observation else TYPE_PRIORS[candidate.category]
    factors = {"future_utility": utility, "factual_confidence": factual, "novelty": novelty,
               "recency": recency, "type_prior": prior}
    score = composite(factors)
    cat = candidate.category.value

    def done(action: AdmissionAction, entry_id: str | None, **kw) -> AdmissionDecision:
        store.log_admission(tick, cat, action.value, score, entry_id)
        return AdmissionDecision(action=action, score=score, factors=factors, entry_id=entry_id, flags=flags, **kw)

    # Near-duplicate of the same type and direction: merge evidence into the existing entry.
    for e, c in neighbours:
        if c > MERGE_COSINE and e.category == candidate.category and polarity(e.content) * pol >= 0:
            new_parents = [p for p in candidate.parent_episode_ids if p not in e.parent_episode_ids]
            if new_parents or e.id != candidate.id:
                merged = e.model_copy(update={
                    "validated_count": e.validated_count + (1 if new_parents else 0),
                    "confidence": min(1.0, e.confidence + (UPVOTE if new_parents else 0.0)),
                    "parent_episode_ids": e.parent_episode_ids + new_parents,
                    "tags": sorted(set(e.tags) | set(candidate.tags)),
                })
                store.update(merged)
            return done(AdmissionAction.SKIPPED if c > SKIP_COSINE else AdmissionAction.MERGED, e.id)

    # Hallucination firewall (Rev. 3): contradicts a high-confidence entry and is itself unsupported.
    if strong_contra and factual < FIREWALL_FACTUAL:
        winner = all(len(candidate.parent_episode_ids) > max(e.validated_count, len(e.parent_episode_ids))
                     and candidate.created_tick > e.created_tick for e in strong_contra)
        if not winner:
            ids = [e.id for e in strong_contra]
            store.quarantine(candidate, "contradicts high-confidence entries", ids, tick)
            return done(AdmissionAction.QUARANTINED, candidate.id, conflicts_with=ids)

    superseded: list[str] = []
    if candidate.category != EntryType.WARNING:
        action = classify(score)
        if action == AdmissionAction.REJECTED:
            return done(action, None)
    else:
        action = AdmissionAction.ADMITTED  # Rev. 3: warnings bypass the gate
    # Rev. 7 step 4: a contradiction the candidate wins (more evidence and newer) supersedes the old entry.
    for e, _ in contradicted:
        if len(candidate.parent_episode_ids) >= max(1, e.validated_count) and candidate.created_tick >= e.created_tick:
            store.update(e.model_copy(update={"valid_until": tick, "contradicted_count": e.contradicted_count + 1,
                                              "confidence": max(0.0, e.confidence - DOWNVOTE)}))
            superseded.append(e.id)
    entry = candidate
    if action == AdmissionAction.ADMITTED_LOW:
        entry = candidate.model_copy(update={"confidence": LOW_ADMIT_CONFIDENCE})
    store.put_many([entry], vec[None, :])
    return done(action, entry.id, superseded=superseded, conflicts_with=[e.id for e, _ in contradicted])
