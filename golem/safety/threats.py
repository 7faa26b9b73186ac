"""Risk layers 4–5: the threats the cage watches for on the local chain, as pure functions.

Sandwich exposure of a pending swap on the Uniswap V2 pair (the best front-run, the attacker's profit, the victim's
loss) and the tolerance or size that keeps it under the bound; oracle manipulation (a price that ran away from the
other source within the last blocks, or a feed round that jumped and reverted); flash-loan-shaped moves (a pool move
in one block that reverts within the next ones). The cage applies them (golem.safety.cage). Why, formulas and
thresholds: docs/design/safety.md#defi-threats.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from golem.models.threats import MarketMark, MarketWindow, ThreatVerdict
from golem.safety.sizing import UNISWAP_V2_FEE, floor_amount

REVERT_BLOCKS = 2  # a move "reverts" when it is undone within this many blocks after it
REVERT_SHARE = 1 / 3  # ... to at most a third of its size
FOLLOW_SHARE = 1 / 3  # the other price source "followed" a move when it moved at least a third as far
MIN_TOLERANCE_BPS = 5.0  # a tighter bound reverts the swap on an honest move between simulation and inclusion
SANDWICH_GAS = 240_000  # the attacker's front-run and back-run swaps through Router02
POOL_PRICED = frozenset({"swap", "add_liquidity", "remove_liquidity"})  # writes that trade at the pair's price
FEED_PRICED_EXPOSURE = frozenset({"borrow", "withdraw"})  # draw against collateral as the feed values it


def amount_out(amount_in: float, reserve_in: float, reserve_out: float) -> float:
    """Uniswap V2's getAmountOut in human units: (1 − fee)·a·R_out / (R_in + (1 − fee)·a)."""
    if amount_in <= 0 or reserve_in <= 0 or reserve_out <= 0:
        return 0.0
    keep = 1.0 - UNISWAP_V2_FEE
    return keep * amount_in * reserve_out / (reserve_in + keep * amount_in)


class SandwichExposure(BaseModel):
    quote: float  # what the swap buys at the current reserves (token_out)
    min_out: float  # the least it accepts (token_out)
    front_run: float  # the attacker's best front-run (token_in); 0 when no sandwich pays
    attacker_profit: float  # back-run proceeds − front-run − the attacker's gas (token_in)
    victim_loss: float  # quote − what the swap gets behind the front-run (token_out)

    @property
    def loss_bps(self) -> float:
        return self.victim_loss / self.quote * 1e4 if self.quote > 0 else 0.0


def _profit(x: float, a: float, rin: float, rout: float) -> tuple[float, float]:
    """(attacker's gross profit in token_in, victim's output) for a front-run x: buy, the victim, sell back."""
    y1 = amount_out(x, rin, rout)
    victim = amount_out(a, rin + x, rout - y1)
    back = amount_out(y1, rout - y1 - victim, rin + x + a)
    return back - x, victim


def sandwich_exposure(amount_in: float, reserve_in: float, reserve_out: float, min_out: float,
                      attacker_cost_in: float = 0.0) -> SandwichExposure:
    """The best sandwich around a swap of `amount_in` that must receive at least `min_out`: the front-run is bounded by
    the victim's minimum (any larger and the victim's swap reverts, so the attacker gains nothing); on [0, that bound]
    the attacker's profit is maximised (golden section, then the bound itself). No sandwich when the best profit does
    not cover `attacker_cost_in` (its gas, in token_in)."""
    quote = amount_out(amount_in, reserve_in, reserve_out)
    none = SandwichExposure(quote=quote, min_out=min_out, front_run=0.0, attacker_profit=0.0, victim_loss=0.0)
    if quote <= 0 or quote < min_out:
        return none
    lo, hi = 0.0, reserve_in
    while _profit(hi, amount_in, reserve_in, reserve_out)[1] >= min_out and hi < reserve_in * 1e9:
        lo, hi = hi, hi * 2
    for _ in range(200):  # the largest front-run the victim's minimum survives
        mid = (lo + hi) / 2
        if _profit(mid, amount_in, reserve_in, reserve_out)[1] >= min_out:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(hi, 1.0):
            break
    x_max = lo

    def gain(x: float) -> float:
        return _profit(x, amount_in, reserve_in, reserve_out)[0]

    a, b = 0.0, x_max
    inv = (math.sqrt(5) - 1) / 2
    c, d = b - inv * (b - a), a + inv * (b - a)
    for _ in range(200):
        if gain(c) >= gain(d):
            b, d = d, c
            c = b - inv * (b - a)
        else:
            a, c = c, d
            d = a + inv * (b - a)
        if b - a <= 1e-12 * max(x_max, 1e-18):
            break
    best = max(((a + b) / 2, x_max), key=gain)
    profit = gain(best) - attacker_cost_in
    if best <= 0 or profit <= 0:
        return none
    victim = _profit(best, amount_in, reserve_in, reserve_out)[1]
    return SandwichExposure(quote=quote, min_out=min_out, front_run=best, attacker_profit=profit,
                            victim_loss=max(quote - victim, 0.0))


