"""Predict-then-compare, Reflexion, credit, the ExpeL Curator and learned PLAYBOOK rules."""

from __future__ import annotations

from golem.grimoire.playbook.heuristics import HeuristicStore
from golem.grimoire.playbook.compile import rewrite_playbook
from golem.inference.strategy import parse_strategy, rules_in
from golem.learning import curator
from golem.learning.expectation import expect
from golem.learning.ledger import LearningLedger, OutcomeRow
from golem.learning.reflexion import credit_for, reflect_on, verdict_of
from golem.models.enums import ActionStatus, MarketRegime, Tier
from golem.models.record import (
    ActionRecord,
    DecisionCycleRecord,
    DeliberationRecord,
    OutcomeRecord,
    RetrievedEntrySummary,
    RuleApplied,
)
from golem.models.tick import ProposedAction
from tests.unit.test_offline_deliberator import EXAMPLE, decide, decide_input

OWNER = "WHEN health_factor < 1.6 THEN repay 25% debt"


def _record(outcome: OutcomeRecord, rules=(), retrieved=(), tick=5) -> DecisionCycleRecord:
    inp = decide_input(hf=1.5, collateral=10.0, debt=8000.0, regime=MarketRegime.VOLATILE)
    return DecisionCycleRecord(
        tick=tick, timestamp="2026-01-01T00:00:00+00:00", golem_id="t", observation=inp.observation,
        regime=MarketRegime.VOLATILE, tier=Tier.T2, prediction_error=0.5, deliberation_threshold=0.3, gating_reason="test",
        deliberation=DeliberationRecord(model="offline-deliberator", tier=Tier.T2, rules_applied=list(rules)),
        actions=[ActionRecord(action_index=0, action_type="repay", tool_name="repay", status=ActionStatus.EXECUTED)],
        outcome=outcome, retrieved_entries=list(retrieved), episodes_written=[f"ep-{tick}"],
    )


REPAY = [ProposedAction(action_index=0, tool="repay", arguments={"amount": 2000.0})]


def test_expectation_projects_health_factor_from_the_pre_tick_state():
    obs = decide_input(hf=1.5, collateral=10.0, debt=8000.0).observation
    e = expect(REPAY, obs)
    assert e.health_factor_before == 1.5 and round(e.health_factor_after, 6) == 2.0  # HF ∝ 1/debt: 8000 → 6000
    assert round(expect(REPAY, obs, scale=0.5).health_factor_after, 4) == round(1.5 * 8000 / 7000, 4)
    swap = expect([ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC",
                                                                           "amount_in": 1.0})], obs)
    assert swap.value_change_usd < 0 and swap.slippage_bps > 0 and swap.health_factor_after == 1.5


async def test_offline_decision_states_rule_and_origin():
    d = await decide(decide_input(hf=1.5))
    assert [(r.rule, r.origin, r.entry_id) for r in d.record.rules_applied] == [("STRATEGY.md:21", "owner", None)]


def test_verdict_follows_rev4():
    assert verdict_of(OutcomeRecord(verified=True, pnl_impact=-1.0, health_factor_before=1.5,
                                    health_factor_after=1.9)) == "positive"  # risk metric improved
    assert verdict_of(OutcomeRecord(verified=True, pnl_impact=-1.0, health_factor_before=1.5,
                                    health_factor_after=1.5)) == "negative"
    assert verdict_of(OutcomeRecord(verified=False, pnl_impact=5.0), failed=True) == "negative"
    assert verdict_of(OutcomeRecord(verified=False, pnl_impact=5.0, invariant_violations=["x"])) == "negative"
    # waiting for confirmations is not a failure: judged on the re-read state
    assert verdict_of(OutcomeRecord(verified=False, health_factor_before=1.5, health_factor_after=1.6)) == "positive"
    assert verdict_of(OutcomeRecord(verified=True)) == "neutral"


def test_reflexion_carries_the_numbers_and_counterfactuals():
    rec = _record(OutcomeRecord(verified=True, pnl_impact=-0.4, health_factor_before=1.5, health_factor_after=1.95))
    obs = rec.observation
    r = reflect_on(rec, expect(REPAY, obs), expect(REPAY, obs, scale=0.5))
    assert r.verdict == "positive" and round(r.health_factor_error, 3) == -0.05 and r.value_error_usd == -0.4
    assert [c.label for c in r.counterfactuals] == ["not acting", "half size"]
    assert r.counterfactuals[0].health_factor_after == 1.5 and r.counterfactuals[1].value_change_usd == -0.2
    assert "expected health factor 2.000, verified 1.950" in r.insight and "half size about 1.671" in r.insight
    held = rec.model_copy(update={"actions": []})
    assert reflect_on(held, expect(REPAY, obs), expect(REPAY, obs, scale=0.5)) is None


