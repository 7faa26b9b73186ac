"""The RETRIEVE step's policy in one call: what the decide step gets from memory this tick.

Hybrid retrieval over episodes and semantic entries for the tick's situation, asked as an action
question (warnings and MUST constraints get top-3 slots); an owner's steer or next-decide follow-up that asks
about an earlier tick is asked as of that tick and its answer leads; at T2 the causal graph adds the
expected effects and upstream causes of the current anomalies. What is returned is marked accessed.
"""

from __future__ import annotations

from golem.grimoire.episodes.store import EpisodeStore
from golem.grimoire.semantic.graph import CausalGraph
from golem.grimoire.retrieval import RetrievedItem, past_tick_of, retrieve_for_tick
from golem.grimoire.semantic.store import SemanticStore
from golem.learning.causal import causal_entries
from golem.learning.ledger import LearningLedger
from golem.cognition.mental_models import domain_model_entries
from golem.cognition.reflect import retrieval_query
from golem.models.enums import Tier
from golem.models.observation import Observation
from golem.models.record import ContextBundleSummary, RetrievedEntrySummary
from golem.models.tick import PastQuestion, RetrievedKnowledge, RetrieveInput, whole

RETRIEVAL_K = 5
MAX_PAST_QUESTIONS = 3  # owner notes looked at for a past tick per retrieval (ours: bounds the extra queries)


def retrieve_for_decide(inp: RetrieveInput, episodes: EpisodeStore, semantic: SemanticStore,
                        learning: LearningLedger) -> RetrievedKnowledge:
    obs = whole(inp.observation, "observation")
    ctx, cfg = inp.ctx, inp.ctx.cfg
    query = retrieval_query(obs)
    if not cfg.grimoire.memory:
        return RetrievedKnowledge(query=query, reason="memory off ([grimoire] memory = false)", abstained=True)
    pad = ctx.state.pad
    result = retrieve_for_tick(
        episodes, semantic, query, regime=obs.regime.value, tick=ctx.tick,
        pad=(pad.pleasure, pad.arousal, pad.dominance), k=RETRIEVAL_K, tier=inp.tier.value,
        action=True,  # this query feeds the decide step: warnings and MUST constraints get top-3 slots
        steered=bool(ctx.state.pending_steers), tick_seconds=cfg.clock.theta_base_seconds,
        floor=cfg.grimoire.semantic_floor,
    )
    # An owner's steer or next-decide follow-up that asks about an earlier tick ("why did you repay at tick
    # 8,000?") is asked as of that tick: what was in force then, superseded since or not.
    past: list[PastQuestion] = []
    past_items: list[tuple[RetrievedItem, int | None]] = []
    tokens = result.tokens
    owner = [*ctx.state.pending_steers, *(f for f in ctx.state.pending_followups if f.window.value == "next-decide")]
    for note in owner[:MAX_PAST_QUESTIONS]:
        at = past_tick_of(note.message, ctx.tick)
        if at is None:
            continue
        then = retrieve_for_tick(
            episodes, semantic, note.message, regime=obs.regime.value, tick=ctx.tick, as_of=at, k=RETRIEVAL_K,
            steered=True, tick_seconds=cfg.clock.theta_base_seconds, floor=cfg.grimoire.semantic_floor, log=False,
        )
        past.append(PastQuestion(id=note.id, as_of=at, abstained=then.abstained, reason=then.reason,
                                 entry_ids=then.ids))
        past_items += [(i, at) for i in then.items]
        tokens += then.tokens
    # the owner's question first: its answer is what the decide step must address
    items: list[tuple[RetrievedItem, int | None]] = []
    seen: set[str] = set()
    for i, at in [*past_items, *((i, None) for i in result.items)]:
        if i.id not in seen:
            seen.add(i.id)
            items.append((i, at))
    episode_ids = [i.id for i, _ in items if i.source == "episode"]
    entry_ids = [i.id for i, _ in items if i.source != "episode"]
    if episode_ids:
        episodes.mark_accessed(episode_ids, ctx.tick)
    if entry_ids:
        semantic.mark_accessed(entry_ids, ctx.tick)
    entries = [
        RetrievedEntrySummary(id=i.id, kind=i.kind, source=i.source, summary=i.summary, score=round(i.final, 4),
                              scores={k: round(v, 4) for k, v in i.scores.items()}, as_of=at)
        for i, at in items
    ]
    causal = causal_search(obs, ctx.tick, semantic, learning) if inp.tier == Tier.T2 else []
    entries += causal
    # T2: the domain mental models that outrank the core thirteen for this situation come first
    models = domain_model_entries(semantic, query, ctx.tick) if inp.tier == Tier.T2 else []
    entries = [*models, *(e for e in entries if e.id not in {m.id for m in models})]
    return RetrievedKnowledge(
        query=query, reason=result.reason, abstained=result.abstained and not past_items and not causal and not models,
        entries=entries,
        summary=ContextBundleSummary(categories={"retrieved": tokens}, total_tokens=tokens),
        past_questions=past,
    )


def causal_search(obs: Observation, tick: int, semantic: SemanticStore,
                  learning: LearningLedger) -> list[RetrievedEntrySummary]:
    """T2: from the current anomalies, the causal graph's expected effects and upstream causes."""
    start = sorted({f"anomaly:{a.probe}" for a in obs.anomalies})
    if not start:
        return []
    graph = CausalGraph(semantic.db_path)
    return causal_entries(graph.bfs(start, now_tick=tick), graph.bfs(start, now_tick=tick, direction="backward"),
                          start, learning.causal_evidence())
