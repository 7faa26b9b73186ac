"""System 1: deterministic probes.

Each probe is a small pure function of the chain snapshot and the golem's rolling state; it returns a ProbeResult
with a severity. Probes feed the prediction error rather than gating directly: the aggregate, not any single probe,
picks the tier. Probes needing data we do not have yet (pheromone field, causal graph) are not run.
The table of probes and thresholds: docs/design/gate.md#probes.
"""

from __future__ import annotations

import itertools
import math

from golem.models.config import HeartbeatSection, ProbeThresholds
from golem.models.enums import ProbeSeverity
from golem.models.observation import Anomaly, ChainSnapshot, ProbeResult
from golem.models.state import GolemState

RSI_PERIOD = 14
# RSI bands: "divergence from mean" → Low, "extreme oversold/overbought" → High.
RSI_LOW_BAND = (30.0, 70.0)
RSI_HIGH_BAND = (20.0, 80.0)


def _grade(value: float, low: float, high: float, *, below: bool = False) -> ProbeSeverity:
    """Severity of `value` against two thresholds; `below` when smaller is worse (health factor)."""
    if below:
        if value < high:
            return ProbeSeverity.HIGH
        if value < low:
            return ProbeSeverity.LOW
        return ProbeSeverity.NONE
    if value > high:
        return ProbeSeverity.HIGH
    if value > low:
        return ProbeSeverity.LOW
    return ProbeSeverity.NONE


def _rel_bps(now: float, before: float) -> float:
    return (now - before) / before * 10_000.0


def probe_price_delta(snapshot: ChainSnapshot, state: GolemState, t: ProbeThresholds) -> ProbeResult:
    """|pool price change| since last tick, bps. Low > 0.5 %, High > 2 % (50 / 200 bps)."""
    price = snapshot.pool.price
    if not state.price_history or state.price_history[-1] <= 0:
        return ProbeResult(probe="price_delta", threshold=t.price_delta_low_bps,
                           detail="no previous price yet: skipped")
    before = state.price_history[-1]
    delta = _rel_bps(price, before)
    sev = _grade(abs(delta), t.price_delta_low_bps, t.price_delta_high_bps)
    return ProbeResult(probe="price_delta", severity=sev, value=round(delta, 4), threshold=t.price_delta_low_bps,
                       detail=f"price {before:.4f} → {price:.4f} ({delta:+.1f} bps)")


def probe_tvl_change(snapshot: ChainSnapshot, state: GolemState, t: ProbeThresholds) -> ProbeResult:
    """|pool TVL change| in one tick, percent. Low > 1 %, High > 5 %."""
    tvl = snapshot.pool.tvl
    if state.last_tvl is None or state.last_tvl <= 0:
        return ProbeResult(probe="tvl_change", threshold=t.tvl_change_low_pct, detail="no previous TVL yet: skipped")
    pct = (tvl - state.last_tvl) / state.last_tvl * 100.0
    sev = _grade(abs(pct), t.tvl_change_low_pct, t.tvl_change_high_pct)
    return ProbeResult(probe="tvl_change", severity=sev, value=round(pct, 4), threshold=t.tvl_change_low_pct,
                       detail=f"TVL {state.last_tvl:.2f} → {tvl:.2f} ({pct:+.2f} %)")


def probe_position_health(snapshot: ChainSnapshot, t: ProbeThresholds) -> ProbeResult:
    """Minimum health factor over positions. Low < 1.5, High < 1.2."""
    hfs = [(p.health_factor, p.id) for p in snapshot.positions if p.health_factor is not None]
    if not hfs:
        # No debt means infinite health; value stays finite so the record serialises to JSON.
        return ProbeResult(probe="position_health", threshold=t.health_factor_low, detail="no debt positions")
    hf, pid = min(hfs)
    sev = _grade(hf, t.health_factor_low, t.health_factor_high, below=True)
    return ProbeResult(probe="position_health", severity=sev, value=round(hf, 6), threshold=t.health_factor_low,
                       detail=f"min health factor {hf:.3f} ({pid})")


def probe_gas_price(snapshot: ChainSnapshot, state: GolemState, t: ProbeThresholds) -> ProbeResult:
    """Gas price over its recent average. Low > 2×, High > 5× the 1-hour average
    (the average is over state.gas_history, ~1 h of theta ticks at 30 s)."""
    hist = [g for g in state.gas_history if g > 0]
    if not hist:
        return ProbeResult(probe="gas_price", threshold=t.gas_ratio_low, detail="no gas history yet: skipped")
    avg = sum(hist) / len(hist)
    ratio = snapshot.gas_price_gwei / avg
    sev = _grade(ratio, t.gas_ratio_low, t.gas_ratio_high)
    return ProbeResult(probe="gas_price", severity=sev, value=round(ratio, 4), threshold=t.gas_ratio_low,
                       detail=f"gas {snapshot.gas_price_gwei:.3f} gwei = {ratio:.2f}× the {len(hist)}-tick average")


