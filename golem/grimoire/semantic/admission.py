"""Grimoire Admission Gate (five weighted factors) with write-time conflict handling.

    score = 0.25·future_utility + 0.25·factual_confidence + 0.20·novelty + 0.15·recency + 0.15·type_prior
    score < 0.45 → rejected; 0.45–0.55 → admitted at confidence 0.3; > 0.55 → admitted at its own confidence.

Near neighbours are skipped or merged, a weak contradiction of a confident entry is quarantined (the hallucination
firewall), a contradiction the candidate wins supersedes the old entry; warnings face the novelty check only.
Future utility: golem/inference/admission_utility.py. Rules, quarantine review, why: docs/design/grimoire.md#admission.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from golem.grimoire.semantic.graph import CausalGraph
from golem.grimoire.semantic.store import EntryType, GrimoireEntry, SemanticStore
from golem.models.golem import QuarantineOutcome

WEIGHTS = {"future_utility": 0.25, "factual_confidence": 0.25, "novelty": 0.20, "recency": 0.15, "type_prior": 0.15}
REJECT_BELOW = 0.45
LOW_ADMIT_BELOW = 0.55  # 0.45–0.55 admitted at confidence 0.3
LOW_ADMIT_CONFIDENCE = 0.3
SKIP_COSINE = 0.95  # novelty: > 0.95 → SKIP
MERGE_COSINE = 0.90  # novelty: > 0.9 → MERGE
OFF_TOPIC_COSINE = 0.5  # novelty: < 0.5 → flag off-topic
CONTRADICTION_COSINE = 0.75  # ours: how close two statements must be to be "about the same thing"
HIGH_CONFIDENCE = 0.7  # the promotion threshold is what "high confidence" means here
FIREWALL_FACTUAL = 0.3  # hallucination firewall
UPVOTE, DOWNVOTE = 0.1, 0.15  # asymmetric: a contradiction weighs more
RECENCY_TIME_CONSTANT_TICKS = 1440.0  # ours: one day of 60 s ticks

# content type priors; DreamJournal is the staging-buffer output, treated as a strategy fragment.
TYPE_PRIORS: dict[EntryType, float] = {
    EntryType.WARNING: 0.9,
    EntryType.CAUSAL_LINK: 0.7,
    EntryType.HEURISTIC: 0.6,
    EntryType.INSIGHT: 0.5,
    EntryType.STRATEGY_FRAGMENT: 0.4,
    EntryType.DREAM_JOURNAL: 0.4,
}
OBSERVATION_PRIOR = 0.2  # observations are ephemeral

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
    """Deterministic stand-in for the future-utility question: specific, actionable, conditioned text scores higher."""
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
    """Artifact quality scoring: five weighted dimensions minus 0.1 per red flag, in [0, 1]."""

    specificity: float
    actionability: float
    novelty: float
    verifiability: float
    consistency: float
    red_flags: list[str] = Field(default_factory=list)
    weights: dict[str, float]
    score: float


# Artifact quality weights; dream hypotheses: specificity 0.10 and consistency 0.25. The
# dream row leaves 0.15 unassigned after those two changes; we hand it to novelty so weights sum to 1.
QUALITY_WEIGHTS = {"specificity": 0.25, "actionability": 0.25, "novelty": 0.20, "verifiability": 0.15,
                   "consistency": 0.15}
DREAM_QUALITY_WEIGHTS = {"specificity": 0.10, "actionability": 0.25, "novelty": 0.25, "verifiability": 0.15,
                         "consistency": 0.25}
RED_FLAG_PENALTY = 0.1  # -0.1 each

_NUMBER = re.compile(r"(?<![a-z])\d+(?:\.\d+)?")
_ADDRESS = re.compile(r"\b0x[0-9a-f]{6,}\b")
_HEDGE = re.compile(r"\b(might|maybe|perhaps|possibly|could be|seems?|somewhat|arguably|generally|sometimes|"
                    r"in some cases|to some extent)\b")
_ACTION_VERB = re.compile(r"\b(avoid|prefer|reduce|increase|hold|swap|repay|deposit|withdraw|supply|borrow|sell|buy|"
                          r"exit|enter|rebalance|hedge|pause|stop)\b")
_TRIGGER = re.compile(r"\b(when|if|whenever|once|unless|after|before|while)\b")
_ONCHAIN = re.compile(r"\b(block|tx|transaction|health factor|gwei|gas|oracle|pool|price|reserves?|tvl|slippage|"
                      r"bps|receipt|nonce)\b|%|\b0x[0-9a-f]{6,}")
_RED_FLAGS: list[tuple[str, re.Pattern[str]]] = [
    ("empty rhetoric", re.compile(r"\b(markets? (can|may) be volatile|it depends|be careful|monitor the situation|"
                                  r"past performance|things (can|may) change|stay vigilant|only time will tell)\b")),
    ("weasel words", re.compile(r"\b(some say|many believe|it is said|experts agree|studies show|"
                                r"it is widely known|clearly|obviously)\b")),
    ("self-referential praise", re.compile(r"\b(i|we|the golem) (am|are|is|was|were|performed) "
                                           r"(very |extremely )?(good|great|excellent|smart|brilliant|well)\b")),
    ("overclaims certainty", re.compile(r"\b(guaranteed|always wins|risk[- ]free|can't lose|never fails)\b")),
]
_CAUSAL = re.compile(r"\b(because|caused|causes|due to|leads? to|results? in)\b")


_STOPWORDS = {"the", "and", "for", "with", "that", "this", "are", "was", "its", "has", "have", "been", "will"}


def _tautology(text: str) -> bool:
    """"X when X"-shaped content: the condition restates the conclusion."""
    m = re.match(r"(?P<a>.+?)\b(when|if|because)\b(?P<b>.+)", text)
    if not m:
        return False
    a, b = (set(re.findall(r"[a-z]{3,}", m[k])) - _STOPWORDS for k in ("a", "b"))
    return bool(a) and bool(b) and len(a & b) / len(a | b) > 0.8


def artifact_quality(content: str, novelty: float, consistency: float, *, evidence: int = 0,
                     dream: bool = False) -> ArtifactQuality:
    """Score one cognitive artifact at creation time, rule-based for specificity, actionability,
    verifiability and red flags. `novelty` comes from the LanceDB neighbours, `consistency` from the producer
    (regeneration agreement: 1.0 for a deterministic distiller, measured for LLM output). `evidence` is how many
    episodes back the artifact: a causal claim with none is the "unverified causal claim" red flag."""
    for name, v in (("novelty", novelty), ("consistency", consistency)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and 0.0 <= v <= 1.0):
            raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
    text = content.lower()
    concrete = len(_NUMBER.findall(text)) + 2 * len(_ADDRESS.findall(text))
    hedges = len(_HEDGE.findall(text))
    specificity = max(0.0, min(1.0, 0.3 + 0.2 * concrete - 0.15 * hedges))
    verb, trigger = bool(_ACTION_VERB.search(text)), bool(_TRIGGER.search(text))
    actionability = 1.0 if verb and trigger else 0.6 if verb or trigger else 0.2
    verifiability = min(1.0, 0.3 + 0.25 * len(set(_ONCHAIN.findall(text))))
    flags = [name for name, rx in _RED_FLAGS if rx.search(text)]
    if _CAUSAL.search(text) and evidence == 0:
        flags.append("unverified causal claim")
    if _tautology(text):
        flags.append("tautological content")
    if len(text.split()) < 5:
        flags.append("too short")
    weights = DREAM_QUALITY_WEIGHTS if dream else QUALITY_WEIGHTS
    dims = {"specificity": specificity, "actionability": actionability, "novelty": float(novelty),
            "verifiability": verifiability, "consistency": float(consistency)}
    base = sum(weights[k] * dims[k] for k in weights)
    return ArtifactQuality(**dims, red_flags=flags, weights=weights,
                           score=round(max(0.0, min(1.0, base - RED_FLAG_PENALTY * len(flags))), 6))


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
    quality: ArtifactQuality | None = None  # artifact quality given to the candidate (None when it merged/was skipped)


def composite(factors: dict[str, float]) -> float:
    return sum(WEIGHTS[k] * factors[k] for k in WEIGHTS)


def classify(score: float) -> AdmissionAction:
    """The admission thresholds, pure."""
    if not math.isfinite(score):
        raise ValueError(f"admission score must be finite, got {score}")
    if score < REJECT_BELOW:
        return AdmissionAction.REJECTED
    if score < LOW_ADMIT_BELOW:
        return AdmissionAction.ADMITTED_LOW
    return AdmissionAction.ADMITTED


@dataclass
class Assessment:
    """The candidate against its nearest neighbours, before anything is written (the novelty and factual
    factors, and which write-time path it will take)."""

    vector: np.ndarray
    neighbours: list[tuple[GrimoireEntry, float]]
    polarity: int
    novelty: float
    factual: float
    flags: list[str]
    contradicted: list[tuple[GrimoireEntry, float]]
    strong_contra: list[GrimoireEntry]
    merge_into: tuple[GrimoireEntry, float] | None  # near-duplicate of the same type and direction
    firewalled: bool  # the hallucination firewall will quarantine it
    category: EntryType

    @property
    def needs_utility(self) -> bool:
        """Whether future utility can change the outcome: not for merges, quarantines or warnings (which bypass
        the composite), so no Haiku call is spent on them."""
        return self.merge_into is None and not self.firewalled and self.category != EntryType.WARNING


def evidence(e: GrimoireEntry) -> int:
    """How much an entry rests on: its validations or its source episodes, whichever is more."""
    return max(e.validated_count, len(e.parent_episode_ids))


def outweighs(candidate: GrimoireEntry, e: GrimoireEntry) -> bool:
    """For the firewall: the candidate has more evidence than the entry it contradicts, and is newer."""
    return len(candidate.parent_episode_ids) > evidence(e) and candidate.created_tick > e.created_tick


def assess(store: SemanticStore, candidate: GrimoireEntry, *, firewall: bool = True) -> Assessment:
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
    merge_into = next(((e, c) for e, c in neighbours if c > MERGE_COSINE and e.category == candidate.category
                       and polarity(e.content) * pol >= 0), None)
    # Hallucination firewall: contradicts a high-confidence entry and is itself unsupported.
    firewalled = (firewall and merge_into is None and bool(strong_contra) and factual < FIREWALL_FACTUAL
                  and not all(outweighs(candidate, e) for e in strong_contra))
    return Assessment(vector=vec, neighbours=neighbours, polarity=pol, novelty=novelty, factual=factual, flags=flags,
                      contradicted=contradicted, strong_contra=strong_contra, merge_into=merge_into,
                      firewalled=firewalled, category=candidate.category)


def admit(
    store: SemanticStore,
    candidate: GrimoireEntry,
    *,
    tick: int,
    event_tick: int | None = None,
    utility_fn: Callable[[GrimoireEntry], float] | None = None,
    ephemeral_observation: bool = False,
    vouched: bool = False,
    consistency: float = 1.0,
) -> AdmissionDecision:
    """Run the gate and write the outcome. Idempotent for a candidate id already stored (returns MERGED/SKIPPED
    without counting its evidence twice, because parent episode ids are unioned).

    `utility_fn` is asked only when the composite decides the outcome (not for merges, quarantines or
    warnings); otherwise the deterministic estimate fills the factor. `vouched=True` is the owner's release of
    a quarantined entry: the hallucination firewall is skipped, and a composite below 0.45 admits it at the
    low confidence 0.3 (flagged) instead of rejecting it — the owner's word stands in for the missing evidence.

    Every candidate gets its artifact quality here (unless its producer set `quality_score` itself);
    `consistency` is the producer's regeneration agreement — 1.0 for the deterministic distiller, whose
    regeneration is identical by construction."""
    a = assess(store, candidate, firewall=not vouched)
    vec, flags = a.vector, a.flags
    quality = artifact_quality(candidate.content, a.novelty, consistency, evidence=len(candidate.parent_episode_ids),
                               dream=candidate.category == EntryType.DREAM_JOURNAL)
    flags.extend(f"quality red flag: {f}" for f in quality.red_flags)
    if "quality_score" not in candidate.model_fields_set:
        candidate = candidate.model_copy(update={"quality_score": quality.score})
    if a.needs_utility and utility_fn is not None:
        utility = utility_fn(candidate)
    else:
        utility = estimate_future_utility(candidate)
    if not isinstance(utility, (int, float)) or not 0.0 <= utility <= 1.0:
        raise ValueError(f"utility_fn returned {utility!r}, expected a value in [0, 1]")
    age = max(0, tick - (event_tick if event_tick is not None else candidate.created_tick))
    recency = math.exp(-age / RECENCY_TIME_CONSTANT_TICKS)
    prior = OBSERVATION_PRIOR if ephemeral_observation else TYPE_PRIORS[candidate.category]
    factors = {"future_utility": float(utility), "factual_confidence": a.factual, "novelty": a.novelty,
               "recency": recency, "type_prior": prior}
    score = composite(factors)
    cat = candidate.category.value

    def done(action: AdmissionAction, entry_id: str | None, **kw: Any) -> AdmissionDecision:
        store.log_admission(tick, cat, action.value, score, entry_id)
        kw.setdefault("quality", quality)
        return AdmissionDecision(action=action, score=score, factors=factors, entry_id=entry_id, flags=flags, **kw)

    # Near-duplicate of the same type and direction: merge evidence into the existing entry.
    if a.merge_into is not None:
        e, c = a.merge_into
        new_parents = [p for p in candidate.parent_episode_ids if p not in e.parent_episode_ids]
        if new_parents or e.id != candidate.id:
            merged = e.model_copy(update={
                "validated_count": e.validated_count + (1 if new_parents else 0),
                "confidence": min(1.0, e.confidence + (UPVOTE if new_parents else 0.0)),
                "parent_episode_ids": e.parent_episode_ids + new_parents,
                "tags": sorted(set(e.tags) | set(candidate.tags)),
            })
            store.update(merged)
        return done(AdmissionAction.SKIPPED if c > SKIP_COSINE else AdmissionAction.MERGED, e.id, quality=None)

    if a.firewalled:
        ids = [e.id for e in a.strong_contra]
        twin = _pending_quarantine_twin(store, candidate, a)
        if twin is not None and twin != candidate.id:
            # The same contradiction again: its episodes join the pending row's evidence (reviewed next cycle).
            store.add_quarantine_evidence(twin, candidate.parent_episode_ids, ids, tick)
            return done(AdmissionAction.QUARANTINED, twin, conflicts_with=ids)
        store.quarantine(candidate, "contradicts high-confidence entries", ids, tick)
        return done(AdmissionAction.QUARANTINED, candidate.id, conflicts_with=ids)

    superseded: list[str] = []
    if candidate.category != EntryType.WARNING:
        action = classify(score)
        if action == AdmissionAction.REJECTED and vouched:
            action = AdmissionAction.ADMITTED_LOW
            flags.append(f"owner release: admitted at confidence {LOW_ADMIT_CONFIDENCE} despite score {score:.3f}")
        if action == AdmissionAction.REJECTED:
            return done(action, None)
    else:
        action = AdmissionAction.ADMITTED  # warnings bypass the gate
    # a contradiction the candidate wins (more evidence and newer) supersedes the old entry.
    for e, _ in a.contradicted:
        if len(candidate.parent_episode_ids) >= max(1, e.validated_count) and candidate.created_tick >= e.created_tick:
            store.update(e.model_copy(update={"valid_until": tick, "contradicted_count": e.contradicted_count + 1,
                                              "confidence": max(0.0, e.confidence - DOWNVOTE)}))
            superseded.append(e.id)
    entry = candidate
    if action == AdmissionAction.ADMITTED_LOW:
        entry = candidate.model_copy(update={"confidence": LOW_ADMIT_CONFIDENCE})
    store.put_many([entry], vec[None, :])
    return done(action, entry.id, superseded=superseded, conflicts_with=[e.id for e, _ in a.contradicted])


def _pending_quarantine_twin(store: SemanticStore, candidate: GrimoireEntry, a: Assessment) -> str | None:
    """The pending quarantine row this candidate repeats: the same id, or a near-duplicate (cosine > 0.9,
    same type and direction — the merge rule) of its content."""
    pending = [q for q in store.quarantined("pending") if q["entry"].category == candidate.category]
    if any(q["id"] == candidate.id for q in pending):
        return candidate.id
    pending = [q for q in pending if polarity(q["entry"].content) * a.polarity >= 0]
    if not pending:
        return None
    sims = store.embedder.embed([q["entry"].content for q in pending]) @ np.asarray(a.vector, dtype=np.float32)
    best = int(np.argmax(sims))
    return pending[best]["id"] if float(sims[best]) > MERGE_COSINE else None


# ---- quarantine review at the next Curator cycle ("reviewed next Curator cycle") ----------------------
QUARANTINE_MAX_REVIEWS = 3  # ours: like the three Curator cycles of the pruning rule, then dropped


class QuarantineAssessment(BaseModel):
    """One pending row at a review: what became of each entry it contradicted."""

    id: str
    entry: GrimoireEntry
    review_cycles: int
    conflicts: dict[str, str]  # entry id -> gone | superseded | weakened | outweighed | standing
    releasable: bool
    reason: str


def conflict_status(store: SemanticStore, candidate: GrimoireEntry, conflict_ids: list[str]) -> dict[str, str]:
    found = store.get_many(list(conflict_ids))
    out: dict[str, str] = {}
    for cid in conflict_ids:
        e = found.get(cid)
        if e is None:
            out[cid] = "gone"  # archived to cold storage (or removed)
        elif e.valid_until is not None:
            out[cid] = "superseded"
        elif e.confidence < HIGH_CONFIDENCE:
            out[cid] = "weakened"
        elif outweighs(candidate, e):
            out[cid] = "outweighed"
        else:
            out[cid] = f"standing (confidence {e.confidence:.2f}, evidence {evidence(e)} vs {len(candidate.parent_episode_ids)})"
    return out


def assess_quarantine(store: SemanticStore, tick: int) -> list[QuarantineAssessment]:
    """Pending rows due for review at `tick`: quarantined at an earlier cycle and not yet reviewed at this tick
    (a retried Curator cycle reviews nothing twice). Reads only."""
    out = []
    for q in store.quarantined("pending"):
        if q["tick"] >= tick or (q["last_reviewed_tick"] is not None and q["last_reviewed_tick"] >= tick):
            continue
        status = conflict_status(store, q["entry"], q["conflicts_with"])
        standing = [cid for cid, st in status.items() if st.startswith("standing")]
        if standing:
            reason = "still contradicts " + ", ".join(f"{cid} {status[cid]}" for cid in standing)
        else:
            reason = "contradicted entries " + (", ".join(f"{cid} {st}" for cid, st in status.items()) or "none")
        out.append(QuarantineAssessment(id=q["id"], entry=q["entry"], review_cycles=q["review_cycles"],
                                        conflicts=status, releasable=not standing, reason=reason))
    return out


def apply_quarantine_review(
    store: SemanticStore,
    assessments: list[QuarantineAssessment],
    tick: int,
    *,
    utility_fn: Callable[[GrimoireEntry], float] | None = None,
    max_reviews: int = QUARANTINE_MAX_REVIEWS,
) -> list[QuarantineOutcome]:
    """Release what is releasable through `admit()` again; count a review for the rest and drop those that
    have now stayed `max_reviews` cycles (the row keeps the reason: nothing is deleted)."""
    if max_reviews < 1:
        raise ValueError(f"max_reviews must be >= 1, got {max_reviews}")
    out: list[QuarantineOutcome] = []
    for qa in assessments:
        if qa.releasable:
            d = admit(store, qa.entry, tick=tick, utility_fn=utility_fn)
            if d.action != AdmissionAction.QUARANTINED:
                link_proposed_edge(store, qa.entry, tick)
                store.resolve_quarantine(qa.id, "released", tick, qa.reason, admission_action=d.action.value,
                                         entry_id=d.entry_id)
                out.append(QuarantineOutcome(id=qa.id, outcome="released", reason=qa.reason,
                                             review_cycles=qa.review_cycles, admission_action=d.action.value,
                                             entry_id=d.entry_id))
                continue
            reason = "contradicts other high-confidence entries now: " + ", ".join(d.conflicts_with)
        else:
            reason = qa.reason
        cycles = store.note_quarantine_review(qa.id, tick)
        if cycles >= max_reviews:
            why = f"dropped after {cycles} review cycles: {reason}"
            store.resolve_quarantine(qa.id, "dropped", tick, why)
            out.append(QuarantineOutcome(id=qa.id, outcome="dropped", reason=why, review_cycles=cycles))
        else:
            out.append(QuarantineOutcome(id=qa.id, outcome="kept", reason=reason, review_cycles=cycles))
    return out


def review_quarantine(store: SemanticStore, tick: int, *, utility_fn: Callable[[GrimoireEntry], float] | None = None,
                      max_reviews: int = QUARANTINE_MAX_REVIEWS) -> list[QuarantineOutcome]:
    """One Curator cycle's review of the quarantine (assess, then apply)."""
    return apply_quarantine_review(store, assess_quarantine(store, tick), tick, utility_fn=utility_fn,
                                   max_reviews=max_reviews)


