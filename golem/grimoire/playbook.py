"""PLAYBOOK.md compilation (grimoire "PLAYBOOK.md as Living Strategy Document").

The Curator compiles heuristics with confidence >= 0.7 ("Curator Cycle" step 2: "Heuristics with
confidence >= 0.7 are promoted to PLAYBOOK.md") into a `## Global` section and one
`## Strategy: <id>` section per strategy scope. The file's first line carries its revision.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from golem.grimoire.heuristics import GLOBAL_SCOPE, Heuristic, HeuristicStore

PROMOTION_THRESHOLD = 0.7  # grimoire "Curator Cycle" step 2
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


def _line(h: Heuristic) -> str:
    text = " ".join(h.text.split())  # one bullet per heuristic, whatever the stored whitespace
    return f"- {text} _(confidence {h.confidence:.2f}, {h.evidence_count} episodes, {h.id})_"


def compile_body(heuristics: list[Heuristic], min_confidence: float = PROMOTION_THRESHOLD) -> str:
    """Everything below the header line. Pure: same heuristics → same text."""
    chosen = [h for h in heuristics if h.confidence >= min_confidence - 1e-9]
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
    lines += [_line(h) for h in by_scope.get(GLOBAL_SCOPE, [])] or ["_No global heuristics yet._"]
    for scope in sorted(s for s in by_scope if s != GLOBAL_SCOPE):
        lines += ["", f"## Strategy: {scope}", ""]
        lines += [_line(h) for h in by_scope[scope]]
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


def rewrite_playbook(
    store: HeuristicStore,
    path: Path,
    min_confidence: float = PROMOTION_THRESHOLD,
    guard: Callable[[str, str], list[str]] | None = None,
) -> PlaybookRevision:
    """Compile PLAYBOOK.md from the store; bump the revision only when the content changes.

    Idempotent: a retried consolidation that finds the same heuristics keeps the revision.
    guard(old_text, new_text) returns the reasons to refuse (PLAYBOOK evolution may never weaken a
    safety constraint); a refused rewrite raises PlaybookRefused and leaves the file as it was.
    """
    path = Path(path)
    heuristics = store.list(min_confidence)
    body = compile_body(heuristics, min_confidence)
    current = read_revision(path)
    if current and path.exists():
        existing = path.read_text(encoding="utf-8")
        if existing.split("\n", 1)[1:] == [body]:
            return PlaybookRevision(
                revision=current,
                path=str(path),
                heuristics=len(heuristics),
                sha256=hashlib.sha256(existing.encode("utf-8")).hexdigest(),
                changed=False,
            )
    text = _header(current + 1) + "\n" + body
    if guard is not None:
        refused = guard(path.read_text(encoding="utf-8") if path.exists() else "", text)
        if refused:
            raise PlaybookRefused("PLAYBOOK.md rewrite refused: " + "; ".join(refused))
    _atomic_write(path, text)
    return PlaybookRevision(
        revision=current + 1,
        path=str(path),
        heuristics=len(heuristics),
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )
