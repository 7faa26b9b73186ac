"""The causal graph learns: at each delta cycle, edges from the cycle records — an anomaly (probe) or a
regime change followed within k ticks by an effect (the health factor or the price falling, a liquidation,
another anomaly) — with lag, weight and evidence ticks; at T2 a causal search from the current anomalies puts the
upstream causes and expected effects in the workspace's "causal" section.

A pattern needs 3+ episodes: an edge needs >= 3 occurrences of its cause followed by its
effect. Weight = P(effect within k | cause), the share of the cause's occurrences the effect followed.
"""

from __future__ import annotations

import statistics
from typing import Any

from pydantic import BaseModel, Field

from golem.models.enums import ProbeSeverity
from golem.models.observation import Observation, ProbeResult
from golem.models.record import DecisionCycleRecord, RetrievedEntrySummary

CAUSAL_WINDOW_TICKS = 5  # ours: "followed within k ticks", k = 5 theta ticks
MIN_CAUSAL_SUPPORT = 3  # clusters with 3+ episodes
FALL_FRACTION = 0.01  # ours: a health factor or price 1 % lower than the tick before is an effect worth an edge
MAX_CAUSAL_ENTRIES = 6  # ours: causal chains shown in a T2 workspace
CAUSAL_LINK_PROBE = "causal_link"  # the causal-link probe (docs/design/learning.md#the-causal-graph)
# ours: the probe fires on an outcome the edge gave <= 20 % probability (surprise >= 0.8): a failed edge of weight
# >= 0.8 is "invalidated" (High), a weak edge (<= 0.2) that held is Low. Over the crash-and-recover backtest's
# records with that run's edges, a 0.5 bar fired on 52 % of ticks (edges at weight ~0.58 fail 42 % of the time),
# 0.8 on 10 %.
SURPRISE_AT = 0.8


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


def tick_events(tick: int, observation: Observation, prev: Observation | None, regime_changed_to: str | None = None,
                acted_badly: bool = False) -> TickEvents:
    """One tick's causes and effects, against the tick before (None: the first tick seen)."""
    anomalies = sorted({f"anomaly:{a.probe}" for a in observation.anomalies
                        if a.severity != ProbeSeverity.NONE and a.probe != CAUSAL_LINK_PROBE})
    causes = list(anomalies)
    effects = list(anomalies)  # an anomaly can follow another
    if prev is not None:
        if regime_changed_to:
            causes.append(f"regime:{regime_changed_to}")
        hf, hf0 = observation.min_health_factor(), prev.min_health_factor()
        if hf is not None and hf0 and hf < hf0 * (1 - FALL_FRACTION):
            effects.append("effect:health_factor_fell")
        p, p0 = observation.primary_price, prev.primary_price
        if p0 and p < p0 * (1 - FALL_FRACTION):
            effects.append("effect:price_fell")
    if acted_badly:
        effects.append("effect:acted_badly")
    return TickEvents(tick=tick, causes=causes, effects=effects)


def events_of(records: list[DecisionCycleRecord]) -> list[TickEvents]:
    """Causes and effects per tick, from consecutive records (sorted by tick)."""
    out, prev = [], None
    for r in sorted(records, key=lambda r: r.tick):
        # the record's anomalies are the observation's, kept on the record
        obs = r.observation.model_copy(update={"anomalies": r.anomalies})
        out.append(tick_events(r.tick, obs, prev[1] if prev else None,
                               r.regime.value if prev is not None and r.regime != prev[0].regime else None,
                               r.reflexion is not None and r.reflexion.verdict == "negative"))
        prev = (r, obs)
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
            edges.append(CausalEdge(source=cause, target=effect, lag=float(statistics.median(lags[t] or 0 for t in followed)),
                                    weight=round(len(followed) / len(ticks), 6), evidence=followed))
    return edges


def causal_entries(forward: list[tuple[str, float, int]], backward: list[tuple[str, float, int]],
                   start: list[str], evidence: dict[tuple[str, str], dict[str, Any]]) -> list[RetrievedEntrySummary]:
    """Workspace lines for a T2 causal search: expected effects (forward) and upstream causes (backward)."""
    out = []
    for node, score, hops in forward[:MAX_CAUSAL_ENTRIES]:
        out.append(_entry(start, node, score, hops, evidence, "expected effect"))
    for node, score, hops in backward[:MAX_CAUSAL_ENTRIES - len(out)] if len(out) < MAX_CAUSAL_ENTRIES else []:
        out.append(_entry(start, node, score, hops, evidence, "upstream cause"))
    return out


