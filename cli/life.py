"""`golem extensions`, `golem kill --reason R`, `golem spawn NEW_ID --inherit DEAD_ID`.

extensions  the hook × extension matrix of this build, which extensions it has, and
            which golem.toml's [extensions] disabled switches off; a registry violation is printed as the error.
kill        GolemWorkflow's `kill` update, confirmed by typing the golem's id (or --yes); the golem dies after its
            running tick (Thanatopsis) and its workflow completes with the death certificate.
spawn       a successor from a dead golem's legacy (golem.life.succession): its home, data dir, the Grimoire at
            0.3 with the bloodstains, the gating package; started at once when --start and Temporal answer.
"""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path
from typing import TYPE_CHECKING

from cli.common import Command
from golem.errors import UserError

if TYPE_CHECKING:
    from golem.grimoire.episodes.store import EpisodeStore
    from golem.grimoire.semantic.store import SemanticStore
    from golem.models.config import GolemConfig
    from golem.models.golem import GolemStatus


def _load(home: str) -> GolemConfig:
    from golem.models.config import ConfigError, load_config

    try:
        return load_config(Path(home) / "golem.toml")
    except ConfigError as err:
        raise UserError(str(err)) from None


def _extensions(args: Namespace) -> int:
    from golem.extensions import HOOKS, RegistryError, build_registry, builtin_extensions

    disabled = _load(args.home).extensions.disabled if (Path(args.home) / "golem.toml").exists() else []
    try:
        reg = build_registry(disabled)
    except RegistryError as err:
        raise UserError(f"the extension registry refuses this build: {err}") from None
    exts = builtin_extensions()
    if args.json:
        print(json.dumps({
            "hooks": {h: reg.order(h) for h in HOOKS},
            "extensions": [{"name": e.name, "layer": e.layer, "hooks": sorted(e.hooks), "depends_on": list(e.depends_on),
                            "optional": e.optional, "present": e.present, "disabled": e.name in disabled,
                            "what": e.what, "where": e.where} for e in exts],
        }, indent=2))
        return 0
    print("hook                      firing order in this build")
    for hook in HOOKS:
        order = reg.order(hook)
        print(f"  {hook:<24}{' -> '.join(order) if order else '-'}")
    print("\nextension          layer  status     hooks")
    for e in sorted(exts, key=lambda e: (e.layer, e.name)):
        status = "off" if e.name in disabled else ("present" if e.present else "absent")
        opt = " (optional)" if e.optional else ""
        print(f"  {e.name:<17}{e.layer:>3}    {status:<10} {', '.join(sorted(e.hooks)) or '-'}{opt}")
        for hook, where in sorted(e.where.items()):
            print(f"{'':<37}{hook}: {where}")
        if not e.present and e.what:
            print(f"{'':<37}{e.what}")
    present = sum(e.present for e in exts)
    print(f"\n{present} of {len(exts)} extensions in this build; switched off in golem.toml: "
          f"{', '.join(disabled) or 'none'}")
    return 0


async def _kill_async(args: Namespace) -> int:
    from cli.common import client, root_cause
    from golem.ids import golem_workflow_id
    from golem.life.death import KillAnswer, KillRequest

    cfg = _load(args.home)
    gid = cfg.golem.id
    if len(args.reason) > 500 or not args.reason.strip():
        raise UserError("--reason must be 1-500 characters")
    if args.yes:
        typed = gid
    else:
        print(f"golem kill: golem {gid} will settle its positions, write its legacy and die for good.", file=sys.stderr)
        print(f"type its id ({gid}) to confirm: ", end="", file=sys.stderr, flush=True)
        typed = sys.stdin.readline().strip()
    if typed != gid:
        raise UserError(f"not confirmed (typed {typed!r}, the golem's id is {gid!r}); nothing was sent")
    handle = (await client(args)).get_workflow_handle(golem_workflow_id(gid))
    try:
        answer = await handle.execute_update("kill", KillRequest(reason=args.reason, confirm=typed, by="cli"),
                                             result_type=KillAnswer)
    except Exception as err:
        if type(err).__name__ != "WorkflowUpdateFailedError":
            raise
        raise UserError(root_cause(err)) from None  # the validator's reason
    print(f"golem {gid}: {answer.note}")
    return 0


def _kill(args: Namespace) -> int:
    from cli.common import arun

    return arun(_kill_async(args))