def probe_circuit_breaker(snapshot: ChainSnapshot, t: ProbeThresholds) -> ProbeResult:
    """|pool price − oracle price| / oracle, bps: the NAV deviation the circuit breaker watches."""
    oracle = snapshot.oracle_price
    if oracle <= 0:
        return ProbeResult(probe="circuit_breaker", severity=ProbeSeverity.HIGH, threshold=t.oracle_deviation_low_bps,
                           detail=f"oracle price {oracle} is not positive: cannot value the book")
    gap = abs(snapshot.pool.price - oracle) / oracle * 10_000.0
    sev = _grade(gap, t.oracle_deviation_low_bps, t.oracle_deviation_high_bps)
    return ProbeResult(probe="circuit_breaker", severity=sev, value=round(gap, 4),
                       threshold=t.oracle_deviation_low_bps,
                       detail=f"pool {snapshot.pool.price:.4f} vs oracle {oracle:.4f}: {gap:.1f} bps apart")


def probe_kill_switch(triggered: bool, t: ProbeThresholds) -> ProbeResult:
    """Always High when triggered (the observe activity checks the file)."""
    if triggered:
        return ProbeResult(probe="kill_switch", severity=ProbeSeverity.HIGH, value=1.0, threshold=1.0,
                           detail=f"kill switch {t.kill_switch_path} is present")
    return ProbeResult(probe="kill_switch", threshold=1.0, detail="not triggered")


def probe_world_model_drift(snapshot: ChainSnapshot, state: GolemState, t: ProbeThresholds) -> ProbeResult:
    """World-model drift (Low > 10 %, High > 25 % prediction error).

    Proxy until the causal world model exists: the naive model predicts the *oracle* price stays at
    its last value; drift is the relative error |oracle − last_oracle| / last_oracle. It reads the
    oracle (not the pool) so it is not a copy of the price-delta probe.
    """
    last = state.last_oracle_price
    if last is None or last <= 0:
        return ProbeResult(probe="world_model_drift", threshold=t.world_model_drift_low,
                           detail="no previous oracle price yet: skipped")
    drift = abs(snapshot.oracle_price - last) / last
    sev = _grade(drift, t.world_model_drift_low, t.world_model_drift_high)
    return ProbeResult(probe="world_model_drift", severity=sev, value=round(drift, 6),
                       threshold=t.world_model_drift_low,
                       detail=f"oracle {last:.4f} → {snapshot.oracle_price:.4f}: naive-model error {drift:.2%}")


def rsi(prices: list[float], period: int = RSI_PERIOD) -> float | None:
    """Cutler's RSI (simple mean of the last `period` gains and losses); None when history is short.

    Simple means rather than Wilder's smoothing keep it a function of the window alone, so the same
    history always gives the same number however long it is.
    """
    if len(prices) < period + 1:
        return None
    window = prices[-(period + 1):]
    changes = [b - a for a, b in itertools.pairwise(window)]
    gain = sum(c for c in changes if c > 0) / period
    loss = sum(-c for c in changes if c < 0) / period
    if gain == 0 and loss == 0:
        return 50.0
    if loss == 0:
        return 100.0
    return 100.0 - 100.0 / (1.0 + gain / loss)


MACD_FAST, MACD_SLOW, MACD_SIGNAL = 12, 26, 9  # the classic MACD(12, 26, 9)


def _ema(values: list[float], period: int) -> list[float]:
    k = 2.0 / (period + 1.0)
    out = [values[0]]
    for v in values[1:]:
        out.append(out[-1] + k * (v - out[-1]))
    return out


def macd_histogram(prices: list[float]) -> float | None:
    """MACD line minus its signal line; None until slow + signal prices exist."""
    if len(prices) < MACD_SLOW + MACD_SIGNAL:
        return None
    line = [f - s for f, s in zip(_ema(prices, MACD_FAST), _ema(prices, MACD_SLOW))]
    return line[-1] - _ema(line, MACD_SIGNAL)[-1]


