"""`golem steer | followup`: signals to the running golem (validated here first, as the workflow will)."""

from __future__ import annotations

import sys
import uuid

from cli.common import arun, client, golem_config, now_iso
from golem.ids import golem_workflow_id


async def _signal(args, kind: str, payload: dict) -> int:
    """The owner's message on its way to the golem, validated here as the workflow will: the send_message hook
    (see docs/design/life.md#extensions), whose intervention member delivers it."""
    from golem.extensions.registry import registry_or_full
    from golem.extensions.hooks import fire_async
    from golem.models.interventions import parse_intervention

    try:
        parse_intervention(kind, payload)  # same validation the workflow applies; fail fast here
    except ValueError as err:
        sys.exit(f"golem: {err}")
    cfg = golem_config(args)

    async def intervention() -> None:
        temporal = await client(args)
        handle = temporal.get_workflow_handle(golem_workflow_id(cfg.golem.id))
        # By name (GolemWorkflow.steer / .follow_up): the workflow module would load every activity's clients.
        await handle.signal(kind, payload)
        print(f"{kind} {payload['id']} delivered to {handle.id}")

    registry, refused = registry_or_full(cfg.extensions.disabled)
    if refused:  # a golem.toml mid-edit must not lock the owner out of a steer (golem_config)
        print(f"golem: warning: [extensions]: {refused}; delivering through this build's full registry",
              file=sys.stderr)
    await fire_async(registry, "send_message", {"intervention": intervention})
    return 0


def cmd_steer(args) -> int:
    payload = {"id": args.id or f"steer-{uuid.uuid4().hex[:12]}", "message": args.message,
               "severity": args.severity, "created_at": now_iso()}
    return arun(_signal(args, "steer", payload))


def cmd_followup(args) -> int:
    payload = {"id": args.id or f"followup-{uuid.uuid4().hex[:12]}", "message": args.message,
               "window": args.window, "created_at": now_iso()}
    return arun(_signal(args, "follow_up", payload))


def register(command) -> None:
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
