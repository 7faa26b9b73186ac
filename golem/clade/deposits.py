"""What a golem lays on the field after a tick, from what its record says it saw and did. Pure.
Sources, intensities and why: docs/design/pheromones.md#what-a-golem-lays.
"""

from __future__ import annotations

from golem.models.config import CladeSection
from golem.models.enums import ActionStatus, ProbeSeverity
from golem.models.pheromones import Deposit
from golem.models.record import DecisionCycleRecord
from golem.models.threats import detector_of

# a probe's severity → the intensity it lays
SEVERITY_INTENSITY = {ProbeSeverity.LOW: 0.4, ProbeSeverity.HIGH: 0.8}
DETECTOR_INTENSITY = 0.8  # a DeFi threat detector fired (sandwich exposure, oracle manipulation, flash-loan moves)
LIQUIDATION_INTENSITY = 1.0  # a liquidation seen on the market: the strongest threat there is
OPPORTUNITY_INTENSITY = 0.5  # a verified action that paid
# which topology entity each source concerns
DETECTOR_ENTITY = {"sandwich": "pool", "flash_loan": "pool", "oracle_manipulation": "oracle"}
TOOL_ENTITY = {"swap": "pool", "add_liquidity": "pool", "remove_liquidity": "pool",
               "supply": "lending_market", "withdraw": "lending_market", "borrow": "lending_market",
               "repay": "lending_market"}


def entities_by_kind(entities: list[str]) -> dict[str, str]:
    """`kind:id` node ids → {kind: id} (one per kind: the golem's pool, oracle, market and chain)."""
    return {e.partition(":")[0]: e for e in entities}


def deposits_from(record: DecisionCycleRecord, cfg: CladeSection) -> list[Deposit]:
    """The tick's deposits: the strongest per (entity, kind). None without a clade reading (no clade at observe)."""
    readings = record.observation.pheromones
    if readings is None or not cfg.id:
        return []
    where = entities_by_kind(readings.entities)
    half_life = {"threat": cfg.threat_half_life_s, "opportunity": cfg.opportunity_half_life_s,
                 "congestion": cfg.congestion_half_life_s}
    best: dict[tuple[str, str], tuple[float, str]] = {}

    def lay(entity_kind: str, kind: str, intensity: float, reason: str) -> None:
        entity = where.get(entity_kind)
        if entity is None or intensity <= 0:
            return
        key = (entity, kind)
        if intensity > best.get(key, (0.0, ""))[0]:
            best[key] = (intensity, reason)

    for a in record.observation.anomalies:
        sev = SEVERITY_INTENSITY.get(a.severity, 0.0)
        if a.probe == "circuit_breaker":  # the pool left the oracle: the oracle the market trusts is suspect
            lay("oracle", "threat", sev, f"circuit breaker: {a.description}")
        elif a.probe == "gas_price":
            lay("chain", "congestion", sev, f"gas: {a.description}")
    for liq in record.observation.liquidations:
        lay("lending_market", "threat", LIQUIDATION_INTENSITY,
            f"liquidation in tx {liq.tx_hash}: {liq.debt_covered:,.2f} {liq.debt_asset} repaid")
    for action in record.actions:
        for line in action.threats:
            entity_kind = DETECTOR_ENTITY.get(detector_of(line))
            if entity_kind:
                lay(entity_kind, "threat", DETECTOR_INTENSITY, line)
    out = record.outcome
    paid = record.reflexion is not None and record.reflexion.verdict == "positive"
    if out is not None and out.verified and not out.invariant_violations and paid:
        for action in record.actions:
            if action.status == ActionStatus.EXECUTED and action.tool_name in TOOL_ENTITY:
                lay(TOOL_ENTITY[action.tool_name], "opportunity", OPPORTUNITY_INTENSITY,
                    f"tick {record.tick}: verified {action.tool_name} that paid")
    return [Deposit(entity=e, kind=k, intensity=i, half_life_s=half_life[k], depositor=record.golem_id,  # type: ignore[arg-type]
                    reason=r[:300])
            for (e, k), (i, r) in sorted(best.items())]
