"""Life and death on real Temporal + Anvil: the clocks drive the phases and each phase takes effect; a Hayflick limit
kills a golem with open positions (settlement on chain, the legacy written, the workflow completes with its
certificate); a successor starts from the legacy; an owner kill needs confirmation."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError

from golem.grimoire.episodes.model import pad_label
from golem.life.cycle_store import CycleStore
from golem.life.death import KillRequest
from golem.life.legacy import Legacy, legacy_dir
from golem.models.config import load_config
from golem.models.enums import ActionStatus, BehavioralPhase, MarketRegime
from golem.models.golem import GolemWorkflowInput
from golem.models.state import GolemState
from infra.stack import inherited_state
from tests.integration.golem_rig import GOLEM_KEY, REPO, in_process_worker, make_rig, wait_for, wait_for_record
from workers.services import GolemServices
from workflows.golem import GolemWorkflow

pytestmark = pytest.mark.integration

AFTER_TURN = ["heartbeat", "lifespan", "daimon", "memory", "risk", "cybernetics", "telemetry"]


def _name(request, prefix):
    return prefix + "-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]


def _cli(temporal_env, home, data):
    env = dict(os.environ, GOLEM_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host)

    async def run(*args: str, stdin: str | None = None):
        return await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "cli", "--home", str(home), "--data", str(data), *args],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=120, input=stdin)

    return run


def _records(store: CycleStore):
    return [store.load(r["tick"]) for r in sorted(store.recent(500), key=lambda r: r["tick"])]


async def test_hayflick_death_settles_on_chain_leaves_a_legacy_and_a_successor_starts_from_it(
        temporal_env, temporal_client, tmp_path, request):
    gid = _name(request, "hay")
    rig = make_rig(tmp_path, gid, "calm", theta=0.3, lifespan={"hayflick_ticks": 30, "settlement_ticks": 4})
    request.addfinalizer(rig.stop)
    rig.start_market(interval=0.3)
    store = CycleStore(rig.data_dir)
    debt_before = next(p.debt for p in rig.services().read_snapshot().positions if p.kind == "lending")
    assert debt_before > 1000  # the golem is born with an open loan
    async with in_process_worker(temporal_client, rig):
        handle = await rig.start_golem(temporal_client, max_ticks=None)
        state: GolemState = await asyncio.wait_for(handle.result(), 300)
    cert = state.life.certificate
    assert cert is not None and cert.cause == "hayflick" and "30 ticks lived" in cert.detail
    assert cert.phases == ["acceptance", "settlement", "reflection", "legacy"]
    assert state.life.on_end == ["lifespan"]  # on_end fired its member; Thanatopsis is lifespan's handler
    desc = await handle.describe()
    assert desc.status == WorkflowExecutionStatus.COMPLETED
    assert desc.typed_search_attributes  # Phase = dead on the golem's own workflow
    assert any(getattr(p.key, "name", "") == "Phase" and p.value == "dead" for p in desc.typed_search_attributes)

    records = _records(store)
    lived = [r for r in records if r.deliberation is None or r.deliberation.model != "thanatopsis-settlement"]
    settling = [r for r in records if r.deliberation is not None and r.deliberation.model == "thanatopsis-settlement"]
    # the after_turn chain ran in its declared order on every tick and wrote its part of the record
    assert all(r.after_turn == AFTER_TURN for r in records), {r.tick: r.after_turn for r in records}
    assert all(r.pad_after is not None and r.credit_consumed is not None and r.risk is not None for r in records)
    # a primary emotion exactly when the affect has a valence (no emotion when neutral)
    assert all((r.primary_emotion is None) == (pad_label(**r.pad_after.model_dump()) == "neutral") for r in records)
    # the stochastic clock aged the golem through every phase to the Hayflick limit
    assert {r.phase for r in lived} >= set(BehavioralPhase), sorted({r.phase.value for r in lived})
    transitions = [r.phase_transition for r in lived if r.phase_transition]
    assert transitions[:4] == ["thriving→stable", "stable→conservation", "conservation→declining",
                               "declining→terminal"], transitions
    assert lived[-1].death_cause == "hayflick"
    # Settlement: through the normal write path, transactions on chain
    assert [r.tick for r in settling] == cert.settlement_ticks and cert.settlement_txs
    repay = [a for r in settling for a in r.actions if a.tool_name == "repay"]
    assert repay and repay[0].status == ActionStatus.EXECUTED
    for tx in cert.settlement_txs:
        assert rig.w3.eth.get_transaction_receipt(tx)["status"] == 1
    snap = rig.services().read_snapshot()
    lending = next(p for p in snap.positions if p.kind == "lending")
    assert lending.debt < 1e-6  # the loan is repaid
    withdrawn = [a for r in settling for a in r.actions if a.tool_name == "withdraw" and a.status == ActionStatus.EXECUTED]
    assert withdrawn, [(a.tool_name, a.status, a.block_reason) for r in settling for a in r.actions]
    # what the owner's MUST caps kept open (10 % withdrawals per tick) is named in the certificate
    assert cert.unsettled == [] or any("collateral" in u or "balance" in u for u in cert.unsettled)

    # Legacy in the data dir
    legacy = Legacy(legacy_dir(rig.data_dir, gid))
    assert legacy.certificate.cause == "hayflick" and legacy.certificate.legacy_dir == cert.legacy_dir
    assert legacy.reflection.ticks == len(records) and "died of hayflick" in legacy.reflection.summary
    lines = [json.loads(x) for x in legacy.grimoire.read_text().splitlines()]
    # every lived tick's episode is exported, but for those a dream's NREM compression folded into a near-duplicate
    # (kept whole in the merged_episodes audit)
    staging = rig.data_dir / "grimoire" / "dream-staging.sqlite"
    merged = 0
    if staging.exists():
        import sqlite3

        with sqlite3.connect(staging) as db:
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'merged_episodes'").fetchone():
                merged = db.execute("SELECT COUNT(*) FROM merged_episodes").fetchone()[0]
    exported = sum(x["kind"] == "episode" for x in lines)
    assert lines[0]["kind"] == "header" and exported + merged >= 30 and exported >= 15, (exported, merged)

    # A successor from the legacy: `golem spawn`
    into = tmp_path / "heir"
    heir = _name(request, "heir")
    cli = _cli(temporal_env, rig.home, rig.data_dir)
    out = await cli("spawn", heir, "--inherit", gid, "--into", str(into))
    assert out.returncode == 0, out.stderr
    assert f"successor {heir} (generation 1) of {gid}" in out.stdout
    shutil.copy(rig.data_dir / "deployment.json", into / "deployment.json")
    cfg = load_config(into / "home" / "golem.toml")
    assert cfg.golem.id == heir and cfg.lifespan.hayflick_ticks == 30
    born = inherited_state(cfg, into)
    assert born.life.generation == 1 and born.life.predecessor == gid
    assert born.learned_gating.inherited_from == f"{gid}@{legacy.certificate.died_at_tick}"
    services = GolemServices(cfg, into, private_key=GOLEM_KEY)
    entries = services.semantic.all(include_inactive=True)
    stains = [e for e in entries if e.provenance.value == "death_reflection"]
    assert all(e.confidence <= 0.3 + 1e-9 for e in entries) and len(stains) == len(legacy.reflection.warnings)
    assert all(e.confidence <= 0.3 + 1e-9 for e in services.episodes.all())
    rig2 = type(rig)(heir, rig.anvil, rig.deployment, into / "home", into, cfg, "calm")
    async with in_process_worker(temporal_client, rig2, services=services):
        h2 = await temporal_client.start_workflow(
            GolemWorkflow.run, GolemWorkflowInput(config=cfg, state=born, max_ticks=2), id=f"golem-{heir}",
            task_queue=f"golem-{heir}")
        st2: GolemState = await asyncio.wait_for(h2.result(), 120)
    assert st2.tick == 2 and st2.life.generation == 1 and st2.life.predecessor == gid and st2.life.ticks_lived == 2


async def test_small_credit_walks_the_phases_conservation_refuses_a_new_position_a_repay_passes_then_economic_death(
        temporal_env, temporal_client, tmp_path, request):
    gid = _name(request, "eco")
    # terminal_ticks far out: near an empty credit the golem is Terminal, and with the default 5 a loaded machine (ticks
    # between the steers that spend the rest) let the terminal count win the race against the credit reaching 0
    rig = make_rig(tmp_path, gid, "calm", theta=0.3, lifespan={"credits_usd": 3.0, "settlement_ticks": 1,
                                                               "terminal_ticks": 10_000})
    strategy = rig.home / "STRATEGY.md"
    strategy.write_text(strategy.read_text().replace(
        '- WHEN steer contains "repay" THEN repay 25% debt\n',
        '- WHEN steer contains "repay" THEN repay 25% debt\n- WHEN steer contains "buy weth" THEN swap 5% USDC to WETH\n'))
    rig.start_market(interval=0.3)
    store = CycleStore(rig.data_dir)
    try:
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            await wait_for(lambda: store.count() >= 2, 90, "two ticks")
            seen, repaid = [], []
            for i in range(12):  # each repay's gas comes off the credit
                st = await handle.query(GolemWorkflow.status)
                if st.phase in ("conservation", "declining", "terminal") or st.dying:
                    break
                await handle.signal(GolemWorkflow.steer, {"id": f"r{i}", "severity": "high", "message": "repay"})
                rec = await wait_for_record(store, lambda r, i=i: any(x.id == f"r{i}" for x in r.active_interventions),
                                            f"steer r{i}", n=40, timeout=90)
                seen.append((rec.tick, rec.phase.value, rec.credit_remaining, rec.credit_consumed))
                repaid.append(rec)
            assert st.phase in ("conservation", "declining", "terminal"), seen
            assert [s[1] for s in seen][:1] == ["thriving"] and "stable" in {s[1] for s in seen}, seen
            assert all(a[2] > b[2] for a, b in zip(seen, seen[1:])), seen  # the credit only goes down
            # the daimon's agency: a repay verified on chain that raised the health factor where Reflexion predicted
            # is control regained by the golem's own hand (golem.life.daimon.agency) — named in the appraisal
            own = [r for r in repaid if r.outcome is not None and r.outcome.verified and r.reflexion is not None
                   and r.reflexion.health_factor_error is not None and abs(r.reflexion.health_factor_error) <= 0.1
                   and (r.outcome.health_factor_after or 0) > (r.outcome.health_factor_before or 0)]
            assert own, [(r.tick, r.outcome, r.reflexion) for r in repaid]
            assert all(any(x.startswith("own write raised the health factor") for x in r.appraisal["reasons"])
                       for r in own), [(r.tick, r.appraisal) for r in own]
            await handle.signal(GolemWorkflow.steer, {"id": "both", "severity": "high", "message": "repay, then buy weth"})
            rec = await wait_for_record(store, lambda r: any(x.id == "both" for x in r.active_interventions),
                                        "the steered tick in conservation", n=40, timeout=90)
            by = {a.tool_name: a for a in rec.actions}
            assert by["swap"].status == ActionStatus.BLOCKED and "phase blocks new positions" in by["swap"].block_reason
            assert by["repay"].status == ActionStatus.EXECUTED
            latest = temporal_client.get_workflow_handle(f"golem-{gid}")  # across continue-as-new
            for i in range(12):  # spend the rest: economic death
                if (await latest.describe()).status != WorkflowExecutionStatus.RUNNING:
                    break
                try:
                    await latest.signal(GolemWorkflow.steer, {"id": f"e{i}", "severity": "high", "message": "repay"})
                except RPCError:  # it died meanwhile
                    break
                await asyncio.sleep(2.0)
            state: GolemState = await asyncio.wait_for(handle.result(), 120)
    finally:
        rig.stop()
    cert = state.life.certificate
    assert cert is not None and cert.cause == "economic" and state.life.credit_remaining_usd == 0.0
    records = _records(store)
    assert any(r.phase_transition == "thriving→stable" for r in records)
    assert records[-1].credit_consumed is not None


async def test_owner_kill_needs_confirmation_then_the_golem_dies_with_a_certificate(
        temporal_env, temporal_client, tmp_path, request):
    gid = _name(request, "kill")
    rig = make_rig(tmp_path, gid, "calm", theta=0.3, lifespan={"settlement_ticks": 1})
    rig.start_market(interval=0.3)
    store = CycleStore(rig.data_dir)
    cli = _cli(temporal_env, rig.home, rig.data_dir)
    try:
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            await wait_for(lambda: store.count() >= 2, 90, "two ticks")
            ext = await cli("extensions")
            assert ext.returncode == 0 and "heartbeat -> lifespan -> daimon -> memory" in ext.stdout, ext.stderr
            no = await cli("kill", "--reason", "enough", stdin="not-the-id\n")
            assert no.returncode == 1 and "not confirmed" in no.stderr and "Traceback" not in no.stderr
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.execute_update(GolemWorkflow.kill, KillRequest(reason="enough"))
            assert "confirm" in str(refused.value.cause)
            assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
            yes = await cli("kill", "--reason", "enough", stdin=f"{gid}\n")
            assert yes.returncode == 0 and "dies after its running tick" in yes.stdout, yes.stderr
            state: GolemState = await asyncio.wait_for(handle.result(), 120)
    finally:
        rig.stop()
    cert = state.life.certificate
    assert cert.cause == "owner" and cert.detail == "enough" and (legacy_dir(rig.data_dir, gid) / "certificate.json").exists()
    assert state.life.on_end == ["lifespan"]


async def test_the_worker_refuses_to_start_on_a_registry_violation(temporal_client, tmp_path, request):
    """The registry's start-up check runs as the worker starts (GolemServices' session hook, then build_worker): a
    non-optional extension switched off in golem.toml (or, in code, a dependency on a higher layer) stops the worker,
    naming both sides."""
    from golem.extensions import RegistryError
    from golem.models.config import ExtensionsSection
    from workers.worker import build_worker

    rig = make_rig(tmp_path, _name(request, "reg"), "calm", theta=0.3)
    try:
        cfg = rig.config.model_copy(update={"extensions": ExtensionsSection(disabled=["daimon"])})
        with pytest.raises(RegistryError, match="'daimon' \\(layer 2\\) is not optional"):
            build_worker(temporal_client, GolemServices(cfg, rig.data_dir, private_key=GOLEM_KEY))
        cfg = rig.config.model_copy(update={"extensions": ExtensionsSection(disabled=["cybernetics"])})
        assert build_worker(temporal_client, GolemServices(cfg, rig.data_dir, private_key=GOLEM_KEY))  # optional
    finally:
        rig.stop()


async def test_a_loss_lays_a_somatic_marker_that_fires_in_the_same_situation_and_shrinks_the_size(
        temporal_env, temporal_client, tmp_path, request):
    gid = _name(request, "soma")
    rig = make_rig(tmp_path, gid, "calm", theta=0.3)
    strategy = rig.home / "STRATEGY.md"
    strategy.write_text(strategy.read_text().replace(
        '- WHEN steer contains "repay" THEN repay 25% debt\n',
        '- WHEN steer contains "repay" THEN repay 25% debt\n- WHEN steer contains "buy weth" THEN swap 20% USDC to WETH\n'))
    # No market: the price moves only by the golem's own swaps, so the situation (regime, health band, price move,
    # tool) at the second buy is the first one's by construction, not by the luck of a random walk.
    store = CycleStore(rig.data_dir)
    try:
        async with in_process_worker(temporal_client, rig):
            handle = await rig.start_golem(temporal_client, max_ticks=None)
            await wait_for_record(store, lambda r: r.regime == MarketRegime.RANGE_BOUND, "a settled regime",
                                  n=5, timeout=120)
            await handle.signal(GolemWorkflow.steer, {"id": "buy1", "severity": "high", "message": "buy weth"})
            first = await wait_for_record(store, lambda r: any(x.id == "buy1" for x in r.active_interventions),
                                          "the first buy", n=40, timeout=90)
            # the swap moved the price: wait until a tick has seen the new price and the regime is settled again
            await wait_for_record(store, lambda r: r.tick > first.tick + 1 and r.regime == first.regime,
                                  "the market settled after the first buy", n=5, timeout=120)
            await handle.signal(GolemWorkflow.steer, {"id": "buy2", "severity": "high", "message": "buy weth"})
            second = await wait_for_record(store, lambda r: any(x.id == "buy2" for x in r.active_interventions),
                                           "the second buy", n=40, timeout=90)
            await handle.terminate("test over")  # not left running on the session's Temporal (golem list shows it)
    finally:
        rig.stop()
    swap1 = next(a for a in first.actions if a.tool_name == "swap")
    assert swap1.status == ActionStatus.EXECUTED and first.outcome.pnl_impact < -1.0, first.outcome
    assert first.somatic_marker_laid, first.appraisal  # the loss laid a marker on its situation
    assert first.pad_after.pleasure < first.pad_before.pleasure
    assert first.somatic_marker_laid in second.somatic_markers_fired, (first.appraisal, second.appraisal)
    swap2 = next(a for a in second.actions if a.tool_name == "swap")
    # the marker halves the size cap; the cage sizes the trade to fit it (sent smaller) or, below the minimum worth
    # doing, refuses it — either way naming the marker
    if swap2.status == ActionStatus.EXECUTED:
        assert swap2.clipped and "by somatic marker" in swap2.clipped, swap2.clipped
        assert "shrinks the size cap to 0.5×" in swap2.clipped and "($2,500.00)" in swap2.clipped  # ½ of $5,000
    else:
        assert swap2.status == ActionStatus.BLOCKED and "somatic marker" in swap2.block_reason, swap2.block_reason
        assert "size cap shrinks to 0.5×" in swap2.block_reason
