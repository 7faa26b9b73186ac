"""Dream threat rehearsal and REM scenarios: what is injected, and how a rehearsal is judged.

Tier 1 threats are the existential ones for this golem's positions (liquidation cascade, a lagging or manipulated
oracle, a drained pool, a gas spike past the emergency slice, a reverting exit). The golem's own response is checked
against the live chain today (no revert, gas within the partition, reserves carry the exit at the policy's slippage)
and end to end on an Anvil fork with the crisis injected. Pure: activities/dream.py does the chain I/O.
Why: docs/design/dreams.md#threat-rehearsal.
"""

from __future__ import annotations

import math
from enum import Enum

from pydantic import BaseModel, Field

from golem.grimoire.episodes.model import Episode

UNISWAP_V2_FEE = 0.003  # the pair's 0.3% swap fee (Uniswap V2 core)
# Aave V3 liquidates below health factor 1.0; a response that leaves the position under this margin is judged
# broken (the next tick of the same crash liquidates it). Our choice: the STRATEGY's MUST floor is 1.3, and
# "survives the crisis" is the weaker test a rehearsal can honestly pass or fail.
SURVIVAL_HEALTH_FACTOR = 1.0
# REM depth (the numbers are ours): the episode's position is hit by a crash 1.25× the
# one that would just liquidate it (HF ∝ price: that crash is 1 − 1/HF), at least a 15% day.
REM_DEPTH_BEYOND_LIQUIDATION = 1.25
MIN_REM_SHOCK = 0.15


class ThreatKind(str, Enum):
    LIQUIDATION_CASCADE = "liquidation_cascade"
    ORACLE_STALE = "oracle_stale"
    POOL_DRAINED = "pool_drained"
    GAS_SPIKE = "gas_spike"
    REVERTING_EXIT = "reverting_exit"


TIER1 = tuple(ThreatKind)


class Crisis(BaseModel):
    """What is injected on a fork before the golem responds."""

    price_shock: float = Field(default=0.0, gt=-1.0, le=1.0)  # the ETH/USD feed moves by this fraction
    move_pool: bool = True  # the pair follows the feed (False: the oracle leads, the pool lags)
    liquidity_removed: float = Field(default=0.0, ge=0.0, lt=1.0)  # share of both reserves taken out of the pair
    base_fee_multiple: float = Field(default=1.0, ge=1.0)
    oracle_lag_s: int = Field(default=0, ge=0)  # time passes with no new feed round

    def describe(self) -> str:
        parts = []
        if self.price_shock:
            parts.append(f"ETH/USD feed {self.price_shock:+.0%}" + ("" if self.move_pool else " (pool lagging)"))
        if self.liquidity_removed:
            parts.append(f"{self.liquidity_removed:.0%} of the WETH/USDC pair's liquidity removed")
        if self.base_fee_multiple > 1:
            parts.append(f"base fee ×{self.base_fee_multiple:g}")
        if self.oracle_lag_s:
            parts.append(f"oracle silent for {self.oracle_lag_s} s")
        return ", ".join(parts) or "no change"


class Scenario(BaseModel):
    """One fork run: a Tier 1 threat (rehearsal) or a counterfactual of a real episode (REM)."""

    name: str
    crisis: Crisis
    threat: ThreatKind | None = None
    source_episode: str | None = None  # REM: the real episode this varies (never free invention)
    block: int | None = None  # REM: the episode's block, where its fork starts (None: today's head)
    steer: str | None = None  # the owner's words the response is decided under ("reduce exposure": the exit)


class PositionView(BaseModel):
    """What the threat list needs to know about the golem's positions (from an Observation)."""

    health_factor: float | None = None
    debt: float = 0.0
    collateral: float = 0.0
    weth: float = 0.0
    lp_shares: float = 0.0


def tier1_threats(pos: PositionView, rehearsals_per_threat: int = 1) -> list[Scenario]:
    """The Tier 1 threats for these positions, each with the crisis its fork gets.

    `rehearsals_per_threat` 2 = doubled (high volatility or thin liquidity): each threat is also
    rehearsed at a harsher setting."""
    out: list[Scenario] = []
    hf = pos.health_factor
    has_loan = pos.debt > 0 and hf is not None
    exposure = pos.weth > 0 or pos.collateral > 0 or pos.lp_shares > 0
    for level in range(max(1, rehearsals_per_threat)):
        harsh = 1.0 + 0.5 * level
        tag = "" if level == 0 else f" ×{harsh:g}"
        if has_loan and hf is not None:
            # The crash that takes the position to liquidation's door: HF ∝ price, so HF·(1+s) = 1.05.
            shock = -min(0.9, max(0.3, 1.0 - 1.05 / hf) * harsh)
            out.append(Scenario(name=f"liquidation cascade{tag}", threat=ThreatKind.LIQUIDATION_CASCADE,
                                crisis=Crisis(price_shock=shock)))
            out.append(Scenario(name=f"oracle stale{tag}", threat=ThreatKind.ORACLE_STALE,
                                crisis=Crisis(price_shock=-min(0.9, 0.25 * harsh), move_pool=False,
                                              oracle_lag_s=3600)))
            out.append(Scenario(name=f"gas spike{tag}", threat=ThreatKind.GAS_SPIKE,
                                crisis=Crisis(price_shock=shock, base_fee_multiple=50.0 * harsh)))
        if exposure:
            out.append(Scenario(name=f"pool drained{tag}", threat=ThreatKind.POOL_DRAINED,
                                crisis=Crisis(price_shock=-0.2, liquidity_removed=min(0.98, 0.9 * harsh)),
                                steer="reduce exposure"))
            out.append(Scenario(name=f"reverting exit{tag}", threat=ThreatKind.REVERTING_EXIT,
                                crisis=Crisis(price_shock=-min(0.9, 0.2 * harsh)), steer="reduce exposure"))
    return out


