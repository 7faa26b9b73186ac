"""The lifespan extension's after_turn: the three mortality clocks, vitality, the behavioural phase and the
death triggers. Pure: every input comes in, nothing is read from a clock or a file.

vitality = economic × epistemic × stochastic; the phase follows (golem.cognition.threshold.phase_for_vitality).
Death: the credit spent, the hazard, the Hayflick limit reached, or Terminal `terminal_ticks` ticks in a row.
Each clock's formula and why: docs/design/life.md#mortality-clocks.
"""

from __future__ import annotations

import hashlib
import random

from pydantic import BaseModel

from golem.cognition.threshold import phase_for_vitality
from golem.models.config import LifespanSection
from golem.models.enums import BehavioralPhase
from golem.models.life import LifeState
from golem.models.state import VitalityState

ECONOMIC_BUDGET_WEIGHT = 0.5  # without credits: spending the whole day's budget halves economic vitality
BURN_EMA = 0.2  # weight of one tick's spend in the burn rate
HF_ACCURATE = 0.1  # reflexion: a verified health factor within 0.1 of the expected one counts as predicted


class LifeFacts(BaseModel):
    """What the lifespan reads of one finished tick (the heartbeat's part of the record)."""

    tick: int
    credit_consumed_usd: float  # inference + gas of the tick
    budget_fraction: float = 0.0  # today's inference spend / the daily cap
    prediction_error: float = 0.0
    threshold: float = 0.3
    gamma_resolved: int = 0  # the gamma clock's counters, cumulative
    gamma_violations: int = 0
    hf_error: float | None = None  # reflexion: verified − expected health factor, on an acted tick
    wallet_usdc: float | None = None  # the wallet's USDC after the tick (None: not observed)
    tick_seconds: float | None = None  # the tick length (theta), for the runway in days


class LifespanResult(BaseModel):
    life: LifeState
    vitality: VitalityState
    phase: BehavioralPhase
    transition: str | None = None
    accuracy: float | None = None  # this tick's prediction accuracy sample (None: nothing was predicted)



def lived_after(life: LifeState) -> int:
    """The Hayflick counter once this tick is folded: one more tick lived."""
    return life.ticks_lived + 1

def _clamp01(x: float) -> float:
    return max(0.0, min(1.0, x))


def hazard_draw(seed: int, golem_id: str, tick: int) -> float:
    """A uniform [0, 1) draw fixed by (seed, golem, tick): a replayed or rerun tick draws the same number."""
    digest = hashlib.sha256(f"{seed}:{golem_id}:{tick}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big")).random()


def born(cfg: LifespanSection, tick: int = 0, generation: int = 0, predecessor: str | None = None) -> LifeState:
    """A newborn's life state: full credit, nothing lived."""
    return LifeState(generation=generation, predecessor=predecessor, born_tick=tick,
                     credits_initial_usd=cfg.credits_usd, credit_remaining_usd=cfg.credits_usd)


def accuracy_sample(life: LifeState, facts: LifeFacts) -> tuple[float | None, int, int]:
    """(this tick's accuracy or None, gamma resolved seen, gamma violations seen)."""
    parts: list[float] = []
    resolved = max(facts.gamma_resolved - life.gamma_resolved_seen, 0)
    violated = max(facts.gamma_violations - life.gamma_violations_seen, 0)
    if facts.gamma_resolved < life.gamma_resolved_seen:  # counters restarted (a new gamma state): take them as new
        resolved, violated = facts.gamma_resolved, facts.gamma_violations
    if resolved > 0:
        parts.append(1.0 - min(violated, resolved) / resolved)
    parts.append(1.0 if facts.prediction_error < 2.0 * facts.threshold else 0.0)
    if facts.hf_error is not None:
        parts.append(1.0 if abs(facts.hf_error) <= HF_ACCURATE else 0.0)
    return sum(parts) / len(parts), facts.gamma_resolved, facts.gamma_violations


