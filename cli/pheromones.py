"""`golem pheromones [--json] [--clade ID]` — the clade's pheromone field: every trail with its intensity now.
`golem clade [--json] [--stage S]` — the entry exchange as this golem sees it: what it shared, and every entry its
siblings sent, by stage (quarantine, consensus, sandbox, adopted, rejected) with the reason.
`golem consolidator NAME --member ID[=DATA[@HOME]] ... [--every 50m] [--clade ID] [--delete]` — a
memory-consolidator on a Temporal Schedule over those golems' Grimoires, run by their fleet host's worker or on a
clade's queue. The field is read with a query on PheromoneFieldWorkflow; a golem without `[clade] id` has none
and the command says so (docs/how-to/clade.md).
"""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

from cli.common import Command, arun, client, config


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


async def _pheromones(args: Namespace) -> int:
    import time

    from activities.pheromones import PheromoneLink
    from golem.clade.field import everything
    from golem.grimoire.semantic.topology import address_labels

    cfg = config(args)
    clade = args.clade or cfg.clade.id
    if not clade:
        print(f"golem {cfg.golem.id} is in no clade: there is no pheromone field to show (set [clade] id in "
              "golem.toml to join one, or pass --clade ID)")
        return 0
    state = await PheromoneLink(await client(args)).state(clade, timeout_s=10.0)
    now = time.time()
    trails = everything(state, now) if state is not None else []
    if args.json:
        print(json.dumps({"clade": clade, "started": state is not None,
                          "trails": [t.model_dump(mode="json") for t in trails]}, indent=2))
        return 0
    if state is None:
        print(f"clade {clade}: no pheromone field yet (no golem of the clade has laid one)")
        return 0
    labels = address_labels(Path(args.data))
    print(f"clade {clade}: {len(trails)} trail(s), intensity now (half-lives: threat, opportunity, congestion as laid)")
    if not trails:
        return 0
    print(f"  {'intensity':>9}  {'kind':<11} {'half-life':>9}  {'age':>6}  {'depositor':<16} entity")
    for t in trails:
        label = labels.get(t.entity.partition(":")[2].lower(), "")
        print(f"  {t.intensity:>9.3f}  {t.kind:<11} {_age(t.half_life_s):>9}  {_age(t.age_s):>6}  {t.depositor:<16} "
              f"{t.entity}" + (f" ({label})" if label else ""))
    return 0


def cmd_pheromones(args: Namespace) -> int:
    try:
        return arun(_pheromones(args))
    except ValueError as err:  # a bad --clade id
        sys.exit(f"golem pheromones: {err}")


def cmd_clade(args: Namespace) -> int:
    """Reads the golem's own exchange ledger (<data>/clade/exchange.sqlite); no Temporal needed."""
    from activities.clade import ledger_path
    from golem.clade.exchange import CladeLedger
    from golem.models.clade import STAGES

    cfg = config(args)
    path = ledger_path(Path(args.data))
    if not path.exists():
        where = (f"golem {cfg.golem.id} is in no clade (set [clade] id in golem.toml to join one)" if not cfg.clade.id
                 else f"golem {cfg.golem.id} has exchanged nothing with clade {cfg.clade.id} yet (its first "
                      f"tick shares and reads)")
        if args.json:
            print(json.dumps({"clade": cfg.clade.id, "sent": 0, "inbound": []}, indent=2))
        else:
            print(where)
        return 0
    from golem.clade.proposals import ProposalInbox

    ledger = CladeLedger(path)
    items = ledger.inbound(args.stage)
    offers = ProposalInbox(path).all()
    if args.json:
        print(json.dumps({"clade": cfg.clade.id, "sent": ledger.sent_count(), "stages": ledger.stage_counts(),
                          "inbound": [i.model_dump(mode="json") for i in items],
                          "proposals": [d.model_dump(mode="json") for d in offers]}, indent=2))
        return 0
    counts = ledger.stage_counts()
    print(f"clade {cfg.clade.id or '(none now)'}: {ledger.sent_count()} entr(ies) shared; inbound "
          + ", ".join(f"{s} {counts.get(s, 0)}" for s in STAGES))
    for stage in [args.stage] if args.stage else STAGES:
        rows = [i for i in items if i.stage == stage]
        if not rows:
            continue
        print(f"{stage}:")
        for i in rows:
            conf = f"{i.adopted_confidence:.2f}" if i.adopted_confidence is not None else f"{i.confidence:.2f}"
            mark = " [death]" if i.legacy else ""
            print(f"  {i.category:<11} {conf}  from {', '.join(i.origins)}{mark}: {i.content[:90]}")
            print(f"    {i.reason}")
    if offers and not args.stage:
        print("proposals (a memory-consolidator's; this golem's admission gate decides at its next tick):")
        for d in offers:
            score = f" (score {d.score:.2f})" if d.score is not None else ""
            print(f"  {d.status:<12} from {d.proposal.consolidator}, seen by {', '.join(d.proposal.golems)}{score}: "
                  f"{d.proposal.content[:90]}")
    return 0


def _duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        return float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)
    except (ValueError, IndexError):
        raise ValueError(f"--every {text!r}: give seconds or a number with s/m/h/d, e.g. 50m") from None