def rem_scenarios(episodes: list[Episode], health: dict[str, float], limit: int,
                  blocks: dict[str, int] | None = None) -> list[Scenario]:
    """Counterfactual variations of real episodes (REM): the worst-health episodes first; each gets a crash deeper
    than its margin (REM_DEPTH_BEYOND_LIQUIDATION) and, for the two worst, its liquidity thinned and its oracle
    lagging.
    `health` maps episode id → the health factor its record saw (episodes without a loan are skipped); `blocks`
    episode id → the block its record observed, where its forks start (the episode's position and market)."""
    ranked = sorted((e for e in episodes if e.id in health), key=lambda e: (health[e.id], -e.tick))
    out: list[Scenario] = []
    for rank, ep in enumerate(ranked[:limit]):
        hf = health[ep.id]
        at = (blocks or {}).get(ep.id)
        margin = 1.0 - 1.0 / hf if hf > 1 else 0.0
        shock = -min(0.9, max(MIN_REM_SHOCK, REM_DEPTH_BEYOND_LIQUIDATION * margin))
        out.append(Scenario(name=f"deeper crash after tick {ep.tick}", source_episode=ep.id, block=at,
                            crisis=Crisis(price_shock=shock)))
        if rank < 2:
            out.append(Scenario(name=f"thin pool after tick {ep.tick}", source_episode=ep.id, block=at,
                                crisis=Crisis(price_shock=shock / 2, liquidity_removed=0.5)))
            out.append(Scenario(name=f"oracle lag after tick {ep.tick}", source_episode=ep.id, block=at,
                                crisis=Crisis(price_shock=shock, move_pool=False, oracle_lag_s=1800)))
    return out


def swap_out(amount_in: float, reserve_in: float, reserve_out: float, fee: float = UNISWAP_V2_FEE) -> float:
    """What an exact-in swap fills on a constant-product pair (Uniswap V2 getAmountOut, in floats)."""
    if amount_in <= 0 or reserve_in <= 0 or reserve_out <= 0:
        return 0.0
    a = amount_in * (1.0 - fee)
    return a * reserve_out / (reserve_in + a)


def swap_impact_bps(amount_in: float, reserve_in: float, reserve_out: float, fee: float = UNISWAP_V2_FEE) -> float:
    """How much worse than the pair's spot price an exact-in swap fills (constant product, fee included), bps."""
    if amount_in <= 0:
        return 0.0
    if reserve_in <= 0 or reserve_out <= 0:
        return 10_000.0
    spot_out = amount_in * reserve_out / reserve_in
    return (1.0 - swap_out(amount_in, reserve_in, reserve_out, fee) / spot_out) * 10_000.0


class ResponseCheck(BaseModel):
    """One grounding of a response: on the live chain today, or on the crisis fork."""

    where: str  # "live" | "fork"
    block: int | None = None
    actions: list[str] = Field(default_factory=list)  # "repay 4000 USDC", ...
    simulates: bool = True
    revert_reason: str | None = None
    executed: bool | None = None  # fork only: sent and mined without revert
    gas_units: int = 0
    gas_usd: float = 0.0
    gas_allowance_usd: float = 0.0  # the emergency slice: what the partition keeps for protective actions
    gas_partition_usd: float = 0.0  # the whole day's gas partition (0: not known)
    exit_impact_bps: float | None = None
    max_slippage_bps: float | None = None
    health_before: float | None = None
    health_after: float | None = None
    price: float | None = None  # the pair's price when checked (before the response)


class ThreatRehearsalResult(BaseModel):
    """One scenario's grounded verdict, kept in the dream journal."""

    scenario: str
    threat: ThreatKind | None = None
    source_episode: str | None = None
    fork_block: int | None = None  # the block the fork started at (REM: the episode's, when the node still has it)
    crisis: str
    live: ResponseCheck | None = None
    fork: ResponseCheck | None = None
    ok: bool = True
    problems: list[str] = Field(default_factory=list)
    warning: str | None = None  # a concrete warning when the response is broken
    notes: list[str] = Field(default_factory=list)  # findings that do not break the response (gas over the slice)
    guard: str | None = None  # a PLAYBOOK.md guard candidate (a rule line the offline deliberator reads)