def _spawn(args: Namespace) -> int:
    if not args.inherit:  # a new golem on this host's fleet (cli/fleet.py)
        from cli.fleet import spawn_placed

        return spawn_placed(args)
    from golem.grimoire.transfer import import_file
    from golem.life.succession import find_legacy, stage_succession, successor_home

    data = Path(args.data)
    legacy = find_legacy(data, args.inherit)
    into = Path(args.into) if args.into else data.with_name(f"{data.name}-{args.new_id}")
    if into.exists() and any(into.iterdir()):
        raise UserError(f"{into} is not empty: a successor starts from a fresh data dir (pick --into)")
    toml = successor_home(Path(args.home) / "golem.toml", args.new_id, into)
    papers = stage_succession(legacy, into)
    cfg = _load(str(toml.parent))
    episodes, semantic = _open_stores(into, toml.parent)
    counts = import_file(legacy.grimoire, episodes, semantic)
    print(f"successor {args.new_id} (generation {papers['generation']}) of {args.inherit} "
          f"(died of {legacy.certificate.cause} at tick {legacy.certificate.died_at_tick}) in {into}")
    print(f"  inherited: {json.dumps(counts)} at confidence ≤ 0.3; bloodstains: {len(legacy.reflection.warnings)}; "
          f"gating package staged")
    print(f"  its worker: golem worker --home {toml.parent} --data {into}")
    if args.start:
        from cli.common import arun
        from infra.stack import ensure_golem_running

        print("  " + arun(ensure_golem_running(args.address, cfg, into)))
    else:
        print(f"  start it:   golem run --home {toml.parent} --data {into}   (or `golem spawn ... --start` "
              "beside a running Temporal)")
    return 0


def _open_stores(data_dir: Path, home: Path) -> tuple[EpisodeStore, SemanticStore]:
    from golem.grimoire.access import open_stores

    return open_stores(data_dir, home)


def _ticks(n: float) -> str:
    """A runway in ticks an owner can read: ~12 ticks, ~48,000 ticks, or 'over a million ticks' when the burn is
    next to nothing (no deliberation, no gas yet)."""
    return "over a million ticks" if n >= 1e6 else f"~{n:,.0f} ticks"


def life_line(st: GolemStatus) -> str:
    """`golem status`'s lines on the golem's life: the three clocks, the credit, the affect, death."""
    c = st.clocks or {}
    clocks = (f"economic {c.get('economic', 1):.2f} × epistemic {c.get('epistemic', 1):.2f} × stochastic "
              f"{c.get('stochastic', 1):.2f}")
    credit = f"   credit ${st.credit_remaining_usd:,.4f}" if st.credit_remaining_usd is not None else ""
    if st.estimated_ttl_ticks is not None:  # (wallet USDC + credit) / burn of gas and inference (x402: paid from it)
        runway = _ticks(st.estimated_ttl_ticks)
        if st.runway_days is not None:
            runway += f", ~{st.runway_days:,.1f} days"
        burn = f" at ${st.burn_usd_per_tick:.4f}/tick of gas + inference" if st.burn_usd_per_tick else ""
        credit += f" (runway {runway}{burn})" if credit else f"   runway {runway} (wallet USDC / burn{burn})"
    gen = f"   generation {st.generation} (of {st.predecessor})" if st.predecessor else ""
    p = st.pad or {}
    mood = st.emotion or ("neutral" if st.pad else "-")  # no primary emotion: the affect has no valence
    affect = (f"  affect:     {mood} (P {p.get('pleasure', 0):+.2f} A {p.get('arousal', 0):+.2f} "
              f"D {p.get('dominance', 0):+.2f})   somatic markers: {st.somatic_markers}")
    limit = getattr(st, "hayflick_ticks", None)
    lived = (f"{st.ticks_lived} of {limit} ticks lived (Hayflick distance {max(limit - st.ticks_lived, 0)})"
             if limit else f"{st.ticks_lived} ticks lived")
    out = f"  life:       {lived}; {clocks}{credit}{gen}\n{affect}"
    if st.certificate:
        out += f"\n  DEAD:       {st.certificate.get('cause')} ({st.certificate.get('detail')}); legacy in " \
               f"{st.certificate.get('legacy_dir')}"
    elif st.dying:
        out += f"\n  DYING:      {st.dying}: Thanatopsis under way"
    return out


def register(command: Command) -> None:
    p = command("extensions", "the hook × extension matrix of this build")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=_extensions)
    p = command("kill", "end the golem for good: settle, reflect, leave a legacy (asks for its id to confirm)")
    p.add_argument("--reason", required=True, help="why (in the death certificate)")
    p.add_argument("--yes", action="store_true", help="do not ask; confirm with the golem's id from golem.toml")
    p.set_defaults(fn=_kill)
    p = command("spawn", "place a new golem on this host (--home: the home it copies), or a successor (--inherit)")
    p.add_argument("new_id")
    p.add_argument("--inherit", metavar="DEAD_ID", help="the dead golem whose legacy (in --data) it inherits")
    p.add_argument("--kind", default="golem-instance", choices=["golem-instance"],
                   help="the kind of golem, a workflow kind (today: golem-instance, the trading golem)")
    p.add_argument("--host", help="the host it is placed on (GOLEM_HOST, else this machine's name)")
    p.add_argument("--key-env", help="the env var its host's worker reads its key from (default: its home's "
                                     "[chain] key_env)")
    p.add_argument("--no-start", action="store_true", help="place it without starting its workflow")
    p.add_argument("--into", help="the successor's data dir (default: <data>-<NEW_ID> beside --data)")
    p.add_argument("--start", action="store_true", help="--inherit: also start its GolemWorkflow on Temporal (--address)")
    p.set_defaults(fn=_spawn)
