"""Prediction error: how surprising is this observation?

A scalar in [0, 1] summing six weighted sources, capped at 1.0, plus the topology curiosity term, which only
adds (an anomaly on a position or its 1-hop neighbours weighs double). Pure.
Weights, the oracle-off form and why: docs/design/gate.md#prediction-error.
"""

from __future__ import annotations

from golem.models.enums import MarketRegime
from golem.models.observation import Observation
from golem.models.state import GolemState

# source weights (docs/design/gate.md#prediction-error)
W_PRICE_DIVERGENCE = 0.3
W_REGIME_CHANGE = 0.4
W_POSITION_HEALTH = 0.2
HEALTH_DELTA_THRESHOLD = 0.1  # "significant" = 0.1 change in health factor per tick
HEALTH_DELTA_CAP = 0.5
W_PHEROMONE = 0.15
W_PER_INTERVENTION = 0.1
MAX_INTERVENTIONS = 3
W_PER_ANOMALY = 0.05
MAX_ANOMALIES = 5
# ours: the topology term per anomaly at modifier 1.0 equals the per-anomaly weight (a 1-hop anomaly counts
# double); capped like source 6 at MAX_ANOMALIES, so it adds at most 0.25.
W_TOPOLOGY_PER_ANOMALY = W_PER_ANOMALY

SOURCES = (
    "price_divergence",
    "regime_change",
    "position_health_delta",
    "pheromone_threat",
    "pending_interventions",
    "probe_anomalies",
)
TOPOLOGY_SOURCE = "topology"


def topology_relevance(observation: Observation) -> float:
    """Σ topology modifier over the anomalies (each clamped to [0, 1], so it can only add), at most MAX_ANOMALIES."""
    total = sum(min(max(a.topology_modifier, 0.0), 1.0) for a in observation.anomalies
                if a.topology_modifier == a.topology_modifier)  # NaN adds nothing
    return min(total, float(MAX_ANOMALIES))


def expected_price(state: GolemState) -> float | None:
    """The price the golem expected this tick.

    With no causal model yet, the naive prediction is the last
    observed price. A causal-graph forecast slots in here later.
    """
    last = state.last_price
    return last if last is not None and last > 0 else None


def max_pheromone_threat(observation: Observation) -> float:
    """Peers' threat intensity in [0, 1] on the entities this golem touches, as observe read the clade's pheromone
    field (docs/design/pheromones.md); 0 for a lone golem (no [clade]) or a field that could not be read."""
    readings = observation.pheromones
    return min(max(readings.max_threat_intensity(), 0.0), 1.0) if readings is not None else 0.0


# Regimes whose first sighting is news even during warm-up (see regime_changed).
ALARMING_REGIMES = frozenset({MarketRegime.TRENDING_DOWN, MarketRegime.VOLATILE})


def regime_changed(before: MarketRegime, now: MarketRegime) -> bool:
    """Does this regime transition count as surprise?

    UNKNOWN is the absence of a signal, not a regime: falling back to it is no news, and leaving it
    for range_bound or trending_up is the detector warming up. Leaving it for trending_down or
    volatile does count — a golem whose first look at the market shows a fall must think, or a crash
    in its first ticks would never escalate (the other sources add < 0.3 for a −6 % tick).
    """
    if now == before or now == MarketRegime.UNKNOWN:
        return False
    if before == MarketRegime.UNKNOWN:
        return now in ALARMING_REGIMES
    return True


def compute_prediction_error(
    state: GolemState, observation: Observation, oracle_enabled: bool = True,
    topology_weight: float = W_TOPOLOGY_PER_ANOMALY,
) -> tuple[float, dict[str, float]]:
    """(prediction error in [0, 1], per-source contributions before the cap).

    With the oracle off (`[oracle] enabled = false`) the signal-only fallback applies:
    error = max(regime_change_severity, normalized_anomaly_count, position_health_delta, pheromone_threat)."""
    if not oracle_enabled:
        return signal_only_prediction_error(state, observation, topology_weight)
    src = dict.fromkeys(SOURCES, 0.0)

    expected = expected_price(state)
    if expected is not None:
        src["price_divergence"] = min(abs(observation.primary_price - expected) / expected, 1.0) * W_PRICE_DIVERGENCE

    if regime_changed(state.regime, observation.regime):
        src["regime_change"] = W_REGIME_CHANGE

    health = 0.0
    for pos in observation.snapshot.positions:
        prev = state.position_health.get(pos.id)
        if pos.health_factor is None or prev is None:
            continue
        delta = abs(pos.health_factor - prev)
        if delta > HEALTH_DELTA_THRESHOLD:
            health += min(delta, HEALTH_DELTA_CAP) * W_POSITION_HEALTH
    src["position_health_delta"] = health

    src["pheromone_threat"] = max_pheromone_threat(observation) * W_PHEROMONE

    pending = len(state.pending_steers) + len(state.pending_followups)
    src["pending_interventions"] = min(pending, MAX_INTERVENTIONS) * W_PER_INTERVENTION

    src["probe_anomalies"] = min(len(observation.anomalies), MAX_ANOMALIES) * W_PER_ANOMALY
    src[TOPOLOGY_SOURCE] = topology_relevance(observation) * max(topology_weight, 0.0)

    pe = min(sum(src.values()), 1.0)
    return pe, {k: round(v, 6) for k, v in src.items()}


def signal_only_prediction_error(state: GolemState, observation: Observation,
                                 topology_weight: float = W_TOPOLOGY_PER_ANOMALY) -> tuple[float, dict[str, float]]:
    """The oracle-off fallback: weaker than oracle-derived error but enough to drive the gate. The topology
    term adds on top of the max, on the anomaly count's scale (count / MAX_ANOMALIES; at the default weight
    a 1-hop anomaly adds what one more anomaly would)."""
    health = 0.0
    for pos in observation.snapshot.positions:
        prev = state.position_health.get(pos.id)
        if pos.health_factor is not None and prev is not None:
            health = max(health, abs(pos.health_factor - prev))
    src = {
        "regime_change": 1.0 if regime_changed(state.regime, observation.regime) else 0.0,
        "probe_anomalies": min(len(observation.anomalies), MAX_ANOMALIES) / MAX_ANOMALIES,
        "position_health_delta": min(health, 1.0),
        "pheromone_threat": max_pheromone_threat(observation),
    }
    pe = max(src.values())
    src[TOPOLOGY_SOURCE] = topology_relevance(observation) * max(topology_weight, 0.0) / W_PER_ANOMALY / MAX_ANOMALIES
    return min(pe + src[TOPOLOGY_SOURCE], 1.0), {k: round(v, 6) for k, v in src.items()}
