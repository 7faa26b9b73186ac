"""Every run of a tick keeps its record: Temporal resets of an acted tick and of a failed tick,
driven through the service API and the bundled `temporal` CLI, on the real dev server, Anvil and SQLite.
Each run writes its own record and index row, `golem show` lists them, the wallet's nonce shows that no
transaction was sent twice, and the parent golem keeps ticking without folding a reset run."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import uuid

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus

from golem.life.cycle_store import CycleStore
from golem.models.enums import ActionStatus, Tier
from infra.anvil import ANVIL_ADDRESSES
from infra.temporal import temporal_cli
from tests.integration.golem_rig import REPO, in_process_worker, make_rig, wait_for, wait_for_record
from workers.replay import replay_history, rerun_tick
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration

GOLEM_ACCOUNT = ANVIL_ADDRESSES[2]
# An absolute amount: a run that decides again decides exactly the same action.
STRATEGY = """# Strategy: reset test
## Settings
- collateral: WETH
- debt: USDC
## Rules
- WHEN steer contains "reduce exposure" THEN swap 0.5 WETH to USDC
## Constraints
- MUST keep health_factor >= 1.3
"""


def cli(rig, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", "--home", str(rig.home), "--data", str(rig.data_dir), *args],
                          capture_output=True, text=True, cwd=REPO)


def nonce(rig) -> int:
    return rig.w3.eth.get_transaction_count(GOLEM_ACCOUNT)


async def history(client: Client, wid: str, run_id: str | None = None):
    return await client.get_workflow_handle(wid, run_id=run_id).fetch_history()


def task_completed_after(events, pred) -> int:
    """The id of the first WorkflowTaskCompleted event after the first event matching pred: a reset point
    whose run re-executes everything the workflow decided from then on."""
    start = next(i for i, e in enumerate(events) if pred(e))
    return next(e.event_id for e in events[start:] if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)


def task_completed_before(events, pred) -> int:
    """The id of the last WorkflowTaskCompleted event before the first event matching pred."""
    stop = next(i for i, e in enumerate(events) if pred(e))
    return [e.event_id for e in events[:stop] if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED][-1]


def activity_completed(events, name: str):
    scheduled = {e.event_id for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                 and e.activity_task_scheduled_event_attributes.activity_type.name == name}
    return lambda e: (e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
                      and e.activity_task_completed_event_attributes.scheduled_event_id in scheduled)


async def reset_api(client: Client, wid: str, run_id: str, event_id: int, reason: str) -> str:
    """ResetWorkflowExecution, as the Web UI's Reset calls it; returns the new run's id."""
    resp = await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
        namespace=client.namespace, workflow_execution=WorkflowExecution(workflow_id=wid, run_id=run_id),
        reason=reason, workflow_task_finish_event_id=event_id, request_id=str(uuid.uuid4()),
    ))
    return resp.run_id


def reset_cli(client: Client, wid: str, run_id: str, reason: str, kind: str = "FirstWorkflowTask") -> str:
    """`temporal workflow reset --type FirstWorkflowTask`, the bundled CLI an owner would use."""
    out = subprocess.run(
        [str(temporal_cli()), "workflow", "reset", "--address", client.service_client.config.target_host,
         "--workflow-id", wid, "--run-id", run_id, "--type", kind, "--reason", reason, "--output", "json"],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)["runId"]


async def wait_run_record(store: CycleStore, tick: int, run_id: str, what: str):
    label = f"reset-{run_id[:8]}"
    return await wait_for(lambda: store.exists(tick, label) and store.load(tick, label), 90, what)


def folded_gas(store: CycleStore, up_to: int) -> float:
    """The gas of every tick before `up_to` that the results the parent folded carry: its first run's only."""
    return sum(store.load(t, "").gas_cost for t in range(up_to) if store.exists(t))


@pytest.fixture
def rig(tmp_path, request):
    # a golem id per test: a golem left running by a failed test must not block the next one's start
    rig = make_rig(tmp_path, f"reset-{abs(hash(request.node.name)) % 10**6}", "calm", theta=1.0, anvil_state=True,
                   heartbeat={"step_timeout_seconds": 3.0})
    (rig.home / "STRATEGY.md").write_text(STRATEGY)
    yield rig
    rig.stop()


