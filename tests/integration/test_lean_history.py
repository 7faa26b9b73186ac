"""Lean histories on the real dev server, Anvil and a live golem: no activity input carries the
golem's config or its whole state, each step's input holds only its slice, and the history of a T0 and of
an acted T2 tick stay under their size bounds. Also the namespace retention `golem run` sets."""

from __future__ import annotations

import json

import pytest
from temporalio.api.enums.v1 import EventType

from golem.life.cycle_store import CycleStore
from golem.models.enums import Tier
from golem.models.slices import tail_fields
from golem.models.state import STEP_STATE_FIELDS
from golem.models.tick import STEP_REFS
from infra.history_size import history_sizes
from infra.temporal import set_retention
from tests.integration.golem_rig import in_process_worker, make_rig, wait_for, wait_for_record
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration

# Bytes of serialized History (protobuf) per tick, measured with bench/history_bytes.py (README "Lean
# histories"): before this change a T0 tick took ~68 KB and an acted T2 tick ~182 KB. The targets:
# a T0 tick measured 12.7 KB here and 15.3 KB once in the suite (a larger start input and reflect: what a queued tick
# carries on a loaded machine)
T0_MAX_BYTES = 18 * 1024
# the test's acted T2 tick (a steered tick, two writes, the threat detectors' verdicts in its validate result) measured
# 39.7 KB at 73 events and 45.8 KB at 79 (a third write); with the pheromone field in the observation 35.5 KB at 73 on a
# quiet machine and 50.4 KB at 79 on a loaded CI runner (reflect's input and result, and the tick's result, ~1 KB more
# each: a somatic marker laid on the acted tick's loss rides in its life update). The bound guards against config or
# whole state in a payload (each adds tens of KB to every event that carries it); the bench's acted-T2 median target
# stays 40 KB
T2_MAX_BYTES = 60 * 1024
# Never a key in any activity input: the config's and those of GolemState parts no step reads.
CONFIG_MARKERS = ('"max_trade_size_usd":', '"theta_base_seconds":', '"approved_assets":')
STATE_MARKERS = ('"recent_ticks":', '"seen_intervention_ids":', '"tick_queue":', '"failed_ticks":',
                 '"decision_cache":', '"cumulative_loss":')


async def _inputs(client, workflow_id: str, run_id: str) -> dict[str, list[dict]]:
    """Each activity's decoded JSON input in a tick's history, by activity type."""
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    out: dict[str, list[dict]] = {}
    for ev in history.events:
        if ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = ev.activity_task_scheduled_event_attributes
            out.setdefault(a.activity_type.name, []).append(json.loads(a.input.payloads[0].data))
        elif ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            out["(start)"] = [json.loads(ev.workflow_execution_started_event_attributes.input.payloads[0].data)]
    return out


async def test_tick_histories_are_lean(tmp_path, temporal_client, request):
    gid = f"lean-{abs(hash(request.node.name)) % 10**6}"
    rig = make_rig(tmp_path, gid, "volatile", theta=0.3)
    store = CycleStore(rig.data_dir)
    try:
        rig.start_market(interval=0.3)
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            t0 = await wait_for_record(store, lambda r: r.tier == Tier.T0 and r.tick >= 3, "a T0 tick", timeout=90)
            await handle.signal(GolemWorkflow.steer, {"id": "lean-1", "message": "reduce exposure",
                                                      "severity": "high"})
            t2 = await wait_for_record(store, lambda r: r.tier == Tier.T2 and any(a.tx_hash for a in r.actions),
                                       "an acted T2 tick", timeout=120)
            await wait_for(lambda: store.count() > t2.tick + 1, 60, "the tick after the acted one")
            await handle.terminate("test done")

        for rec, bound in ((t0, T0_MAX_BYTES), (t2, T2_MAX_BYTES)):
            sizes = await history_sizes(temporal_client, rec.workflow_id, rec.run_id)
            assert sizes.total <= bound, (f"tick {rec.tick} ({rec.tier.value}) history {sizes.total} B > {bound} B at "
                                          f"{sizes.events} events; by event: {sorted(sizes.by_event.items(), key=lambda kv: -kv[1])}")
            inputs = await _inputs(temporal_client, rec.workflow_id, rec.run_id)
            start = inputs.pop("(start)")[0]
            # Wire 2: the parent chose the tick's shape, so the tick records no patch marker of its own (each
            # costs a marker and a search-attribute upsert), and Regime goes up with Tier in one upsert.
            assert start["wire"] == 2
            events = (await temporal_client.get_workflow_handle(rec.workflow_id, run_id=rec.run_id)
                      .fetch_history()).events
            kinds = [ev.event_type for ev in events]
            assert EventType.EVENT_TYPE_MARKER_RECORDED not in kinds, f"tick {rec.tick} records a patch marker"
            upserts = [ev.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
                       for ev in events if ev.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES]
            assert [sorted(u) for u in upserts] == [["Regime", "Tier"], ["Phase"]], [sorted(u) for u in upserts]
            assert "config" not in start and start["config_version"], "the tick input names its config version"
            assert start["state_slice"] == "tick" and "state_fields" not in start, "the slice goes by name"
            for marker in STATE_MARKERS:
                assert marker not in json.dumps(start), f"the tick input carries {marker}"
            for step, payloads in inputs.items():
                if step == "record_failure":
                    continue
                for payload in payloads:
                    text = json.dumps(payload)
                    for marker in CONFIG_MARKERS + STATE_MARKERS:
                        assert marker not in text, f"{step}'s input carries {marker}"
                    state = payload["ctx"]["state"]
                    allowed = tail_fields(STEP_STATE_FIELDS[step])
                    assert set(state) <= set(allowed) | {"golem_id", "tick"}, (step, sorted(state))
                    for name, tail in allowed.items():
                        if tail and name in state:
                            assert len(state[name]) == 1, (step, name)  # only the newest element
                    if step in STEP_REFS:  # the observation is written once, by observe, and named after that
                        assert payload["refs"]["observation"] == "observe" and "observation" not in payload, step
                        for name in payload["refs"]:
                            assert name not in payload, (step, name)
        # the record still has everything (nothing was lost by slicing)
        assert t2.observation.probes and t2.deliberation is not None and t2.outcome is not None
    finally:
        rig.stop()


async def test_namespace_retention_is_set(temporal_client):
    assert await set_retention(temporal_client, 3) == 3
    assert await set_retention(temporal_client, 1) == 1
