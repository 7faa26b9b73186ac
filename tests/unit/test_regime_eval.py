"""The regime tag, the matched before/after comparison and its test, the CUSUM change-point detector (on seeded series
with and without a known change), the evaluation windows and verdicts, and what the ledger and the heuristics keep."""

from __future__ import annotations

import random

import pytest

from golem.cognition.regime_tag import gas_band, liquidity_band, regime_tag, volatility_quintile
from golem.grimoire.playbook.compile import compile_body, compiled_entries, rewrite_playbook
from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.learning.ledger import LearningChange, LearningLedger
from golem.models.regime_tag import RegimeTag
from golem.learning.regime_eval import (
    GRACE_TICKS,
    ChangePoint,
    TickOutcome,
    change_points,
    compare,
    judge,
    windows,
)


def _walk(seed: int, n: int, sigma: float, p: float = 2000.0) -> list[float]:
    r = random.Random(seed)
    out = []
    for _ in range(n):
        p *= 1 + r.gauss(0, sigma)
        out.append(p)
    return out


# ---- the tag ---------------------------------------------------------------------------------------
def test_volatility_quintile_is_ranked_against_the_golems_own_history():
    calm = _walk(1, 60, 0.0005)
    q, sigma = volatility_quintile([*calm, calm[-1] * 1.03])  # a 3 % move after a calm hour: the wildest fifth
    assert q == 5 and sigma is not None and sigma > 0.005
    wild = _walk(2, 60, 0.03)
    quiet = [*wild] + [wild[-1]] * 6  # five flat returns after a wild history: the calmest fifth
    assert volatility_quintile(quiet)[0] == 1
    # the same absolute σ is quintile 5 in a calm history and 1 in a wild one: no constant table
    assert volatility_quintile([2000.0] * 64)[0] == 3  # a flat history: every tick ties, the middle quintile
    assert volatility_quintile(calm[:12]) == (None, volatility_quintile(calm[:12])[1])  # too little history yet
    assert volatility_quintile(calm[:4]) == (None, None)


def test_gas_band_against_the_recent_median_and_liquidity_from_the_pools_depth():
    hist = [10.0] * 20
    assert [gas_band(g, hist)[0] for g in (5.0, 10.0, 20.0, 40.0)] == ["low", "normal", "high", "spike"]
    assert gas_band(10.0, hist[:3]) == (None, None)  # too little history
    # selling 10 WETH into 1,000: 2 % impact → "thin" starts at 2 %; 1 into 1,000 is deep; 200 into 1,000 a crisis
    assert liquidity_band(1.0, 1000.0)[0] == "deep"
    assert liquidity_band(5.0, 1000.0)[0] == "normal"
    assert liquidity_band(20.0, 1000.0)[0] == "thin"
    assert liquidity_band(200.0, 1000.0)[0] == "crisis"
    assert liquidity_band(0.0, 0.0) == (None, None)


def test_a_tick_tag_and_its_cell():
    prices = [2000.0 + 3 * i for i in range(40)]  # a steady climb: above its SMA by more than 1σ (and 0.5 %)
    tag = regime_tag(prices, 12.0, [10.0] * 20, exposure=10.0, reserve=5000.0)
    assert (tag.trend, tag.gas_band, tag.liquidity_band) == ("up", "normal", "deep")
    assert tag.cell == f"v{tag.volatility_quintile}/up/gas-normal/liq-deep"
    assert RegimeTag().cell == "v?/?/gas-?/liq-?"
    # liquidity: a tenth of the exposure (one de-risking step) sold into the pool — 30 of 300 into 1,000 is thin,
    # where the whole 300 would read a crisis
    assert regime_tag(prices, 12.0, [10.0] * 20, exposure=300.0, reserve=1000.0).liquidity_band == "thin"


# ---- matching and the test -----------------------------------------------------------------------------
def _o(tick: int, pnl: float, q: int = 3, trend: str = "range", gas: str = "normal", liq: str = "deep") -> TickOutcome:
    return TickOutcome(tick=tick, pnl=pnl, cells={"volatility_quintile": q, "trend": trend, "gas_band": gas,
                                                  "liquidity_band": liq})


def _market(r: random.Random, tick: int, trend: str, effect: float = 0.0) -> TickOutcome:
    base = {"up": 50.0, "down": -50.0, "range": 0.0}[trend]
    return _o(tick, base + effect + r.gauss(0, 20), trend=trend)