def tick_clocks(life: LifeState, vitality: VitalityState, phase: BehavioralPhase, facts: LifeFacts,
                cfg: LifespanSection, golem_id: str) -> LifespanResult:
    """One tick of the three clocks. `life`, `vitality`, `phase`: the state going into the tick."""
    new = life.model_copy(deep=True)
    new.ticks_lived = lived_after(life)
    spent = max(facts.credit_consumed_usd, 0.0)

    # economic
    if new.credits_initial_usd is None and cfg.credits_usd is not None:  # credits configured after birth
        new.credits_initial_usd = new.credit_remaining_usd = cfg.credits_usd
    new.burn_ema_usd = spent if life.ticks_lived == 0 else (1 - BURN_EMA) * life.burn_ema_usd + BURN_EMA * spent
    if new.credits_initial_usd:
        new.credit_remaining_usd = max((new.credit_remaining_usd or 0.0) - spent, 0.0)
        economic = _clamp01(new.credit_remaining_usd / new.credits_initial_usd)
    else:
        economic = _clamp01(1.0 - ECONOMIC_BUDGET_WEIGHT * min(max(facts.budget_fraction, 0.0), 1.0))
    new.estimated_ttl_ticks, new.runway_days = runway(new, facts)
    if cfg.runway_days and new.runway_days is not None:
        economic *= _clamp01(new.runway_days / cfg.runway_days)

    # epistemic
    sample, new.gamma_resolved_seen, new.gamma_violations_seen = accuracy_sample(life, facts)
    epistemic = vitality.epistemic
    if sample is not None:
        epistemic = _clamp01((1 - cfg.epistemic_ema) * epistemic + cfg.epistemic_ema * sample)

    # stochastic
    stochastic = 1.0
    if cfg.hayflick_ticks:
        stochastic = _clamp01(1.0 - new.ticks_lived / cfg.hayflick_ticks)
    if new.stochastic_struck_at is None and cfg.hazard_per_tick > 0 and \
            hazard_draw(cfg.hazard_seed, golem_id, facts.tick) < cfg.hazard_per_tick:
        new.stochastic_struck_at = facts.tick
    if new.stochastic_struck_at is not None:
        stochastic = 0.0

    v = VitalityState(economic=round(economic, 6), epistemic=round(epistemic, 6), stochastic=round(stochastic, 6))
    new_phase = phase_for_vitality(v.composite)
    new.terminal_ticks = life.terminal_ticks + 1 if new_phase == BehavioralPhase.TERMINAL else 0
    transition = f"{phase.value}→{new_phase.value}" if new_phase != phase else None

    if new.death_cause is None and cfg.mortal:
        cause, detail = death_trigger(new, v, cfg)
        if cause:
            new.death_cause, new.death_detail = cause, detail
    return LifespanResult(life=new, vitality=v, phase=new_phase, transition=transition, accuracy=sample)


def runway(life: LifeState, facts: LifeFacts) -> tuple[float | None, float | None]:
    """(ticks, days) the wallet's USDC and the credit left pay the burn for; (None, None) with no burn yet or
    nothing to pay with (no credit configured and no USDC observed)."""
    funds = max(facts.wallet_usdc or 0.0, 0.0) + (life.credit_remaining_usd or 0.0 if life.credits_initial_usd else 0.0)
    if life.burn_ema_usd <= 0 or (facts.wallet_usdc is None and not life.credits_initial_usd):
        return None, None
    ticks = funds / life.burn_ema_usd
    days = ticks * facts.tick_seconds / 86_400 if facts.tick_seconds else None
    return round(ticks, 1), (round(days, 3) if days is not None else None)


def death_trigger(life: LifeState, v: VitalityState, cfg: LifespanSection) -> tuple[str | None, str]:
    """Which clock ran out, first match wins: economic, stochastic, hayflick, terminal."""
    if life.credits_initial_usd and (life.credit_remaining_usd or 0.0) <= 0.0:
        return "economic", f"the credit of ${life.credits_initial_usd:g} is spent (burn ${life.burn_ema_usd:.4f}/tick)"
    if life.stochastic_struck_at is not None:
        return "stochastic", (f"the per-tick hazard ({cfg.hazard_per_tick:g}, seed {cfg.hazard_seed}) struck at "
                              f"tick {life.stochastic_struck_at}")
    if cfg.hayflick_ticks and life.ticks_lived >= cfg.hayflick_ticks:
        return "hayflick", f"{life.ticks_lived} ticks lived: the Hayflick limit is {cfg.hayflick_ticks}"
    if life.terminal_ticks >= cfg.terminal_ticks:
        return "terminal", (f"vitality {v.composite:.3f} has been Terminal (< 0.1) for {life.terminal_ticks} ticks "
                            f"(economic {v.economic:.3f} × epistemic {v.epistemic:.3f} × stochastic {v.stochastic:.3f})")
    return None, ""