def owner_release(store: SemanticStore, quarantine_id: str, tick: int) -> AdmissionDecision:
    """`golem grimoire quarantine release ID`: the owner vouches for the entry (admit(vouched=True), with the
    deterministic utility estimate): stored at its composite's confidence, at least at 0.3, or merged."""
    q = _pending_row(store, quarantine_id)
    d = admit(store, q["entry"], tick=tick, vouched=True)
    link_proposed_edge(store, q["entry"], tick)
    store.resolve_quarantine(quarantine_id, "released", tick, "owner release (firewall overridden)",
                             admission_action=d.action.value, entry_id=d.entry_id)
    return d


def proposed_edge(entry: GrimoireEntry) -> tuple[str, str, float] | None:
    """(cause, effect, weight) of a causal edge the model proposed (link_causal's tags), or None."""
    if entry.category != EntryType.CAUSAL_LINK or "causal-edge" not in entry.tags:
        return None
    tag = {k: v for k, _, v in (t.partition(":") for t in entry.tags) if v}
    try:
        return tag["cause"], tag["effect"], float(tag["weight"])
    except (KeyError, ValueError):
        return None


def link_proposed_edge(store: SemanticStore, entry: GrimoireEntry, tick: int) -> bool:
    """A released link_causal proposal joins the causal graph (admitted, its edge is knowledge like any other)."""
    edge = proposed_edge(entry)
    if edge is None:
        return False
    CausalGraph(store.db_path).add_edge(edge[0], edge[1], weight=min(max(edge[2], 1e-6), 1.0), tick=tick)
    return True


def owner_drop(store: SemanticStore, quarantine_id: str, tick: int, reason: str = "") -> None:
    _pending_row(store, quarantine_id)
    store.resolve_quarantine(quarantine_id, "dropped", tick, "owner drop" + (f": {reason}" if reason else ""))


def _pending_row(store: SemanticStore, quarantine_id: str) -> dict[str, Any]:
    q = store.quarantined_one(quarantine_id)
    if q is None:
        raise KeyError(f"no quarantined entry {quarantine_id!r}; `golem grimoire quarantine list --all` shows them")
    if q["status"] != "pending":
        raise ValueError(f"quarantined entry {quarantine_id!r} was already {q['status']} at tick {q['resolved_tick']}"
                         f" ({q['resolution']})")
    return q
