"""The `golem` command: run the embedded stack, serve a worker, and inspect / steer / replay a golem."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

from golem.errors import UserError


ROOMS_WITH_COMMANDS = ("cognition", "grimoire", "chain", "inference", "safety", "life", "world", "backtest", "config", "events")


def _default_home() -> Path:
    return Path(os.environ.get("GOLEM_HOME", "examples/golem-home")).resolve()


def _default_data() -> Path:
    return Path(os.environ.get("GOLEM_DATA", ".golem-data")).resolve()


def _one_line(text: str) -> str:
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip()).replace(":; ", ": ")


def _config(args):
    from golem.models.config import ConfigError, load_config

    try:
        return load_config(Path(args.home) / "golem.toml")
    except ConfigError as err:
        sys.exit(f"golem: {_one_line(err)}")


def _data_dir(args) -> Path:
    """The golem's data directory, which must exist: reading commands never create one (a typo in
    --data used to print an empty table from a fresh, empty store)."""
    data = Path(args.data)
    if not data.is_dir():
        raise UserError(f"no data directory at {data}: point --data (or GOLEM_DATA) at the golem's data dir; "
                        "`golem run` creates it")
    return data


def _tick_id(golem_id: str, n: int) -> str:
    return f"golem-{golem_id}-tick-{n}"


# ---- commands -------------------------------------------------------------------------------
def cmd_run(args) -> int:
    from infra.stack import run_stack

    return run_stack(Path(args.home), Path(args.data), scenario=args.scenario, quiet=args.quiet)


def cmd_worker(args) -> int:
    import logging

    from workers.worker import run_worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = _config(args)
    try:
        _arun(run_worker(cfg, Path(args.data), args.address, live=True if args.live else None))
    except KeyboardInterrupt:
        pass
    return 0


def cmd_dashboard(args) -> int:
    import logging

    from workers.dashboard.server import run_dashboard

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port {args.port} is not a TCP port (0-65535; 0 picks a free one)")
    cfg = _config(args)
    try:
        _arun(run_dashboard(cfg.golem.id, _data_dir(args), args.address, port=args.port, temporal_ui=args.temporal_ui,
                            home=Path(args.home), backtests=Path(args.backtests).resolve()))
    except OSError as err:
        raise UserError(f"cannot serve on 127.0.0.1:{args.port} ({err.strerror or err}): pick another --port") from None
    except KeyboardInterrupt:
        pass
    return 0


def cmd_codec_server(args) -> int:
    import asyncio
    import signal

    from workers.codec import CodecConfigError, codec_from_env
    from workers.codec_server import DEFAULT_ORIGINS, serve_codec

    try:
        codec = codec_from_env()
    except CodecConfigError as err:
        raise UserError(str(err)) from None
    if codec is None:
        raise UserError("GOLEM_PAYLOAD_KEYS is not set: give the codec server the keys the worker seals with "
                        "(key-id:base64-key, comma separated)")

    async def serve() -> None:
        runner = await serve_codec(codec, args.port, tuple(args.cors_origin or DEFAULT_ORIGINS))
        print(f"codec server: http://127.0.0.1:{args.port} (POST /decode, /encode; key id {codec.key_id}; "
              f"CORS for {', '.join(args.cors_origin or DEFAULT_ORIGINS)})", flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    try:
        _arun(serve())
    except OSError as err:
        raise UserError(f"cannot serve on 127.0.0.1:{args.port} ({err.strerror or err}): pick another --port") from None
    return 0


def cmd_sim(args) -> int:
    if args.rest[:1] == ["export"]:  # `golem sim export ...`: a scenario as a market-path CSV, no chain needed
        from golem.backtest.export import export_main

        return export_main(args.rest[1:])
    from golem.world import simulator

    return simulator.main(args.rest) or 0


async def _client(args):
    from workers.client import connect

    try:
        return await connect(args.address)
    except Exception as err:  # connection refused etc.
        if type(err).__name__ == "CodecConfigError":  # a bad GOLEM_PAYLOAD_KEYS: its own fix, not Temporal's
            sys.exit(f"golem: {err}")
        why = "connection refused" if "Connection refused" in str(err) else _one_line(err)[:200]
        sys.exit(f"golem: cannot reach Temporal at {_address(args)} ({why}): is `golem run` up, "
                 "and --address (GOLEM_TEMPORAL_ADDRESS) right?")


def _rpc_status(err: BaseException):
    """The Temporal RPC status of err, or None when err is not a Temporal RPC error (checked without
    importing temporalio, which commands that never reach Temporal do not load)."""
    if type(err).__name__ != "RPCError" or not type(err).__module__.startswith("temporalio"):
        return None
    return err.status.name


async def _query_golem(args, cfg, handle, query: str, result_type):
    """A query on the golem's workflow by name (importing GolemWorkflow would load every activity's
    clients: web3, LanceDB, anthropic; seconds for a one-line answer), with `golem not started` said as such."""
    try:
        return await handle.query(query, result_type=result_type)
    except Exception as err:
        if _rpc_status(err) != "NOT_FOUND":
            raise
        raise UserError(f"no golem '{cfg.golem.id}' on Temporal at {_address(args)} (workflow {handle.id} "
                        f"not found): start it with `golem run`, or check --home's golem id") from None


def _address(args) -> str:
    from workers.client import temporal_address

    return args.address or temporal_address()


async def _status(args) -> int:
    from golem.models.golem import GolemStatus
    from golem.models.state import FsmState

    cfg = _config(args)
    client = await _client(args)
    handle = client.get_workflow_handle(f"golem-{cfg.golem.id}")
    st = await _query_golem(args, cfg, handle, "status", GolemStatus)  # GolemWorkflow.status
    if st.current_tick_workflow_id:
        try:  # ThetaTickWorkflow.fsm
            st.fsm = await client.get_workflow_handle(st.current_tick_workflow_id).query("fsm", result_type=FsmState)
        except Exception:
            pass  # the tick finished between the two queries
    if args.json:
        print(st.model_dump_json(indent=2))
        return 0
    last = st.last_tick
    print(f"golem {st.golem_id}: {st.activity}, next tick {st.tick}")
    print(f"  FSM:        {st.fsm.state.value}" + (f" [{st.fsm.substate}]" if st.fsm.substate != "Normal" else "")
          + (f" for {_since(st.fsm.entered_at)}" if st.current_tick_workflow_id and st.fsm.entered_at else ""))
    print(chain_line(st.chain))
    if st.paused or st.entries_stopped:
        print(f"  STOPPED:    {'paused (no new ticks)' if st.paused else ''}{'; ' if st.paused and st.entries_stopped else ''}"
              f"{'entries stopped (no new positions)' if st.entries_stopped else ''} — {st.control_note}")
    if st.chain.alert:
        print(f"  ALERT:      {st.chain.alert}")
    if last:
        print(f"  last tick:  {last.tick} tier {last.tier.value if last.tier else '-'}"
              + (" FAILED: " + (last.error or "") if last.failed else ""))
    print(f"  regime:     {st.regime}   phase: {st.phase}   vitality: {st.vitality:.2f}")
    print(importlib.import_module("golem.life.life_commands").life_line(st))  # clocks, affect, death (issue 17)
    print(f"  theta:      {st.theta_seconds:.1f}s")
    print(spend_line(st))
    print(f"  steers:     {len(st.pending_steers)} pending" + "".join(
        f"\n    - [{s.severity}] {s.message} ({s.id})" for s in st.pending_steers))
    print(f"  follow-ups: {len(st.pending_followups)} pending" + "".join(
        f"\n    - [{f.window}] {f.message} ({f.id})" for f in st.pending_followups))
    dc = st.decision_cache
    print(f"  gating:     {'learned (Hedge + Thompson)' if st.learned_gating_active else 'cold start (fixed thresholds)'}"
          f"   decision cache: {dc.get('hits', 0)}/{dc.get('lookups', 0)} hits, {dc.get('entries', 0)} entries")
    print(dream_line(st))
    for r in st.rejected_interventions:
        print(f"  {rejection_line(r)}")
    if st.failed_ticks:
        print(f"  failed ticks: {st.failed_ticks}  (golem rerun N)")
    return 0


def _since(iso: str) -> str:
    from datetime import datetime, timezone

    secs = (datetime.now(timezone.utc) - datetime.fromisoformat(iso)).total_seconds()
    return f"{secs:.0f}s" if secs < 120 else f"{secs / 60:.1f} min"


def chain_line(chain) -> str:
    """Chain RPC health from the golem's own reads (each tick's observe step)."""
    good = f"last good read {_since(chain.last_good_read_at)} ago (tick {chain.last_good_tick})" \
        if chain.last_good_read_at else "no good read yet"
    if not chain.errors_in_row:
        return f"  chain RPC:  ok, {good}"
    return f"  chain RPC:  {chain.errors_in_row} failed reads in a row, {good}; last error: {chain.last_error}"


def rejection_line(r) -> str:
    """One rejected steer or follow-up, dated by time and by the tick whose record reports it."""
    when = r.received_at[:19].replace("T", " ") + " UTC" if r.received_at else "time unknown"
    tick = f"before tick {r.tick}" if r.tick is not None else "tick unknown"
    return f"rejected {r.kind} at {when}, {tick}: {r.reason}"


def dream_line(st) -> str:
    """rev. 12 dream yield (healthy 10–30%) and threat coverage (target 100%), the last cycle, the next one's urgency."""
    pct = lambda x: "n/a" if x is None else f"{100 * x:.0f}%"  # noqa: E731
    urgency = f"   urgency {st.dream_urgency:.2f} (dreams at 1.00)" if st.dream_urgency is not None else ""
    return (f"  dreams:     yield {pct(st.dream_yield)} (healthy 10-30%)   threat coverage {pct(st.threat_coverage)} "
            f"(target 100%){urgency}" + (f"\n    last: {st.last_dream}" if st.last_dream else ""))