def test_credit_reaches_workspace_entries_and_learned_rules():
    rules = [RuleApplied(action_index=0, rule="PLAYBOOK.md:7", origin="learned", entry_id="h-0123456789abcdef"),
             RuleApplied(action_index=1, rule="STRATEGY.md:22", origin="owner")]
    retrieved = [RetrievedEntrySummary(id="e1", source="entry", summary="s", score=1.0),
                 RetrievedEntrySummary(id="ep1", source="episode", summary="s", score=1.0)]
    rec = _record(OutcomeRecord(verified=True), rules, retrieved)
    credit = credit_for(rec, "negative")
    assert [(c.entry_id, c.kind, c.delta) for c in credit] == [("e1", "entry", -1), ("h-0123456789abcdef", "heuristic", -1)]
    assert credit_for(rec, "neutral") == []


def test_ledger_credits_once_per_tick_and_run(tmp_path):
    ledger = LearningLedger(tmp_path / "learning.sqlite")
    rec = _record(OutcomeRecord(verified=True, health_factor_before=1.5, health_factor_after=1.9),
                  [RuleApplied(action_index=0, rule="PLAYBOOK.md:7", origin="learned", entry_id="h-1", text=OWNER)])
    r = reflect_on(rec, expect(REPAY, rec.observation), expect(REPAY, rec.observation, scale=0.5))
    credit = credit_for(rec, r.verdict)
    assert ledger.record(rec, r, credit) == credit and ledger.record(rec, r, credit) == []  # a retried reflect
    assert ledger.uncurated(10) == {"h-1": 1}
    ledger.close_cycle(10, {"tick": 10})
    assert ledger.uncurated(10) == {} and ledger.cycle(10) == {"tick": 10}


def _outcomes(n, verdict="positive", regime="volatile", text=OWNER):
    return [OutcomeRow(tick=i, regime=regime, episode_id=f"ep-{regime}-{i}", verdict=verdict,
                       rules=[{"rule": "STRATEGY.md:22", "origin": "owner", "tool": "repay", "text": text}])
            for i in range(n)]


def test_curator_adds_a_rule_only_from_five_supporting_outcomes():
    assert [op.op for op in curator.plan(50, _outcomes(4), [], {}, EXAMPLE).operations] == []
    report = curator.plan(50, _outcomes(5), [], {}, EXAMPLE)
    (op,) = report.operations
    # the owner's threshold moved 10 % (the Curator's bound), scoped to the regime it paid in
    assert op.op == "ADD" and op.text == "WHEN health_factor < 1.76 AND regime == volatile THEN repay 25% debt"
    assert len(op.support) == 5


def test_learned_rule_that_would_widen_a_must_limit_is_refused():
    greedy = "WHEN health_factor < 1.6 THEN swap 40% WETH to USDC"  # MUST NOT swap more than 30% WETH
    (op,) = curator.plan(50, _outcomes(6, text=greedy), [], {}, EXAMPLE).operations
    assert op.op == "REFUSED" and "widen a limit" in op.reason and "30% WETH" in op.reason
    risky = "WHEN health_factor < 1.6 THEN withdraw 5% collateral"
    (op,) = curator.plan(50, _outcomes(6, text=risky), [], {}, EXAMPLE).operations
    assert op.op == "REFUSED" and "only reduce risk" in op.reason


def test_next_curator_followup_focuses_distillation():
    outcomes = _outcomes(5, regime="volatile") + _outcomes(5, regime="trending_down")
    plain = curator.plan(50, outcomes, [], {}, EXAMPLE)
    assert sorted(op.text.split("regime == ")[1].split()[0] for op in plain.operations) == ["trending_down", "volatile"]
    focused = curator.plan(50, outcomes, [], {}, EXAMPLE, [("f-1", "next time focus on the trending down regime")])
    assert [op.op for op in focused.operations] == ["ADD"] and "trending_down" in focused.operations[0].text
    assert focused.focus == "distillation focused on trending_down (follow-up f-1)"


