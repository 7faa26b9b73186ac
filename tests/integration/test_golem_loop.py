"""The living loop on real parts: Temporal dev server, Anvil, LanceDB, SQLite."""

from __future__ import annotations

import asyncio
import signal
import sqlite3

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from activities.consolidation import ConsolidationActivities
from golem.grimoire.store.embeddings import embedder_by_name
from golem.grimoire.episodes.store import EpisodeStore
from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, Tier
from golem.models.golem import ConsolidationResult, DreamResult
from golem.safety.risk import net_value_usd
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for, wait_for_record
from workers.replay import recorded_tick_input, replay_history
from workflows.golem import GolemWorkflow
from workflows.tick import ThetaTickWorkflow

pytestmark = pytest.mark.integration

WRITE_STEPS = {"Simulating", "Validating", "Executing", "Verifying"}


DREAM_HOLD_S = 4.0


class _SlowDreamPhase(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput):
        from temporalio import activity

        if activity.info().activity_type == "dream_nrem":
            await asyncio.sleep(DREAM_HOLD_S)
        return await self.next.execute_activity(input)


class _SlowDream(Interceptor):
    """A dream that takes a while, as a long one does: theta triggers fall due while the heartbeat is suspended."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _SlowDreamPhase(next)


@pytest.fixture
def calm_rig(tmp_path):
    rig = make_rig(tmp_path, "calm-golem", "calm", theta=0.25)
    yield rig
    rig.stop()


@pytest.fixture
def crash_rig(tmp_path):
    rig = make_rig(tmp_path, "crash-golem", "crash", theta=0.25)
    yield rig
    rig.stop()


async def test_calm_golem_runs_twenty_ticks_mostly_t0(temporal_client, calm_rig):
    rig = calm_rig
    rig.start_market(interval=0.25)
    # max_cached_workflows=0: every workflow task replays the whole history (determinism check).
    async with in_process_worker(temporal_client, rig, max_cached_workflows=0, interceptors=[_SlowDream()]):
        handle = await rig.start_golem(temporal_client, max_ticks=22)
        await handle.signal(GolemWorkflow.follow_up, {"id": "cur-1", "message": "prune stale notes", "window": "next-curator"})
        final = await asyncio.wait_for(handle.result(), timeout=180)
    assert final.tick == 22
    # continue_as_new_ticks = 12 in the rig: the first run (ticks 0-11) continued as new and a second run
    # (ticks 12-21) finished. (A started handle has no run_id: describe() answers for the latest run.)
    first = await temporal_client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id).describe()
    assert first.status == WorkflowExecutionStatus.CONTINUED_AS_NEW, first.status
    latest = await handle.describe()
    assert latest.run_id != first.run_id and latest.status == WorkflowExecutionStatus.COMPLETED, latest.status

    store = CycleStore(rig.data_dir)
    rows = {r["tick"]: r for r in store.recent(100)}
    assert sorted(rows) == list(range(22)), "every tick has an index row"
    tiers = [rows[t]["tier"] for t in range(22)]
    assert tiers.count("T0") >= 0.8 * 22, f"calm market should be mostly T0, got {tiers}"
    for t in range(22):
        rec = store.load(t)
        assert rec.tier.value == rows[t]["tier"] and rec.regime.value == rows[t]["regime"]
        assert abs(rec.prediction_error - rows[t]["prediction_error"]) < 1e-9
        if rec.tier == Tier.T0:
            assert not WRITE_STEPS & set(rec.fsm_trace), rec.fsm_trace
            assert rec.deliberation is None and rec.actions == []
            assert "Retrieving" not in rec.fsm_trace
        assert rec.episodes_written == [f"calm-golem:tick:{t}"]
    assert final.last_delta_tick >= 10, "delta consolidation ran"
    assert (rig.data_dir / "PLAYBOOK.md").exists()
    assert final.last_dream_tick == 15, "the dream cycle ran when due (dream_every_ticks = 15)"
    dream = await temporal_client.get_workflow_handle("golem-calm-golem-dream-15", result_type=DreamResult).result()
    assert dream.tick == 15 and dream.replayed, "the dream replayed the highest-utility episodes"
    # the heartbeat was suspended while it dreamt: the theta triggers that fell due were queued (at most 3), the
    # oldest dropped as heartbeat.tick_dropped_during_dream
    # (_SlowDream holds its NREM phase 4 s: at theta ≤ 0.75 s at least 5 triggers fall due, 3 are kept)
    seen = await temporal_client.get_workflow_handle("golem-calm-golem-dream-15").describe()
    slept = (seen.close_time - seen.start_time).total_seconds()
    assert slept >= DREAM_HOLD_S and final.tick_queue.dropped_during_dream >= 2, (slept, final.tick_queue)
    delta = await temporal_client.get_workflow_handle("golem-calm-golem-delta-10", result_type=ConsolidationResult).result()
    assert delta.episodes_scanned >= 10 and delta.playbook_revision is not None
    # the cycle's steps are activities of its workflow, in order (a retry redoes one step)
    history = await temporal_client.get_workflow_handle("golem-calm-golem-delta-10").fetch_history()
    steps = [e.activity_task_scheduled_event_attributes.activity_type.name for e in history.events
             if e.HasField("activity_task_scheduled_event_attributes")]
    assert steps == [f"delta_{name}" for name in ConsolidationActivities.DELTA_STEPS_VIABILITY] + ["delta_report"], steps
    assert delta.followups_delivered == ["cur-1"] and not final.pending_followups, "the curator got its follow-up"
    assert delta.embedding_drift["status"] == "healthy", "the embedding drift check ran at delta"
    assert delta.embedding_drift["write_pause"]["paused"] is False
    assert delta.admission.utility_source in ("estimate", "none"), "offline: no LLM rating"
    # the window's return split (golem.safety.attribution): ticks 0-10 of a calm golem, delta every 10 ticks
    a = delta.attribution
    assert a is not None and a["window_ticks"] == 10 and 1 <= a["intervals"] <= 10, a
    assert sum(a[k] for k in ("market_beta", "strategy_alpha", "knowledge_alpha", "noise")) == \
        pytest.approx(a["total"], abs=1e-3)
    # Episodes carry their fields; those the delta at tick 10 distilled are marked consolidated.
    ep_store = EpisodeStore(rig.data_dir / "grimoire" / "episodes.lance", embedder_by_name("wordllama"))
    episodes = {e.tick: e for e in ep_store.all()}
    # the dream at tick 15 folded near-duplicate quiet ticks into one row each (NREM compression)
    with sqlite3.connect(rig.data_dir / "grimoire" / "dream-staging.sqlite") as db:
        merged = {int(m.rsplit(":", 1)[1]) for (m,) in db.execute("SELECT merged_id FROM merged_episodes")}
    assert set(range(22)) - set(episodes) == merged, "an episode is only missing when a dream merged it"
    assert all(episodes[t].consolidated for t in range(10) if t in episodes), "the delta cycle marked what it distilled"
    assert not episodes[21].consolidated, "tick 21 came after the last delta"
    ep = episodes[min(episodes)]
    assert (ep.chain, ep.token_pair, ep.timestamp_ms > 0) == (str(rig.w3.eth.chain_id), "WETH/USDC", True)
    if ep.actions == 0:
        assert (ep.tool, ep.outcome.value, ep.action_tools) == ("heartbeat", "descriptive", [])
    identity = ep_store.table.to_arrow().select(["embedding_model", "embedding_version", "embedding_dim"]).to_pylist()
    assert {(r["embedding_model"], r["embedding_dim"]) for r in identity} == {(ep_store.embedder.model_name, 256)}
    assert all(r["embedding_version"] for r in identity), "every vector carries its model version"
    assert "prune stale notes" in (rig.data_dir / "owner-notes.jsonl").read_text()

    # Ticks get the state without the learned-gating log (only the golem workflow uses it): smaller payloads.
    tick_ctx = await recorded_tick_input(temporal_client, "golem-calm-golem-tick-20")
    assert final.learned_gating.log and tick_ctx.state.learned_gating.log == []
    assert tick_ctx.state.tick == 20 and tick_ctx.state.learned_gating.thompson, "the parameters the gate needs stay"

    # A tick's search attributes are set for the UI.
    tick_desc = await temporal_client.get_workflow_handle("golem-calm-golem-tick-3").describe()
    attrs = {k.name: v for k, v in ((k, tick_desc.typed_search_attributes.get(k)) for k in _sa_keys())}
    assert attrs["GolemId"] == "calm-golem" and attrs["Tick"] == 3 and attrs["Tier"] in ("T0", "T1", "T2")
    assert attrs["Regime"] and attrs["Phase"]

    # Replaying a finished tick's history with the current code reproduces it.
    history = await temporal_client.get_workflow_handle("golem-calm-golem-tick-5").fetch_history()
    ok, detail = await replay_history(history)
    assert ok, detail


def _sa_keys():
    from workflows.tick import SA_GOLEM_ID, SA_PHASE, SA_REGIME, SA_TICK, SA_TIER

    return [SA_GOLEM_ID, SA_TICK, SA_TIER, SA_REGIME, SA_PHASE]


async def test_crash_escalates_and_acts_on_chain(temporal_client, crash_rig):
    rig = crash_rig
    w3 = rig.w3
    account = rig.deployment.golem_account
    nonce_before = w3.eth.get_transaction_count(account)
    rig.start_market(interval=0.3, max_steps=18, per_tick=True, crash_after=9)
    async with in_process_worker(temporal_client, rig):
        handle = await rig.start_golem(temporal_client, max_ticks=18)
        await asyncio.wait_for(handle.result(), timeout=240)
    store = CycleStore(rig.data_dir)
    records = [store.load(t) for t in range(18)]
    escalated = [r for r in records if r.tier != Tier.T0]
    assert escalated, "a crash must escalate"
    executed = [a for r in records for a in r.actions if a.status == ActionStatus.EXECUTED]
    assert executed, f"the golem should act during the crash: {[r.deliberation for r in escalated]}"
    acted = [r for r in records if any(a.status == ActionStatus.EXECUTED for a in r.actions)]
    for r in acted:
        assert {"Simulating", "Validating", "Executing", "Verifying"} <= set(r.fsm_trace)
        assert r.outcome is not None and r.outcome.ground_truth_source
        for a in r.actions:
            if a.tx_hash:
                receipt = w3.eth.get_transaction_receipt(a.tx_hash)
                assert receipt["status"] == 1
    # Every transaction the golem sent is one journaled intent: no duplicates.
    _assert_each_intent_sent_once(w3, rig.data_dir, w3.eth.get_transaction_count(account) - nonce_before)
    # Return attribution: each tick's change since the one before, split exactly (golem.safety.attribution)
    assert records[0].attribution is None
    for prev, r in zip(records, records[1:]):
        a = r.attribution
        assert a is not None and a["since_tick"] == prev.tick, r.tick
        assert sum(a[k] for k in ("market_beta", "strategy_alpha", "knowledge_alpha", "noise")) == \
            pytest.approx(a["total"], abs=1e-3)
        assert a["total"] == pytest.approx(net_value_usd(r.observation.snapshot)
                                           - net_value_usd(prev.observation.snapshot) - prev.gas_cost, abs=1e-3)
    assert all(records[r.tick + 1].attribution["strategy_alpha"] != 0 for r in acted if r.tick + 1 < 18)
    assert sum(r.attribution["market_beta"] for r in records[1:]) < 0, "the crash is the market's"
    await _assert_the_risk_daemon_steered(temporal_client, handle, records)


async def _assert_the_risk_daemon_steered(client, handle, records) -> None:
    """Self-steers (golem.life.self_steer): the crash takes the drawdown into the risk daemon's bands; each band
    entered steers once, as a `steer` signal to the golem's workflow naming its source, and the next tick takes it."""
    import json

    steers = [(r.tick, s) for r in records for s in r.self_steers if s.source == "risk-daemon"]
    assert steers, [(r.tick, r.risk) for r in records]
    assert len(steers) <= 2, steers  # once per band entered, not on every tick the drawdown stays in it
    tick, steer = steers[0]
    assert steer.id == f"self-risk-{tick}" and records[tick].risk["drawdown_used"] >= 0.5
    if tick + 1 < len(records):
        nxt = records[tick + 1]
        assert nxt.tier == Tier.T2 and f"{steer.id} from the risk-daemon" in nxt.gating_reason, nxt.gating_reason
        assert any(iv.id == steer.id and iv.source == "risk-daemon" for iv in nxt.active_interventions)
    signals = []
    for run_id in {handle.first_execution_run_id, None}:  # the golem continues as new every 12 ticks in the rig
        async for event in client.get_workflow_handle(handle.id, run_id=run_id).fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                attrs = event.workflow_execution_signaled_event_attributes
                signals.append((attrs.signal_name, json.loads(attrs.input.payloads[0].data)))
    sent = [p for n, p in signals if n == "steer" and p.get("source") == "risk-daemon"]
    assert [p["id"] for p in sent] == [s.id for _, s in steers], signals