def spend_line(st) -> str:
    """Today's inference and gas spend, each beside its budget (the gas partition's emergency slice too)."""
    day = f" ({st.spend_day} UTC)" if st.spend_day else ""
    return (f"  today{day}: inference ${st.daily_spend_usd:.4f} of ${st.max_daily_cost_usd:.2f}   "
            f"gas ${st.daily_gas_usd:.4f} of ${st.gas_budget_usd_per_day:.2f} "
            f"(${st.gas_emergency_usd:.2f} of it ring-fenced for protective actions)")


def _arun(coro):
    import asyncio  # ~75 ms: only for the commands that talk to Temporal

    return asyncio.run(coro)


def cmd_status(args) -> int:
    return _arun(_status(args))


def cmd_ticks(args) -> int:
    from golem.life.cycle_store import CycleStore

    if args.n < 0:
        raise UserError(f"-n must be >= 0, got {args.n} (-n 5 lists the 5 newest ticks)")
    store = CycleStore(_data_dir(args))
    rows = store.recent(args.n)
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    # One row per tick (the run an owner cares about); `runs` > 1: `golem show N` lists the others.
    print(f"{'tick':>6} {'tier':4} {'regime':13} {'phase':12} {'PE':>6} {'act':>3} {'cost':>9} {'runs':>4}  time")
    for r in rows:
        note = f"  recovered by {r['run']} (first run failed)" if r["recovered"] else ""
        print(f"{r['tick']:>6} {r['tier']:4} {r['regime']:13} {r['phase']:12} {r['prediction_error']:6.3f} "
              f"{int(bool(r['has_action'])):>3} {r['total_cost']:9.5f} {r['runs']:>4}  {r['timestamp']}{note}")
    for f in store.failures(args.n):
        print(f"{f['tick']:>6} FAILED {f['error'][:100]}  ({f['failed_at']})")
    return 0