def test_downvoted_rule_leaves_playbook_and_is_retired_at_zero_importance(tmp_path):
    store = HeuristicStore(tmp_path / "heuristics.sqlite")
    report = curator.apply(curator.plan(50, _outcomes(5), [], {}, EXAMPLE), store)
    hid = report.operations[0].entry_id
    assert store.get(hid).status == "active" and round(store.get(hid).confidence, 2) == 0.9
    path = tmp_path / "PLAYBOOK.md"
    rewrite_playbook(store, path, tick=50)
    (learned,) = rules_in(path.read_text(), "PLAYBOOK.md", EXAMPLE)
    assert learned.entry_id == hid and learned.text.startswith("WHEN health_factor < 1.76")
    # bad outcomes: net -2 → DOWNVOTE (0.9 - 0.3 = 0.6, still in: hysteresis) and EDIT 10 % back
    r2 = curator.apply(curator.plan(100, [], store.list(), {hid: -2}, EXAMPLE), store)
    assert [op.op for op in r2.operations] == ["DOWNVOTE", "EDIT"]
    h = store.get(hid)
    # 0.9 - 2 × 0.15 = 0.6 would keep it in PLAYBOOK.md (hysteresis), but importance 2 - 2 = 0 retires it:
    # the row is kept for the audit and leaves PLAYBOOK.md
    assert round(h.confidence, 2) == 0.6 and h.importance == 0
    assert h.status == "retired" and h.retired_tick == 100 and r2.retired == [hid]
    assert h.text.startswith("WHEN health_factor < 1.584")  # EDIT: 1.76 moved 10 % back
    rewrite_playbook(store, path, tick=100)
    assert rules_in(path.read_text(), "PLAYBOOK.md", EXAMPLE) == [] and store.get(hid) is not None


def test_confidence_below_0_4_demotes_from_playbook(tmp_path):
    store = HeuristicStore(tmp_path / "heuristics.sqlite")
    h = curator.apply(curator.plan(50, _outcomes(5), [], {}, EXAMPLE), store).operations[0]
    store.vote(h.entry_id, +5, 60)  # importance 7, confidence 1.0
    after = store.vote(h.entry_id, -4, 70)  # 1.0 - 0.6 = 0.4: still in (not below 0.4)
    assert after.status == "active" and round(after.confidence, 2) == 0.4 and after.importance == 3
    after = store.vote(h.entry_id, -1, 80)  # 0.25 < 0.4: out of PLAYBOOK.md, still a candidate row
    assert after.status == "candidate" and round(after.confidence, 2) == 0.25 and after.importance == 2
    assert rewrite_playbook(store, tmp_path / "PLAYBOOK.md", tick=80).heuristics == 0


def _series(n=20, every=4, lag=2):
    """Records: an oracle anomaly every `every` ticks, the health factor falling `lag` ticks after each."""
    from golem.models.enums import ProbeSeverity
    from golem.models.observation import Anomaly
    base = _record(OutcomeRecord(verified=True))
    out, hf = [], 2.0
    for t in range(1, n + 1):
        anomalies = [Anomaly(probe="oracle_deviation", severity=ProbeSeverity.HIGH, description="gap")] if t % every == 1 else []
        if t % every == 1 + lag:
            hf *= 0.95
        snap = base.observation.snapshot.model_copy(update={"positions": [
            p.model_copy(update={"health_factor": hf}) for p in base.observation.snapshot.positions]})
        obs = base.observation.model_copy(update={"snapshot": snap, "anomalies": anomalies})
        out.append(base.model_copy(update={"tick": t, "observation": obs, "anomalies": anomalies, "reflexion": None}))
    return out


def test_causal_edges_from_anomalies_followed_by_effects():
    from golem.learning.causal import causal_edges, events_of
    edges = {(e.source, e.target): e for e in causal_edges(events_of(_series()))}
    e = edges[("anomaly:oracle_deviation", "effect:health_factor_fell")]
    assert e.lag == 2 and e.weight == 1.0 and e.evidence == [1, 5, 9, 13, 17]
    # fewer than 3 occurrences (the grouping rule) make no edge
    assert causal_edges(events_of(_series(n=8))) == []


