"""Dependencies point one way (docs/architecture.md): the core (``opt``) never imports
``models``, ``solvers`` or ``heuristics`` (its CLI may, lazily, inside functions); ``models``
and ``heuristics`` never import ``solvers``, and neither imports the other; no module takes
part in an import cycle, lazy imports included."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("opt", "models", "solvers", "heuristics", "instances")
FORBIDDEN = {"opt": ("models", "solvers", "heuristics"),
             "models": ("heuristics", "solvers"),
             "heuristics": ("models", "solvers")}


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


@pytest.mark.parametrize("name", sorted(MODULES))
def test_layers_point_one_way(name: str) -> None:
    top = name.split(".")[0]
    path = MODULES[name]
    lazy_ok = top == "opt" and "cli" in name.split(".")  # the CLI may import lazily
    for imported in _imports(path, top_level_only=lazy_ok):
        assert imported.split(".")[0] not in FORBIDDEN.get(top, ()), \
            f"{name} imports {imported}"


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