def run_lines(store, tick: int, shown: str | None) -> list[str]:
    """How each run of tick N started and why, the shown one marked (for `golem show`)."""
    lines = []
    failure = store.failure(tick)
    if failure is not None and not any(r["run"] == "" for r in store.runs(tick)):
        lines.append(f"  {'(first run)':24} FAILED: {failure['error'][:100]}  ({failure['failed_at']})")
    for r in store.runs(tick):
        label = r["run"] or "(first run)"
        why = {
            "original": "started by the golem",
            "rerun": f"`golem rerun` of {r['rerun_of']}",
            "reset": f"Temporal reset from run {r['original_run_id']}: {r['reset_reason'] or '(reason not read)'}",
            "retry": f"workflow retry of run {r['original_run_id']}",
        }.get(r["run_kind"], r["run_kind"])
        acted = "acted" if r["has_action"] else "no action"
        mark = "  <- shown" if r["run"] == shown else ""
        lines.append(f"  {label:24} {r['run_kind']:8} run {r['run_id'] or '?'}  {r['tier']} {acted}; {why}{mark}")
    for f in store.run_failures(tick):
        lines.append(f"  {f['run']:24} {f['run_kind']:8} run {f['run_id'] or '?'}  FAILED: {f['error'][:100]}  "
                     f"({f['failed_at']})")
    return lines