def test_cybernetics_loop2_shifts_tokens_bounded_and_loop3_resets_halfway(tmp_path):
    from golem.deliberators import HomeContext
    from golem.layout import DataLayout
    from golem.learning import cybernetics
    from golem.learning.loop import tune_context

    defaults = {"T1": {"invariants": 400, "strategy": 600, "retrieved": 600, "observation": 500}}
    ledger = LearningLedger(tmp_path / "grimoire" / "learning.sqlite")
    policy = ledger.context_policy(defaults)
    assert policy.revision == 0 and policy.allocations == defaults
    # retrieved memory in the workspace went with good outcomes; ticks without it went badly
    samples = [cybernetics.ContextSample(tick=i, tier="T1", quality=1.0 if i % 2 else 0.0,
                                         categories={"invariants": 50, "observation": 80, "retrieved": 120 if i % 2 else 0})
               for i in range(10)]
    assert cybernetics.retune(policy, samples[:4], 50) is None  # fewer than 5 samples: nothing moves
    new = cybernetics.retune(policy, samples, 50)
    # 10 % of the loser's allocation (observation 500 → 450) goes to the winner (retrieved 600 → 650)
    assert new.revision == 1 and new.allocations["T1"]["observation"] == 450 and new.allocations["T1"]["retrieved"] == 650
    assert new.allocations["T1"]["invariants"] == 400 and "retrieved" in new.reason
    ledger.save_policy(new)
    assert HomeContext(None, tmp_path).allocations(Tier.T1) == new.allocations["T1"]  # the LLM workspace reads it
    # the worker hands its DataLayout down (select_deliberator(data_dir=layout)), not a path: same answer
    assert HomeContext(None, DataLayout(tmp_path)).allocations(Tier.T1) == new.allocations["T1"]
    # loop 3: a regime change moves the allocations halfway back and halves what loop 1 learned
    for s in samples:
        ledger.add_context_sample(s.tick, "", s)
    rec = _record(OutcomeRecord(verified=True), tick=60).model_copy(update={"regime": MarketRegime.TRENDING_DOWN})
    assert tune_context(rec, ledger, defaults, regime_changed=True) == 2
    after = ledger.context_policy(defaults)
    assert after.allocations["T1"]["observation"] == 475 and after.allocations["T1"]["retrieved"] == 625
    assert {s.weight for s in ledger.context_samples()} == {0.5}


async def test_claude_words_the_insight_t1_routine_t2_anomalous_numbers_kept():
    from golem.learning.reflexion_llm import worded
    from tests.unit.inference_fakes import FakeMessagesAPI, message, router, tool_use

    rec = _record(OutcomeRecord(verified=True, pnl_impact=-0.4, health_factor_before=1.5, health_factor_after=1.95))
    r = reflect_on(rec, expect(REPAY, rec.observation), expect(REPAY, rec.observation, scale=0.5))
    api = FakeMessagesAPI(
        message([tool_use("reflect", {"insight": "Repaying early in volatile markets  bought  safety cheaply."})],
                model="claude-haiku-4-5"),
        message([tool_use("reflect", {"deviation_explained": "no insight field"})]),
    )
    rt = router(api)
    worded_r, cost = await worded(r, rec, router=rt, regime_changed=False, daily_spend=0.0)
    assert api.requests[0]["model"] == rt.config.t1_model and cost > 0  # routine outcome → T1
    assert worded_r.model == rt.config.t1_model
    assert worded_r.insight == f"Repaying early in volatile markets bought safety cheaply. Numbers: {r.insight}"
    # a regime transition goes to T2; an answer without an insight leaves the deterministic text
    again, _ = await worded(r, rec, router=rt, regime_changed=True, daily_spend=0.0)
    assert api.requests[1]["model"] == rt.config.t2_model
    assert again.insight == r.insight and again.model.startswith("offline (")
    assert (await worded(r, rec, router=None, regime_changed=False, daily_spend=0.0)) == (r, 0.0)


async def test_conservation_phase_words_reflexion_on_the_t1_model_only():
    """Conservation uses the T1 model for all Reflexion: an anomalous outcome that would go to T2
    goes to T1 once the golem is in Conservation or below."""
    from golem.learning.reflexion_llm import worded
    from golem.models.enums import BehavioralPhase
    from tests.unit.inference_fakes import FakeMessagesAPI, message, router, tool_use

    rec = _record(OutcomeRecord(verified=True, pnl_impact=-0.4, health_factor_before=1.5, health_factor_after=1.95))
    r = reflect_on(rec, expect(REPAY, rec.observation), expect(REPAY, rec.observation, scale=0.5))
    api = FakeMessagesAPI(*[message([tool_use("reflect", {"insight": "ok"})])] * 2)
    rt = router(api)
    await worded(r, rec, router=rt, regime_changed=True, daily_spend=0.0)
    assert api.requests[0]["model"] == rt.config.t2_model  # Thriving: a regime change is T2
    conserving = rec.model_copy(update={"phase": BehavioralPhase.CONSERVATION})
    await worded(r, conserving, router=rt, regime_changed=True, daily_spend=0.0)
    assert api.requests[1]["model"] == rt.config.t1_model


