"""`golem pheromones [--json] [--clade ID]` — the clade's pheromone field: every trail with its intensity now.

Reads the clade's PheromoneFieldWorkflow with a query (docs/how-to/clade.md); a golem without `[clade] id` has no
field and the command says so.
"""

from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path

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


def register(command: Command) -> None:
    p = command("pheromones", "the clade's pheromone field: trails, intensity now, half-life, depositor, age")
    p.add_argument("--clade", default=None, help="the clade to read (default: [clade] id of golem.toml)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_pheromones)