async def test_resets_of_an_acted_tick_keep_every_record_and_send_nothing_twice(temporal_env, temporal_client, rig):
    store = CycleStore(rig.data_dir)
    client = temporal_client
    async with in_process_worker(client, rig):
        # Unversioned (a golem from before config versions): its ticks read STRATEGY.md from the home, so step 3's
        # edited rule reaches the reset run. A versioned tick keeps its own version's STRATEGY.md in a reset too.
        handle = await rig.start_golem(client, max_ticks=None, versioned=False)
        await wait_for(lambda: store.count() >= 2, 90, "two ticks")
        await handle.signal(GolemWorkflow.steer, {"id": "st-reset", "message": "reduce exposure", "severity": "high"})
        acted = await wait_for_record(
            store, lambda r: any(a.status == ActionStatus.EXECUTED for a in r.actions), "the steered tick's swap")
        tick, wid = acted.tick, acted.workflow_id
        assert acted.tier == Tier.T2 and acted.run_kind == "original" and acted.run_label == ""
        assert store.path_for(tick).exists()
        sent = [a.tx_hash for a in acted.actions if a.tx_hash]
        assert sent and rig.w3.eth.get_transaction_receipt(sent[0])["status"] == 1
        nonce_after_original = nonce(rig)
        original_run = acted.run_id
        # the record is written inside the run: at a high load a reset could land before the run completed, and the
        # parent would then fold a reset run's result (its actions already sent, no gas) instead of this one
        await client.get_workflow_handle(wid, run_id=original_run).result()
        events = (await history(client, wid, original_run)).events

        # 1. Reset to the workflow task after `simulate` completed (service API, as the Web UI does):
        #    validate and execute run again for the same action, which the original run already sent.
        point = task_completed_after(events, activity_completed(events, "simulate"))
        after_sim = await reset_api(client, wid, original_run, point, "redo after simulate")
        rec1 = await wait_run_record(store, tick, after_sim, "the after-simulate reset's record")
        assert rec1.run_kind == "reset" and rec1.run_id == after_sim and rec1.original_run_id == original_run
        assert rec1.reset_reason == "redo after simulate" and rec1.reset_from_run_id == original_run
        assert [a.status for a in rec1.actions] == [ActionStatus.ALREADY_SENT]
        assert rec1.actions[0].sent_by_run == original_run and sent[0] in rec1.actions[0].block_reason
        assert rec1.observation == acted.observation  # observe was not re-executed: it came from history
        assert nonce(rig) == nonce_after_original
        # 1b. The same reset by step name with `golem reset` (it finds the event an owner hunts for in the UI)
        at = ("--address", client.service_client.config.target_host)
        out = cli(rig, *at, "reset", str(tick), "--before", "validate", "--run-id", original_run, "--reason", "by name")
        assert out.returncode == 0, out.stderr
        by_name = re.search(r"new run ([0-9a-f-]{36})", out.stdout).group(1)
        rec1b = await wait_run_record(store, tick, by_name, "the by-name reset's record")
        assert rec1b.reset_reason == "by name" and rec1b.observation == acted.observation
        assert [a.status for a in rec1b.actions] == [ActionStatus.ALREADY_SENT] and nonce(rig) == nonce_after_original
        bad = cli(rig, *at, "reset", str(tick), "--before", "nosuch")
        assert bad.returncode != 0 and "its steps: observe, analyze, gate" in bad.stderr

        # 2. Reset to the first workflow task with the bundled CLI: the run observes and decides again, and
        #    decides the same swap (an absolute amount) — it is not sent again.
        first_task = reset_cli(client, wid, original_run, "redo the whole tick")
        rec2 = await wait_run_record(store, tick, first_task, "the first-workflow-task reset's record")
        assert rec2.run_kind == "reset" and rec2.reset_reason.endswith("redo the whole tick")  # the CLI prefixes its user
        assert rec2.tier == Tier.T2 and [a.status for a in rec2.actions] == [ActionStatus.ALREADY_SENT]
        assert rec2.actions[0].action_index >= 1  # numbered after the original run's slot
        assert nonce(rig) == nonce_after_original

        # 3. The owner changes the rule and resets again: the redo decides a *new* action, which acts in its
        #    own slot, and the new run's record shows its own transaction.
        (rig.home / "STRATEGY.md").write_text(STRATEGY.replace("0.5 WETH", "0.25 WETH"))
        redo = reset_cli(client, wid, original_run, "redo with a smaller swap")
        rec3 = await wait_run_record(store, tick, redo, "the redo's record")
        (executed,) = [a for a in rec3.actions if a.status == ActionStatus.EXECUTED]
        assert executed.tx_hash and executed.tx_hash not in sent and executed.action_index >= 1
        assert rec3.gas_cost > 0
        assert nonce(rig) > nonce_after_original
        assert rig.w3.eth.get_transaction_receipt(sent[0])["status"] == 1  # the original swap is still there, once

        # 4. `golem rerun --force` (a new workflow from the recorded input) writes beside them too; it decides
        #    the redo's swap again, which the redo run already sent: not sent again, across workflows.
        n = nonce(rig)
        # the redo's record is written inside its run; a rerun is refused until that run has finished
        await client.get_workflow_handle(wid, run_id=redo).result()
        rerun_id, _ = await rerun_tick(client, rig.golem_id, tick, force=True)
        rec4 = store.load(tick, "rerun-1")
        assert rec4.run_kind == "rerun" and rec4.rerun_of == wid and rec4.workflow_id == rerun_id
        assert [a.status for a in rec4.actions] == [ActionStatus.ALREADY_SENT] and rec4.actions[0].sent_by_run == redo
        assert nonce(rig) == n

        # Every run kept its record; the index has one row per run, linked to the original.
        assert store.load(tick) == acted  # `show N` shows the original run
        runs = store.runs(tick)
        labels = [r["run"] for r in runs]
        assert labels[0] == "" and labels[-1] == "rerun-1" and sorted(labels[1:5]) == sorted(
            f"reset-{r[:8]}" for r in (after_sim, by_name, first_task, redo))
        assert {r["original_run_id"] for r in runs[:5]} == {original_run} and runs[5]["rerun_of"] == wid
        assert store.row(tick)["runs"] == 6 and store.count() == len({r["tick"] for r in store.recent(10_000)})

        # The parent moved on and folded the tick once; it keeps ticking. Its gas figures are the cage's ledger:
        # the redo's transaction is in them though no result the parent folded carries it (the second new tick is
        # recorded once the first, started after the resets, has been folded).
        before = store.latest_tick()
        await wait_for(lambda: store.latest_tick() > before + 1, 90, "two ticks after the resets")
        state = await handle.query(GolemWorkflow.state)
        assert [t.tick for t in state.recent_ticks].count(tick) <= 1
        every_run = sum(store.load(t, r["run"]).gas_cost for t in range(state.tick) if store.exists(t)
                        for r in store.runs(t))
        assert state.total_gas_usd == pytest.approx(every_run, abs=1e-9)
        assert state.total_gas_usd == pytest.approx(folded_gas(store, state.tick) + rec3.gas_cost, abs=1e-9)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        # A reset run's history replays like any other.
        ok, detail = await replay_history(await history(client, wid, first_task))
        assert ok, detail
        await handle.terminate("test done")

    show = cli(rig, "show", str(tick))
    assert show.returncode == 0, show.stderr
    assert json.loads(show.stdout)["run_id"] == original_run
    assert "ran 6 times" in show.stderr and "redo after simulate" in show.stderr and "<- shown" in show.stderr
    listed = cli(rig, "show", str(tick), "--runs").stdout
    assert listed.count("reset") >= 6 and "redo with a smaller swap" in listed
    other = cli(rig, "show", str(tick), "--run", f"reset-{redo[:8]}")
    assert json.loads(other.stdout)["run_id"] == redo
    bad = cli(rig, "show", str(tick), "--run", "reset-nosuchrun")
    assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0 and "recorded runs" in bad.stderr
    ticks = cli(rig, "ticks", "-n", "500", "--json")
    row = next(r for r in json.loads(ticks.stdout) if r["tick"] == tick)
    assert row["runs"] == 6 and row["run"] == "" and row["recovered"] is False


