"""The dream staging buffer and the DreamJournal.

Dream outputs never enter the Grimoire directly: they move hypothesis → partially_validated → validated. A grounded
threat rehearsal starts partially validated and its warning and guard enter at confidence 0.3; a REM hypothesis
waits for a waking tick that corroborates it; a second corroboration raises the entry to 0.7. Dream yield = share
of staged items that reached validated (healthy 10–30 %). Why: docs/design/dreams.md#staging.
"""

from __future__ import annotations

import hashlib
import sqlite3
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from golem.layout import DataLayout

DREAM_ENTRY_CONFIDENCE = 0.3  # a dream is a simulation the golem wrote itself: low confidence first
DREAM_VALIDATED_CONFIDENCE = 0.7  # validated by waking evidence
CORROBORATIONS_TO_VALIDATE = 2  # ours: one waking confirmation = partial, two = validated
DREAM_YIELD_HEALTHY = (0.10, 0.30)  # docs/design/events.md#quality-figures
THREAT_COVERAGE_CYCLES = 7  # threat coverage: rehearsed in the last 7 dream cycles


class StageStatus(str, Enum):
    HYPOTHESIS = "hypothesis"
    PARTIALLY_VALIDATED = "partially_validated"
    VALIDATED = "validated"


class StageKind(str, Enum):
    HYPOTHESIS = "hypothesis"  # REM: what a counterfactual of a real episode showed
    THREAT_WARNING = "threat_warning"  # a broken response, in figures
    GUARD = "guard"  # a PLAYBOOK.md guard candidate


class Trigger(BaseModel):
    """The waking situation that would corroborate a staged item: a tick whose record shows health factor
    below `health_below` or a price move at or below `price_move_bps`."""

    health_below: float | None = None
    price_move_bps: float | None = None

    def matches(self, health: float | None, move_bps: float | None) -> bool:
        return bool((self.health_below is not None and health is not None and health < self.health_below)
                    or (self.price_move_bps is not None and move_bps is not None and move_bps <= self.price_move_bps))


class StagedItem(BaseModel):
    id: str
    cycle_tick: int
    kind: StageKind
    content: str
    scenario: str = ""
    source_episode: str | None = None
    status: StageStatus = StageStatus.HYPOTHESIS
    confidence: float = DREAM_ENTRY_CONFIDENCE
    corroborations: list[int] = Field(default_factory=list)  # waking ticks that confirmed it
    trigger: Trigger = Field(default_factory=Trigger)
    entry_id: str | None = None  # the semantic entry once admitted
    rule: str | None = None  # a guard's PLAYBOOK rule line ("WHEN … THEN …"), for the heuristic store


def staged_id(cycle_tick: int, kind: StageKind, content: str) -> str:
    """Deterministic per cycle: a retried integration stages the same ids again (an upsert, not a duplicate)."""
    return "dream-" + hashlib.sha256(f"{cycle_tick}|{kind.value}|{content}".encode()).hexdigest()[:16]


def corroborate(item: StagedItem, waking: list[tuple[int, float | None, float | None]]) -> StagedItem:
    """Fold waking evidence (tick, health factor, price move bps) from after the dream into the item's status."""
    seen = set(item.corroborations)
    new = [t for t, hf, mv in waking if t > item.cycle_tick and t not in seen and item.trigger.matches(hf, mv)]
    if not new:
        return item
    ticks = sorted(seen | set(new))
    status = (StageStatus.VALIDATED if len(ticks) >= CORROBORATIONS_TO_VALIDATE
              else StageStatus.PARTIALLY_VALIDATED)
    if item.status == StageStatus.VALIDATED:
        status = StageStatus.VALIDATED
    conf = DREAM_VALIDATED_CONFIDENCE if status == StageStatus.VALIDATED else item.confidence
    return item.model_copy(update={"corroborations": ticks, "status": status, "confidence": conf})


