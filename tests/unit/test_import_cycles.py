"""No import cycles in the repository's packages.

Every import in golem/, activities/, workflows/, workers/, infra/ and cli/ counts, function-local ones too (deferring
an import hides a cycle without removing it); `if TYPE_CHECKING:` imports never run and do not count, and a package
importing its own submodules is left out, as import-linter does. A strongly connected component of more than one
module is a cycle: the test names its modules and each import's line, so the loop can be cut where it closes.
Lazy imports that close no cycle are fine (the CLI imports lazily so `golem status` answers fast).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("golem", "activities", "workflows", "workers", "infra", "cli")

# Cycles allowed for now, each as the exact set of modules in its strongly connected component (a new module joining it
# or a new cycle fails the test). Empty since the CLI left the domain and activities depend on golem.services. A cycle
# that must stay for a while goes here with the issue that removes it; test_allow_list_is_not_stale keeps it honest.
ALLOWED_CYCLES: list[frozenset[str]] = []


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def discover(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Module name → file for every .py under the packages that exist."""
    out: dict[str, Path] = {}
    for pkg in packages:
        base = root / pkg
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            if "__pycache__" in path.parts or "node_modules" in path.parts:
                continue
            out[_module_name(path, root)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node, at any depth, except those under `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)  # the else branch runs
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The repository module `name` refers to, or its nearest enclosing one (None: outside the repository)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def build_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module → {imported repository module → line of the first such import}."""
    graph: dict[str, dict[str, int]] = {m: {} for m in modules}
    for mod, path in modules.items():
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:  # relative: from the module's package, up level - 1
                    pkg = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    pkg = pkg[:len(pkg) - (node.level - 1)]
                    base = ".".join(pkg + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                dst = _resolve(t, modules)
                if dst is not None and dst != mod:
                    graph[mod].setdefault(dst, node.lineno)
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def describe(comp: list[str], graph: dict[str, dict[str, int]], modules: dict[str, Path]) -> str:
    inside = set(comp)
    def where(path: Path) -> Path:
        return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path

    edges = [f"    {a} -> {b}  ({where(modules[a])}:{line})" for a in comp for b, line in sorted(graph[a].items())
             if b in inside]
    return f"  cycle of {len(comp)} modules: {', '.join(comp)}\n" + "\n".join(edges)


def test_no_import_cycles():
    modules = discover()
    assert "golem.grimoire.episodes.store" in modules and "workflows.tick" in modules  # the walk found the packages
    graph = build_graph(modules)
    cycles = strongly_connected(graph)
    allowed = set(ALLOWED_CYCLES)
    new = [c for c in cycles if frozenset(c) not in allowed]
    assert not new, ("import cycles (cut them where they close; a function-local import hides a cycle, it does not "
                     "remove it):\n" + "\n".join(describe(c, graph, modules) for c in new))


def test_allow_list_is_not_stale():
    """An allowed cycle that no longer exists is taken off the list, so it cannot come back unnoticed."""
    cycles = {frozenset(c) for c in strongly_connected(build_graph(discover()))}
    stale = [sorted(c) for c in ALLOWED_CYCLES if c not in cycles]
    assert not stale, f"these allowed cycles are gone — remove them from ALLOWED_CYCLES: {stale}"


def test_the_check_sees_function_local_and_relative_imports(tmp_path):
    """The graph builder finds a loop closed by an import inside a function and one through a relative import,
    and ignores imports under TYPE_CHECKING."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.a import x  # hidden\n    return x\n")
    (pkg / "c.py").write_text("from . import d\n")
    (pkg / "d.py").write_text("class K:\n    def m(self):\n        from .c import y\n")
    (pkg / "e.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.f import z\n")
    (pkg / "f.py").write_text("import pkg.e\n")
    modules = discover(tmp_path, ("pkg",))
    assert set(modules) == {"pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d", "pkg.e", "pkg.f"}
    graph = build_graph(modules)
    assert strongly_connected(graph) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
