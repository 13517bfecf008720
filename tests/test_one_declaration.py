"""Each name shared by the API, the command line and the files is declared once: the problem
names, and the defaults of the builders and of ``solve``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_problem_names_are_one_tuple():
    from opt.common.problem import PROBLEMS
    from opt.common.result import PROBLEMS as result_problems
    from opt.problems import PROBLEMS as instance_problems
    from solvers.registry import PROBLEMS as registry_problems

    assert PROBLEMS == ("placement", "layout", "serving")
    assert result_problems is PROBLEMS and instance_problems is PROBLEMS
    assert registry_problems is PROBLEMS


def test_no_other_module_assigns_a_list_of_problems():
    defined = []
    for folder in ("opt", "solvers", "models", "heuristics", "instances"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, ast.AnnAssign) else []
                if any(isinstance(t, ast.Name) and t.id.lstrip("_") == "PROBLEMS"
                       for t in targets):
                    defined.append(str(path.relative_to(ROOT)))
    assert defined == ["opt/common/problem.py"]
