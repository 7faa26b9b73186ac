"""The legacy package (Thanatopsis phase 4) and succession from it (`golem spawn NEW --inherit DEAD`).

<data>/legacy/<golem>/ holds certificate.json, death-reflection.json, grimoire.jsonl (golem.grimoire.transfer
format, plus one bloodstain warning per lesson of the death) and gating.json (the learned-gating package).
A successor imports them at confidence min(c, 0.3): docs/design/life.md#death-and-legacy.
"""

from __future__ import annotations

import json
from pathlib import Path

from golem.cognition.learned_gating import export_package, import_package
from golem.grimoire.semantic.store import EntrySource, EntryType, GrimoireEntry, Provenance
from golem.layout import DataLayout
from golem.life.death import DeathReflection
from golem.models.life import DeathCertificate
from golem.models.state import LearnedGatingState

FILES = ("certificate.json", "death-reflection.json", "grimoire.jsonl", "gating.json")


def legacy_dir(data_dir: Path, golem_id: str) -> Path:
    return DataLayout(data_dir).legacy(golem_id)


def bloodstains(reflection: DeathReflection, generation: int, tick: int) -> list[GrimoireEntry]:
    """The death's warnings as Grimoire entries (provenance death_reflection): the legacy's and the clade's."""
    return [GrimoireEntry(id=f"bloodstain-{reflection.golem_id}-{i}", category=EntryType.WARNING, content=text,
                          confidence=0.9, quality_score=0.8, provenance=Provenance.DEATH_REFLECTION,
                          source=EntrySource(golem_id=reflection.golem_id, generation_number=generation),
                          created_tick=tick, tags=["bloodstain", "death_reflection"])
            for i, text in enumerate(reflection.warnings)]


def bloodstain_lines(reflection: DeathReflection, generation: int, tick: int) -> list[str]:
    """The bloodstains as lines of the legacy's grimoire.jsonl."""
    return [json.dumps({"kind": "entry", **e.model_dump(mode="json")})
            for e in bloodstains(reflection, generation, tick)]


def write_legacy(out: Path, certificate: DeathCertificate, reflection: DeathReflection, grimoire_lines: list[str],
                 gating: LearnedGatingState) -> Path:
    """Write the package atomically (a temp folder renamed into place); returns the folder."""
    out = Path(out)
    tmp = out.with_name(out.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    lines = [*grimoire_lines, *bloodstain_lines(reflection, certificate.generation, certificate.died_at_tick)]
    (tmp / "grimoire.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    package = export_package(gating, certificate.golem_id, certificate.died_at_tick)
    (tmp / "gating.json").write_text(json.dumps(package, indent=1), encoding="utf-8")
    (tmp / "death-reflection.json").write_text(reflection.model_dump_json(indent=1), encoding="utf-8")
    cert = certificate.model_copy(update={"legacy_dir": str(out)})
    (tmp / "certificate.json").write_text(cert.model_dump_json(indent=1), encoding="utf-8")
    if out.exists():  # a retried activity: replace what an earlier attempt left
        for f in out.iterdir():
            f.unlink()
        out.rmdir()
    tmp.rename(out)
    return out


class Legacy:
    """A dead golem's package, read for a successor."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        missing = [f for f in FILES if not (self.folder / f).exists()]
        if missing:
            raise ValueError(f"{self.folder} is not a complete legacy package (missing {', '.join(missing)}); a golem "
                             "leaves one when it dies (golem kill, or a clock running out)")
        self.certificate = DeathCertificate.model_validate_json((self.folder / "certificate.json").read_text())
        self.reflection = DeathReflection.model_validate_json((self.folder / "death-reflection.json").read_text())
        self.gating = import_package(json.loads((self.folder / "gating.json").read_text()))
        self.grimoire = self.folder / "grimoire.jsonl"


def inherited_gating(legacy: Legacy) -> LearnedGatingState:
    """The predecessor's gating beliefs (import_package leaves the decision log empty: the successor judges its own
    ticks)."""
    return legacy.gating.model_copy(update={"inherited_from": legacy.certificate.golem_id})
