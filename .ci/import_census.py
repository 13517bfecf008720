"""Import census of the project: how many project imports sit inside functions, by
layer, and how many project modules one command imports.

    python .ci/import_census.py                 # in-function imports per layer
    python .ci/import_census.py --walk -- solve INSTANCE --method bifocal --time-limit 1
    CENSUS_ROOT=/other/checkout python .ci/import_census.py   # another tree (before / after)

The core is ``opt`` minus the application layer (``opt.app``) and the façade (``opt.api``).
``opt.cli``, ``opt.runs``, ``opt.plots`` and ``opt.viewer`` count as the application too, so
that a ``CENSUS_ROOT`` tree which keeps its application in those packages is counted alike.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

#: the tree to count (default: this checkout)
ROOT = Path(os.environ.get("CENSUS_ROOT") or Path(__file__).resolve().parent.parent)
PACKAGES = ("opt", "models", "solvers", "heuristics", "instances")
APP = ("opt.app", "opt.api", "opt.cli", "opt.runs", "opt.plots", "opt.viewer")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(name: str) -> str:
    if name.startswith("opt"):
        return "app" if any(name == a or name.startswith(a + ".") for a in APP) else "core"
    return name.split(".")[0]


def _project_imports(tree: ast.Module) -> tuple[int, int]:
    """(top-level, in-function) counts of imports of project modules."""
    top_nodes = {id(n) for n in tree.body}
    top = inner = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        n = sum(1 for x in names if x.split(".")[0] in PACKAGES)
        if id(node) in top_nodes or _in_type_checking(tree, node):
            top += n
        else:
            inner += n
    return top, inner


def _in_type_checking(tree: ast.Module, target: ast.AST) -> bool:
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            if any(target is n for n in ast.walk(node)):
                return True
    return False


def census() -> dict[str, dict[str, int]]:
    """Per layer: modules, top-level and in-function project imports."""
    out: dict[str, dict[str, int]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            layer = _layer(_module_name(path))
            top, inner = _project_imports(ast.parse(path.read_text()))
            row = out.setdefault(layer, {"modules": 0, "top_level": 0, "in_function": 0})
            row["modules"] += 1
            row["top_level"] += top
            row["in_function"] += inner
    return out


WALK = """
import runpy, sys, json
sys.argv = ['hetopt'] + json.loads(sys.argv[1])
try:
    from opt.__main__ import *  # noqa
except SystemExit:
    pass
mods = sorted(m for m in sys.modules if m.split('.')[0] in %r)
sys.stderr.write('\\n@@' + json.dumps(mods) + '\\n')
"""


def walk(argv: list[str]) -> list[str]:
    """Project modules imported by ``hetopt ARGV`` (run in a fresh interpreter)."""
    proc = subprocess.run([sys.executable, "-c", WALK % (PACKAGES,), json.dumps(argv)],
                          cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    line = proc.stderr.rsplit("@@", 1)[-1]
    return json.loads(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--walk", action="store_true", help="count modules imported by a command")
    ap.add_argument("argv", nargs="*", help="hetopt arguments for --walk")
    args = ap.parse_args()
    if args.walk:
        mods = walk(args.argv)
        print(f"{len(mods)} project modules")
        for m in mods:
            print(" ", m)
        return 0
    rows = census()
    print(f"{'layer':<12}{'modules':>8}{'top-level':>11}{'in-function':>13}")
    for layer, row in sorted(rows.items()):
        print(f"{layer:<12}{row['modules']:>8}{row['top_level']:>11}{row['in_function']:>13}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