def test_a_bull_market_after_a_change_is_not_credited_to_it():
    r = random.Random(3)
    before = [_market(r, t, "down" if t % 5 else "up") for t in range(50)]  # 80 % bear
    after = [_market(r, 50 + t, "up" if t % 5 else "down") for t in range(50)]  # 80 % bull, the change did nothing
    naive = sum(o.pnl for o in after) / 50 - sum(o.pnl for o in before) / 50
    assert naive > 50  # unmatched, the change looks like +60 $/tick
    cmp = compare(before, after, 10)
    assert cmp is not None and cmp.level == ["volatility_quintile", "trend", "gas_band", "liquidity_band"]
    assert cmp.verdict == "no effect" and abs(cmp.effect_usd) < 10, cmp


def test_a_change_that_loses_in_matched_cells_is_harmful_and_one_that_gains_improved():
    r = random.Random(4)
    before = [_market(r, t, "down" if t % 5 else "up") for t in range(50)]
    worse = [_market(r, 50 + t, "up" if t % 5 else "down", effect=-20.0) for t in range(50)]  # −1σ in every cell
    cmp = compare(before, worse, 10)
    assert cmp is not None and cmp.verdict == "harmful" and cmp.z < -1.645 and cmp.d < -0.2, cmp
    assert cmp.effect_usd == pytest.approx(-20, abs=10)  # a bull market after it does not hide the loss
    # an effect only in falling cells counts at the before window's mix (80 % falling), not the after window's (20 %)
    # (−40 $ in the falling cell: 0.8 × −40 = −32 at the before mix, 0.2 × −40 = −8 at the after mix)
    r5 = random.Random(5)
    bear_only = [_market(r5, 50 + t, trend, effect=-40.0 if trend == "down" else 0.0)
                 for t, trend in enumerate("up" if t % 5 else "down" for t in range(50))]
    assert compare(before, bear_only, 10).effect_usd == pytest.approx(-32, abs=12)  # type: ignore[union-attr]
    better = [_market(r, 50 + t, "down" if t % 5 else "up", effect=+20.0) for t in range(50)]
    assert compare(before, better, 10).verdict == "improved"  # type: ignore[union-attr]


def test_the_test_wrongly_calls_harm_in_at_most_5_percent_of_no_effect_changes():
    harmful = 0
    for seed in range(400):
        r = random.Random(seed)
        trends = ["up", "down", "range"]
        before = [_market(r, t, r.choice(trends)) for t in range(50)]
        after = [_market(r, 50 + t, r.choice(trends)) for t in range(50)]
        cmp = compare(before, after, 10)
        harmful += cmp is not None and cmp.verdict == "harmful"
    assert harmful / 400 <= 0.05, harmful  # one-sided 5 %, and the effect-size floor on top


def test_sparse_cells_fall_back_to_a_coarser_match_and_too_few_matched_is_none():
    before = [_o(t, 0.0, gas="low" if t % 2 else "high") for t in range(12)]
    after = [_o(20 + t, -5.0, gas="normal") for t in range(12)]  # no shared full cell; shared quintile + trend
    cmp = compare(before, after, 10)
    assert cmp is not None and cmp.level == ["volatility_quintile", "trend"] and cmp.verdict == "harmful"
    assert compare(before[:5], after, 10) is None
    assert compare([_o(t, 0.0, trend="up") for t in range(20)], [_o(t, 0.0, trend="down") for t in range(20)], 10) is None


# ---- change points -----------------------------------------------------------------------------------
def _series(seed: int, n: int = 300, shift_at: int | None = None, shift: float = 0.0,
            heavy: bool = False) -> list[TickOutcome]:
    r = random.Random(seed)
    out = []
    for t in range(n):
        x = r.gauss(0, 1)
        if heavy:  # Student-t-like tails: a calm market with the odd large move
            x /= max(0.2, r.gammavariate(1.5, 1 / 1.5) ** 0.5)
        out.append(TickOutcome(tick=t, pnl=10 * (x + (shift if shift_at is not None and t >= shift_at else 0.0))))
    return out


def test_the_detector_does_not_fire_on_series_without_a_change():
    # stated false-alarm rate: at most 2 % of 300-tick series (measured 0.3 % Gaussian, 0 % heavy-tailed)
    gaussian = sum(bool(change_points(_series(s))) for s in range(300))
    heavy = sum(bool(change_points(_series(s, heavy=True))) for s in range(300))
    assert gaussian <= 6 and heavy <= 6, (gaussian, heavy)


def test_the_detector_finds_a_known_shift_and_where_it_began():
    delays, onsets = [], []
    for seed in range(200):
        found = [p for p in change_points(_series(1000 + seed, shift_at=150, shift=-2.0)) if p.alarm_tick >= 150]
        assert found, seed
        delays.append(found[0].alarm_tick - 150)
        onsets.append(found[0].tick)
        assert found[0].direction == "down"
    delays.sort()
    assert delays[100] <= 12 and delays[190] <= 20, delays  # median and 95th percentile of the detection delay
    assert sum(abs(t - 150) <= 10 for t in onsets) >= 180  # the onset is placed within 10 ticks in 90 % of runs
    assert change_points(_series(5, shift_at=150, shift=2.0))[0].direction == "up"