def _assert_each_intent_sent_once(w3, data_dir, nonce_delta: int) -> None:
    """Every journaled intent is on chain, and the account nonce rose by exactly one per intent."""
    import sqlite3

    with sqlite3.connect(data_dir / "tx_journal.sqlite") as conn:
        intents = conn.execute("SELECT tx_hash, nonce FROM tx_intents").fetchall()
    assert len({n for _, n in intents}) == len(intents), "two intents share a nonce"
    for tx_hash, _ in intents:
        assert w3.eth.get_transaction_receipt(tx_hash) is not None, f"journaled {tx_hash} never reached the chain"
    assert nonce_delta == len(intents), f"nonce rose by {nonce_delta} for {len(intents)} journaled intents"


async def _pending_followups(handle) -> bool:
    return bool((await handle.query(GolemWorkflow.status)).pending_followups)


def _cli(temporal_env, rig):
    import os
    import subprocess
    import sys

    from tests.integration.golem_rig import REPO

    env = dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host)

    async def run(*args: str):
        # On a thread: the in-process worker shares this event loop and must keep answering queries.
        return await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir), *args],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=60,
        )

    return run


async def test_steer_forces_t2_and_malformed_steer_is_recorded(temporal_env, temporal_client, calm_rig):
    rig = calm_rig
    rig.start_market(interval=0.25)
    async with in_process_worker(temporal_client, rig):
        handle = await rig.start_golem(temporal_client, max_ticks=None)
        store = CycleStore(rig.data_dir)
        await wait_for(lambda: store.count() >= 6, 60, "six ticks")

        cli = _cli(temporal_env, rig)
        queued = await cli("followup", "check the DAI balance", "--window", "next-decide", "--id", "f-1")
        assert queued.returncode == 0, queued.stderr
        await wait_for(lambda: _pending_followups(handle), 30, "the follow-up to be pending")
        sent = await cli("steer", "reduce exposure", "--severity", "high", "--id", "s-1")
        assert sent.returncode == 0 and "s-1 delivered" in sent.stdout, sent.stderr
        await handle.signal(GolemWorkflow.steer, {"id": "s-1", "message": "reduce exposure", "severity": "high"})  # dup
        refused = await cli("steer", "   ", "--severity", "high")
        assert refused.returncode != 0 and "message" in refused.stderr  # CLI validates before sending
        await handle.signal(GolemWorkflow.steer, {"id": "bad-1", "severity": "apocalyptic"})
        await handle.signal(GolemWorkflow.steer, "not an object")

        rec = await wait_for_record(
            store, lambda rec: any(i.id == "s-1" for i in rec.active_interventions), "a tick that handled steer s-1", n=30
        )
        assert rec.tier == Tier.T2 and "s-1" in rec.gating_reason
        assert "f-1" in [i.id for i in rec.active_interventions], "the next-decide follow-up reached the decision"
        assert rec.deliberation is not None and "s-1" in rec.deliberation.steers_considered
        # handled once, not twice (the duplicate signal was ignored)
        handled = [r["tick"] for r in store.recent(60) if any(i.id == "s-1" for i in store.load(r["tick"]).active_interventions)]
        assert len(handled) == 1, handled

        async def cleared():
            st = await handle.query(GolemWorkflow.status)
            return st if not st.pending_steers and not st.pending_followups else None

        # The record is written inside the tick; the parent clears the steer when it folds the tick's result.
        status = await wait_for(cleared, 30, "the handled steer and follow-up to leave the pending lists")
        shown = await cli("status", "--json")
        assert shown.returncode == 0 and f'"golem_id": "{rig.golem_id}"' in shown.stdout, shown.stderr
        # gas today beside inference, each with its budget (the gas partition and its emergency slice)
        assert status.gas_budget_usd_per_day == 10.0 and status.gas_emergency_usd == 2.0 and status.spend_day
        plain = await cli("status")
        assert "inference $" in plain.stdout and "gas $" in plain.stdout and "ring-fenced" in plain.stdout, plain.stderr
        reasons = " | ".join(r.reason for r in status.rejected_interventions)
        assert "severity" in reasons and "expected a JSON object" in reasons, reasons
        assert not status.pending_steers and not status.pending_followups
        tick_at_reject = status.tick
        await wait_for(lambda: store.count() >= tick_at_reject + 3, 60, "the golem keeps ticking")
        # The record of the first tick that saw a rejection reports it; later records do not repeat it.
        bad = next(r for r in status.rejected_interventions if "severity" in r.reason)
        await wait_for(lambda: store.count() > bad.tick + 1, 60, "the ticks after the rejection")
        assert any("severity" in r.reason for r in store.load(bad.tick).rejected_interventions)
        assert not any("severity" in r.reason for r in store.load(bad.tick + 1).rejected_interventions)

        # golem status's FSM comes from the running tick's query
        wid = f"golem-{rig.golem_id}-tick-{tick_at_reject}"
        fsm = await temporal_client.get_workflow_handle(wid).query(ThetaTickWorkflow.fsm)
        assert fsm.state.value in ("Idle", "Observing", "Analyzing", "Gating", "Reflecting")
        await handle.terminate("test done")