def macd_divergence(prices: list[float]) -> bool:
    """Momentum disagrees with the move: price up over the RSI window while the MACD histogram is
    negative, or down while it is positive (a "divergence from mean")."""
    hist = macd_histogram(prices)
    if hist is None or len(prices) < RSI_PERIOD + 1:
        return False
    move = prices[-1] - prices[-(RSI_PERIOD + 1)]
    return (move > 0 > hist) or (move < 0 < hist)


def probe_rsi(snapshot: ChainSnapshot, state: GolemState) -> ProbeResult:
    """RSI-14 over price history + this tick's price. Low outside 30–70, High outside 20–80;
    a MACD(12,26,9) divergence from the price move is at least Low."""
    prices = [*state.price_history, snapshot.pool.price]
    value = rsi(prices)
    if value is None:
        return ProbeResult(probe="rsi", threshold=RSI_LOW_BAND[1],
                           detail=f"needs {RSI_PERIOD + 1} prices, have {len(prices)}: skipped")
    if value < RSI_HIGH_BAND[0] or value > RSI_HIGH_BAND[1]:
        sev = ProbeSeverity.HIGH
    elif value < RSI_LOW_BAND[0] or value > RSI_LOW_BAND[1]:
        sev = ProbeSeverity.LOW
    else:
        sev = ProbeSeverity.NONE
    label = "oversold" if value < 50 else "overbought"
    detail = f"RSI-{RSI_PERIOD} {value:.1f}" + (f" ({label})" if sev != ProbeSeverity.NONE else "")
    if macd_divergence(prices):
        sev = max(sev, ProbeSeverity.LOW, key=lambda x: x.rank)
        detail += "; MACD diverges from the price move"
    return ProbeResult(probe="rsi", severity=sev, value=round(value, 3), threshold=RSI_LOW_BAND[1], detail=detail)


# credit balance: Low when the partition has < 20 % left, High < 10 %.
CREDIT_LOW_FRACTION = 0.20
CREDIT_HIGH_FRACTION = 0.10


def probe_credit_balance(daily_spend: float | None, heartbeat: HeartbeatSection | None) -> ProbeResult:
    """Share of today's inference budget left (the credit partition, from the daily cap)."""
    if heartbeat is None or daily_spend is None:
        return ProbeResult(probe="credit_balance", threshold=CREDIT_LOW_FRACTION, detail="no budget given: skipped")
    cap = heartbeat.max_daily_cost_usd
    if cap <= 0:
        left = 0.0 if daily_spend > 0 else 1.0
    else:
        left = max(0.0, 1.0 - max(daily_spend, 0.0) / cap)
    sev = _grade(left, CREDIT_LOW_FRACTION, CREDIT_HIGH_FRACTION, below=True)
    return ProbeResult(probe="credit_balance", severity=sev, value=round(left, 6), threshold=CREDIT_LOW_FRACTION,
                       detail=f"{left:.0%} of the ${cap:.2f} daily budget left (spent ${max(daily_spend, 0.0):.4f})")


# homeostatic deviation: Low when any variable is > 1σ from its rolling mean, High > 2σ.
HOMEOSTATIC_LOW_SIGMA = 1.0
HOMEOSTATIC_HIGH_SIGMA = 2.0
HOMEOSTATIC_WINDOW = 20  # the same 20 periods as the regime SMA
HOMEOSTATIC_MIN_SAMPLES = 10
# σ floors, so a flat history does not turn noise into a deviation: price level 0.5 % of its mean
# (the price probe's Low), returns 10 bps (regime.MIN_RETURN_SIGMA), gas 10 % of its mean.
PRICE_SIGMA_FLOOR = 0.005
RETURN_SIGMA_FLOOR = 0.001
GAS_SIGMA_FLOOR = 0.10


def _zscore(value: float, history: list[float], floor: float, *, relative_floor: bool) -> float | None:
    xs = [x for x in history[-HOMEOSTATIC_WINDOW:] if math.isfinite(x)]
    if len(xs) < HOMEOSTATIC_MIN_SAMPLES:
        return None
    mean = math.fsum(xs) / len(xs)
    sigma = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / len(xs))
    sigma = max(sigma, floor * abs(mean) if relative_floor else floor)
    if sigma <= 0:
        return None
    return abs(value - mean) / sigma