def cmd_show(args) -> int:
    from golem.life.cycle_store import CycleStore

    if args.tick < 0:
        raise UserError(f"tick must be >= 0, got {args.tick} (`golem ticks` lists the recorded ones)")
    store = CycleStore(_data_dir(args))
    try:
        rec = store.load(args.tick, args.run)
    except (LookupError, ValueError) as err:
        failure = store.failure(args.tick) if args.run is None else None
        if failure is None:
            sys.exit(f"golem show: {err}")
        if args.runs:  # a failed tick's runs are still worth listing
            print(f"runs of tick {args.tick}:\n" + "\n".join(run_lines(store, args.tick, None)))
            return 0
        later = len(store.run_failures(args.tick))
        sys.exit(f"golem show: tick {args.tick} has no record: its run failed ({failure['error'][:160]})"
                 + (f" and {later} later run(s) failed too (golem show {args.tick} --runs)" if later else "")
                 + f"; `golem rerun {args.tick}` or a Temporal reset runs it again")
    lines = run_lines(store, args.tick, rec.run_label)
    if args.runs:
        print(f"runs of tick {args.tick}:\n" + "\n".join(lines))
        return 0
    print(rec.model_dump_json(indent=2))
    if len(lines) > 1:  # the runs go to stderr, so `golem show N | jq` still reads one record
        print(f"tick {args.tick} ran {len(lines)} times (`golem show {args.tick} --run LABEL` shows another):",
              file=sys.stderr)
        print("\n".join(lines), file=sys.stderr)
    return 0


async def _signal(args, kind: str, payload: dict) -> int:
    from golem.models.interventions import parse_intervention

    try:
        parse_intervention(kind, payload)  # same validation the workflow applies; fail fast here
    except ValueError as err:
        sys.exit(f"golem: {err}")
    cfg = _config(args)
    client = await _client(args)
    handle = client.get_workflow_handle(f"golem-{cfg.golem.id}")
    # By name (GolemWorkflow.steer / .follow_up): the workflow module would load every activity's clients.
    await handle.signal(kind, payload)
    print(f"{kind} {payload['id']} delivered to golem-{cfg.golem.id}")
    return 0


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def cmd_steer(args) -> int:
    payload = {"id": args.id or f"steer-{uuid.uuid4().hex[:12]}", "message": args.message,
               "severity": args.severity, "created_at": _now()}
    return _arun(_signal(args, "steer", payload))


def cmd_followup(args) -> int:
    payload = {"id": args.id or f"followup-{uuid.uuid4().hex[:12]}", "message": args.message,
               "window": args.window, "created_at": _now()}
    return _arun(_signal(args, "follow_up", payload))


