"""Dependencies point one way: the core (opt/) never imports models, solvers or heuristics
(the CLI may, lazily, inside functions)."""

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "opt"
UPPER = ("models", "solvers", "heuristics")


def _imports(tree: ast.AST, top_level_only: bool):
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: str(p.relative_to(CORE)))
def test_core_never_imports_upper_layers(path):
    tree = ast.parse(path.read_text())
    lazy_ok = "cli" in path.relative_to(CORE).parts
    for name in _imports(tree, top_level_only=lazy_ok):
        assert name.split(".")[0] not in UPPER, f"{path.name} imports {name}"