def test_causal_link_probe_surprise_from_learned_edges():
    from golem.learning.causal import TickEvents, probe_causal_link
    from golem.models.enums import ProbeSeverity

    edges = {("anomaly:oracle", "effect:price_fell"): {"weight": 0.15, "lag": 1.0, "evidence": [1]},
             ("anomaly:gas", "effect:health_factor_fell"): {"weight": 0.8, "lag": 2.0, "evidence": [1]}}
    hist = [TickEvents(tick=5, causes=["anomaly:oracle", "anomaly:gas"]), TickEvents(tick=6)]
    # a weak edge (0.15) that held: surprise 0.85 → Low; the strong one's window is still open
    held = probe_causal_link(hist, TickEvents(tick=7, effects=["effect:price_fell"]), edges)
    assert held.severity == ProbeSeverity.LOW and held.value == 0.85 and "held: anomaly:oracle" in held.detail
    # an edge of 0.6 failing is no surprise worth a probe (it fails 40 % of the time)
    edges[("anomaly:gas", "effect:health_factor_fell")]["weight"] = 0.6
    quiet = probe_causal_link(hist + [TickEvents(tick=t) for t in (7, 8, 9)], TickEvents(tick=10), edges)
    assert quiet.severity == ProbeSeverity.NONE and quiet.value == 0.6
    edges[("anomaly:gas", "effect:health_factor_fell")]["weight"] = 0.8
    # at tick 10 the gas edge's window closes without its effect: invalidated, High, surprise = its weight
    late = probe_causal_link(hist + [TickEvents(tick=t) for t in (7, 8, 9)], TickEvents(tick=10), edges)
    assert late.severity == ProbeSeverity.HIGH and late.value == 0.8 and "invalidated: anomaly:gas" in late.detail
    # an effect after a cause with no edge between them: a new link candidate, named, not fired
    new = probe_causal_link(hist, TickEvents(tick=7, effects=["effect:acted_badly"]), edges)
    assert new.severity == ProbeSeverity.NONE and "new link candidate: anomaly:gas at tick 5" in new.detail


def test_a_loss_the_evaluator_rejected_weighs_double_from_credit_to_settlement_to_the_curator(tmp_path):
    from golem.grimoire.semantic.store import SemanticStore
    from golem.grimoire.store.embeddings import default_embedder
    from golem.learning.loop import learn_from_outcome
    from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry

    rules = [RuleApplied(action_index=0, rule="PLAYBOOK.md:7", origin="learned", entry_id="h-1", text=OWNER)]
    retrieved = [RetrievedEntrySummary(id="e1", source="entry", summary="s", score=1.0)]
    lost = OutcomeRecord(verified=True, pnl_impact=-5.0, health_factor_before=1.5, health_factor_after=1.5)
    rejected = _record(lost, rules, retrieved).model_copy(update={"evaluation": {"evaluator_verdict": "bad"}})
    approved = _record(lost, rules, retrieved).model_copy(update={"evaluation": {"evaluator_verdict": "good"}})
    offline = _record(lost, rules, retrieved).model_copy(update={"evaluation": {"external_verdict": "bad",
                                                                                "final_verdict": "bad"}})
    assert [c.delta for c in credit_for(rejected, "negative")] == [-2, -2]
    assert [c.delta for c in credit_for(approved, "negative")] == [-1, -1]
    assert [c.delta for c in credit_for(offline, "negative")] == [-1, -1]  # the metrics are the outcome, not a 2nd view
    assert [c.delta for c in credit_for(rejected, "positive")] == [1, 1]
    # the semantic entry in the workspace is weakened twice; the ledger keeps the weight for the Curator
    sem = SemanticStore(tmp_path / "s.sqlite", tmp_path / "s.lance", default_embedder())
    sem.put_many([GrimoireEntry(id="e1", category=EntryType.INSIGHT, content="repay early in a volatile market",
                                confidence=0.8, source=EntrySource(golem_id="t"))])
    ledger = LearningLedger(tmp_path / "learning.sqlite")
    out = learn_from_outcome(rejected, REPAY, sem, ledger, memory=False)
    assert [c.delta for c in out.credit] == [-2, -2]
    assert abs(sem.get("e1").confidence - 0.5) < 1e-9  # 0.8 - 2 x 0.15
    assert ledger.uncurated(10) == {"h-1": -2}
    # a swap's credit waits for its settlement, which keeps the evaluator's weight
    swap = ProposedAction(action_index=0, tool="swap", arguments={"token_in": "WETH", "token_out": "USDC",
                                                                  "amount_in": 1.0})
    swapped = rejected.model_copy(update={"tick": 6, "actions": [ActionRecord(
        action_index=0, action_type="swap", tool_name="swap", status=ActionStatus.EXECUTED)]})
    learn_from_outcome(swapped, [swap], sem, ledger, memory=False)
    [row] = [r for r in ledger.unsettled(10) if r.tick == 6]
    assert row.evaluator == "bad"
    assert ledger.settle(row, -3.0, "negative", at_tick=9, cycle=1)
    assert ledger.uncurated(10) == {"h-1": -4}


