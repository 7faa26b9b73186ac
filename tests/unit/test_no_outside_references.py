"""Code and docs point only inside the repository, and module docstrings stay short.

A reader of this repository has no spec documents and no issue tracker: a comment citing a spec section,
an issue number, a revision or a spec file leads nowhere. Why and formulas live in docs/design/ (see
docs/development/layout.md#comments-and-design-pages); a comment points there in one line. This test
greps the code and docs for such references, checks that each docs/design link in code names a page and
heading that exist, and holds every module docstring to 8 lines.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("golem", "activities", "workflows", "workers", "infra", "cli", "bench", "tests", "docs", "examples",
         "README.md")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".sh", ".js", ".html", ".css", ".vy", ".cfg"}
SELF = Path(__file__).resolve()
MAX_DOCSTRING_LINES = 8

OUTSIDE = {
    "spec section": re.compile(r"§"),
    "issue number": re.compile(r"\bissues? #?\d+", re.IGNORECASE),
    "revision": re.compile(r"\brev\. ?\d+", re.IGNORECASE),
    "spec file": re.compile(r"runtime-extensions|heartbeat-tick-pipeline|grimoire-knowledge|golem-archetypes"
                            r"|revisions-grounding|\bprd2\b|00-overview|01[ab]-runtime", re.IGNORECASE),
    "the spec": re.compile(r"\bthe spec\b|\bspec's\b", re.IGNORECASE),
    "spec title": re.compile(r"\b(?:heartbeat|grimoire|revisions|archetypes?) \"[A-Z]|\barchetypes?\b"),
    "outside design doc": re.compile(r"\bARCHITECTURE\b"),
}
DESIGN_LINK = re.compile(r"docs/design/([\w-]+\.md)(?:#([\w-]+))?")

# Path prefixes exempt for now, e.g. files another branch is moving, to be cleared after it merges. Empty: nothing is
# exempt. A listed prefix with nothing left to clear fails the test, so the list cannot go stale.
ALLOWED_PREFIXES: tuple[str, ...] = ()


def files() -> list[Path]:
    out: list[Path] = []
    for root in ROOTS:
        p = REPO / root
        candidates = [p] if p.is_file() else sorted(p.rglob("*"))
        out += [f for f in candidates if f.is_file() and f.suffix in TEXT_SUFFIXES and f.resolve() != SELF
                and "node_modules" not in f.parts and "__pycache__" not in f.parts]
    return out


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def slug(heading: str) -> str:
    """The anchor mkdocs' toc extension gives a heading (its default slugify)."""
    text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text).strip("-")


@lru_cache(maxsize=None)
def anchors(page: Path) -> frozenset[str]:
    return frozenset(slug(m.group(1)) for m in re.finditer(r"^#+\s+(.+?)\s*#*\s*$", page.read_text(encoding="utf-8"),
                                                            re.MULTILINE))


def findings() -> dict[str, list[str]]:
    """file -> problems ("line N: ..."), for every file under ROOTS."""
    found: dict[str, list[str]] = {}
    for path in files():
        text = path.read_text(encoding="utf-8", errors="replace")
        problems = []
        for n, line in enumerate(text.splitlines(), 1):
            for what, pattern in OUTSIDE.items():
                m = pattern.search(line)
                if m:
                    problems.append(f"line {n}: {what} {m.group(0)!r}")
            for m in DESIGN_LINK.finditer(line):
                page = REPO / "docs" / "design" / m.group(1)
                if not page.is_file():
                    problems.append(f"line {n}: {m.group(0)} names no page")
                elif m.group(2) and m.group(2) not in anchors(page):
                    problems.append(f"line {n}: {m.group(0)} names no heading of {m.group(1)}")
        if path.suffix == ".py":
            doc = ast.get_docstring(ast.parse(text))
            if doc and len(doc.splitlines()) > MAX_DOCSTRING_LINES:
                problems.append(f"line 1: module docstring of {len(doc.splitlines())} lines (at most "
                                f"{MAX_DOCSTRING_LINES}; the rest belongs in docs/design/)")
        if problems:
            found[rel(path)] = problems
    return found


def allowed(name: str) -> bool:
    return name.startswith(ALLOWED_PREFIXES)


def test_code_and_docs_point_only_inside_the_repository() -> None:
    bad = [f"{name}:{p}" for name, problems in sorted(findings().items()) if not allowed(name) for p in problems]
    assert not bad, f"{len(bad)} outside references or long docstrings:\n" + "\n".join(bad)


def test_the_allow_list_holds_only_files_with_something_left_to_clear() -> None:
    found = findings()
    stale = [prefix for prefix in ALLOWED_PREFIXES if not any(name.startswith(prefix) for name in found)]
    assert not stale, f"nothing left to clear under {stale}: remove them from ALLOWED_PREFIXES"


def test_the_check_sees_a_planted_reference(tmp_path: Path) -> None:
    """The patterns catch each kind, so a green run means there were none, not that nothing was read."""
    lines = ["# threshold from §S5", "# fixed in issue 14", "# rev. 11 tiers", "# runtime-extensions hooks",
             "# as the spec's table says", '# grimoire "Episode Struct"', '# ARCHITECTURE "The world"']
    hits = [what for line in lines for what, pattern in OUTSIDE.items() if pattern.search(line)]
    assert hits == ["spec section", "issue number", "revision", "spec file", "the spec", "spec title",
                    "outside design doc"]
    assert slug("Thresholds and why (T0/T1)") == "thresholds-and-why-t0t1"
