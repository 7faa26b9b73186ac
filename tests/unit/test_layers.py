"""The layers: golem/ is the domain and imports none of the layers above it — not Temporal, not the
workflows, activities or workers, not infra (the stack's launchers) and not the CLI. Checked on the source with
`ast`: every import statement, at module level or inside a function, and importlib.import_module("...") /
__import__("...") with a literal name — what importing the modules would not show (a function-local import only
runs when the function does)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOMAIN = REPO / "golem"
ABOVE_THE_DOMAIN = ("temporalio", "workflows", "workers", "infra", "activities", "cli")

# Imports of the layers above that golem/ still makes, each with the issue part that removes it. Empty this list;
# never add to it. A listed import that is gone fails the test too, so the list cannot go stale.
ALLOWED: set[tuple[str, str]] = set()


def imported_names(source: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the source, function-local ones included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in ("import_module", "__import__"):
                found.append((node.lineno, node.args[0].value))
    return found


def upward_imports(path: Path) -> list[tuple[int, str]]:
    return [(line, name) for line, name in imported_names(path.read_text(encoding="utf-8"))
            if name.split(".")[0] in ABOVE_THE_DOMAIN]


def test_the_checker_sees_function_local_and_dynamic_imports():
    source = (
        "import json\n"
        "from golem.models import state\n"
        "def f():\n"
        "    from temporalio import workflow\n"
        "    import workers.client as c\n"
        "    class K:\n"
        "        def g(self):\n"
        "            from cli.common import config\n"
        "    return importlib.import_module('infra.stack'), __import__('activities.tick')\n"
        "from . import sibling\n"
    )
    upward = [(line, name) for line, name in imported_names(source) if name.split(".")[0] in ABOVE_THE_DOMAIN]
    assert upward == [(4, "temporalio"), (5, "workers.client"), (8, "cli.common"), (9, "infra.stack"),
                      (9, "activities.tick")]


def test_golem_imports_nothing_above_the_domain():
    files = sorted(DOMAIN.rglob("*.py"))
    assert len(files) > 100  # the whole domain is walked, not an empty glob
    found = {(str(path.relative_to(REPO)), name): line for path in files for line, name in upward_imports(path)}
    new = sorted(f"{where}:{found[(where, name)]} imports {name}" for where, name in found
                 if (where, name) not in ALLOWED)
    assert not new, ("golem/ must not import " + ", ".join(ABOVE_THE_DOMAIN) + " (the layers above the domain): "
                     "move the code up a layer, or pass what the domain needs in from the caller:\n  "
                     + "\n  ".join(new))
    gone = sorted(f"{where} no longer imports {name}" for where, name in ALLOWED if (where, name) not in found)
    assert not gone, "remove these from ALLOWED in tests/unit/test_layers.py:\n  " + "\n  ".join(gone)


def test_the_cli_is_a_top_level_package_nothing_below_imports():
    """workers/, workflows/, activities/ and infra/ start and serve golems; the CLI drives them. None of them may
    reach back into cli/ (the stack starts its worker and dashboard as `python -m cli` processes, not by import)."""
    offenders = [f"{path.relative_to(REPO)}:{line} imports {name}"
                 for layer in ("golem", "workers", "workflows", "activities", "infra")
                 for path in sorted((REPO / layer).rglob("*.py"))
                 for line, name in imported_names(path.read_text(encoding="utf-8")) if name.split(".")[0] == "cli"]
    assert not offenders, "\n".join(offenders)