DOWNTREND_SELL = "WHEN health_factor < 1.9 AND regime == trending_down AND balance.WETH > 10 THEN swap 30% WETH to USDC"


def _market(prices, regime="trending_down", exposure=30.0, start=0):
    return [curator.MarketTick(tick=start + i, regime=regime, price=p, exposure=exposure) for i, p in enumerate(prices)]


def test_holding_losses_count_ticks_whose_k_tick_move_beats_a_hedges_cost():
    # a bleed of 0.2 % a row: every tick whose next 10 ticks are recorded lost ~2 %, more than a hedge costs
    bleed = _market([2000.0 * (1 - 0.002) ** i for i in range(30)])
    lost, gained = curator.holding_losses(bleed, 10)["trending_down"]
    assert lost == list(range(20)) and gained == 0  # ticks 20-29 have no tick 10 on: not read yet
    # a chop within the hedge's cost is neither; a rise the size of a hedge counts against it
    assert curator.holding_losses(_market([2000.0, 2010.0] * 10), 10)["trending_down"] == ([], 0)
    assert curator.holding_losses(_market([2000.0 + 3 * i for i in range(30)]), 10)["trending_down"] == ([], 20)
    # nothing held: no loss to hedge; a gap in the ticks: the first recorded tick from t + k settles it
    assert curator.holding_losses(_market([2000.0 - 10 * i for i in range(30)], exposure=0.0), 10) == {}
    gappy = [m for m in bleed if m.tick not in (10, 11)]
    assert curator.holding_losses(gappy, 10)["trending_down"][0][:2] == [0, 1]


def test_the_owners_regime_hedge_is_learned_earlier_from_what_holding_in_that_regime_lost():
    """A bleed read as trending_down: the owner's downtrend sell waits for health factor 1.9 and has never fired, so
    no outcome of it could have paid; what holding lost there is the evidence for firing it a step earlier."""
    bleed = _market([2000.0 * (1 - 0.002) ** i for i in range(60)])
    report = curator.plan(50, [], [], {}, EXAMPLE, market=bleed, settle_ticks=10)
    (op,) = report.operations
    assert op.op == "ADD" and op.text == ("WHEN health_factor < 2.09 AND balance.WETH > 10 AND regime == trending_down "
                                          "THEN swap 30% WETH to USDC")
    assert len(op.support) == 50 and op.support[0] == "hold-trending_down-tick-0" and "lost more than" in op.reason
    # the learned text is the one the owner-win ADD would write: both lines of evidence reinforce one rule
    wins = [OutcomeRow(tick=i, regime="trending_down", episode_id=f"ep-{i}", verdict="positive",
                       rules=[{"origin": "owner", "tool": "swap", "text": DOWNTREND_SELL}]) for i in range(5)]
    both = curator.plan(50, wins, [], {}, EXAMPLE, market=bleed, settle_ticks=10)
    assert [op.op for op in both.operations] == ["ADD"] and both.operations[0].text == op.text
    # fewer than 5 losing ticks, or as many gains as losses: nothing; nor in a regime no owner hedge names
    assert curator.plan(50, [], [], {}, EXAMPLE, market=bleed[:14], settle_ticks=10).operations == []
    vee = _market([2000.0 - 20 * i for i in range(10)] + [1800.0 + 20 * i for i in range(20)])
    assert curator.plan(50, [], [], {}, EXAMPLE, market=vee, settle_ticks=10).operations == []
    volatile = _market([2000.0 * (1 - 0.002) ** i for i in range(60)], regime="volatile")
    assert curator.plan(50, [], [], {}, EXAMPLE, market=volatile, settle_ticks=10).operations == []
    # a next-curator follow-up about repays leaves the sell alone
    assert curator.plan(50, [], [], {}, EXAMPLE, [("f1", "look at repay")], market=bleed).operations == []