async def test_killing_worker_mid_tick_loses_no_tick_and_sends_no_tx_twice(temporal_env, temporal_client, crash_rig):
    rig = crash_rig
    address = temporal_env.client.service_client.config.target_host
    w3 = rig.w3
    account = rig.deployment.golem_account
    nonce_before = w3.eth.get_transaction_count(account)
    rig.start_market(interval=0.3, max_steps=16, per_tick=True, crash_after=9)
    worker = rig.worker_subprocess(address)
    handle = await rig.start_golem(temporal_client, max_ticks=16)
    store = CycleStore(rig.data_dir)
    kills = 0
    try:
        # Kill the worker with SIGKILL three times while ticks are in flight, restarting it each time.
        for wait_ticks in (3, 6, 9):
            await wait_for(lambda: store.count() >= wait_ticks, 120, f"{wait_ticks} ticks")
            await asyncio.sleep(0.15)  # land inside the next tick
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            kills += 1
            worker = rig.worker_subprocess(address)
        final = await asyncio.wait_for(handle.result(), timeout=240)
    finally:
        worker.send_signal(signal.SIGINT)
        try:
            worker.wait(timeout=15)
        except Exception:
            worker.kill()
    assert kills == 3
    assert final.tick == 16
    ticks = sorted(r["tick"] for r in store.recent(100))
    failed = sorted(f["tick"] for f in store.failures(100))
    assert sorted(ticks + failed) == list(range(16)), "no tick lost: each has a record or a recorded failure"
    _assert_each_intent_sent_once(w3, rig.data_dir, w3.eth.get_transaction_count(account) - nonce_before)
    assert any(store.load(t).actions for t in ticks), "the run acted on chain, so the kill test covered the write path"


