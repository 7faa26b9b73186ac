"""PLAYBOOK.md compilation.

The Curator compiles heuristics with confidence >= 0.7 into a `## Global` section and one `## Strategy: <id>`
section per strategy scope; the file's first line carries its revision. Every revision (text, sha256, tick,
reason) is kept in `playbook_revisions`; history is append-only: `rollback(n)` writes revision n back as a *new*
revision through the same safety guard. See docs/design/grimoire.md#playbookmd.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from golem.grimoire.playbook.heuristics import GLOBAL_SCOPE, Heuristic, HeuristicStore
from golem.storage import connect, immediate_tx, init_db

PROMOTION_THRESHOLD = 0.7  # heuristics at or above it are promoted
HEADER_RE = re.compile(r"^<!-- golem PLAYBOOK revision: (\d+) -->\s*$")


class PlaybookRevision(BaseModel):
    revision: int
    path: str
    heuristics: int
    sha256: str
    changed: bool = True  # False when the compiled content equalled the file already on disk


def _header(revision: int) -> str:
    return f"<!-- golem PLAYBOOK revision: {revision} -->"


def read_revision(path: Path) -> int:
    """Revision in the file's first line; 0 when the file does not exist or is empty."""
    path = Path(path)
    if not path.exists():
        return 0
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return 0
    m = HEADER_RE.match(text.splitlines()[0])
    if not m:
        raise ValueError(
            f"{path} has no '<!-- golem PLAYBOOK revision: N -->' first line, so it was not compiled by the "
            f"Curator; move it aside (PLAYBOOK.md is generated, operator rules belong in STRATEGY.md)"
        )
    return int(m.group(1))


def playbook_line(h: Heuristic) -> str:
    """The heuristic's bullet in PLAYBOOK.md."""
    text = " ".join(h.text.split())  # one bullet per heuristic, whatever the stored whitespace
    return f"- {text} _(confidence {h.confidence:.2f}, {h.evidence_count} episodes, {h.id})_"


_LINE_RE = re.compile(r"^- (?P<text>.+) _\(confidence [0-9.]+, \d+ episodes, (?P<id>h-[0-9a-f]+)\)_\s*$")


def compiled_entries(text: str) -> dict[str, str]:
    """The heuristics a PLAYBOOK.md text holds: id → rule text (playbook_line read back)."""
    out = {}
    for line in text.splitlines():
        m = _LINE_RE.match(line)
        if m:
            out[m.group("id")] = m.group("text")
    return out


def in_playbook(h: Heuristic, min_confidence: float = PROMOTION_THRESHOLD) -> bool:
    """An active heuristic stays until it falls below 0.4 (heuristics.status_after); retired rows never appear, nor
    a rule its trial held back (docs/design/learning.md)."""
    if h.held:
        return False
    return h.status == "active" or (h.status == "candidate" and h.confidence >= min_confidence - 1e-9)


def compile_body(heuristics: list[Heuristic], min_confidence: float = PROMOTION_THRESHOLD) -> str:
    """Everything below the header line. Pure: same heuristics → same text."""
    chosen = [h for h in heuristics if in_playbook(h, min_confidence)]
    by_scope: dict[str, list[Heuristic]] = {}
    for h in chosen:
        by_scope.setdefault(h.scope, []).append(h)
    for hs in by_scope.values():
        hs.sort(key=lambda h: (-h.confidence, -h.evidence_count, h.id))

    lines = [
        "# PLAYBOOK",
        "",
        f"Compiled by the Curator from heuristics with confidence >= {min_confidence:.2f}. "
        "Generated file: the next consolidation rewrites it.",
        "",
        "## Global",
        "",
    ]
    lines += [playbook_line(h) for h in by_scope.get(GLOBAL_SCOPE, [])] or ["_No global heuristics yet._"]
    for scope in sorted(s for s in by_scope if s != GLOBAL_SCOPE):
        lines += ["", f"## Strategy: {scope}", ""]
        lines += [playbook_line(h) for h in by_scope[scope]]
    return "\n".join(lines) + "\n"


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # readers see the old or the new file, never half of one
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class PlaybookRefused(ValueError):
    """A rewrite the safety guard refused: it would drop or loosen a safety constraint."""


