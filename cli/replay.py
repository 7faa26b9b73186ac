"""`golem replay N | rerun N`: a tick's history replayed for determinism, or the tick re-executed as a new run."""

from __future__ import annotations

from cli.common import address, arun, client, golem_config, data_dir, root_cause, rpc_status
from golem.errors import UserError
from golem.ids import tick_workflow_id


async def _replay(args) -> int:
    from workers.replay import replay_history

    cfg = golem_config(args)
    temporal = await client(args)
    wid = args.workflow_id or tick_workflow_id(cfg.golem.id, args.tick)
    # Without --run-id Temporal answers with the workflow's latest run (after a reset: the reset run).
    try:
        history = await temporal.get_workflow_handle(wid, run_id=args.run_id).fetch_history()
    except Exception as err:
        if rpc_status(err) != "NOT_FOUND":
            raise
        what = f"tick {args.tick}" if args.workflow_id is None else "that workflow"
        run = f" run {args.run_id}" if args.run_id else ""
        raise UserError(f"{what} has no history on Temporal at {address(args)} (workflow {wid}{run} not found): "
                        "`golem ticks` lists the recorded ticks (a tick older than the namespace's retention "
                        "is gone)") from None
    ok, detail = await replay_history(history)
    print(f"{wid}: determinism {'OK' if ok else 'DIVERGED'} ({len(history.events)} events)")
    if not ok:
        print(detail)
    return 0 if ok else 1


def cmd_replay(args) -> int:
    return arun(_replay(args))


async def _rerun(args) -> int:
    from temporalio.client import WorkflowFailureError
    from temporalio.service import RPCError

    from workers.replay import RerunRefused, rerun_tick

    cfg = golem_config(args)
    temporal = await client(args)
    try:
        new_id, result = await rerun_tick(temporal, cfg.golem.id, args.tick, force=args.force)
    except RerunRefused as err:
        raise UserError(str(err)) from None
    except RPCError as err:
        if err.status.name != "NOT_FOUND":
            raise
        raise UserError(f"tick {args.tick} has no workflow on Temporal at {address(args)} ({err.message}): "
                        "`golem ticks` lists the recorded ticks") from None
    except WorkflowFailureError as err:
        raise UserError(f"the re-run of tick {args.tick} failed: {root_cause(err)}. Its failure is recorded "
                        f"(`golem show {args.tick} --runs`); fix the cause (is the chain RPC up? `golem doctor`) "
                        f"and run `golem rerun {args.tick}` again") from None
    from golem.life.cycle_store import CycleStore

    path = result.record_path or CycleStore(data_dir(args)).path_for(args.tick, result.run_label)
    print(f"re-ran tick {args.tick} as {new_id}: tier {result.tier.value}, record {path}")
    return 0


def cmd_rerun(args) -> int:
    return arun(_rerun(args))


async def _reset(args) -> int:
    from temporalio.service import RPCError

    from workers.replay import ResetRefused, reset_tick

    cfg = golem_config(args)
    temporal = await client(args)
    try:
        run, event = await reset_tick(temporal, cfg.golem.id, args.tick, args.before, args.reason, run_id=args.run_id)
    except ResetRefused as err:
        raise UserError(f"tick {args.tick}: {err}") from None
    except RPCError as err:
        if err.status.name != "NOT_FOUND":
            raise
        raise UserError(f"tick {args.tick} has no workflow on Temporal at {address(args)} ({err.message}): "
                        "`golem ticks` lists the recorded ticks") from None
    print(f"reset tick {args.tick} to just before `{args.before}` (event {event}): new run {run}. "
          f"It records as reset-{run[:8]} and sends nothing another run sent; `golem show {args.tick} --runs` "
          "lists every run")
    return 0


def cmd_reset(args) -> int:
    return arun(_reset(args))


def register(command) -> None:
    s = command("replay", "replay tick N's history with Replayer and report determinism")
    s.add_argument("tick", type=int, nargs="?")
    s.add_argument("--workflow-id", help="replay any workflow by id instead of a tick")
    s.add_argument("--run-id", help="replay this run (e.g. the first run of a tick that was reset); default the latest")
    s.set_defaults(fn=cmd_replay)
    s = command("rerun", "re-execute tick N from its recorded input as a new, linked workflow")
    s.add_argument("tick", type=int)
    s.add_argument("--force", action="store_true", help="re-run even a tick that completed")
    s.set_defaults(fn=cmd_rerun)
    s = command("reset", "Temporal-reset tick N to just before one of its steps (a new run of the same workflow)")
    s.add_argument("tick", type=int)
    s.add_argument("--before", required=True, metavar="STEP",
                   help="the step to run again, and every step after it, e.g. decide, simulate, validate "
                        "(an unknown name lists the run's steps)")
    s.add_argument("--reason", default="owner reset", help="recorded on the new run (default: owner reset)")
    s.add_argument("--run-id", help="reset this run (default: the latest)")
    s.set_defaults(fn=cmd_reset)
