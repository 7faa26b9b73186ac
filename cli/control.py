"""`golem pause | resume | stop-entries | allow-entries`: the stop buttons; `golem approve | deny ID`: the owner's
answer to a privileged request (GolemWorkflow updates, by name)."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path
from typing import TYPE_CHECKING

from cli.common import Command, address, arun, client, golem_config, now_iso, root_cause, rpc_status
from golem.errors import UserError
from golem.ids import golem_workflow_id

if TYPE_CHECKING:
    from golem.models.golem import ControlState


async def _control(args: Namespace) -> int:
    """A stop button: GolemWorkflow's pause / resume / stop_entries / allow_entries update (by name)."""
    from golem.models.golem import ControlRequest, ControlState

    update = args.cmd.replace("-", "_")
    req = ControlRequest(reason=args.reason or "", source="cli")
    cfg = golem_config(args)
    temporal = await client(args)
    handle = temporal.get_workflow_handle(golem_workflow_id(cfg.golem.id))
    try:
        st = await handle.execute_update(update, req, result_type=ControlState)
    except Exception as err:
        if rpc_status(err) == "NOT_FOUND":
            raise UserError(f"no golem '{cfg.golem.id}' on Temporal at {address(args)}: start it with `golem run`") from None
        if type(err).__name__ != "WorkflowUpdateFailedError":
            raise
        raise UserError(root_cause(err)) from None  # the validator's reason, e.g. "already paused: ..."
    _store_control_event(args, cfg.golem.id, update, st)
    print(f"golem {cfg.golem.id}: {st.note}; paused={st.paused} entries_stopped={st.entries_stopped} "
          f"(next tick {st.tick})")
    return 0


def _store_control_event(args: Namespace, golem_id: str, update: str, answer: ControlState) -> None:
    """The accepted stop button goes on the Event Fabric too, when this machine holds the golem's data dir."""
    if not Path(args.data).is_dir():
        return
    from golem.events.bridge import control_event
    from golem.events.store import EventStore

    EventStore(Path(args.data)).append([control_event(golem_id, update, answer, now_iso())])


def cmd_control(args: Namespace) -> int:
    if args.reason is not None and len(args.reason) > 500:
        raise UserError(f"--reason is {len(args.reason)} characters; keep it under 500")
    return arun(_control(args))


async def _answer(args: Namespace) -> int:
    """`golem approve ID` / `golem deny ID`: GolemWorkflow's approve / deny update."""
    from golem.models.approvals import ApprovalAnswer, ApprovalDecision

    req = ApprovalDecision(id=args.request_id, note=args.note or "", source="cli")
    cfg = golem_config(args)
    temporal = await client(args)
    handle = temporal.get_workflow_handle(golem_workflow_id(cfg.golem.id))
    try:
        answer = await handle.execute_update(args.cmd, req, result_type=ApprovalAnswer)
    except Exception as err:
        if rpc_status(err) == "NOT_FOUND":
            raise UserError(f"no golem '{cfg.golem.id}' on Temporal at {address(args)}: start it with `golem run`") from None
        if type(err).__name__ != "WorkflowUpdateFailedError":
            raise
        raise UserError(root_cause(err)) from None  # the validator's reason, e.g. "no privileged request ..."
    print(f"golem {cfg.golem.id}: {answer.message}")
    return 0


def cmd_answer(args: Namespace) -> int:
    if args.note is not None and len(args.note) > 500:
        raise UserError(f"--note is {len(args.note)} characters; keep it under 500")
    return arun(_answer(args))


def register(command: Command) -> None:
    for name, what in (("pause", "no new ticks (the running one finishes; state kept) until `golem resume`"),
                       ("resume", "resume ticking after `golem pause`"),
                       ("stop-entries", "no new positions; risk-reducing actions and steers still run"),
                       ("allow-entries", "allow new positions again after `golem stop-entries`")):
        s = command(name, what)
        s.add_argument("--reason", help="why (kept in status and the golem's log)")
        s.set_defaults(fn=cmd_control)
    for name, what in (("approve", "approve a privileged request (`golem status` lists them): it runs on the next "
                                   "tick, through every safety check"),
                       ("deny", "deny a privileged request: it never runs")):
        s = command(name, what)
        s.add_argument("request_id", metavar="ID", help="the request's id, e.g. apr-12-0")
        s.add_argument("--note", help="a note kept with the answer (status, the audit trail)")
        s.set_defaults(fn=cmd_answer)