# ---- revision history -------------------------------------------------------------------------
_HISTORY_SCHEMA = """
CREATE TABLE IF NOT EXISTS playbook_revisions (
    revision INTEGER PRIMARY KEY,
    sha256 TEXT NOT NULL,
    text TEXT NOT NULL,            -- the whole file, header line included
    tick INTEGER,                  -- delta-cycle tick that wrote it (NULL: unknown, e.g. found on disk)
    reason TEXT NOT NULL,          -- 'compile' | 'rollback:<n>' | 'found-on-disk'
    heuristics INTEGER,            -- promoted heuristics compiled into it (NULL for rollbacks)
    created_at TEXT NOT NULL
);
"""


class PlaybookRevisionRow(BaseModel):
    revision: int
    sha256: str
    text: str
    tick: int | None
    reason: str
    heuristics: int | None
    created_at: str

    @property
    def body(self) -> str:
        return _body(self.text)


def _body(text: str) -> str:
    return text.split("\n", 1)[1] if "\n" in text else ""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class PlaybookHistory:
    """Append-only PLAYBOOK.md revisions in a SQLite file (by default the heuristics file: the rules and
    the document compiled from them live together). One playbook per file."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        init_db(self.db_path, _HISTORY_SCHEMA)

    @classmethod
    def for_store(cls, store: HeuristicStore) -> PlaybookHistory:
        return cls(store.path)

    def record(self, revision: int, text: str, *, tick: int | None, reason: str,
               heuristics: int | None = None) -> bool:
        """Store a revision; False when that revision number is already recorded (history is never rewritten)."""
        if revision < 1:
            raise ValueError(f"revision must be >= 1, got {revision}")
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with immediate_tx(self.db_path) as db:
            cur = db.execute("INSERT OR IGNORE INTO playbook_revisions VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (revision, _sha(text), text, tick, reason, heuristics, now))
            return cur.rowcount == 1

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[PlaybookRevisionRow]:
        with closing(connect(self.db_path, rows=True)) as db:
            try:
                rows = db.execute(sql, args).fetchall()
            except sqlite3.OperationalError:
                return []
        return [PlaybookRevisionRow(**dict(r)) for r in rows]

    def log(self) -> list[PlaybookRevisionRow]:
        """Every revision, oldest first."""
        return self._rows("SELECT * FROM playbook_revisions ORDER BY revision")

    def get(self, revision: int) -> PlaybookRevisionRow:
        rows = self._rows("SELECT * FROM playbook_revisions WHERE revision = ?", (revision,))
        if not rows:
            known = [r.revision for r in self.log()]
            raise KeyError(f"no PLAYBOOK revision {revision} in {self.db_path} (recorded: {known or 'none'})")
        return rows[0]

    def head(self) -> PlaybookRevisionRow | None:
        rows = self._rows("SELECT * FROM playbook_revisions ORDER BY revision DESC LIMIT 1")
        return rows[0] if rows else None

    def last_compiled(self) -> PlaybookRevisionRow | None:
        rows = self._rows("SELECT * FROM playbook_revisions WHERE reason = 'compile' ORDER BY revision DESC LIMIT 1")
        return rows[0] if rows else None

    def diff(self, rev_a: int, rev_b: int, context: int = 3) -> str:
        """Unified diff from revision a to revision b ('' when identical)."""
        a, b = self.get(rev_a), self.get(rev_b)
        return "".join(difflib.unified_diff(a.text.splitlines(keepends=True), b.text.splitlines(keepends=True),
                                            fromfile=f"PLAYBOOK.md@{rev_a}", tofile=f"PLAYBOOK.md@{rev_b}", n=context))


def diff_texts(old: str, new: str, name_a: str = "a", name_b: str = "b") -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=name_a, tofile=name_b))


def _backfill(history: PlaybookHistory, path: Path, current: int) -> None:
    """A file on disk whose revision history has never seen (written before history existed, or the
    process died between the file write and the history insert): record it as found."""
    if current and path.exists() and not history._rows(
            "SELECT * FROM playbook_revisions WHERE revision = ?", (current,)):
        history.record(current, path.read_text(encoding="utf-8"), tick=None, reason="found-on-disk")


def _next_revision(history: PlaybookHistory | None, current: int) -> int:
    head = history.head() if history is not None else None
    return max(current, head.revision if head else 0) + 1  # a deleted file never reuses a number


def rollback(
    path: Path,
    revision: int,
    *,
    history: PlaybookHistory,
    guard: Callable[[str, str], list[str]] | None = None,
    tick: int | None = None,
) -> PlaybookRevision:
    """Write revision `revision`'s content back as a new revision (history is never rewritten).

    The same safety guard as a Curator rewrite applies: rolling back to a revision that lacks a safety
    constraint added since raises PlaybookRefused and leaves the file as it was.
    """
    path = Path(path)
    target = history.get(revision)
    current = read_revision(path)
    _backfill(history, path, current)
    new_rev = _next_revision(history, current)
    text = _header(new_rev) + "\n" + target.body
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if guard is not None:
        refused = guard(old, text)
        if refused:
            raise PlaybookRefused(f"PLAYBOOK.md rollback to revision {revision} refused: " + "; ".join(refused))
    _atomic_write(path, text)
    history.record(new_rev, text, tick=tick, reason=f"rollback:{revision}")
    return PlaybookRevision(revision=new_rev, path=str(path), heuristics=target.heuristics or 0, sha256=_sha(text))


def rewrite_playbook(
    store: HeuristicStore,
    path: Path,
    min_confidence: float = PROMOTION_THRESHOLD,
    guard: Callable[[str, str], list[str]] | None = None,
    *,
    tick: int | None = None,
    history: PlaybookHistory | None | bool = True,
    keep: Callable[[Heuristic], bool] | None = None,
) -> PlaybookRevision:
    """Compile PLAYBOOK.md from the store; bump the revision only when the content changes.

    `keep` narrows the eligible heuristics further: the golem passes playbook_view.admitted_filter, so PLAYBOOK.md
    is a view of the admitted semantic store (quarantine, supersession and decay respected).

    Idempotent: a retried consolidation that finds the same heuristics keeps the revision.
    guard(old_text, new_text) returns the reasons to refuse (PLAYBOOK evolution may never weaken a
    safety constraint); a refused rewrite raises PlaybookRefused and leaves the file as it was.
    Every new revision is recorded in `history` (default: a PlaybookHistory in the store's SQLite
    file; False: none). While the newest revision is a rollback, the Curator leaves it in place until
    its compiled content differs from the last revision it compiled itself.
    """
    path = Path(path)
    if history is True:
        history = PlaybookHistory.for_store(store)
    elif history is False:
        history = None
    heuristics = [h for h in store.list() if in_playbook(h, min_confidence) and (keep is None or keep(h))]
    body = compile_body(heuristics, min_confidence)
    current = read_revision(path)
    if history is not None:
        _backfill(history, path, current)
    if current and path.exists():
        existing = path.read_text(encoding="utf-8")
        same = existing.split("\n", 1)[1:] == [body]
        head = history.head() if history is not None else None
        if not same and history is not None and head is not None and head.revision == current and head.reason.startswith("rollback:"):
            compiled = history.last_compiled()
            same = compiled is not None and compiled.body == body  # knowledge unchanged since the rollback
        if same:
            return PlaybookRevision(
                revision=current,
                path=str(path),
                heuristics=len(heuristics),
                sha256=_sha(existing),
                changed=False,
            )
    new_rev = _next_revision(history, current)
    text = _header(new_rev) + "\n" + body
    if guard is not None:
        refused = guard(path.read_text(encoding="utf-8") if path.exists() else "", text)
        if refused:
            raise PlaybookRefused("PLAYBOOK.md rewrite refused: " + "; ".join(refused))
    _atomic_write(path, text)
    if history is not None:
        history.record(new_rev, text, tick=tick, reason="compile", heuristics=len(heuristics))
    return PlaybookRevision(
        revision=new_rev,
        path=str(path),
        heuristics=len(heuristics),
        sha256=_sha(text),
    )