async def _replay(args) -> int:
    from workers.replay import replay_history

    cfg = _config(args)
    client = await _client(args)
    wid = args.workflow_id or _tick_id(cfg.golem.id, args.tick)
    # Without --run-id Temporal answers with the workflow's latest run (after a reset: the reset run).
    try:
        history = await client.get_workflow_handle(wid, run_id=args.run_id).fetch_history()
    except Exception as err:
        if _rpc_status(err) != "NOT_FOUND":
            raise
        what = f"tick {args.tick}" if args.workflow_id is None else "that workflow"
        run = f" run {args.run_id}" if args.run_id else ""
        raise UserError(f"{what} has no history on Temporal at {_address(args)} (workflow {wid}{run} not found): "
                        "`golem ticks` lists the recorded ticks (a tick older than the namespace's retention "
                        "is gone)") from None
    ok, detail = await replay_history(history)
    print(f"{wid}: determinism {'OK' if ok else 'DIVERGED'} ({len(history.events)} events)")
    if not ok:
        print(detail)
    return 0 if ok else 1


def cmd_replay(args) -> int:
    return _arun(_replay(args))


async def _rerun(args) -> int:
    from temporalio.client import WorkflowFailureError
    from temporalio.service import RPCError

    from workers.replay import RerunRefused, rerun_tick

    cfg = _config(args)
    client = await _client(args)
    try:
        new_id, result = await rerun_tick(client, cfg.golem.id, args.tick, force=args.force)
    except RerunRefused as err:
        raise UserError(str(err)) from None
    except RPCError as err:
        if err.status.name != "NOT_FOUND":
            raise
        raise UserError(f"tick {args.tick} has no workflow on Temporal at {_address(args)} ({err.message}): "
                        "`golem ticks` lists the recorded ticks") from None
    except WorkflowFailureError as err:
        raise UserError(f"the re-run of tick {args.tick} failed: {_root_cause(err)}. Its failure is recorded "
                        f"(`golem show {args.tick} --runs`); fix the cause (is the chain RPC up? `golem doctor`) "
                        f"and run `golem rerun {args.tick}` again") from None
    print(f"re-ran tick {args.tick} as {new_id}: tier {result.tier.value}, record {result.record_path}")
    return 0


def _root_cause(err: BaseException) -> str:
    """The innermost cause of a Temporal failure chain (the activity's own error, not "Activity task failed")."""
    while getattr(err, "cause", None) is not None:
        err = err.cause
    return _one_line(getattr(err, "message", None) or err)[:300]


def cmd_rerun(args) -> int:
    return _arun(_rerun(args))


async def _control(args) -> int:
    """A stop button: GolemWorkflow's pause / resume / stop_entries / allow_entries update (by name)."""
    from golem.models.golem import ControlRequest, ControlState

    update = args.cmd.replace("-", "_")
    req = ControlRequest(reason=args.reason or "", source="cli")
    cfg = _config(args)
    client = await _client(args)
    handle = client.get_workflow_handle(f"golem-{cfg.golem.id}")
    try:
        st = await handle.execute_update(update, req, result_type=ControlState)
    except Exception as err:
        if _rpc_status(err) == "NOT_FOUND":
            raise UserError(f"no golem '{cfg.golem.id}' on Temporal at {_address(args)}: start it with `golem run`") from None
        if type(err).__name__ != "WorkflowUpdateFailedError":
            raise
        raise UserError(_root_cause(err)) from None  # the validator's reason, e.g. "already paused: ..."
    _store_control_event(args, cfg.golem.id, update, st)
    print(f"golem {cfg.golem.id}: {st.note}; paused={st.paused} entries_stopped={st.entries_stopped} "
          f"(next tick {st.tick})")
    return 0