def _members(args: Namespace) -> tuple[list[Any], list[str | None]]:
    """The --member golems (ID=DATA[@HOME], or a bare ID: the golem placed in --data) and, for each, the fleet host its
    data dir is placed on (<fleet>/golems/<id>/ in <fleet>/fleet.sqlite, placed and not stopped or moved) or None."""
    from golem.fleet import FleetRegistry
    from golem.models.clade import ConsolidatedGolem

    golems: list[ConsolidatedGolem] = []
    hosts: list[str | None] = []
    for spec in args.member:
        home: Path | None
        gid, eq, rest = spec.partition("=")
        if eq and not rest or not gid:
            raise ValueError(f"--member {spec!r}: write ID (a golem placed in --data), ID=DATA_DIR or ID=DATA_DIR@HOME")
        if not eq:
            registry = FleetRegistry(args.data)
            if (registry.get(gid) if registry.path.exists() else None) is None:
                raise ValueError(f"--member {gid}: no golem {gid} placed in {args.data} (`golem list`); "
                                 f"or write ID=DATA_DIR[@HOME]")
            data, home = Path(registry.layout(gid).root).resolve(), registry.home(gid).resolve()
        else:
            path, _, home_text = rest.partition("@")
            data, home = Path(path).resolve(), Path(home_text).resolve() if home_text else None
        placed = FleetRegistry(data.parent.parent).get(gid) if data.parent.name == "golems" and \
            (data.parent.parent / "fleet.sqlite").exists() else None
        running = placed is not None and placed.running
        hosts.append(placed.host if placed is not None and running else None)
        if running:
            home = home or FleetRegistry(data.parent.parent).home(gid)
        golems.append(ConsolidatedGolem(id=gid, data=str(data), home=str(home) if home else ""))
    return golems, hosts


async def _consolidator(args: Namespace) -> int:
    from datetime import timedelta

    from activities.consolidator import schedule
    from golem.ids import clade_queue, host_queue
    from golem.models.clade import ConsolidatorInput, consolidator_id

    if args.delete:
        c = await client(args)
        await c.get_schedule_handle(consolidator_id(args.name)).delete()
        print(f"consolidator {args.name}: schedule {consolidator_id(args.name)} deleted")
        return 0
    golems, hosts = _members(args)
    # where it runs: the worker that holds the members' data — their fleet host — unless --clade names a queue
    host = ""
    if not args.clade and any(hosts):
        if len(set(hosts)) > 1:
            on = ", ".join(f"{g.id} on {h or 'no fleet host'}" for g, h in zip(golems, hosts))
            raise ValueError(f"the members are not all on one fleet host ({on}): a consolidator reads their data dirs "
                             f"where they are; move them onto one host (golem export / import), or pass --clade ID "
                             f"to run it on a clade queue whose worker reads every data dir")
        host = hosts[0] or ""
    cfg = None if host and not (Path(args.home) / "golem.toml").exists() else config(args)
    clade = "" if host else (args.clade or (cfg.clade.id if cfg is not None else ""))
    if not host and not clade:
        raise ValueError("a consolidator runs where its golems' data is: name golems placed on a fleet host "
                         "(--member ID with --data FLEET_DIR), or pass --clade ID / set [clade] id in golem.toml")
    # default interval: every 50 ticks (the consolidator's cadence) of the first member's golem, else this home's
    theta = _theta(golems[0]) if host else None
    every = _duration(args.every) if args.every else 50 * (theta or (cfg.clock.theta_base_seconds if cfg else 30.0))
    inp = ConsolidatorInput(name=args.name, clade=clade, host=host, golems=golems)
    sid = await schedule(await client(args), inp, timedelta(seconds=every))
    where = f"host {host}'s queue {host_queue(host)}" if host else f"clade {clade}'s queue {clade_queue(clade)}"
    print(f"consolidator {args.name}: schedule {sid} runs every {every:.0f} s on {where} over "
          f"{', '.join(g.id for g in golems)}")
    return 0


def _theta(g: Any) -> float | None:
    from golem.models.config import load_config

    try:
        return load_config(Path(g.home) / "golem.toml").clock.theta_base_seconds if g.home else None
    except Exception:  # the interval falls back to this home's golem
        return None


def cmd_consolidator(args: Namespace) -> int:
    from pydantic import ValidationError
    try:
        return arun(_consolidator(args))
    except (ValueError, ValidationError) as err:
        sys.exit(f"golem consolidator: {err}")


def register(command: Command) -> None:
    p = command("pheromones", "the clade's pheromone field: trails, intensity now, half-life, depositor, age")
    p.add_argument("--clade", default=None, help="the clade to read (default: [clade] id of golem.toml)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_pheromones)
    c = command("clade", "the clade's entry exchange: entries shared, and siblings' entries by stage with the reason")
    c.add_argument("--stage", choices=("quarantine", "consensus", "sandbox", "adopted", "rejected"), default=None)
    c.add_argument("--json", action="store_true")
    c.set_defaults(fn=cmd_clade)
    m = command("consolidator", "a memory-consolidator on a Temporal Schedule over several golems' Grimoires")
    m.add_argument("name", help="the consolidator's name (its Schedule is consolidator-NAME)")
    # --member, since --golem ID is every command's choice of a placed golem
    m.add_argument("--member", action="append", default=[], metavar="ID[=DATA[@HOME]]",
                   help="a golem whose Grimoire it reads (at least two); a bare ID: the golem placed in --data")
    m.add_argument("--every", default=None, help="interval, e.g. 50m (default: 50 ticks of this home's golem)")
    m.add_argument("--clade", default=None, help="the clade whose queue runs it (default: the members' fleet host's "
                                                 "queue, else [clade] id)")
    m.add_argument("--delete", action="store_true", help="delete the consolidator's Schedule")
    m.set_defaults(fn=cmd_consolidator)
