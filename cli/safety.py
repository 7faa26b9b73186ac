"""CLI of the safety room: `golem audit verify|tail` and `golem strategy-check`."""

from __future__ import annotations

import json
from collections.abc import Callable
from argparse import Namespace
from pathlib import Path
from typing import TYPE_CHECKING

from cli.common import Command, config

if TYPE_CHECKING:
    from golem.models.observation import Observation
    from golem.models.tick import ProposedAction, SimulationResult


def cmd_audit(args: Namespace) -> int:
    from golem.layout import DataLayout
    from golem.safety.audit import AuditLog

    path = DataLayout(args.data).audit
    if not path.exists():
        print(f"golem audit: no audit trail at {path} (nothing has been validated yet, or --data is wrong)")
        return 1
    log = AuditLog(path)
    if args.action == "verify":
        report = log.verify()
        if report.ok:
            print(f"audit trail OK: {report.entries} entries, head {report.head_hash}")
            return 0
        print(f"audit trail BROKEN at entry {report.first_bad_seq} ({report.entries} entries present):")
        for p in report.problems:
            print(f"  - {p}")
        return 1
    for e in log.entries(kind_prefix=args.kind, limit=args.n):
        print(json.dumps({"seq": e.seq, "at": e.at, "kind": e.kind, **e.payload}, sort_keys=True, default=str))
    return 0


def cmd_strategy_check(args: Namespace) -> int:
    from golem.inference.strategies import read_bundle
    from golem.safety.limits import SafetyLimits
    from golem.safety.strategy_check import validate_strategies

    cfg = config(args)
    path = Path(cfg.golem.home) / "STRATEGY.md"
    if not path.exists():
        print(f"golem strategy-check: {path} not found; copy examples/golem-home/STRATEGY.md")
        return 1
    if args.ack:
        return _acknowledge(args, cfg.golem.id)
    limits = SafetyLimits.from_config(cfg)
    observation: Observation | None = None
    simulate: Callable[[list[ProposedAction], Observation], SimulationResult] | None = None
    if args.chain:
        from golem.chain.contracts import Deployment, DeploymentError
        from golem.chain.reader import read_snapshot
        from golem.chain.simulate import simulate_actions
        from golem.chain.web3client import make_web3
        from golem.errors import UserError
        from golem.layout import DataLayout
        from golem.models.observation import Observation

        w3 = make_web3(cfg.chain.rpc_url)
        if not w3.is_connected():
            raise UserError(f"cannot reach the chain RPC at {cfg.chain.rpc_url} ([chain] rpc_url in golem.toml) for "
                            "the dry run: is the node (`golem run`'s Anvil) up? Without --chain the other four "
                            "stages run offline")
        try:
            dep = Deployment.load(DataLayout(args.data).deployment)
        except DeploymentError as err:
            raise UserError(f"{err} (or point --data at the golem's data dir)") from None
        account = args.account or dep.golem_account
        if account is None:
            raise UserError(f"the deployment in {args.data} names no golem account: give --account for the dry run")
        observation = Observation(snapshot=read_snapshot(w3, dep, account))

        def simulate_on_chain(actions: list[ProposedAction], obs: Observation) -> SimulationResult:
            return simulate_actions(w3, dep, chain_account, actions, obs)

        chain_account, simulate = account, simulate_on_chain

    # STRATEGY.md and every strategies/*.md, each on its own (docs/how-to/strategies.md)
    results = validate_strategies(read_bundle(cfg.golem.home), limits, observation=observation, simulate=simulate,
                                  dry_run=args.chain)
    for name, result in results:
        print(f"{Path(cfg.golem.home) / name}: {result.status}")
        for issue in result.issues:
            print(f"  {issue}")
        for d in result.dry_run:
            print(f"  dry-run {d['rule']}: {d['tool']} {d['arguments']} → {'ok' if d['ok'] else d['reason']}")
    if not args.chain:
        print("dry run not asked for: --chain also tries the first rule actions against the chain")
    return 0 if all(r.viable for _, r in results) else 2


def _acknowledge(args: Namespace, golem_id: str) -> int:
    """The owner accepts what the delta cycle found of the strategy by experience: the restriction lifts, the
    acknowledgment is an event (and stays until STRATEGY.md changes or a new kind of finding appears)."""
    from datetime import datetime, timezone

    from golem.events.models import make_event
    from golem.events.store import EventStore
    from golem.layout import DataLayout
    from golem.safety.experience import ViabilityStore

    store = ViabilityStore(DataLayout(args.data).viability)
    state = store.load()
    if state.assessment is None or not state.assessment.findings:
        print("golem strategy-check --ack: nothing to acknowledge (no delta cycle has found anything of the strategy)")
        return 0
    now = datetime.now(timezone.utc).isoformat()
    findings = store.acknowledge(now, args.note or "")
    EventStore(Path(args.data)).append([make_event(
        golem_id, state.assessment.tick, now, "safety.strategy_acknowledged", now,
        kinds=[f.kind for f in findings], note=args.note or "")])
    for f in findings:
        print(f"acknowledged {f}")
    print("the restriction is lifted; a new kind of finding, or a new STRATEGY.md, starts over")
    return 0


def register(command: Command) -> None:
    p = command("audit", "verify or print the hash-chained audit trail of permits, tool calls and outcomes")
    p.add_argument("action", choices=["verify", "tail"])
    p.add_argument("-n", type=int, default=20, help="tail: how many entries")
    p.add_argument("--kind", help="tail: only entries whose kind starts with this (e.g. permit.)")
    p.set_defaults(fn=cmd_audit)
    p = command("strategy-check", "run the strategy validation pipeline on STRATEGY.md and strategies/*.md")
    p.add_argument("--chain", action="store_true", help="also dry-run the first rule actions on the chain")
    p.add_argument("--account", help="account to dry-run as (default: the deployment's golem account)")
    p.add_argument("--ack", action="store_true",
                   help="acknowledge what the delta cycle found of the strategy by experience (lifts the restriction)")
    p.add_argument("--note", help="--ack: why (kept with the acknowledgment)")
    p.set_defaults(fn=cmd_strategy_check)
