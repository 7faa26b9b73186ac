"""The layers (docs/design/layers.md): golem/ is the domain and imports none of the layers above it — not Temporal,
not the workflows, activities or workers, not infra (the stack's launchers) and not the CLI; inside golem/ the
packages stand in one order and each imports only those below it; activities/ never import infra/. Checked on the
source with `ast`: every import statement, at module level or inside a function, and
importlib.import_module("...") / __import__("...") with a literal name — what importing the modules would not show
(a function-local import only runs when the function does)."""

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


# The domain's order, ground first (docs/design/layers.md): a module of golem/ imports only golem modules of its own
# package or of a package listed before it. The ground modules come first; the top-level modules of golem/ that are
# not listed (services.py and the use cases: doctor.py, deliberators.py, ...) stand above every package and may
# import any of them.
DOMAIN_ORDER: tuple[str, ...] = (
    "ids", "errors", "storage", "layout",  # ground modules
    "models",
    "extensions",
    "chain",
    "grimoire",
    "inference",
    "safety",
    "world",
    "backtest",
    "learning",
    "cognition",
    "clade",  # the exchange replays a sibling's entry with the grimoire, learning and cognition
    "life",
    "events",
    "usecases",  # the top floor: one call per use case; it may also read services.py's Protocol
)


def _relative_target(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a relative import (`from . import x`, `from ..a import b`) names."""
    package = list(path.relative_to(REPO).with_suffix("").parts)[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def domain_imports(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every golem.* import of a file, relative ones resolved."""
    source = path.read_text(encoding="utf-8") if source is None else source
    found = [(line, name) for line, name in imported_names(source) if name.split(".")[0] == "golem"]
    found += [(node.lineno, _relative_target(path, node)) for node in ast.walk(ast.parse(source))
              if isinstance(node, ast.ImportFrom) and node.level > 0]
    return found


def room_of(module: str) -> str | None:
    """The package (or ground module) of golem.X.… in DOMAIN_ORDER; None for a top-level use case."""
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "golem":
        return None
    return parts[1] if parts[1] in DOMAIN_ORDER else None


def order_violations(files: list[Path], sources: dict[Path, str] | None = None) -> list[str]:
    rank = {name: i for i, name in enumerate(DOMAIN_ORDER)}
    out = []
    for path in files:
        here = room_of(".".join(path.relative_to(REPO).with_suffix("").parts))
        if here is None:
            continue  # a top-level module of golem/ (services, a use case): above every package
        for line, name in domain_imports(path, (sources or {}).get(path)):
            there = room_of(name)
            # a top-level module (services.py, a use case) stands above every package but the top floor, usecases
            if there is None and len(name.split(".")) > 1 and here != DOMAIN_ORDER[-1]:
                out.append(f"{path.relative_to(REPO)}:{line} imports {name}, a top-level module above every package")
            elif there is not None and rank[there] > rank[here]:
                out.append(f"{path.relative_to(REPO)}:{line} imports {name}: {there} stands above {here}")
    return out


def test_every_package_of_golem_has_a_place_in_the_order():
    packages = {p.name for p in DOMAIN.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages - set(DOMAIN_ORDER) == set(), "add the new package to DOMAIN_ORDER and docs/design/layers.md"
    assert set(DOMAIN_ORDER) <= packages | {p.stem for p in DOMAIN.glob("*.py")}, "DOMAIN_ORDER names a room that is gone"


def test_each_package_imports_only_packages_below_it():
    files = sorted(DOMAIN.rglob("*.py"))
    bad = order_violations(files)
    assert not bad, ("golem/'s packages import only those below them (docs/design/layers.md): move the shared "
                     "piece down to the lower package, or the caller up:\n  " + "\n  ".join(bad))


def test_the_order_check_sees_an_upward_import():
    """A function-local import of a higher package from a lower one, a relative one and one of a top-level use
    case are caught; an import of a lower package is not."""
    probe = REPO / "golem" / "chain" / "probe.py"
    source = ("def f():\n    from golem.life import death\n    from ..cognition import fold\n"
              "    import golem.doctor\nfrom golem.models import tick\n")
    assert order_violations([probe], {probe: source}) == [
        "golem/chain/probe.py:2 imports golem.life: life stands above chain",
        "golem/chain/probe.py:4 imports golem.doctor, a top-level module above every package",
        "golem/chain/probe.py:3 imports golem.cognition: cognition stands above chain",
    ]


def test_activities_never_import_infra():
    """Activities do I/O around domain calls; processes (Anvil, forks, the stack) are started by workers/ and
    infra/ and handed in (a dream's forks come from the worker)."""
    offenders = [f"{path.relative_to(REPO)}:{line} imports {name}"
                 for path in sorted((REPO / "activities").rglob("*.py"))
                 for line, name in imported_names(path.read_text(encoding="utf-8")) if name.split(".")[0] == "infra"]
    assert not offenders, "\n".join(offenders)