async def test_reset_of_a_failed_tick_at_its_failed_step_recovers_it(temporal_env, temporal_client, rig):
    store = CycleStore(rig.data_dir)
    client = temporal_client
    async with in_process_worker(client, rig):
        handle = await rig.start_golem(client, max_ticks=None)
        await wait_for(lambda: store.count() >= 2, 90, "two ticks")
        # An RPC outage fails a tick at observe (after its retries); the parent records it and goes on.
        rig.anvil.stop()
        (failed,) = (await wait_for(lambda: store.failures(10), 90, "a failed tick"))[-1:]
        tick, wid = failed["tick"], failed["workflow_id"]
        desc = await client.get_workflow_handle(wid).describe()
        assert desc.status == WorkflowExecutionStatus.FAILED
        failed_run = desc.run_id
        # Reset at the failed step: the workflow task that scheduled the observe which failed.
        events = (await history(client, wid, failed_run)).events
        point = task_completed_before(events, lambda e: e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)

        # Reset while the RPC is still down: the reset run fails too, and records its own failure.
        too_soon = await reset_api(client, wid, failed_run, point, "too soon")
        (again,) = await wait_for(lambda: store.run_failures(tick), 90, "the failed reset run's own note")
        assert again["run"] == f"reset-{too_soon[:8]}" and again["run_kind"] == "reset" and "observe" in again["error"]
        rig.anvil.start()
        await wait_for(lambda: (store.latest_tick() or 0) > tick, 90, "ticks after the outage")
        nonce_before = nonce(rig)

        new_run = await reset_api(client, wid, failed_run, point, "RPC is back")
        rec = await wait_run_record(store, tick, new_run, "the reset run's record")
        assert rec.run_kind == "reset" and rec.reset_reason == "RPC is back" and rec.original_run_id == failed_run
        assert nonce(rig) == nonce_before

        # The tick is recovered: shown by its reset run, no longer listed as failed, counted as two runs.
        assert tick not in [f["tick"] for f in store.failures(100)]
        row = store.row(tick)
        assert row["recovered"] is True and row["runs"] == 3 and row["run"] == f"reset-{new_run[:8]}"
        assert store.load(tick).run_id == new_run
        before = store.latest_tick()
        await wait_for(lambda: store.latest_tick() > before, 60, "the parent ticking on")
        state = await handle.query(GolemWorkflow.state)
        assert [t.tick for t in state.recent_ticks].count(tick) <= 1  # the failure, folded once
        assert tick in state.failed_ticks

        # A reset past reflect (the last workflow task of a completed tick) re-executes no step; the run still
        # writes its own record, from the first run's step results.
        done = store.load(0)
        late = reset_cli(client, done.workflow_id, done.run_id, "after the fact", kind="LastWorkflowTask")
        rec0 = await wait_run_record(store, 0, late, "the late reset's record")
        assert rec0.run_kind == "reset" and rec0.observation == done.observation and store.load(0) == done
        await handle.terminate("test done")

    out = cli(rig, "ticks", "-n", "500")
    line = next(ln for ln in out.stdout.splitlines() if ln.split()[:1] == [str(tick)])
    assert "recovered by reset-" in line and "FAILED" not in out.stdout.split(line)[1].split("\n")[0]
    show = cli(rig, "show", str(tick))
    assert json.loads(show.stdout)["run_id"] == new_run
    assert show.stderr.count("FAILED") == 2 and "RPC is back" in show.stderr and "ran 3 times" in show.stderr