def _entry(start: list[str], node: str, score: float, hops: int, evidence: dict[tuple[str, str], dict[str, Any]],
           role: str) -> RetrievedEntrySummary:
    direct = next(((s, node) for s in start if (s, node) in evidence), None) or \
        next(((node, s) for s in start if (node, s) in evidence), None)
    ev = evidence.get(direct) if direct else None
    how = (f", lag {ev['lag']:g} ticks, weight {ev['weight']:.2f}, seen at ticks {', '.join(map(str, ev['evidence'][-5:]))}"
           if ev else "")
    chain = " → ".join(direct) if direct else f"{', '.join(start)} ⇢ {node}"
    return RetrievedEntrySummary(id=f"causal:{node}", kind="causal", source="causal", score=round(score, 4),
                                 summary=f"{role} ({hops} hop{'s' if hops != 1 else ''}): {chain}{how}")


def probe_causal_link(history: list[TickEvents], now: TickEvents, edges: dict[tuple[str, str], dict[str, Any]],
                      k: int = CAUSAL_WINDOW_TICKS) -> ProbeResult:
    """The causal-link probe (Low = new link candidate, High = causal link invalidated; a fired probe counts as an
    anomaly in the prediction error). Against the learned edges (cause → effect, weight = P(effect within k | cause)):

    - a cause whose k-tick window closes now without its expected effect: surprise = the edge's weight
      (a confident edge that failed is the surprise); >= SURPRISE_AT → High, "causal link invalidated";
    - an expected effect arriving now, within its cause's window: surprise = 1 - weight (a weak edge that held is
      news, a strong one is not); >= SURPRISE_AT → Low;
    - an effect arriving now after a cause with no learned edge between them: named as a "new link candidate" in
      the detail only (ours: as a Low it would fire on most volatile ticks and add cost; the delta cycle turns
      candidates that recur 3+ times into edges).
    `value` is the largest surprise. Pure."""
    window = [e for e in history if now.tick - k <= e.tick < now.tick]
    seen: dict[str, list[int]] = {}
    for e in [*window, now]:
        for f in e.effects:
            seen.setdefault(f, []).append(e.tick)
    invalidated, held, candidates = [], [], []
    for (cause, effect), ev in sorted(edges.items()):
        w = float(ev["weight"])
        for e in window:
            if cause not in e.causes:
                continue
            after = [t for t in seen.get(effect, []) if e.tick < t <= e.tick + k]
            if e.tick + k == now.tick and not after:
                invalidated.append((w, f"{cause} at tick {e.tick} → {effect} did not follow in {k} ticks (weight {w:.2f})"))
            elif after == [now.tick] and 1 - w > 0:
                held.append((1 - w, f"{cause} at tick {e.tick} → {effect} followed (weight {w:.2f})"))
    for e in window:
        for cause in e.causes:
            for effect in now.effects:
                if effect != cause and (cause, effect) not in edges:
                    candidates.append(f"{cause} at tick {e.tick} → {effect}")
    surprise = max([w for w, _ in invalidated] + [s for s, _ in held] + [0.0])
    if any(w >= SURPRISE_AT for w, _ in invalidated):
        sev = ProbeSeverity.HIGH
    elif any(s >= SURPRISE_AT for s, _ in held):
        sev = ProbeSeverity.LOW
    else:
        sev = ProbeSeverity.NONE
    parts = ([f"invalidated: {d}" for w, d in invalidated if w >= SURPRISE_AT]
             + [f"held: {d}" for s, d in held if s >= SURPRISE_AT]
             + [f"new link candidate: {c}" for c in sorted(set(candidates))[:3]])
    return ProbeResult(probe=CAUSAL_LINK_PROBE, severity=sev, value=round(surprise, 4), threshold=SURPRISE_AT,
                       detail="; ".join(parts) or f"{len(edges)} learned edges, none due this tick")
