"""House census: the counts a maintainer taking the project over reads first.

    python .ci/house_census.py                      # this checkout
    CENSUS_ROOT=/other/checkout python .ci/house_census.py   # another tree (before / after)

Counts: the façade's imports of the CLI; project imports inside functions; functions over
100 lines; functions over 10 parameters; modules over 800 lines; "issue N" / "revision N"
mentions in code, tests and docs; lines of the scheduling loops (list scheduler, Bifocal,
static policies and their kernels).
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

ROOT = Path(os.environ.get("CENSUS_ROOT") or Path(__file__).resolve().parent.parent)
PACKAGES = ("opt", "models", "solvers", "heuristics", "instances")
MENTION = re.compile(r"\b(issue|revision)s? #?\d+", re.IGNORECASE)
LOOPS = ("heuristics/placement/bifocal.py", "heuristics/placement/list_scheduler.py",
         "heuristics/placement/static_policies.py", "heuristics/placement/schedule_arrays.py",
         "heuristics/placement/state_kernels.py", "heuristics/placement/bifocal_kernels.py",
         "heuristics/placement/order_kernels.py", "heuristics/placement/setup_kernels.py",
         "heuristics/placement/kernel_types.py")


def _sources() -> list[Path]:
    return [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]


def _in_function_imports(tree: ast.AST) -> int:
    n = 0
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    n += node.module.split(".")[0] in PACKAGES
                elif isinstance(node, ast.Import):
                    n += sum(a.name.split(".")[0] in PACKAGES for a in node.names)
    return n


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _params(f: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = f.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return len([x for x in names if x not in ("self", "cls")])


def census() -> dict[str, object]:
    out: dict[str, object] = {}
    facade = ROOT / "opt/app/facade.py"
    text = facade.read_text() if facade.exists() else ""
    out["facade_cli_imports"] = len(re.findall(r"^\s*(from|import) opt\.app\.cli", text, re.M))
    imports = long_fns = many_params = 0
    big_modules: list[str] = []
    for p in _sources():
        src = p.read_text()
        tree = ast.parse(src)
        imports += _in_function_imports(tree)
        fns = _functions(tree)
        long_fns += sum((f.end_lineno or f.lineno) - f.lineno + 1 > 100 for f in fns)
        many_params += sum(_params(f) > 10 for f in fns)
        if src.count("\n") > 800:
            big_modules.append(str(p.relative_to(ROOT)))
    out["in_function_project_imports"] = imports
    out["functions_over_100_lines"] = long_fns
    out["functions_over_10_params"] = many_params
    out["modules_over_800_lines"] = len(big_modules)
    out["modules_over_800_lines_list"] = big_modules
    mentions = 0
    for sub in PACKAGES + ("tests", "docs", "benchmarks", ".ci"):
        for p in (ROOT / sub).rglob("*"):
            if p.suffix in (".py", ".md", ".sh", ".txt") and p.is_file() \
                    and p.name != "house_census.py":
                mentions += len(MENTION.findall(p.read_text(errors="replace")))
    readme = ROOT / "README.md"
    mentions += len(MENTION.findall(readme.read_text())) if readme.exists() else 0
    out["issue_revision_mentions"] = mentions
    out["scheduling_loop_lines"] = {f: (ROOT / f).read_text().count("\n")
                                    for f in LOOPS if (ROOT / f).exists()}
    out["scheduling_loop_lines_total"] = sum(out["scheduling_loop_lines"].values())  # type: ignore[union-attr]
    return out


if __name__ == "__main__":
    print(json.dumps(census(), indent=1))
