"""The causal graph learns (issue 16): at each delta cycle, edges from the cycle records — an anomaly (probe) or a
regime change followed within k ticks by an effect (the health factor or the price falling, a liquidation,
another anomaly) — with lag, weight and evidence ticks; at T2 a causal search from the current anomalies puts the
upstream causes and expected effects in the workspace's "causal" section.

Grouping as in rev. 7 (a pattern needs 3+ episodes): an edge needs >= 3 occurrences of its cause followed by its
effect. Weight = P(effect within k | cause), the share of the cause's occurrences the effect followed.
"""

from __future__ import annotations

import statistics

from pydantic import BaseModel, Field

from golem.models.enums import ProbeSeverity
from golem.models.record import DecisionCycleRecord, RetrievedEntrySummary

CAUSAL_WINDOW_TICKS = 5  # ours: "followed within k ticks" (issue 16), k = 5 theta ticks
MIN_CAUSAL_SUPPORT = 3  # revisions rev. 7: clusters with 3+ episodes
FALL_FRACTION = 0.01  # ours: a health factor or price 1 % lower than the tick before is an effect worth an edge
MAX_CAUSAL_ENTRIES = 6  # ours: causal chains shown in a T2 workspace


class TickEvents(BaseModel):
    tick: int
    causes: list[str] = Field(default_factory=list)
    effects: list[str] = Field(default_factory=list)


class CausalEdge(BaseModel):
    source: str
    target: str
    lag: float  # median ticks from cause to effect
    weight: float  # P(effect within k | cause), in (0, 1]
    evidence: list[int]  # the cause ticks the effect followed


def events_of(records: list[DecisionCycleRecord]) -> list[TickEvents]:
    """Causes and effects per tick, from consecutive records (sorted by tick)."""
    out, prev = [], None
    for r in sorted(records, key=lambda r: r.tick):
        anomalies = sorted({f"anomaly:{a.probe}" for a in r.anomalies if a.severity != ProbeSeverity.NONE})
        causes = list(anomalies)
        effects = list(anomalies)  # an anomaly can follow another
        if prev is not None:
            if r.regime != prev.regime:
                causes.append(f"regime:{r.regime.value}")
            hf, hf0 = r.observation.min_health_factor(), prev.observation.min_health_factor()
            if hf is not None and hf0 and hf < hf0 * (1 - FALL_FRACTION):
                effects.append("effect:health_factor_fell")
            p, p0 = r.observation.primary_price, prev.observation.primary_price
            if p0 and p < p0 * (1 - FALL_FRACTION):
                effects.append("effect:price_fell")
        if r.reflexion is not None and r.reflexion.verdict == "negative":
            effects.append("effect:acted_badly")
        out.append(TickEvents(tick=r.tick, causes=causes, effects=effects))
        prev = r
    return out


def causal_edges(events: list[TickEvents], k: int = CAUSAL_WINDOW_TICKS,
                 min_support: int = MIN_CAUSAL_SUPPORT) -> list[CausalEdge]:
    occurrences: dict[str, list[int]] = {}
    effects_at: dict[str, list[int]] = {}
    for e in events:
        for c in e.causes:
            occurrences.setdefault(c, []).append(e.tick)
        for f in e.effects:
            effects_at.setdefault(f, []).append(e.tick)
    edges = []
    for cause, ticks in sorted(occurrences.items()):
        for effect, when in sorted(effects_at.items()):
            if effect == cause:
                continue
            lags = {t: min((w - t for w in when if 0 < w - t <= k), default=None) for t in ticks}
            followed = sorted(t for t, lag in lags.items() if lag is not None)
            if len(followed) < min_support:
                continue
            edges.append(CausalEdge(source=cause, target=effect, lag=float(statistics.median(lags[t] for t in followed)),
                                    weight=round(len(followed) / len(ticks), 6), evidence=followed))
    return edges


def causal_entries(forward: list[tuple[str, float, int]], backward: list[tuple[str, float, int]],
                   start: list[str], evidence: dict[tuple[str, str], dict]) -> list[RetrievedEntrySummary]:
    """Workspace lines for a T2 causal search: expected effects (forward) and upstream causes (backward)."""
    out = []
    for node, score, hops in forward[:MAX_CAUSAL_ENTRIES]:
        out.append(_entry(start, node, score, hops, evidence, "expected effect"))
    for node, score, hops in backward[:MAX_CAUSAL_ENTRIES - len(out)] if len(out) < MAX_CAUSAL_ENTRIES else []:
        out.append(_entry(start, node, score, hops, evidence, "upstream cause"))
    return out


def _entry(start, node, score, hops, evidence, role) -> RetrievedEntrySummary:
    direct = next(((s, node) for s in start if (s, node) in evidence), None) or \
        next(((node, s) for s in start if (node, s) in evidence), None)
    ev = evidence.get(direct) if direct else None
    how = (f", lag {ev['lag']:g} ticks, weight {ev['weight']:.2f}, seen at ticks {', '.join(map(str, ev['evidence'][-5:]))}"
           if ev else "")
    chain = " → ".join(direct) if direct else f"{', '.join(start)} ⇢ {node}"
    return RetrievedEntrySummary(id=f"causal:{node}", kind="causal", source="causal", score=round(score, 4),
                                 summary=f"{role} ({hops} hop{'s' if hops != 1 else ''}): {chain}{how}")
