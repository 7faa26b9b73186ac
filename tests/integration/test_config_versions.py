"""Config is versioned and applied whole, on real parts: Temporal dev server, Anvil, the worker.

One golem lives through four config events: born on v1 (max_trade_size_usd = 1000); `golem config apply` of v2
(5000) without restarting the worker, after which a steered tick sizes and validates a > $1000 swap under v2 (the
safety layer reads the tick's version, not its file); a bad golem.toml refused with the keys named while the golem
keeps running on v2; a restart on the edited file that delivers v3 whole.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest
import tomli_w
import tomllib

from golem.chain.tools.valuation import action_value_usd
from golem.life.cycle_store import CycleStore
from golem.models.config import load_config
from golem.models.enums import ActionStatus
from golem.models.tick import ProposedAction
from infra.stack import ensure_golem_running
from tests.integration.golem_rig import GOLEM_KEY, in_process_worker, make_rig, wait_for_record
from workers.config_versions import local_version
from workers.replay import replay_history
from workers.services import GolemServices
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration


def set_policy(rig, **policy) -> None:
    path = rig.home / "golem.toml"
    raw = tomllib.loads(path.read_text())
    raw.setdefault("policy", {}).update(policy)
    path.write_text(tomli_w.dumps(raw))


def cli(rig, address: str, *argv: str) -> tuple[int, str]:
    """`golem config ...` in-process (argv given: no os._exit); returns (exit code, stderr-style message)."""
    from cli.main import main

    try:
        return main(["--home", str(rig.home), "--data", str(rig.data_dir), "--address", address, "config", *argv]), ""
    except SystemExit as stop:
        return (stop.code if isinstance(stop.code, int) else 1), str(stop.code)


def swap_values(rec) -> list[float]:
    """USD size of each executed swap of a record (the number the PolicyCage limits)."""
    calls = rec.deliberation.tool_calls if rec.deliberation else []
    executed = {a.action_index for a in rec.actions if a.status is ActionStatus.EXECUTED and a.tool_name == "swap"}
    return [action_value_usd(ProposedAction(action_index=i, tool=c.tool_name, arguments=c.arguments), rec.observation)
            for i, c in enumerate(calls) if c.tool_name == "swap" and i in executed]


@pytest.fixture
def rig(tmp_path):
    rig = make_rig(tmp_path, "cfgver", "calm", theta=0.3, policy={"max_trade_size_usd": 1000.0})
    yield rig
    rig.stop()


async def test_config_change_is_applied_whole_and_a_bad_one_is_refused(temporal_client, rig, capsys):
    client = temporal_client
    address = client.service_client.config.target_host
    store = CycleStore(rig.data_dir)
    handle = client.get_workflow_handle(f"golem-{rig.golem_id}")
    v1 = local_version(rig.home / "golem.toml").version

    worker_a = GolemServices(load_config(rig.home / "golem.toml"), rig.data_dir, private_key=GOLEM_KEY)
    assert worker_a.config_version == v1
    try:
        async with in_process_worker(client, rig, worker_a):
            # 1. born on v1, as `golem run` starts it
            how = await ensure_golem_running(address, rig.config, rig.data_dir)
            assert how.startswith("started") and v1[:12] in how
            await wait_for_record(store, lambda r: r.config_version == v1, "a tick on v1")

            # 2. `golem config apply` of v2 while worker A (started on the 1000 file) keeps serving
            set_policy(rig, max_trade_size_usd=5000.0)
            v2 = local_version(rig.home / "golem.toml").version
            code, _ = await asyncio.to_thread(cli, rig, address, "diff")
            assert code == 1 and "[policy.max_trade_size_usd] 1000.0 -> 5000.0" in capsys.readouterr().out
            code, err = await asyncio.to_thread(cli, rig, address, "apply")
            assert code == 0, err
            out = capsys.readouterr().out
            assert f"config {v2[:12]} applied (was {v1[:12]})" in out and "max_trade_size_usd" in out
            running = await handle.query(GolemWorkflow.config_version)
            assert running.info.version == v2 and running.config.policy.max_trade_size_usd == 5000.0
            assert worker_a.config.policy.max_trade_size_usd == 1000.0  # the worker's file config is stale

            first_v2 = await wait_for_record(store, lambda r: r.config_version == v2 and r.config_change, "v2's first tick")
            assert "[policy.max_trade_size_usd] 1000.0 -> 5000.0" in first_v2.config_change
            # The run that took the update replays with the current code (max_cached_workflows=0 style check).
            history = await handle.fetch_history()
            ok, detail = await replay_history(history)
            assert ok, detail
            if os.environ.get("GOLEM_RECORD_CONFIG_HISTORY") and any(
                    e.HasField("workflow_execution_update_accepted_event_attributes") for e in history.events):
                (Path(__file__).parents[1] / "histories" / "golem-config-applied.json").write_text(history.to_json())
            await handle.signal(GolemWorkflow.steer, {
                "id": f"steer-{uuid.uuid4().hex[:8]}", "message": "reduce exposure now", "severity": "high",
                "created_at": datetime.now(timezone.utc).isoformat()})
            steered = await wait_for_record(store, lambda r: bool(r.deliberation and r.deliberation.steers_considered),
                                            "the steered tick", timeout=90)
            assert steered.config_version == v2
            values = swap_values(steered)
            # The deliberator sized the swap from v2 (over v1's $1000) and the validate step, on a worker whose
            # golem.toml said 1000 at start, enforced v2's limit: executed, not blocked.
            assert values and 1000.0 < max(values) <= 5000.0, (values, [(a.status, a.block_reason) for a in steered.actions])

            # 3. a bad config is refused by the workflow's validator, keys named; v2 keeps running
            set_policy(rig, max_trade_size_usd=-5.0, max_slipage_bps=10)
            code, err = await asyncio.to_thread(cli, rig, address, "apply")
            assert code == 1
            assert "[policy.max_trade_size_usd]" in err and "[policy.max_slipage_bps] unknown key" in err, err
            assert f"keeps running on {v2[:12]}" in err
            assert (await handle.query(GolemWorkflow.config_version)).info.version == v2
            tick_now = (await handle.query(GolemWorkflow.status)).tick
            later = await wait_for_record(store, lambda r: r.tick > tick_now, "a tick after the refusal")
            assert later.config_version == v2
            assert (await handle.query(GolemWorkflow.status)).config_version == v2

        # 4. a restart: a new worker on the edited file, and ensure_golem_running delivers v3 whole
        path = rig.home / "golem.toml"
        raw = tomllib.loads(path.read_text())
        raw["policy"] = {"max_trade_size_usd": 2000.0}
        path.write_text(tomli_w.dumps(raw))
        cfg3 = load_config(path)
        worker_b = GolemServices(cfg3, rig.data_dir, private_key=GOLEM_KEY)
        v3 = worker_b.config_version
        async with in_process_worker(client, rig, worker_b):
            how = await ensure_golem_running(address, cfg3, rig.data_dir)
            assert how.startswith("resumed;") and f"config {v3[:12]} applied (was {v2[:12]})" in how, how
            assert "[policy.max_trade_size_usd] 5000.0 -> 2000.0" in how
            rec = await wait_for_record(store, lambda r: r.config_version == v3 and r.config_change, "v3's first tick")
            assert "5000.0 -> 2000.0" in rec.config_change
            running = await handle.query(GolemWorkflow.config_version)
            assert running.info.version == v3 and running.info.previous == v2 and running.info.source == "golem run"
            assert running.config.policy.max_trade_size_usd == 2000.0
            # a restart on unchanged files applies nothing
            again = await ensure_golem_running(address, cfg3, rig.data_dir)
            assert again == f"resumed (config {v3[:12]})"
            code, _ = await asyncio.to_thread(cli, rig, address, "show")
            assert code == 0 and f"running config version {v3}" in capsys.readouterr().out
    finally:
        try:
            await handle.terminate("test over")
        except Exception:
            pass
    # the key never reached a record
    for row in store.recent(200):
        assert GOLEM_KEY[2:].lower() not in (rig.data_dir / "cycles").joinpath(f"cycle-{row['tick']:06d}.json").read_text().lower()