def within(loss_bps: float, bound_bps: float) -> bool:
    """A loss within the bound (a loss of exactly the tolerance may round a hair above it)."""
    return loss_bps <= bound_bps + 1e-9


def min_out_of(amount_in: float, reserve_in: float, reserve_out: float, slippage_bps: float,
               min_amount_out: float | None) -> float:
    """The executor's minimum: the quote less the slippage bound, or min_amount_out when that is higher."""
    quote = amount_out(amount_in, reserve_in, reserve_out)
    return max(quote * (1.0 - slippage_bps / 1e4), min_amount_out or 0.0)


def exposure_at(amount_in: float, reserve_in: float, reserve_out: float, slippage_bps: float,
                min_amount_out: float | None, cost_in: float) -> SandwichExposure:
    return sandwich_exposure(amount_in, reserve_in, reserve_out,
                             min_out_of(amount_in, reserve_in, reserve_out, slippage_bps, min_amount_out), cost_in)


def safe_tolerance(amount_in: float, reserve_in: float, reserve_out: float, slippage_bps: float,
                   min_amount_out: float | None, bound_bps: float, cost_in: float) -> float:
    """The largest slippage bound ≤ `slippage_bps` (to 0.01 bps) at which the best sandwich takes ≤ `bound_bps`.
    The victim's loss never exceeds its tolerance, so the answer is at least min(bound, slippage)."""
    def ok(s: float) -> bool:
        return within(exposure_at(amount_in, reserve_in, reserve_out, s, min_amount_out, cost_in).loss_bps, bound_bps)

    return slippage_bps if ok(slippage_bps) else math.floor(_bisect(slippage_bps, ok, 40) * 100) / 100


def safe_amount(amount_in: float, reserve_in: float, reserve_out: float, slippage_bps: float, bound_bps: float,
                cost_in: float) -> float:
    """The largest amount ≤ `amount_in` whose best sandwich at `slippage_bps` takes ≤ `bound_bps` (a smaller swap
    moves the price less, so less is left for a front-runner once its fees and gas are paid)."""
    def ok(a: float) -> bool:
        return within(exposure_at(a, reserve_in, reserve_out, slippage_bps, None, cost_in).loss_bps, bound_bps)

    return amount_in if ok(amount_in) else floor_amount(_bisect(amount_in, ok, 60))


def _bisect(top: float, ok: Callable[[float], bool], steps: int) -> float:
    """The largest value in [0, top) that passes `ok`, to `steps` halvings (`ok` is monotone: true below some bound,
    false above it)."""
    lo, hi = 0.0, top
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


# ── the market's recent blocks ──────────────────────────────────────────────────────────────────────────────


def _bps(new: float, old: float) -> float:
    return (new - old) / old * 1e4 if old > 0 else 0.0


def _price(m: MarketMark, source: str) -> float:
    return m.pool_price if source == "pool" else m.feed_price


def _ran_away(marks: list[MarketMark], source: str, move_bps: float) -> dict[str, Any] | None:
    """The largest move of `source` from an earlier block to the newest that took it away from the other source while
    that one stood still (moved less than FOLLOW_SHARE as far); None when there is none of `move_bps` or more."""
    other = "feed" if source == "pool" else "pool"
    last = marks[-1]
    found: dict[str, Any] | None = None
    for m in marks[:-1]:
        moved = _bps(_price(last, source), _price(m, source))
        other_moved = _bps(_price(last, other), _price(m, other))
        gap_then = abs(_bps(m.pool_price, m.feed_price))
        gap_now = abs(_bps(last.pool_price, last.feed_price))
        if (abs(moved) >= move_bps and abs(other_moved) < abs(moved) * FOLLOW_SHARE
                and gap_now - gap_then >= abs(moved) * (1 - FOLLOW_SHARE)):
            if found is None or abs(moved) > abs(found["move_bps"]):
                found = {"from_block": m.block, "block": last.block, "move_bps": moved, "other_move_bps": other_moved,
                         "gap_bps": gap_now}
    return found


def _jump_and_revert(marks: list[MarketMark], source: str, move_bps: float) -> dict[str, Any] | None:
    """The largest one-block move of `source` of `move_bps` or more that the other source did not follow and that
    was undone (to at most REVERT_SHARE of it) within REVERT_BLOCKS blocks."""
    other = "feed" if source == "pool" else "pool"
    found: dict[str, Any] | None = None
    for i in range(1, len(marks)):
        before, at = marks[i - 1], marks[i]
        jump = _bps(_price(at, source), _price(before, source))
        followed = _bps(_price(at, other), _price(before, other))
        if abs(jump) < move_bps or abs(followed) >= abs(jump) * FOLLOW_SHARE:
            continue
        for after in marks[i + 1: i + 1 + REVERT_BLOCKS]:
            left = _bps(_price(after, source), _price(before, source))
            if abs(left) <= abs(jump) * REVERT_SHARE:
                if found is None or abs(jump) > abs(found["move_bps"]):
                    found = {"block": at.block, "move_bps": jump, "revert_block": after.block, "left_bps": left,
                             "other_move_bps": followed}
                break
    return found