class StagingBuffer:
    """`<data>/grimoire/dream-staging.sqlite`: one row per staged dream output."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("CREATE TABLE IF NOT EXISTS staged (id TEXT PRIMARY KEY, cycle_tick INTEGER NOT NULL, "
                       "status TEXT NOT NULL, body TEXT NOT NULL)")

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def put(self, item: StagedItem) -> None:
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO staged (id, cycle_tick, status, body) VALUES (?, ?, ?, ?)",
                       (item.id, item.cycle_tick, item.status.value, item.model_dump_json()))

    def get(self, item_id: str) -> StagedItem | None:
        with self._db() as db:
            row = db.execute("SELECT body FROM staged WHERE id = ?", (item_id,)).fetchone()
        return StagedItem.model_validate_json(row[0]) if row else None

    def all(self) -> list[StagedItem]:
        with self._db() as db:
            rows = db.execute("SELECT body FROM staged ORDER BY cycle_tick, id").fetchall()
        return [StagedItem.model_validate_json(r[0]) for r in rows]

    def open_items(self) -> list[StagedItem]:
        return [i for i in self.all() if i.status != StageStatus.VALIDATED]

    def dream_yield(self) -> float | None:
        """Share of staged items that reached validated (None before anything was staged)."""
        items = self.all()
        return sum(i.status == StageStatus.VALIDATED for i in items) / len(items) if items else None


# ---- the DreamJournal: one JSON file per cycle, keyed by the cycle's tick -------------------------------------
class DreamJournal(BaseModel):
    """What one dream cycle did (grimoire DreamJournal): replayed, imagined, rehearsed, staged, promoted."""

    golem_id: str
    tick: int
    started_at: str = ""
    urgency: float | None = None
    reasons: list[str] = Field(default_factory=list)  # why the scheduler dreamed now
    focus: str | None = None  # a next-dream follow-up's focus: episodes of the regimes / tools it names replay first
    phases_done: list[str] = Field(default_factory=list)
    stopped_at: str | None = None  # the phase a critical steer or the time budget stopped it before
    stop_reason: str | None = None
    replayed: list[dict[str, Any]] = Field(default_factory=list)  # episode id, utility, deviation data, strengthened
    merged: list[list[str]] = Field(default_factory=list)  # near-duplicate episode groups among the replayed
    compressed: list[dict[str, Any]] = Field(default_factory=list)  # groups folded into one row: {"kept", "merged"} ids
    imagined: list[dict[str, Any]] = Field(default_factory=list)  # ThreatRehearsalResult dumps of REM scenarios
    rehearsed: list[dict[str, Any]] = Field(default_factory=list)  # ThreatRehearsalResult dumps of Tier 1 threats
    threats_rehearsed: list[str] = Field(default_factory=list)  # ThreatKind values covered this cycle
    threats_due: list[str] = Field(default_factory=list)  # Tier 1 threats that apply to the positions
    staged: list[str] = Field(default_factory=list)
    promoted: list[str] = Field(default_factory=list)  # staged ids admitted (or raised) this cycle
    forks: int = 0
    dream_yield: float | None = None
    threat_coverage: float | None = None


def journal_dir(data_dir: Path) -> Path:
    return DataLayout(data_dir).dreams


def journal_path(data_dir: Path, tick: int) -> Path:
    return journal_dir(data_dir) / f"cycle-{tick:06d}.json"


def load_journal(data_dir: Path, golem_id: str, tick: int) -> DreamJournal:
    path = journal_path(data_dir, tick)
    if path.exists():
        return DreamJournal.model_validate_json(path.read_text())
    return DreamJournal(golem_id=golem_id, tick=tick)


def save_journal(data_dir: Path, journal: DreamJournal) -> Path:
    path = journal_path(data_dir, journal.tick)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(journal.model_dump_json(indent=1))
    tmp.replace(path)
    return path


def journals(data_dir: Path) -> list[DreamJournal]:
    d = journal_dir(data_dir)
    if not d.exists():
        return []
    out = []
    for p in sorted(d.glob("cycle-*.json")):
        try:
            out.append(DreamJournal.model_validate_json(p.read_text()))
        except ValueError:
            continue  # a half-written file from a killed worker: the next run of that phase rewrites it
    return out


def threat_coverage(history: list[DreamJournal], window: int = THREAT_COVERAGE_CYCLES) -> float | None:
    """Share of the Tier 1 threats that apply (due in the newest cycles) rehearsed in the last
    `window` cycles. None before any cycle named a threat."""
    recent = history[-window:]
    due = {t for j in recent for t in j.threats_due}
    if not due:
        return None
    done = {t for j in recent for t in j.threats_rehearsed}
    return len(due & done) / len(due)
