"""A strategy judged by what it achieved (golem.safety.experience): each finding from the window's records, the
restriction it sets, the owner's acknowledgment, a new STRATEGY.md starting over."""

from __future__ import annotations

import pytest

from golem.models.config import ViabilitySection
from golem.models.enums import ActionStatus, MarketRegime, Tier
from golem.models.observation import ChainSnapshot, Observation, PoolState
from golem.models.record import ActionRecord, DecisionCycleRecord, OutcomeRecord
from golem.safety.experience import ViabilityStore, assess

CFG = ViabilitySection()
IMPACT_CLIP = ("clipped from 30 ($60,000.00) to 12 ($24,000.00) by max_price_impact_bps: price impact ≤ 100 bps "
               "against the pair's reserve")


def _obs() -> Observation:
    pool = PoolState(address="0x" + "1" * 40, token0="WETH", token1="USDC", reserve0=100.0, reserve1=200_000.0, tvl=400_000.0,
                     price=2000.0)
    return Observation(snapshot=ChainSnapshot(chain_id=31337, block_number=1, block_timestamp=1, gas_price_gwei=1.0,
                                              pool=pool, oracle_price=2000.0))


def _rec(tick: int, actions: list[ActionRecord] = (), pnl: float | None = None, inference: float = 0.0):
    return DecisionCycleRecord(
        tick=tick, timestamp="2026-11-27T00:00:00+00:00", golem_id="g", observation=_obs(),
        regime=MarketRegime.RANGE_BOUND, tier=Tier.T1, prediction_error=0.1, deliberation_threshold=0.3, gating_reason="t",
        actions=list(actions), inference_cost=inference,
        outcome=OutcomeRecord(verified=True, pnl_impact=pnl) if pnl is not None else None)


def _act(tool: str = "swap", status: ActionStatus = ActionStatus.EXECUTED, gas: float = 0.0, **kw) -> ActionRecord:
    return ActionRecord(action_index=0, action_type="write", tool_name=tool, status=status, gas_cost=gas, **kw)


def test_a_healthy_window_has_no_finding():
    recs = [_rec(t, [_act(gas=0.5)], pnl=20.0) for t in range(10)] + [_rec(t) for t in range(10, 100)]
    a = assess(recs, CFG, tick=100)
    assert a.findings == [] and a.status == "ok" and a.ticks == 100


def test_gas_and_inference_above_what_the_trades_returned_is_critical():
    # four trades, $2 of gas each, each returning $0.50 before gas: $2 of returns against $8 of gas + $1 inference
    recs = [_rec(t, [_act(gas=2.0)], pnl=0.5 - 2.0, inference=0.25) for t in range(4)]
    a = assess(recs, CFG, tick=10)
    (f,) = a.findings
    assert f.kind == "costs_exceed_returns" and f.severity == "critical" and a.status == "STRATEGY_UNVIABLE"
    assert f.figures["gas_usd"] == 8.0 and f.figures["inference_usd"] == 1.0 and f.figures["gross_return_usd"] == 2.0
    # hindsight: the same trades settled k ticks later returned $5 each: they paid for themselves
    assert assess(recs, CFG, tick=10, settled={t: 5.0 - 2.0 for t in range(4)}).findings == []
    # below the minimum cost, or with fewer trades than min_trades, nothing is judged
    assert assess(recs[:2], CFG, tick=10).findings == []
    assert assess(recs, CFG.model_copy(update={"min_cost_usd": 50.0}), tick=10).findings == []


def test_protective_actions_are_insurance_not_trades():
    recs = [_rec(t, [_act("repay", gas=3.0, protective="health factor 1.4 under the 1.6 line")], pnl=-3.0)
            for t in range(5)]
    assert assess(recs, CFG, tick=10).findings == []


def test_swaps_clipped_or_refused_for_price_impact_mean_thin_liquidity():
    recs = [_rec(1, [_act(clipped=IMPACT_CLIP)], pnl=-1.0),
            _rec(2, [_act(status=ActionStatus.BLOCKED, block_reason="policy: price impact 340 bps against the "
                          "pair's 100 WETH reserve exceeds max_price_impact_bps 100")]),
            _rec(3, [_act(status=ActionStatus.FAILED, block_reason="reverted: UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT")]),
            _rec(4, [_act(gas=0.1)], pnl=3.0)]
    (f,) = [f for f in assess(recs, CFG, tick=5).findings if f.kind == "thin_liquidity"]
    assert f.severity == "critical" and f.figures == {"thin": 3.0, "swaps": 4.0, "share": 0.75}
    # the same three among many clean swaps: a warning
    clean = [_rec(t, [_act(gas=0.1)], pnl=3.0) for t in range(10, 20)]
    (w,) = [f for f in assess(recs + clean, CFG, tick=30).findings if f.kind == "thin_liquidity"]
    assert w.severity == "warning"


def test_a_cage_refusing_most_proposals_is_a_warning_naming_the_reason():
    blocked = _act("supply", ActionStatus.BLOCKED, block_reason="policy: trade value $9,000.00 exceeds max_trade_size_usd")
    recs = [_rec(t, [blocked]) for t in range(6)] + [_rec(7, [_act("repay", gas=0.1)], pnl=0.0)]
    (f,) = assess(recs, CFG, tick=8).findings
    assert f.kind == "repeated_refusals" and f.severity == "warning" and "(most often, 6×: policy: trade value … exceeds max_trade_size_usd)" in f.message
    assert assess(recs[:4], CFG, tick=8).findings == []  # under `refusals`


def test_a_critical_finding_restricts_until_acknowledged_and_a_new_strategy_starts_over(tmp_path):
    store = ViabilityStore(tmp_path / "viability.json")
    bad = assess([_rec(t, [_act(gas=2.0)], pnl=-1.5) for t in range(4)], CFG, tick=10)
    state, fresh = store.record(bad, "sha-1")
    assert [f.kind for f in fresh] == ["costs_exceed_returns"]
    assert store.load().restriction("sha-1").startswith("costs_exceed_returns: gas and inference")
    store.notified(fresh)
    assert store.record(bad, "sha-1")[1] == []  # the operator is told once
    assert store.load().restriction("sha-2") is None  # the restriction is of the file it judged
    assert [f.kind for f in store.acknowledge("2026-11-27T00:00:00Z", "known: thin test market")] == ["costs_exceed_returns"]
    assert store.load().restriction("sha-1") is None and store.load().acknowledged_note == "known: thin test market"
    assert store.record(bad, "sha-1")[0].restriction("sha-1") is None  # still acknowledged at the next cycle
    state, fresh = store.record(bad, "sha-2")  # a new STRATEGY.md: judged afresh, nothing acknowledged
    assert state.restriction("sha-2") is not None and fresh


def test_a_damaged_state_file_says_what_to_do(tmp_path):
    path = tmp_path / "viability.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="delete it"):
        ViabilityStore(path).load()