async def test_reset_of_a_running_tick(temporal_env, temporal_client, rig):
    """A tick reset while the parent is still waiting for it: Temporal terminates the running run and the parent
    waits for the new one instead, folds its result once and goes on; nothing is recorded as failed."""
    store = CycleStore(rig.data_dir)
    client = temporal_client
    async with in_process_worker(client, rig):
        handle = await rig.start_golem(client, max_ticks=None)
        await wait_for(lambda: store.count() >= 2, 90, "two ticks")
        os.kill(rig.anvil.pid, signal.SIGSTOP)  # the chain hangs: a tick started from now on waits in observe
        try:
            stopped_at = (await handle.query(GolemWorkflow.status)).tick

            async def running_tick():
                st = await handle.query(GolemWorkflow.status)
                wid = st.current_tick_workflow_id
                if wid is None or int(wid.rsplit("-", 1)[1]) <= stopped_at:
                    return None
                desc = await client.get_workflow_handle(wid).describe()
                return (wid, desc.run_id) if desc.status == WorkflowExecutionStatus.RUNNING else None

            wid, base_run = await wait_for(running_tick, 30, "a tick started after the chain hung")
            tick = int(wid.rsplit("-", 1)[1])
            events = (await history(client, wid, base_run)).events
            point = task_completed_before(events, lambda e: e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
            new_run = await reset_api(client, wid, base_run, point, "reset while running")
        finally:
            os.kill(rig.anvil.pid, signal.SIGCONT)
        rec = await wait_run_record(store, tick, new_run, "the running tick's reset record")
        assert rec.run_kind == "reset" and rec.reset_reason == "reset while running"
        base = await client.get_workflow_handle(wid, run_id=base_run).describe()
        assert base.status == WorkflowExecutionStatus.TERMINATED
        await wait_for(lambda: (store.latest_tick() or 0) > tick, 60, "the parent ticking on")
        state = await handle.query(GolemWorkflow.state)
        assert [t.tick for t in state.recent_ticks].count(tick) == 1 and tick not in state.failed_ticks
        assert tick not in [f["tick"] for f in store.failures(100)]  # (the tick running when the chain hung may fail)
        assert [r["run"] for r in store.runs(tick)] == [f"reset-{new_run[:8]}"]
        assert store.load(tick).run_id == new_run  # the terminated first run wrote nothing; the reset run is shown
        await handle.terminate("test done")
