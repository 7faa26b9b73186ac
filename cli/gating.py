"""`golem gating export|import|show`: the learned gating parameters as an inheritance package.

export  queries the running golem's GolemState (workflow query) and writes the package JSON
import  validates a package and stages it as <data>/gating-inheritance.json, which a new golem
        loads at first start (see learned_gating.import_package); it never touches a running golem
show    prints the running golem's learned weights, boundaries and feedback statistics
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cli.common import Command, arun, client, golem_config, query_golem
from golem.ids import golem_workflow_id

if TYPE_CHECKING:
    from golem.models.state import GolemState



def _learned_state(args: argparse.Namespace) -> GolemState:
    return arun(_learned_state_async(args))


async def _learned_state_async(args: argparse.Namespace) -> GolemState:
    from golem.models.state import GolemState

    cfg = golem_config(args)
    temporal = await client(args)
    # The query by name: importing GolemWorkflow would load every activity's clients (web3, LanceDB, anthropic).
    handle = temporal.get_workflow_handle(golem_workflow_id(cfg.golem.id))
    state = await query_golem(args, cfg, handle, "state", GolemState, or_none=True)
    if state is None:
        sys.exit("golem gating: the golem has no state yet (has it started ticking?)")
    return state


def _export(args: argparse.Namespace) -> int:
    from golem.cognition.learned_gating import export_package

    state = _learned_state(args)
    text = json.dumps(export_package(state.learned_gating, state.golem_id, state.tick), indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
        print(f"wrote {args.out} ({len(text.encode())} bytes, tick {state.tick})")
    else:
        print(text)
    return 0


def _import(args: argparse.Namespace) -> int:
    from golem.cognition.learned_gating import INHERITANCE_FILE, PackageError, import_package

    try:
        package = json.loads(Path(args.file).read_text())
        learned = import_package(package)
    except FileNotFoundError:
        sys.exit(f"golem gating import: {args.file} not found")
    except json.JSONDecodeError as err:
        sys.exit(f"golem gating import: {args.file} is not JSON ({err})")
    except PackageError as err:
        sys.exit(f"golem gating import: {err}")
    dest = Path(args.data) / INHERITANCE_FILE
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(package, indent=2) + "\n")
    weights = ", ".join(f"{e} {w:.3f}" for e, w in zip(learned.hedge.experts, learned.hedge.weights))
    print(f"staged {dest} (from {learned.inherited_from}); a new golem starts with: {weights}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from golem.cognition.decision_cache import hit_rate_report

    state = _learned_state(args)
    lg = state.learned_gating
    print(f"golem {state.golem_id} at tick {state.tick}: {lg.feedback_rounds} feedback rounds, "
          f"{len(lg.log)} ticks awaiting feedback" + (f", inherited from {lg.inherited_from}" if lg.inherited_from else ""))
    from golem.cognition.learned_gating import explain_experts

    for line in explain_experts(lg, lg.log[-1] if lg.log else None):
        print("  " + line)
    for bucket, tb in lg.thompson.items():
        print(f"  {bucket:6} arousal boundaries (mean): " + " / ".join(f"{b.mean:.3f}" for b in tb.boundaries))
    s = lg.stats
    if s.judged:
        print(f"  judged {s.judged}: correct {s.correct / s.judged:.0%}, unnecessary {s.unnecessary}, "
              f"insufficient {s.insufficient}; learned {s.learned_correct / s.judged:.0%} vs "
              f"epsilon-greedy shadow {s.shadow_correct / s.judged:.0%}")
    c = state.decision_cache_stats or hit_rate_report(state.decision_cache)
    print(f"  decision cache: {c['entries']} entries, hit rate {c['hit_rate']:.0%} of {c['lookups']} lookups")
    return 0


def register(command: Command) -> None:
    p = command("gating", "learned gating parameters: export / import the inheritance package, show them")
    sub = p.add_subparsers(dest="gating_cmd", required=True)
    # like every command, accept --home/--data/--address after the subcommand too
    common = argparse.ArgumentParser(add_help=False)
    for opt in ("--home", "--data", "--address"):
        common.add_argument(opt, default=argparse.SUPPRESS)
    e = sub.add_parser("export", parents=[common], help="write the running golem's learned gating package (JSON)")
    e.add_argument("--out", help="file to write (default: stdout)")
    e.set_defaults(fn=_export)
    # the file name is learned_gating.INHERITANCE_FILE, spelled out so `golem --help` does not load pydantic
    i = sub.add_parser("import", parents=[common],
                       help="validate a package and stage it as <data>/gating-inheritance.json")
    i.add_argument("file")
    i.set_defaults(fn=_import)
    s = sub.add_parser("show", parents=[common], help="the running golem's learned gating state")
    s.set_defaults(fn=_show)