def _gamma_pulses_in_first_wait(events) -> tuple[int, bool]:
    """(gamma activities completed after tick 0's child completed, whether a later tick has started) in a
    GolemWorkflow history: the pulses of the theta wait between tick 0 and tick 1."""
    ticks_started = ticks_done = 0
    gamma_ids: set[int] = set()
    pulses = 0
    for e in events:
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            ticks_started += 1
        elif e.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
            ticks_done += 1
        elif (e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
              and e.activity_task_scheduled_event_attributes.activity_type.name == "gamma"):
            gamma_ids.add(e.event_id)
        elif (e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED and ticks_started == ticks_done == 1
              and e.activity_task_completed_event_attributes.scheduled_event_id in gamma_ids):
            pulses += 1
    return pulses, ticks_started > 1


async def test_gamma_pulse_runs_inside_a_long_theta_wait(temporal_client, tmp_path):
    # Theta is 60 s, so tick 1 can only start when a steer wakes the wait: the test sees three pulses in the one
    # wait after tick 0, then steers. (It used to count pulses over two 2-s waits, a wall-clock count: under load
    # tick 0 overran theta, backpressure rightly skipped the first wait, and only 2 pulses ran. The dev
    # server also fires a 0.5-s timer after ~1 s, so a 2-s wait held 2 pulses at best.)
    rig = make_rig(tmp_path, "gamma-golem", "calm", theta=60.0,
                   clock={"theta_min_seconds": 60.0, "theta_max_seconds": 60.0, "gamma_min_seconds": 0.3,
                          "gamma_max_seconds": 0.5})
    try:
        rig.start_market(interval=0.2)
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=2)

            async def three_pulses() -> bool:
                pulses, ticked = _gamma_pulses_in_first_wait((await handle.fetch_history()).events)
                assert not ticked, f"the theta wait after tick 0 ended after {pulses} gamma pulse(s), before a steer"
                return pulses >= 3

            await wait_for(three_pulses, 90, "three gamma pulses inside the theta wait after tick 0")
            await handle.signal(GolemWorkflow.steer, {"id": "gamma-wake", "message": "end the wait", "severity": "low"})
            final = await asyncio.wait_for(handle.result(), timeout=120)
        assert final.tick == 2
        assert final.gamma.resolved > 0, "gamma pulses resolved their predictions between theta ticks"
        assert 0.3 <= final.gamma.interval_seconds <= 0.5
        history = await handle.fetch_history()
        pulses, _ = _gamma_pulses_in_first_wait(history.events)
        assert pulses >= 3
        ok, detail = await replay_history(history)
        assert ok, detail
    finally:
        rig.stop()


async def test_ticks_that_overrun_theta_queue_and_drop_triggers(temporal_client, tmp_path):
    # theta 50 ms, every tick deliberates ([gating] mode = "always": retrieve + decide, ~200 ms): triggers pile up,
    # at most 3 wait, the oldest are dropped. (A T0 tick alone now takes ~75 ms, too close to theta.)
    rig = make_rig(tmp_path, "busy-golem", "calm", theta=0.05,
                   clock={"theta_min_seconds": 0.05, "theta_max_seconds": 0.05}, gating={"mode": "always"})
    try:
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=8)
            final = await asyncio.wait_for(handle.result(), timeout=120)
        q = final.tick_queue
        assert q.warnings > 0 and q.dropped > 0, q
        assert len(q.pending) <= 3
        assert CycleStore(rig.data_dir).count() == 8, "queued triggers run as ticks; none is lost silently"
    finally:
        rig.stop()