def _floats(d: dict[str, Any]) -> dict[str, float]:
    return {k: round(float(v), 4) for k, v in d.items()}


def oracle_manipulation(window: MarketWindow, move_bps: float) -> ThreatVerdict:
    """A pool price that ran `move_bps` away from a feed that stood still, or a feed that did so from the pool; or a
    feed round that jumped and reverted while the pool did not follow."""
    marks = window.marks
    span = f"blocks {marks[0].block}–{marks[-1].block}" if marks else "no blocks"
    if len(marks) < 2:
        return ThreatVerdict(detector="oracle_manipulation", fired=False, detail=f"{span}: too few blocks to judge")
    pool = _ran_away(marks, "pool", move_bps)
    if pool is not None:
        return ThreatVerdict(
            detector="oracle_manipulation", fired=True, source="pool", figures=_floats(pool),
            detail=(f"the pool price moved {pool['move_bps']:+.0f} bps between blocks {pool['from_block']} and "
                    f"{pool['block']} while the feed moved {pool['other_move_bps']:+.0f} bps; it now sits "
                    f"{pool['gap_bps']:.0f} bps from the feed (manipulated pool: no new exposure priced off it)"))
    feed = _ran_away(marks, "feed", move_bps) or _jump_and_revert(marks, "feed", move_bps)
    if feed is not None:
        what = (f"reverted by block {feed['revert_block']} ({feed['left_bps']:+.0f} bps left)" if "revert_block" in feed
                else f"now {feed['gap_bps']:.0f} bps from the pool")
        return ThreatVerdict(
            detector="oracle_manipulation", fired=True, source="feed", figures=_floats(feed),
            detail=(f"the feed jumped {feed['move_bps']:+.0f} bps at block {feed['block']} while the pool moved "
                    f"{feed['other_move_bps']:+.0f} bps, {what} (manipulated feed: no borrowing or withdrawing "
                    "against it)"))
    widest = max((abs(_bps(m.pool_price, marks[0].pool_price)) for m in marks), default=0.0)
    return ThreatVerdict(detector="oracle_manipulation", fired=False, figures={"pool_range_bps": round(widest, 4)},
                         detail=f"{span}: no price ran {move_bps:g} bps away from the other source")


def flash_loan_moves(window: MarketWindow, move_bps: float) -> ThreatVerdict:
    """A one-block pool move of `move_bps` or more, with the feed standing still, undone within REVERT_BLOCKS."""
    marks = window.marks
    span = f"blocks {marks[0].block}–{marks[-1].block}" if marks else "no blocks"
    found = _jump_and_revert(marks, "pool", move_bps) if len(marks) >= 3 else None
    if found is None:
        steps = [abs(_bps(b.pool_price, a.pool_price)) for a, b in zip(marks, marks[1:])]
        return ThreatVerdict(detector="flash_loan", fired=False,
                             figures={"largest_block_move_bps": round(max(steps, default=0.0), 4)},
                             detail=f"{span}: no pool move of {move_bps:g} bps that reverted within "
                                    f"{REVERT_BLOCKS} blocks")
    return ThreatVerdict(
        detector="flash_loan", fired=True, source="pool", figures=_floats(found),
        detail=(f"the pool moved {found['move_bps']:+.0f} bps in block {found['block']} (feed {found['other_move_bps']:+.0f} "
                f"bps) and was back within {found['left_bps']:+.0f} bps by block {found['revert_block']}: a "
                "flash-loan-shaped move; writes priced off the pool wait for the next tick"))


def market_threats(window: MarketWindow | None, move_bps: float) -> list[ThreatVerdict]:
    """The market-wide detectors' verdicts for one tick (none without a window to read)."""
    if window is None:
        return []
    return [oracle_manipulation(window, move_bps), flash_loan_moves(window, move_bps)]


def market_refusal(tool: str, exposure: bool, protective: str | None,
                   verdicts: list[ThreatVerdict]) -> tuple[str | None, bool]:
    """(why the action may not go on now, whether it is held for later rather than refused) from the fired market
    detectors: a manipulated pool refuses new exposure priced off it, a manipulated feed refuses borrowing and
    withdrawing against it, a flash-loan-shaped move holds every pool-priced write for a tick (a protective one goes
    on: waiting would cost the position more)."""
    for v in verdicts:
        if not v.fired:
            continue
        if v.detector == "oracle_manipulation" and v.source == "pool" and exposure and tool in POOL_PRICED:
            return f"oracle manipulation: {v.detail}", False
        if v.detector == "oracle_manipulation" and v.source == "feed" and tool in FEED_PRICED_EXPOSURE:
            return f"oracle manipulation: {v.detail}", False
        if v.detector == "flash_loan" and tool in POOL_PRICED and protective is None:
            return f"flash-loan-shaped move: {v.detail}", True
    return None, False
