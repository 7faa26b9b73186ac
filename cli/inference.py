"""CLI: `golem doctor` (which deliberator thinks, and why) and `golem chat` (the session sidecar)."""

from __future__ import annotations

import os
import sys
from argparse import Namespace
from datetime import timedelta
from pathlib import Path

from cli.common import Command, arun, config, temporal_target
from golem.ids import doctor_workflow_id, task_queue

WORKER_WAIT_SECONDS = 8.0


async def _ask_worker(args: Namespace, golem_id: str) -> str | None:
    """The worker's own report (DoctorWorkflow on its task queue), or None when no worker answers."""
    import asyncio
    import uuid

    from workers.client import connect
    from workflows.doctor import DoctorWorkflow

    target = temporal_target(args)  # a bad [temporal] key exits naming it
    try:
        client = await connect(target=target)
    except Exception:  # no Temporal: there is no worker to ask either
        return None
    wid = doctor_workflow_id(golem_id, uuid.uuid4().hex[:8])
    from workers.client import golem_queue

    queue = await golem_queue(client, golem_id)  # a fleet golem's host queue
    handle = await client.start_workflow(DoctorWorkflow.run, golem_id, id=wid, task_queue=queue,
                                         execution_timeout=timedelta(seconds=60))
    try:
        return await asyncio.wait_for(handle.result(), WORKER_WAIT_SECONDS)
    except asyncio.TimeoutError:
        await handle.terminate("no worker answered golem doctor")
        return None


def cmd_doctor(args: Namespace) -> int:
    cfg = config(args)
    if not getattr(args, "local", False):
        report = arun(_ask_worker(args, cfg.golem.id))
        if report is not None:
            print(report)
            return 0
        print(f"no worker answered on task queue {task_queue(cfg.golem.id)} within {WORKER_WAIT_SECONDS:g}s (is `golem "
              "run` up? is Temporal reachable?); below is this shell's view, which may differ from the worker's (its environment, "
              "its config version)\n")
    from golem.doctor import doctor_report

    home = Path(args.home)
    if cfg.golem.home and not Path(cfg.golem.home).is_absolute():
        home = (home / cfg.golem.home).resolve()
    print(doctor_report(cfg, os.environ, home, Path(args.data)))
    return 0


# ---- chat ----------------------------------------------------------------------------------
def cmd_chat(args: Namespace) -> int:
    from golem.life.chat import llm_reply, offline_reply, state_digest
    from golem.deliberators import select_deliberator
    from golem.inference.llm import LLMDeliberator
    from golem.inference.session import SessionError, SessionTree

    data = Path(args.data)
    tree = SessionTree.load(SessionTree.default_path(data))
    try:
        if args.verify:
            ok, problems = tree.verify_integrity()
            print("session intact" if ok else "session TAMPERED:\n  " + "\n  ".join(problems))
            return 0 if ok else 1
        if args.log:
            on_path = {n.id for n in tree.current_path()}
            for nid in tree.order:
                n = tree.nodes[nid]
                mark = "*" if nid == tree.head else ("|" if nid in on_path else " ")
                print(f"{mark} {n.id} {n.content_hash[:12]} {n.branch or 'trunk':<20} {n.role}: {n.text[:80]}")
            return 0
        if args.navigate:
            print(" → ".join(tree.navigate(args.navigate)))
            return 0
        if not args.message:
            print("golem chat: give a message (or --log, --verify, --navigate NODE)", file=sys.stderr)
            return 2
        if args.branch:
            tree.branch(args.branch, args.kind, args.label or args.message[:40], "user", args.message)
        else:
            tree.append("user", args.message)
    except SessionError as err:
        print(f"golem chat: {err}", file=sys.stderr)
        return 2
    cfg = config(args)
    digest = state_digest(data)
    delib, _ = select_deliberator(cfg, os.environ, data_dir=data)
    if isinstance(delib, LLMDeliberator):
        from golem.layout import DataLayout
        from golem.usecases.conversation import conversation_context

        # the turns before the tail, compacted with the invariants (session hook, before_compact)
        compacted, tail = conversation_context(DataLayout(data), cfg, delib.config.conversation_tail or 8)
        try:
            text, meta = arun(llm_reply(delib, tail, digest, compacted.text() if compacted is not None else ""))
        except Exception as err:  # provider down: still answer, honestly
            text, meta = offline_reply(args.message, digest) + f" (model unavailable: {err})", {}
    else:
        text, meta = offline_reply(args.message, digest), {"model": "offline"}
    tree.append("golem", text, metadata=meta)
    print(text)
    return 0


def register(command: Command) -> None:
    p = command("doctor", "which deliberator is active and why; models, prices, budget (as the worker sees them)")
    p.add_argument("--local", action="store_true", help="this shell's view, without asking the worker")
    p.set_defaults(fn=cmd_doctor)
    p = command("chat", "talk to the golem (session sidecar; the tail enters the next T2 workspace)")
    p.add_argument("message", nargs="?")
    p.add_argument("--log", action="store_true", help="list the conversation tree (* head, | current path)")
    p.add_argument("--verify", action="store_true", help="check the Merkle hash chain")
    p.add_argument("--navigate", metavar="NODE", help="move the head to a node (id or unique prefix)")
    p.add_argument("--branch", metavar="NODE", help="start a branch at a trunk node with this message")
    p.add_argument("--kind", default="sim", choices=["sim", "pre_steer", "dream"])
    p.add_argument("--label", help="branch label (hypothesis, pending steer or dream seed)")
    p.set_defaults(fn=cmd_chat)
