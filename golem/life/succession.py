"""Succession: `golem spawn NEW_ID --inherit DEAD_ID` prepares a successor from a dead golem's legacy.

Into DIR: home/golem.toml (the dead golem's, [golem] id = NEW_ID), grimoire/ (the legacy's grimoire.jsonl imported
at confidence min(c, 0.3), bloodstains kept), gating-inheritance.json (what `golem gating import` stages) and
succession.json (generation and predecessor, read when the successor is born). See docs/design/life.md#death-and-legacy.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from golem.cognition.learned_gating import INHERITANCE_FILE as GATING_FILE  # what `golem gating import` stages
from golem.errors import UserError
from golem.layout import DataLayout
from golem.life.legacy import Legacy, legacy_dir
from golem.life.lifespan import born
from golem.models.config import GolemConfig
from golem.models.life import LifeState
from golem.models.state import GolemState

ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")  # [golem] id


def find_legacy(data_dir: Path, dead_id: str) -> Legacy:
    folder = legacy_dir(data_dir, dead_id)
    if not folder.is_dir():
        raise UserError(f"no legacy of golem {dead_id!r} in {folder}: a golem leaves one when it dies; point --data at "
                        "the dead golem's data dir")
    try:
        return Legacy(folder)
    except ValueError as err:
        raise UserError(str(err)) from None


def successor_home(toml_path: Path, new_id: str, into: Path) -> Path:
    """<into>/home/golem.toml: the dead golem's config under the new id."""
    import tomli_w

    if not ID_PATTERN.match(new_id):
        raise UserError(f"{new_id!r} is not a golem id: lowercase letters, digits and '-', at most 41 characters")
    raw = tomllib.loads(Path(toml_path).read_text())
    golem = raw.setdefault("golem", {})
    home = Path(golem.get("home", "."))
    golem["home"] = str(home if home.is_absolute() else (Path(toml_path).parent / home).resolve())
    golem["id"] = new_id
    out = Path(into) / "home"
    out.mkdir(parents=True, exist_ok=True)
    (out / "golem.toml").write_text(tomli_w.dumps(raw))
    return out / "golem.toml"


def stage_succession(legacy: Legacy, into: Path) -> dict[str, Any]:
    """The successor's birth papers: its generation and predecessor, and the gating package."""
    into = Path(into)
    into.mkdir(parents=True, exist_ok=True)
    cert = legacy.certificate
    papers = {"predecessor": cert.golem_id, "generation": cert.generation + 1, "cause_of_death": cert.cause,
              "legacy": str(legacy.folder)}
    DataLayout(into).succession.write_text(json.dumps(papers, indent=1))
    (into / GATING_FILE).write_text((legacy.folder / "gating.json").read_text())
    return papers


def born_as_successor(config: GolemConfig, data_dir: Path, tick: int = 0) -> LifeState | None:
    """A newborn's LifeState from <data>/succession.json (None when it is a first-generation golem)."""
    path = DataLayout(data_dir).succession
    if not path.exists():
        return None
    papers = json.loads(path.read_text())
    return born(config.lifespan, tick, generation=int(papers["generation"]), predecessor=str(papers["predecessor"]))


def inherited_state(config: GolemConfig, data_dir: Path) -> GolemState | None:
    """A newborn golem's state, seeded with a staged gating inheritance package if there is one
    (`golem gating import FILE`) and, for a successor (`golem spawn`), its generation and predecessor; None when
    nothing is staged."""
    from golem.cognition.fold import new_golem_state
    from golem.cognition.learned_gating import import_package

    path = data_dir / GATING_FILE
    life = born_as_successor(config, data_dir)
    if not path.exists() and life is None:
        return None
    state = new_golem_state(config)
    if path.exists():
        state = state.model_copy(update={"learned_gating": import_package(json.loads(path.read_text()))})
    if life is not None:
        state = state.model_copy(update={"life": life})
    return state