def _store_control_event(args, golem_id: str, update: str, answer) -> None:
    """The accepted stop button goes on the Event Fabric too, when this machine holds the golem's data dir."""
    if not Path(args.data).is_dir():
        return
    from golem.events.bridge import control_event
    from golem.events.store import EventStore

    EventStore(Path(args.data)).append([control_event(golem_id, update, answer, _now())])


def cmd_control(args) -> int:
    if args.reason is not None and len(args.reason) > 500:
        raise UserError(f"--reason is {len(args.reason)} characters; keep it under 500")
    return _arun(_control(args))


# ---- parser ---------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="golem", description=__doc__)
    p.add_argument("--home", default=str(_default_home()), help="golem home with golem.toml, STRATEGY.md (GOLEM_HOME)")
    p.add_argument("--data", default=str(_default_data()), help="data directory (GOLEM_DATA)")
    p.add_argument("--address", default=os.environ.get("GOLEM_TEMPORAL_ADDRESS"), help="Temporal host:port")
    # The same options are accepted after the command too (`golem show 3 --data DIR`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", default=argparse.SUPPRESS)
    common.add_argument("--data", default=argparse.SUPPRESS)
    common.add_argument("--address", default=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="cmd", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, parents=[common])

    s = command("run", "start the embedded stack and a live golem (Ctrl-C stops it)")
    s.add_argument("--scenario", default="calm", choices=["calm", "trending", "volatile", "crash"])
    s.add_argument("--quiet", action="store_true", help="no line per tick on the console after start-up")
    s.set_defaults(fn=cmd_run)
    s = command("worker", "serve this golem's task queue")
    s.add_argument("--live", action="store_true", help="execute transactions even against an external RPC")
    s.set_defaults(fn=cmd_worker)
    s = command("dashboard", "serve the live web dashboard on 127.0.0.1 (golem run starts it too)")
    s.add_argument("--port", type=int, default=int(os.environ.get("GOLEM_DASHBOARD_PORT", 8300)))
    s.add_argument("--temporal-ui", default=os.environ.get("GOLEM_TEMPORAL_UI", "http://127.0.0.1:8233"),
                   help="the Temporal Web UI the tick links point at")
    s.add_argument("--backtests", default=os.environ.get("GOLEM_BACKTESTS", "backtests"),
                   help="the folder whose backtest reports the page lists (`golem backtest`'s default --out parent)")
    s.set_defaults(fn=cmd_dashboard)
    s = command("codec-server", "decode encrypted payloads for the Temporal Web UI (Temporal codec-server protocol)")
    s.add_argument("--port", type=int, default=8234)
    s.add_argument("--cors-origin", action="append", help="a UI origin allowed to call it (default the dev server UI)")
    s.set_defaults(fn=cmd_codec_server)
    s = command("sim", "run the market simulator (arguments pass through)")
    s.add_argument("rest", nargs=argparse.REMAINDER)
    s.set_defaults(fn=cmd_sim)
    s = command("status", "the running golem, from a workflow query")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_status)
    s = command("ticks", "recent ticks from the cycle index")
    s.add_argument("-n", type=int, default=20)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_ticks)
    s = command("show", "print tick N's DecisionCycleRecord (and list its other runs)")
    s.add_argument("tick", type=int)
    s.add_argument("--run", help="the run's label, e.g. rerun-1 or reset-1a2b3c4d (default: the first run, "
                                 "or the latest run that recorded when the first failed)")
    s.add_argument("--runs", action="store_true", help="only list the tick's runs: how each started and why")
    s.set_defaults(fn=cmd_show)
    s = command("steer", "interrupt the golem: forces T2 on the next (or running) tick")
    s.add_argument("message")
    s.add_argument("--severity", default="medium", choices=["low", "medium", "high", "critical"])
    s.add_argument("--id", help="idempotency id (default: random)")
    s.set_defaults(fn=cmd_steer)
    s = command("followup", "queue a follow-up for a delivery window")
    s.add_argument("message")
    s.add_argument("--window", default="next-decide",
                   choices=["next-decide", "next-reflect", "next-curator", "next-dream"])
    s.add_argument("--id")
    s.set_defaults(fn=cmd_followup)
    s = command("replay", "replay tick N's history with Replayer and report determinism")
    s.add_argument("tick", type=int, nargs="?")
    s.add_argument("--workflow-id", help="replay any workflow by id instead of a tick")
    s.add_argument("--run-id", help="replay this run (e.g. the first run of a tick that was reset); default the latest")
    s.set_defaults(fn=cmd_replay)
    s = command("rerun", "re-execute tick N from its recorded input as a new, linked workflow")
    s.add_argument("tick", type=int)
    s.add_argument("--force", action="store_true", help="re-run even a tick that completed")
    s.set_defaults(fn=cmd_rerun)
    for name, what in (("pause", "no new ticks (the running one finishes; state kept) until `golem resume`"),
                       ("resume", "resume ticking after `golem pause`"),
                       ("stop-entries", "no new positions; risk-reducing actions and steers still run"),
                       ("allow-entries", "allow new positions again after `golem stop-entries`")):
        s = command(name, what)
        s.add_argument("--reason", help="why (kept in status and the golem's log)")
        s.set_defaults(fn=cmd_control)
    # Each room may add its own commands: golem/<room>/commands.py defines register(command).
    for room in ROOMS_WITH_COMMANDS:
        try:
            module = importlib.import_module(f"golem.{room}.commands")
        except ModuleNotFoundError as err:
            if err.name != f"golem.{room}.commands":
                raise
            continue
        module.register(command)
    importlib.import_module("golem.life.life_commands").register(command)  # extensions, kill, spawn (issue 17)
    return p


