"""Probes and regime detection (docs/design/gate.md#probes, #regime)."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.cognition.probes import anomalies_from, rsi, run_probes
from golem.cognition.regime import detect_regime
from golem.models.config import ProbeThresholds
from golem.models.enums import MarketRegime, ProbeSeverity
from golem.models.observation import ChainSnapshot, FeedState, PoolState, PositionState
from golem.models.state import GolemState

T = ProbeThresholds()


def snap(price=2000.0, oracle=None, tvl=4_000_000.0, gas=1.0, hf: float | None = 2.0) -> ChainSnapshot:
    return ChainSnapshot(
        chain_id=31337, block_number=10, block_timestamp=1_700_000_000, gas_price_gwei=gas,
        pool=PoolState(address="0xpool", token0="WETH", token1="USDC", reserve0=500, reserve1=500 * price,
                       price=price, tvl=tvl),
        oracle_price=price if oracle is None else oracle,
        balances={"WETH": 20, "USDC": 20_000},
        positions=[PositionState(id="lending:0x1", collateral=10, debt=8000 if hf else 0, health_factor=hf)],
    )


def state(**kw) -> GolemState:
    base = dict(golem_id="t", price_history=[2000.0] * 20, gas_history=[1.0] * 10, last_tvl=4_000_000.0,
                last_oracle_price=2000.0)
    base.update(kw)
    return GolemState(**base)


def by_name(results):
    return {r.probe: r for r in results}


def test_calm_tick_fires_nothing():
    res = run_probes(snap(), state(), T, False)
    assert {r.probe for r in res} == {"price_delta", "tvl_change", "position_health", "gas_price",
                                      "circuit_breaker", "feed_staleness", "kill_switch", "world_model_drift", "rsi", "credit_balance",
                                      "homeostatic_deviation"}
    assert anomalies_from(res) == []


@pytest.mark.parametrize("price,sev", [(2000 * 1.004, ProbeSeverity.NONE), (2000 * 1.006, ProbeSeverity.LOW),
                                       (2000 * 0.979, ProbeSeverity.HIGH)])
def test_price_delta_bands(price, sev):
    r = by_name(run_probes(snap(price=price, oracle=2000), state(), T, False))["price_delta"]
    assert r.severity == sev
    assert r.value == pytest.approx((price - 2000) / 2000 * 1e4, abs=1e-3)


def _feed(age_s: int, heartbeat_s: int | None = 3600, symbol: str = "WETH") -> FeedState:
    return FeedState(symbol=symbol, address="0xfeed", answer=2000.0, round_id=7, updated_at=1_700_000_000 - age_s,
                     age_s=age_s, heartbeat_s=heartbeat_s)


@pytest.mark.parametrize("age,sev", [(60, ProbeSeverity.NONE), (2700, ProbeSeverity.LOW), (3600, ProbeSeverity.LOW),
                                     (3601, ProbeSeverity.HIGH)])
def test_feed_staleness_grades_round_age_against_the_heartbeat(age, sev):
    s = snap().model_copy(update={"feeds": [_feed(age), _feed(30, 86400, "USDC")]})
    r = by_name(run_probes(s, state(), T, False))["feed_staleness"]
    assert r.severity == sev and r.value == pytest.approx(age / 3600, abs=1e-4)
    if sev is ProbeSeverity.HIGH:
        assert "STALE" in r.detail and "round 7" in r.detail
        assert any(a.probe == "feed_staleness" for a in anomalies_from([r]))


def test_feed_staleness_picks_the_oldest_feed_and_skips_unknown_heartbeats():
    s = snap().model_copy(update={"feeds": [_feed(10), _feed(90_000, 86400, "DAI"), _feed(10**6, None, "USDC")]})
    r = by_name(run_probes(s, state(), T, False))["feed_staleness"]
    assert r.severity is ProbeSeverity.HIGH and "DAI" in r.detail
    assert by_name(run_probes(snap(), state(), T, False))["feed_staleness"].detail.endswith("skipped")


def test_tvl_gas_health_circuit_killswitch_drift():
    s = state(gas_history=[2.0] * 5)
    r = by_name(run_probes(snap(tvl=4_000_000 * 0.94, gas=11.0, hf=1.1, oracle=2000 * 1.3), s, T, True))
    assert r["tvl_change"].severity == ProbeSeverity.HIGH and r["tvl_change"].value == pytest.approx(-6.0)
    assert r["gas_price"].severity == ProbeSeverity.HIGH and r["gas_price"].value == pytest.approx(5.5)
    assert r["position_health"].severity == ProbeSeverity.HIGH
    # pool 2000 vs oracle 2600: 2307.7 bps apart → halt band
    assert r["circuit_breaker"].severity == ProbeSeverity.HIGH
    assert r["kill_switch"].severity == ProbeSeverity.HIGH
    assert r["world_model_drift"].severity == ProbeSeverity.HIGH  # oracle +30 % vs last oracle
    anomalies = anomalies_from(list(r.values()))
    assert {a.probe for a in anomalies} >= {"tvl_change", "gas_price", "position_health", "circuit_breaker",
                                             "kill_switch", "world_model_drift"}
    assert all(a.severity != ProbeSeverity.NONE for a in anomalies)


def test_health_bands_and_no_debt():
    assert by_name(run_probes(snap(hf=1.4), state(), T, False))["position_health"].severity == ProbeSeverity.LOW
    r = by_name(run_probes(snap(hf=None), state(), T, False))["position_health"]
    assert r.severity == ProbeSeverity.NONE and math.isfinite(r.value) and "no debt" in r.detail


def test_short_history_skips_with_detail():
    r = by_name(run_probes(snap(), GolemState(golem_id="t"), T, False))
    for name in ("price_delta", "tvl_change", "gas_price", "world_model_drift", "rsi"):
        assert r[name].severity == ProbeSeverity.NONE
        assert "skipped" in r[name].detail


def test_rsi_extremes():
    falling = [2000 - 10 * i for i in range(20)]
    assert rsi(falling) == 0.0
    r = by_name(run_probes(snap(price=falling[-1] - 10), state(price_history=falling), T, False))["rsi"]
    assert r.severity == ProbeSeverity.HIGH and "oversold" in r.detail
    # 11 up moves of 1, 3 down moves of 1: RSI = 100 - 100/(1 + 11/3) ≈ 78.6 → Low (outside 30–70)
    mixed = [100.0]
    for i in range(14):
        mixed.append(mixed[-1] + (-1 if i in (0, 5, 10) else 1))
    value = rsi(mixed)
    assert value == pytest.approx(100 - 100 / (1 + 11 / 3))
    r = by_name(run_probes(snap(price=mixed[-1]), state(price_history=mixed[:-1]), T, False))["rsi"]
    assert r.severity == ProbeSeverity.LOW


def test_probes_are_fast():
    s, sn = state(), snap(price=1950)
    t0 = time.perf_counter()
    for _ in range(200):
        run_probes(sn, s, T, False)
    per_call_ms = (time.perf_counter() - t0) / 200 * 1000
    assert per_call_ms < 1.0  # all probes < 10 ms; ours are far below


# ---- regime ---------------------------------------------------------------------------------

def test_unknown_until_enough_history():
    assert detect_regime([2000.0] * 4, 0) == (MarketRegime.UNKNOWN, 0)


def test_trending_up_and_down():
    up = [2000 * (1.004 ** i) for i in range(30)]
    assert detect_regime(up, 0)[0] == MarketRegime.TRENDING_UP
    down = [2000 * (0.996 ** i) for i in range(30)]
    assert detect_regime(down, 0)[0] == MarketRegime.TRENDING_DOWN


def test_range_bound_needs_more_than_six_ticks():
    flat = [2000.0 + (1 if i % 2 else -1) for i in range(29)] + [2000.0]
    regime, run = detect_regime(flat, 0)
    assert run == 1 and regime == MarketRegime.UNKNOWN  # hysteresis: previous (unknown) holds
    regime, run = detect_regime(flat, 6)
    assert run == 7 and regime == MarketRegime.RANGE_BOUND
    # and a trending golem stays trending until the range has lasted > 6 ticks
    assert detect_regime(flat, 3, MarketRegime.TRENDING_DOWN)[0] == MarketRegime.TRENDING_DOWN


def test_volatile_when_recent_sigma_doubles():
    calm = [2000 * (1 + 0.0005 * (1 if i % 2 else -1)) for i in range(40)]
    wild = calm + [calm[-1] * f for f in (1.03, 0.99, 1.04, 0.97, 1.035)]
    assert detect_regime(calm, 0)[0] != MarketRegime.VOLATILE
    assert detect_regime(wild, 0)[0] == MarketRegime.VOLATILE


def test_steady_crash_is_trending_down_not_volatile():
    crash = [2000.0] * 20 + [2000 * 0.94 ** k for k in range(1, 7)]
    assert detect_regime(crash, 0)[0] == MarketRegime.TRENDING_DOWN


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=1.0, max_value=1e6), min_size=0, max_size=70), st.integers(0, 100))
def test_regime_total_and_run_consistent(prices, run):
    regime, new_run = detect_regime(prices, run)
    assert isinstance(regime, MarketRegime)
    assert new_run == 0 or new_run == run + 1
    assert detect_regime(prices, run) == (regime, new_run)  # deterministic


def test_quiet_noise_does_not_flip_trends():
    """A ±0.03 % wiggle has a tiny σ; without the band floor it would read as trending up/down in turn."""
    run, regime = 0, MarketRegime.UNKNOWN
    prices: list[float] = []
    seen = set()
    for i in range(40):
        prices.append(2000 * (1 + 0.0003 * ((i % 3) - 1)))
        regime, run = detect_regime(prices, run, regime)
        seen.add(regime)
    assert seen <= {MarketRegime.UNKNOWN, MarketRegime.RANGE_BOUND}
    assert regime == MarketRegime.RANGE_BOUND


def test_macd_divergence_flags_a_rise_on_fading_momentum():
    from golem.cognition.probes import macd_divergence, macd_histogram

    assert macd_histogram([100.0] * 20) is None
    assert not macd_divergence([100.0 + i for i in range(40)])  # steady rise: momentum agrees
    # a steep rally, then a crawl higher: price still up over 14 ticks, momentum (histogram) negative
    fading = [100.0 + 5 * i for i in range(30)] + [245.0 + 0.5 * i for i in range(14)]
    assert fading[-1] > fading[-15] and macd_histogram(fading) < 0
    assert macd_divergence(fading)