def probe_homeostatic_deviation(snapshot: ChainSnapshot, state: GolemState) -> ProbeResult:
    """Largest z-score of this tick's price level, price return and gas price against their rolling
    windows in state (the golem's "normal" operating ranges)."""
    prices = [p for p in state.price_history if p > 0]
    zs: dict[str, float] = {}
    price = snapshot.pool.price
    if (z := _zscore(price, prices, PRICE_SIGMA_FLOOR, relative_floor=True)) is not None:
        zs["price"] = z
    if prices and price > 0:
        rets = [(b - a) / a for a, b in itertools.pairwise(prices)]
        if (z := _zscore((price - prices[-1]) / prices[-1], rets, RETURN_SIGMA_FLOOR, relative_floor=False)) is not None:
            zs["return"] = z
    gas = [g for g in state.gas_history if g > 0]
    if (z := _zscore(snapshot.gas_price_gwei, gas, GAS_SIGMA_FLOOR, relative_floor=True)) is not None:
        zs["gas"] = z
    if not zs:
        return ProbeResult(probe="homeostatic_deviation", threshold=HOMEOSTATIC_LOW_SIGMA,
                           detail=f"needs {HOMEOSTATIC_MIN_SAMPLES} samples of history: skipped")
    name, z = max(zs.items(), key=lambda kv: (kv[1], kv[0]))
    sev = _grade(z, HOMEOSTATIC_LOW_SIGMA, HOMEOSTATIC_HIGH_SIGMA)
    return ProbeResult(probe="homeostatic_deviation", severity=sev, value=round(z, 4), threshold=HOMEOSTATIC_LOW_SIGMA,
                       detail=", ".join(f"{k} {v:.2f}σ" for k, v in sorted(zs.items())) + f" (max: {name})")


# A feed is stale once it misses its heartbeat (Chainlink's own definition: no round for longer than the
# feed's heartbeat); it is graded Low from three quarters of the heartbeat on, ours, so the golem looks
# before the price it values the book with stops being trustworthy.
FEED_STALE_LOW_FRACTION = 0.75


def probe_feed_staleness(snapshot: ChainSnapshot) -> ProbeResult:
    """The oldest price feed's round age over its heartbeat: Low ≥ 0.75×, High > 1× (stale)."""
    rated = [(f.age_s / f.heartbeat_s, f) for f in snapshot.feeds if f.heartbeat_s]
    if not rated:
        return ProbeResult(probe="feed_staleness", threshold=FEED_STALE_LOW_FRACTION,
                           detail="no feed with a known heartbeat: skipped")
    ratio, feed = max(rated, key=lambda rf: rf[0])
    sev = ProbeSeverity.HIGH if ratio > 1.0 else ProbeSeverity.LOW if ratio >= FEED_STALE_LOW_FRACTION else ProbeSeverity.NONE
    state = "STALE" if ratio > 1.0 else "fresh"
    return ProbeResult(probe="feed_staleness", severity=sev, value=round(ratio, 4), threshold=FEED_STALE_LOW_FRACTION,
                       detail=f"{feed.symbol}/USD feed round {feed.round_id} is {feed.age_s} s old "
                              f"(heartbeat {feed.heartbeat_s} s): {state}")


def run_probes(
    snapshot: ChainSnapshot,
    state: GolemState,
    thresholds: ProbeThresholds,
    kill_switch_triggered: bool,
    *,
    daily_spend: float | None = None,
    heartbeat: HeartbeatSection | None = None,
) -> list[ProbeResult]:
    """All probes the data allows, in a fixed order. The credit balance needs today's spend
    (budget.daily_spend_on) and the heartbeat section; without them it reports itself skipped."""
    t = thresholds
    return [
        probe_price_delta(snapshot, state, t),
        probe_tvl_change(snapshot, state, t),
        probe_position_health(snapshot, t),
        probe_gas_price(snapshot, state, t),
        probe_circuit_breaker(snapshot, t),
        probe_feed_staleness(snapshot),
        probe_kill_switch(kill_switch_triggered, t),
        probe_world_model_drift(snapshot, state, t),
        probe_rsi(snapshot, state),
        probe_credit_balance(daily_spend, heartbeat),
        probe_homeostatic_deviation(snapshot, state),
    ]


def merge_probe_results(*groups: list[ProbeResult]) -> list[ProbeResult]:
    """One result per probe, the most severe winning (ties: the later group, i.e. the fresher reading).
    Used to fold dropped ticks' probes into the next executing tick (backpressure)."""
    best: dict[str, ProbeResult] = {}
    for group in groups:
        for r in group:
            cur = best.get(r.probe)
            if cur is None or r.severity.rank >= cur.severity.rank:
                best[r.probe] = r
    return list(best.values())


def anomalies_from(probes: list[ProbeResult]) -> list[Anomaly]:
    """Every probe that fired (Low or High) is an anomaly."""
    return [
        Anomaly(probe=p.probe, severity=p.severity, description=p.detail)
        for p in probes
        if p.severity != ProbeSeverity.NONE
    ]