# Commands that open a Temporal client: the SDK's runtime threads can still be calling into Python
# while the interpreter finalizes ("PyGILState_Release ... finalizing", seen in CI), so these leave
# with os._exit once their output is flushed.
_CLIENT_COMMANDS = {"status", "steer", "followup", "replay", "rerun", "gating", "backtest", "config",
                    "pause", "resume", "stop-entries", "allow-entries", "kill", "spawn"}


def _user_error_message(args, err: BaseException) -> str | None:
    """The one line for an exception that is the user's to fix, or None for a bug (which keeps its traceback).
    Types are recognised by module so that commands which never load pydantic or temporalio do not import them."""
    config = sys.modules.get("golem.models.config")
    if config is not None and isinstance(err, config.ConfigError):
        return f"golem: {_one_line(err)}"
    status = _rpc_status(err)
    if status == "NOT_FOUND":
        return (f"golem {args.cmd}: {_one_line(err.message)} on Temporal at {_address(args)}: is the golem started "
                "(`golem run`), and is --home's golem id the right one?")
    if status in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return (f"golem {args.cmd}: lost Temporal at {_address(args)} ({_one_line(err.message)[:160]}): "
                "is `golem run` still up?")
    return None


def _stdout_closed() -> int:
    """The reader of our stdout went away (`golem ticks | head`): nothing to report, and the rest of the
    output goes to /dev/null so the interpreter's final flush does not fail again. 141 = 128 + SIGPIPE,
    what a shell reports for a writer killed by a closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


def _run(args) -> int:
    """Run the command; user errors leave as SystemExit with one line (what, why, the fix)."""
    try:
        code = args.fn(args) or 0
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at interpreter exit
        return code
    except UserError as err:
        raise SystemExit(f"golem {args.cmd}: {err}") from None
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        print(f"golem {args.cmd}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        message = _user_error_message(args, err)
        if message is None:
            raise  # a bug: its traceback is what a maintainer needs
        raise SystemExit(message) from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.cmd == "replay" and args.tick is None and not args.workflow_id:
        sys.exit("golem replay: give a tick number or --workflow-id")
    try:
        code = _run(args)
    except SystemExit as stop:
        if args.cmd not in _CLIENT_COMMANDS or argv is not None:
            raise
        if stop.code not in (None, 0) and not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    if args.cmd in _CLIENT_COMMANDS and argv is None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            code = _stdout_closed()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