def judge(scenario: Scenario, live: ResponseCheck | None, fork: ResponseCheck | None) -> ThreatRehearsalResult:
    """The verdict: each failed check becomes a problem; any problem makes the response broken, with a
    warning naming the figures and a guard candidate that would act before the crisis."""
    problems: list[str] = []
    notes: list[str] = []
    for chk in (c for c in (live, fork) if c is not None):
        at = "on the live chain" if chk.where == "live" else "on the crisis fork"
        if not chk.actions:
            if chk.where == "fork" and chk.health_after is not None and chk.health_after < SURVIVAL_HEALTH_FACTOR:
                problems.append(f"no response was decided {at} and the health factor fell to {chk.health_after:.3f}")
            continue
        if not chk.simulates:
            problems.append(f"{'; '.join(chk.actions)} reverts {at}: {chk.revert_reason or 'no reason'}")
        if chk.executed is False and chk.simulates:
            problems.append(f"{'; '.join(chk.actions)} failed when sent {at}: {chk.revert_reason or 'no reason'}")
        # the full sequence against the gas partition. The gas gate is per action,
        # and a protective action is never deferred (golem/safety/gas.py): it spends the routine share left, then
        # the emergency slice, then proceeds over budget. So a sequence over the slice alone still runs (a note:
        # on a day whose routine share is spent it overdraws the partition); over the whole day's partition it is
        # more than the golem can afford in a day, and the guard is inadequate (a problem).
        if chk.gas_partition_usd > 0 and chk.gas_usd > chk.gas_partition_usd:
            problems.append(f"gas ${chk.gas_usd:,.2f} {at} exceeds the whole day's ${chk.gas_partition_usd:,.2f} "
                            "gas partition")
        elif chk.gas_allowance_usd > 0 and chk.gas_usd > chk.gas_allowance_usd:
            notes.append(f"gas ${chk.gas_usd:,.2f} {at} is over the ${chk.gas_allowance_usd:,.2f} emergency slice: "
                         "the gate does not defer protective actions, so once the routine share is spent it runs "
                         f"${chk.gas_usd - chk.gas_allowance_usd:,.2f} over the day's partition")
        if chk.exit_impact_bps is not None and chk.max_slippage_bps is not None \
                and chk.exit_impact_bps > chk.max_slippage_bps:
            problems.append(f"the exit swap fills {chk.exit_impact_bps:,.0f} bps below spot {at} "
                            f"(policy max {chk.max_slippage_bps:,.0f} bps): the pool cannot carry it")
        if chk.where == "fork" and chk.health_after is not None and chk.health_after < SURVIVAL_HEALTH_FACTOR:
            problems.append(f"after the response the health factor is {chk.health_after:.3f} {at} "
                            f"(liquidatable below {SURVIVAL_HEALTH_FACTOR:g})")
    result = ThreatRehearsalResult(scenario=scenario.name, threat=scenario.threat,
                                   source_episode=scenario.source_episode, crisis=scenario.crisis.describe(),
                                   live=live, fork=fork, ok=not problems, problems=problems, notes=notes)
    if problems:
        what = scenario.threat.value if scenario.threat else f"counterfactual of episode {scenario.source_episode}"
        # The warning opens with the situation it applies to, in the words a tick's retrieval query uses
        # (golem.cognition.reflect.retrieval_query), so a later tick in that situation finds it.
        base = live if live is not None and live.health_before is not None else fork
        situation = (f"At health factor {base.health_before:.2f} and price {base.price:.2f}, " if base is not None
                     and base.health_before is not None and base.price is not None else "")
        result.warning = (f"{situation}dream rehearsal of {what} ({scenario.crisis.describe()}): "
                          + "; ".join(problems) + ".")
        result.guard = guard_for(scenario, live or fork)
    return result


def guard_for(scenario: Scenario, chk: ResponseCheck | None) -> str:
    """A PLAYBOOK.md rule that acts before the rehearsed crisis bites (the offline deliberator's syntax)."""
    crisis = scenario.crisis
    if crisis.liquidity_removed > 0 or scenario.threat in (ThreatKind.POOL_DRAINED, ThreatKind.REVERTING_EXIT):
        # A thin pool cannot take the exit at once: leave in smaller slices, earlier.
        return "- WHEN price_change_bps <= -150 THEN swap 5% WETH to USDC"
    # Repay while there is room: at the health factor that keeps the STRATEGY's 1.3 floor through the rehearsed
    # shock (HF ∝ price), one decimal. Capped at 90% of the health factor the position has now (ours): a guard
    # that already holds today would be "deleverage now", not a guard, and would fire on every tick.
    trigger = 1.8
    if crisis.price_shock < 0:
        trigger = round(1.3 / (1.0 + crisis.price_shock) + 0.05, 1)
    now = chk.health_before if chk is not None and chk.where == "live" else None
    if now:
        trigger = min(trigger, math.floor(now * 0.9 * 10) / 10)
    trigger = max(1.4, min(3.0, trigger))
    return f"- WHEN health_factor < {trigger:g} THEN repay 25% debt"
