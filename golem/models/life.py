"""The golem's life as data: the lifespan's clocks, the daimon's somatic markers, death and succession.

Held in GolemState (`life`) by GolemWorkflow; the after_turn chain (golem.life.after_turn) computes the next
LifeState inside reflect and hands it back in TickResult.life. The formulas live in golem/life/.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from golem.models.enums import BehavioralPhase, PlutchikLabel


class SomaticMarker(BaseModel):
    """Outcome-tagged affect attached to a situation (Damasio's somatic marker; docs/design/life.md#the-daimon):
    a loss in a situation leaves a negative marker; the same situation later makes it fire."""

    id: str  # "sm-<tick>-<tool>-<situation hash>"
    tick: int  # when it was laid down
    situation: dict[str, str]  # golem.safety.somatic.situation_of: regime, health band, price move, tool
    valence: float  # pleasure of the outcome, in [-1, 1] (< 0: a warning)
    strength: float  # [0, 1]: how strongly it fires; grows when confirmed, decays slowly
    pnl_usd: float | None = None  # what the outcome cost or earned
    what: str = ""  # the outcome in words
    fired: int = 0  # times it fired since


class DeathCertificate(BaseModel):
    """What GolemWorkflow completes with (Thanatopsis, four phases); also in the legacy package."""

    golem_id: str
    generation: int = 0
    predecessor: str | None = None
    cause: str  # hayflick | economic | terminal | stochastic | owner
    detail: str
    born_tick: int = 0
    died_at_tick: int
    died_at: str  # ISO, the workflow's clock
    vitality: dict[str, float] = Field(default_factory=dict)  # economic, epistemic, stochastic, composite
    phase: BehavioralPhase = BehavioralPhase.TERMINAL
    settlement_ticks: list[int] = Field(default_factory=list)
    settlement_txs: list[str] = Field(default_factory=list)
    settled: bool = False  # nothing left to unwind after settlement
    unsettled: list[str] = Field(default_factory=list)  # what was still open, in words
    reflection_model: str = "offline"
    legacy_dir: str = ""
    phases: list[str] = Field(default_factory=list)  # acceptance, settlement, reflection, legacy as they ran


class LifeState(BaseModel):
    """The lifespan's and the daimon's durable state (GolemState.life)."""

    generation: int = 0
    predecessor: str | None = None  # the dead golem this one inherited from
    born_tick: int = 0
    ticks_lived: int = 0  # ticks folded since birth (the Hayflick counter)
    on_end: list[str] = Field(default_factory=list)  # on_end's members that ran when the golem died
    credits_initial_usd: float | None = None  # [lifespan] credits_usd at birth; None = no credit clock
    credit_remaining_usd: float | None = None
    burn_ema_usd: float = 0.0  # credit consumed per tick, EMA
    estimated_ttl_ticks: float | None = None  # (wallet USDC + credit remaining) / burn_ema: the projected runway
    runway_days: float | None = None  # the same in days of ticks (× theta)
    # epistemic clock: the gamma clock's prediction counters already counted
    gamma_resolved_seen: int = 0
    gamma_violations_seen: int = 0
    stochastic_struck_at: int | None = None  # the tick the per-tick hazard struck
    terminal_ticks: int = 0  # consecutive ticks in Terminal
    death_cause: str | None = None  # set by the lifespan's after_turn when a clock runs out, or by the owner
    death_detail: str = ""
    # the risk extension's after_turn: the net-value high-water mark the drawdown is measured from (the daimon's
    # coping reads the drawdown against the risk layer's max drawdown)
    nav_high_water_usd: float | None = None
    # self-steers (golem.life.self_steer): the drawdown band last seen and the run of ticks with a refused action, so
    # the risk daemon and the cage steer once on entering, not on every tick that stays
    risk_band: int = 0
    refusal_streak: int = 0
    # return attribution (docs/design/attribution.md): the last tick's holdings and what its actions sent, so the
    # next tick can split the change between them into market, strategy, knowledge and noise
    attribution_basis: dict[str, Any] | None = None
    # the daimon
    emotion: PlutchikLabel | None = None
    markers: list[SomaticMarker] = Field(default_factory=list)  # bounded (golem.safety.somatic.MAX_MARKERS)
    certificate: DeathCertificate | None = None  # set once the golem is dead
