"""Dependencies point one way (docs/architecture.md). From the bottom: the core (``opt``
outside ``opt.app``; ``opt.api`` and ``opt.__main__`` are entry points) imports nothing above
it, not even inside a function; ``models`` and ``heuristics`` build on the core and never import
each other; ``solvers`` builds on them; the application layer ``opt.app`` is the only package
that imports ``solvers`` (besides tests and benchmarks), and it does so at module top level
(only the two modules loaded by ``hetopt --help`` defer it); no module takes part in an import
cycle, lazy imports included."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("opt", "models", "solvers", "heuristics", "instances")
APP = ("opt.app", "opt.api", "opt.__main__")
ABOVE_CORE = ("models", "solvers", "heuristics") + APP
FORBIDDEN = {"core": ABOVE_CORE,
             "instances": ABOVE_CORE,
             "models": ("heuristics", "solvers") + APP,
             "heuristics": ("models", "solvers") + APP,
             "solvers": APP}
#: application modules loaded to build the parser (``hetopt --help``): they may import the
#: solvers inside functions, so that the help does not load them
STARTUP = ("opt.app.cli", "opt.app.cli.common", "opt.app.cli.parser")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imports(path: Path, top_level_only: bool = False) -> Iterator[str]:
    """Absolute names of the project modules ``path`` imports (``from a import b`` yields
    ``a.b`` when that is a module, else ``a``)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                yield full if full in MODULES else node.module


def _layer(name: str) -> str:
    """``core``, ``app``, ``api`` or the top-level package of a project module."""
    top = name.split(".")[0]
    if top != "opt":
        return top
    if name == "opt.api":
        return "api"
    return "app" if name == "opt.__main__" or name.startswith("opt.app") else "core"


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _lazy_imports(path: Path) -> Iterator[str]:
    """Project modules imported inside a function or class of ``path``."""
    top = set(_imports(path, top_level_only=True))
    yield from (m for m in _imports(path) if m not in top)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_layers_point_one_way(name: str) -> None:
    forbidden = FORBIDDEN.get(_layer(name), ())
    for imported in _imports(MODULES[name]):
        assert not _under(imported, forbidden), f"{name} imports {imported}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _layer(n) == "app"))
def test_app_imports_solvers_at_top_level(name: str) -> None:
    if name in STARTUP:
        return
    lazy = [m for m in _lazy_imports(MODULES[name]) if _under(m, ("solvers",))]
    assert lazy == [], f"{name} imports {lazy} inside a function"


def test_layer_rules_catch_a_lazy_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from solvers.api import solve\n    return solve\n")
    assert list(_lazy_imports(bad)) == ["solvers.api"]
    assert _layer("opt.placement.io") == "core" and _layer("opt.app.cli.parser") == "app"
    assert _under("solvers.api", FORBIDDEN["core"])


def _graph() -> dict[str, set[str]]:
    return {name: {m for m in _imports(path) if m in MODULES and m != name}
            for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on_stack.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on_stack.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on_stack:
                low[v] = min(low[v], index[w])
    return out


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
