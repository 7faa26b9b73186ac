"""Somatic markers (Damasio 1994; docs/design/life.md#somatic-markers): a loss leaves a
negative, outcome-tagged affect on the situation it happened in; when a later situation matches a strong one,
the marker fires — it lowers the daimon's dominance (so the threshold drops and the golem deliberates more) and
shrinks the size the risk layer allows for new exposure (Kelly cap and max trade size × SIZE_SHRINK).

A situation is coarse on purpose (a marker must generalise to "the same kind of moment"): the regime, the
lending health-factor band, the direction of the price move since the last tick, and the tool involved.
"""

from __future__ import annotations

import hashlib
import json

from golem.models.life import SomaticMarker
from golem.models.observation import Observation

MAX_MARKERS = 8  # kept in GolemState.life (every tick input carries them); the weakest goes first
LOSS_FLOOR_USD = 1.0  # a verified loss smaller than this lays no marker (gas dust, rounding)
LOSS_SCALE_USD = 50.0  # a loss of this size lays a marker of strength 1
FIRE_STRENGTH = 0.3  # only markers at least this strong fire
SIZE_SHRINK = 0.5  # a fired marker halves the size cap of new exposure
DECAY_PER_TICK = 0.995  # markers fade slowly when not confirmed
PRICE_MOVE_BPS = 50.0  # the price probe's Low step: smaller moves are "flat"
MATCH_KEYS = ("regime", "health", "move")  # must match; the tool matches when both name one


def health_band(hf: float | None) -> str:
    if hf is None:
        return "no_debt"
    if hf < 1.2:
        return "critical"  # the position probe's High line
    if hf < 1.5:
        return "at_risk"  # the position probe's Low line
    if hf < 2.0:
        return "watch"
    return "safe"


def price_move(last_price: float | None, price: float) -> str:
    if not last_price or last_price <= 0 or price <= 0:
        return "flat"
    bps = (price - last_price) / last_price * 1e4
    if bps <= -PRICE_MOVE_BPS:
        return "down"
    if bps >= PRICE_MOVE_BPS:
        return "up"
    return "flat"


def situation_of(observation: Observation, last_price: float | None, tool: str = "") -> dict[str, str]:
    return {"regime": observation.regime.value, "health": health_band(observation.min_health_factor()),
            "move": price_move(last_price, observation.snapshot.pool.price), "tool": tool}


def matches(marker: SomaticMarker, situation: dict[str, str]) -> bool:
    if any(marker.situation.get(k) != situation.get(k) for k in MATCH_KEYS):
        return False
    mt, st = marker.situation.get("tool", ""), situation.get("tool", "")
    return not (mt and st and mt != st)


def firing(markers: list[SomaticMarker], situation: dict[str, str]) -> list[SomaticMarker]:
    """The strong negative markers the situation matches."""
    return [m for m in markers if m.valence < 0 and m.strength >= FIRE_STRENGTH and matches(m, situation)]


def size_factor(markers: list[SomaticMarker], situation: dict[str, str]) -> tuple[float, list[str]]:
    """(factor for the size cap of new exposure, ids of the markers behind it)."""
    fired = firing(markers, situation)
    return (SIZE_SHRINK if fired else 1.0), [m.id for m in fired]


def lay_marker(markers: list[SomaticMarker], tick: int, situation: dict[str, str], pnl_usd: float | None,
               liquidated: bool, valence: float, what: str) -> tuple[list[SomaticMarker], SomaticMarker | None]:
    """After a loss (or a liquidation): a new marker, or the matching one strengthened. Returns the markers and
    the one laid (None when the outcome was no loss)."""
    loss = -(pnl_usd or 0.0)
    if not liquidated and loss < LOSS_FLOOR_USD:
        return markers, None
    strength = 1.0 if liquidated else min(1.0, loss / LOSS_SCALE_USD)
    valence = min(valence, -0.1)
    out = [m.model_copy() for m in markers]
    for i, m in enumerate(out):
        if m.situation == situation:
            out[i] = m.model_copy(update={"strength": round(min(1.0, m.strength + strength), 6),
                                          "valence": round(min(m.valence, valence), 6), "tick": tick,
                                          "pnl_usd": pnl_usd, "what": what})
            return out, out[i]
    key = hashlib.sha1(json.dumps(situation, sort_keys=True).encode()).hexdigest()[:6]  # one id per situation
    new = SomaticMarker(id=f"sm-{tick}-{situation.get('tool') or 'hold'}-{key}", tick=tick, situation=dict(situation),
                        valence=round(valence, 6), strength=round(strength, 6), pnl_usd=pnl_usd, what=what)
    out.append(new)
    if len(out) > MAX_MARKERS:
        out.remove(min(out, key=lambda m: (m.strength, m.tick)))
    return out, new


def age_markers(markers: list[SomaticMarker], fired_ids: list[str]) -> list[SomaticMarker]:
    """One tick older: strength decays; a fired marker counts the firing."""
    ids = set(fired_ids)
    return [m.model_copy(update={"strength": round(m.strength * DECAY_PER_TICK, 6),
                                 "fired": m.fired + (1 if m.id in ids else 0)}) for m in markers]