# ---- windows and verdicts ---------------------------------------------------------------------------
def test_a_change_point_clips_the_before_window_and_one_past_the_grace_cuts_the_after_window():
    series = [_o(t, 0.0) for t in range(200)]
    w = windows(series, 100, 50, [ChangePoint(tick=80, alarm_tick=90, direction="down", statistic=16)])
    assert w.before_from == 80 and {o.tick for o in w.before} == set(range(80, 100))
    soon = ChangePoint(tick=100 + GRACE_TICKS, alarm_tick=115, direction="down", statistic=16)
    late = ChangePoint(tick=130, alarm_tick=140, direction="down", statistic=16)
    assert windows(series, 100, 50, [soon]).after_cut is None  # the change's own effect: not the market's
    at = ChangePoint(tick=100 - GRACE_TICKS, alarm_tick=104, direction="down", statistic=16)
    assert windows(series, 100, 50, [at]).before_from == 50  # an onset placed a few ticks early: nor the before window
    w = windows(series, 100, 50, [soon, late])
    assert w.after_cut == 130 and max(o.tick for o in w.after) == 129


def test_judge_waits_then_rolls_back_keeps_or_gives_up():
    r = random.Random(9)
    series = [_o(t, r.gauss(0, 5)) for t in range(100)] + [_o(t, r.gauss(-10, 5)) for t in range(100, 160)]
    assert judge(series[:105], 100, 105, 50, 10, []).status == "pending"
    j = judge(series, 100, 160, 50, 10, [])
    assert j.status == "rolled_back" and j.comparison is not None and "worse in matched regimes" in j.reason
    flat = [_o(t, r.gauss(0, 5)) for t in range(160)]
    assert judge(flat, 100, 160, 50, 10, []).status == "inconclusive"
    # no matched cell at all by the end of the after window: kept, inconclusive
    other = [_o(t, 0.0, trend="up" if t < 100 else "down", q=1 if t < 100 else 5) for t in range(160)]
    assert judge(other, 100, 160, 50, 10, []).status == "inconclusive"


# ---- what is kept --------------------------------------------------------------------------------------
def test_the_ledger_keeps_changes_once_and_their_verdicts(tmp_path):
    ledger = LearningLedger(tmp_path / "learning.sqlite")
    change = LearningChange(id="context_policy:2", tick=50, kind="context_policy", ref="2", op="retune",
                            description="loop 2: …", before={"revision": 1, "allocations": {"T1": {"a": 1}}})
    assert ledger.record_change(change) and not ledger.record_change(change)
    ledger.judge_change(change.id, "rolled_back", 100, "worse", {"z": -3.0})
    (got,) = ledger.changes()
    assert (got.status, got.judged_tick, got.figures, got.before["allocations"]) == ("rolled_back", 100, {"z": -3.0},
                                                                                    {"T1": {"a": 1}})
    assert ledger.changes("pending") == []
    point = {"tick": 70, "alarm_tick": 80, "direction": "down", "statistic": 15.5}
    assert ledger.add_change_points([point], 100) == [70] and ledger.add_change_points([point], 150) == []


def test_restore_retires_a_rule_that_entered_and_puts_back_one_that_was_revised(tmp_path):
    store = HeuristicStore(tmp_path / "heuristics.sqlite")
    rule = "WHEN health_factor < 2 THEN repay 5% debt"
    h = store.add_or_reinforce(rule, "global", "e1")
    store.vote(h.id, 2, 10)  # 0.7: in PLAYBOOK.md
    assert h.id in compiled_entries(compile_body(store.list()))
    store.restore(h.id, {"in_playbook": False}, 60)
    assert store.get(h.id).status == "retired" and h.id not in compiled_entries(compile_body(store.list()))
    g = store.add_or_reinforce("WHEN health_factor < 1.8 THEN repay 5% debt", "global", "e2")
    store.vote(g.id, -1, 10, text="WHEN health_factor < 1.6 THEN repay 5% debt")  # revised and demoted
    store.restore(g.id, {"in_playbook": True, "text": "WHEN health_factor < 1.8 THEN repay 5% debt"}, 60)
    rev = rewrite_playbook(store, tmp_path / "PLAYBOOK.md", tick=60)
    assert compiled_entries((tmp_path / "PLAYBOOK.md").read_text()) == {
        g.id: "WHEN health_factor < 1.8 THEN repay 5% debt"} and rev.changed
