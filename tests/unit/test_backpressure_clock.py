"""FSM backpressure and the adaptive clock: gamma pulse, budget throttling."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golem.cognition.backpressure import dequeue, enqueue, merge_into_observation
from golem.cognition.clock import (
    budget_throttle,
    gamma_interval_seconds,
    gamma_pulse,
    predict_after_tick,
    theta_interval_seconds,
)
from golem.cognition.fold import fold_tick_result
from golem.cognition.system1 import synthetic_snapshot
from golem.models.config import ClockSection, HeartbeatSection, ProbeThresholds
from golem.models.enums import ProbeSeverity
from golem.models.observation import ProbeResult
from golem.models.state import GolemState, PendingTick, TickQueue
from golem.models.tick import TickResult

PT = ProbeThresholds()
SEV = list(ProbeSeverity)


def pr(name, sev, value=0.0):
    return ProbeResult(probe=name, severity=sev, value=value)


def trig(n, *probes):
    return PendingTick(trigger=f"theta-{n}", probes=list(probes))


# ---- backpressure ------------------------------------------------------------------------------

def test_warning_at_depth_2_and_drop_at_depth_3():
    q = TickQueue()
    q, ev = enqueue(q, trig(1, pr("price_delta", ProbeSeverity.HIGH, 1)))
    assert ev == []
    q, ev = enqueue(q, trig(2, pr("price_delta", ProbeSeverity.LOW, 2)))
    assert [e.kind for e in ev] == ["heartbeat.queue_warning"] and ev[0].depth == 2
    q, ev = enqueue(q, trig(3))
    assert [e.kind for e in ev] == ["heartbeat.queue_warning"] and len(q.pending) == 3
    q, ev = enqueue(q, trig(4, pr("gas_price", ProbeSeverity.LOW)))
    assert [e.kind for e in ev] == ["heartbeat.tick_dropped", "heartbeat.queue_warning"]
    assert ev[0].trigger == "theta-1" and len(q.pending) == 3 and q.dropped == 1
    # the dropped tick's High price probe rides along into the next executing tick
    q, nxt = dequeue(q)
    assert nxt.trigger == "theta-2"
    merged = {p.probe: p for p in nxt.probes}
    assert merged["price_delta"].severity == ProbeSeverity.HIGH and merged["price_delta"].value == 1
    assert q.carried_probes == [] and len(q.pending) == 2


def test_dequeue_empty_and_merge_into_observation_keeps_order():
    assert dequeue(TickQueue()) == (TickQueue(), None)
    own = [pr("a", ProbeSeverity.NONE), pr("b", ProbeSeverity.HIGH)]
    out = merge_into_observation(own, [pr("a", ProbeSeverity.LOW), pr("c", ProbeSeverity.LOW)])
    assert [(p.probe, p.severity) for p in out] == [("a", ProbeSeverity.LOW), ("b", ProbeSeverity.HIGH),
                                                     ("c", ProbeSeverity.LOW)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(SEV)), max_size=3)),
                max_size=30))
def test_queue_never_exceeds_3_and_no_severity_is_lost(ops):
    """Against a reference model: the executing tick sees, per probe, the worst severity of its own
    probes and of every tick dropped since the last tick started."""
    q = TickQueue()
    model_pending: list[dict[str, int]] = []
    model_carried: dict[str, int] = {}
    for op in ops:
        if op is None:  # a tick starts
            q, nxt = dequeue(q)
            if not model_pending:
                assert nxt is None
                continue
            head = model_pending.pop(0)
            expect = dict(model_carried)
            for k, v in head.items():
                expect[k] = max(expect.get(k, -1), v)
            assert {p.probe: p.severity.rank for p in nxt.probes} == expect
            model_carried = {}
            continue
        mine: dict[str, int] = {}
        for n, sev in op:
            mine[n] = max(mine.get(n, -1), sev.rank)
        probes = [pr(n, SEV[r]) for n, r in mine.items()]
        q, events = enqueue(q, PendingTick(trigger="t", probes=probes))
        if len(model_pending) >= 3:
            for k, v in model_pending.pop(0).items():
                model_carried[k] = max(model_carried.get(k, -1), v)
            assert events[0].kind == "heartbeat.tick_dropped"
        model_pending.append(mine)
        assert len(q.pending) == len(model_pending) <= 3
        assert (events[-1].kind == "heartbeat.queue_warning") == (len(q.pending) >= 2) if events else len(q.pending) < 2
    with pytest.raises(ValueError, match="max_pending"):
        enqueue(q, PendingTick(trigger="t"), max_pending=0)


# ---- clock -------------------------------------------------------------------------------------

def test_budget_throttle_ramps_between_warning_and_soft_cap():
    assert budget_throttle(0.5, 0.7, 0.9) == 1.0
    assert budget_throttle(0.8, 0.7, 0.9) == pytest.approx(1.5)
    assert budget_throttle(0.95, 0.7, 0.9) == 2.0
    assert budget_throttle(0.8) == 1.0  # without a warning line: the old step at the soft cap
    assert budget_throttle(float("inf"), 0.7, 0.9) == 2.0


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 3), st.floats(0, 3))
def test_throttle_is_monotone_and_theta_stays_in_bounds(f1, f2):
    lo, hi = sorted([f1, f2])
    assert budget_throttle(lo, 0.7, 0.9) <= budget_throttle(hi, 0.7, 0.9)
    clock = ClockSection()
    assert 30 <= theta_interval_seconds(GolemState(golem_id="g"), clock, hi, 0.9, 0.7) <= 120


def test_fold_throttles_theta_from_the_warning_line():
    clock, hb = ClockSection(), HeartbeatSection()
    s = GolemState(golem_id="g", spend_day="2025-01-01", daily_spend_usd=8.0)  # 80 %: halfway up the ramp
    res = TickResult(tick=0, tier="T0", regime="unknown", prediction_error=0, threshold=0.3, price=2000,
                     gas_price_gwei=1, tvl=1, oracle_price=2000)
    s = fold_tick_result(s, res, "2025-01-01T12:00:00+00:00", clock, hb)
    assert s.theta_seconds == pytest.approx(60 * 1.5)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 1000), st.floats(1.0, 10.0))
def test_gamma_interval_within_5_to_15(violations, budget):
    g = gamma_interval_seconds(violations, budget)
    assert 5.0 <= g <= 15.0
    assert gamma_interval_seconds(violations + 1) <= gamma_interval_seconds(violations)


def test_gamma_resolves_predictions_and_speeds_up_on_violations():
    s = GolemState(golem_id="g", tick=3)
    s = predict_after_tick(s, synthetic_snapshot(2000.0, 3), now=100.0, thresholds=PT)
    assert {(p.kind, p.subject) for p in s.gamma.pending} == {("price", "pool"), ("gas", "chain"),
                                                              ("health", "lending:golem")}
    # not due yet: nothing resolves
    s1, rep = gamma_pulse(s, synthetic_snapshot(2100.0, 3), now=101.0, thresholds=PT)
    assert rep.resolutions == [] and s1.gamma.resolved == 0
    # due: a 0.2 % move is within the 0.5 % tolerance, 15 s interval
    s2, rep = gamma_pulse(s, synthetic_snapshot(2004.0, 3), now=116.0, thresholds=PT)
    price = next(r for r in rep.resolutions if r.kind == "price")
    assert price.residual == pytest.approx(0.002) and not price.violation
    assert rep.violations == 0 and rep.interval_seconds == 15.0 and s2.pad.arousal == 0.0
    # a 6 % crash violates price and health: faster gamma, higher arousal, bias learned
    s3, rep = gamma_pulse(s2, synthetic_snapshot(2004.0 * 0.94, 3), now=131.0, thresholds=PT)
    kinds = {r.kind for r in rep.resolutions if r.violation}
    assert kinds == {"price", "health"}
    assert rep.interval_seconds == pytest.approx(15 / 1.6) and s3.pad.arousal == pytest.approx(0.2)
    assert s3.gamma.residual_bias["price"] < 0 and s3.gamma.violations == 2
    # the next price prediction is corrected by the residual bias (ResidualCorrector)
    nxt = next(p for p in s3.gamma.pending if p.kind == "price")
    assert nxt.expected < 2004.0 * 0.94 and nxt.due_at == pytest.approx(131.0 + rep.interval_seconds)


def test_a_trigger_that_fell_due_while_dreaming_is_dropped_as_such():
    from golem.cognition.backpressure import DREAM_TRIGGER

    queue, kinds = TickQueue(), []
    for i in range(5):
        queue, events = enqueue(queue, PendingTick(trigger=DREAM_TRIGGER, enqueued_at=float(i)))
        kinds += [e.kind for e in events if "dropped" in e.kind]
    assert kinds == ["heartbeat.tick_dropped_during_dream"] * 2
    assert (len(queue.pending), queue.dropped, queue.dropped_during_dream) == (3, 2, 2)
    queue, events = enqueue(queue, PendingTick(trigger="theta", enqueued_at=9.0))  # still a dream trigger pushed out
    assert events[0].kind == "heartbeat.tick_dropped_during_dream" and queue.dropped_during_dream == 3
    for i in range(3):
        queue, events = enqueue(queue, PendingTick(trigger="theta", enqueued_at=10.0 + i))
    assert events[0].kind == "heartbeat.tick_dropped" and (queue.dropped, queue.dropped_during_dream) == (6, 5)
