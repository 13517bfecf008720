"""Dependencies point one way (docs/architecture.md). From the bottom: the core (``opt``
outside ``opt.app``, and ``instances``; ``opt.api`` and ``opt.__main__`` are entry points)
imports nothing above it, not even inside a function; ``models`` and ``heuristics`` build on the
core and never import each other; ``solvers`` builds on them; the application layer ``opt.app``
is the only package that imports ``solvers`` (besides tests and benchmarks); no module takes
part in an import cycle, imports inside functions included.

The layers are import-linter contracts in pyproject.toml (``[tool.importlinter]``), run here
as ``lint-imports`` runs them. import-linter reads import statements, so the string imports of
the three entry seams (the CLI's handler table, the registry's back ends, ``opt.api``'s lazy
exports) are checked here: they are the only ones, and every module they can load is in a
layer they may import."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from argparse import ArgumentParser, _SubParsersAction
from collections.abc import Iterator
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import grimp
from importlinter.cli import lint_imports

import opt.api
from opt.app.cli.parser import PLACEMENT_METHOD_NAMES, RUN_COMMAND, Handler, build_parser
from opt.app.cli.placement import SERVING_SOLVE
from solvers import certify
from solvers.registry import BackendRef, methods

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pyproject.toml"
PACKAGES = ("opt", "models", "solvers", "heuristics", "instances")
#: the modules that import by a string, and the project packages each may load that way:
#: the CLI's handler table, the registry's back ends and ``opt.api``'s exports; the method
#: params a registry entry includes by name (``module:attribute``, imported by
#: :class:`opt.common.params.ParamSpec` on the registry's behalf)
SEAMS = {"opt.app.cli.parser": ("opt.app.cli",),
         "solvers.registry": ("solvers", "models", "heuristics"),
         "opt.api": ("opt",),
         "opt.common.params": ("solvers", "models", "heuristics")}


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _broken_contracts(root: Path) -> list[str]:
    """Names of the contracts of pyproject.toml that the packages under ``root`` break:
    ``lint-imports --no-cache`` run with ``root`` first on the path."""
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--no-cache", str(CONFIG)], cwd=root, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(root)))
    lines = proc.stdout.splitlines()
    kept = [line for line in lines if line.endswith("KEPT")]
    broken = [line.removesuffix("BROKEN").strip() for line in lines if line.endswith("BROKEN")]
    assert len(kept) + len(broken) == 5, proc.stdout + proc.stderr
    assert proc.returncode == (1 if broken else 0)
    return broken


def test_import_contracts_are_kept() -> None:
    assert lint_imports(str(CONFIG), no_cache=True) == 0  # the report is on stdout


#: a module of each package, layer and child of ``opt`` the contracts name
SKELETON = ("opt.__main__", "opt.api", "opt.app.cli", "opt.common.errors", "opt.costlib.fit",
            "opt.placement.io", "opt.serving.plan", "opt.theory.gains", "opt.problems",
            "models.highs", "heuristics.placement", "solvers.api", "instances.stg")


def _skeleton(root: Path, sources: dict[str, str]) -> Path:
    """Empty packages under ``root`` with the modules of :data:`SKELETON` and ``sources``
    (module name -> source)."""
    for name in (*SKELETON, *sources):
        parts = name.split(".")
        for i in range(1, len(parts)):
            root.joinpath(*parts[:i]).mkdir(exist_ok=True)
            root.joinpath(*parts[:i], "__init__.py").touch()
        root.joinpath(*parts).with_suffix(".py").write_text(sources.get(name, ""))
    return root


def test_contracts_catch_an_import_inside_a_function(tmp_path: Path) -> None:
    (tmp_path / "good").mkdir()
    assert _broken_contracts(_skeleton(tmp_path / "good", {})) == []
    (tmp_path / "bad").mkdir()
    bad = _skeleton(tmp_path / "bad", {
        "opt.common.units": "def f():\n    from solvers.api import x\n",
        "models.lazy": "def g():\n    import heuristics.placement\n"})
    assert _broken_contracts(bad) == [
        "The core (opt outside opt.app, and instances) imports nothing above it",
        "models and heuristics build on the core and never import each other"]


def _graph() -> dict[str, set[str]]:
    """Every project module -> the project modules it imports (inside functions too)."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    return {m: graph.find_modules_directly_imported_by(m) - {m} for m in graph.modules}


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (its modules, the first repeated last), or []."""
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return []


def test_no_import_cycles() -> None:
    assert _cycle(_graph()) == []


def test_cycle_check_finds_a_cycle() -> None:
    assert sorted(_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})[:3]) == ["a", "b", "c"]


# ---- the string imports of the entry seams ------------------------------------------------------

def _string_imports(path: Path) -> Iterator[int]:
    """Lines of ``path`` that call ``__import__`` or ``importlib.import_module``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) \
                else ""
            if name in ("__import__", "import_module"):
                yield node.lineno


def test_string_imports_only_at_the_seams() -> None:
    found = {_module_name(p) for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
             if any(_string_imports(p))}
    assert found <= set(SEAMS)


def test_string_finder_sees_both_forms(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text("import importlib\n\ndef f(n):\n    return importlib.import_module(n)\n\n"
                   "def g(n):\n    return __import__(n)\n")
    assert list(_string_imports(mod)) == [4, 7]


def _handlers(parser: ArgumentParser) -> Iterator[Handler]:
    """Every handler of the parser's leaf commands."""
    func = parser.get_default("func")
    if isinstance(func, Handler):
        yield func
    for action in parser._actions:
        if isinstance(action, _SubParsersAction):
            for sub in action.choices.values():
                yield from _handlers(sub)


def _loads(module: str, seam: str) -> None:
    assert _under(module, SEAMS[seam]), f"{seam} loads {module}"
    assert importlib.util.find_spec(module) is not None, f"{seam} names a missing {module}"


def test_cli_handlers_load_command_modules() -> None:
    handlers = list(_handlers(build_parser()))
    assert len(handlers) > 20
    for h in (*handlers, RUN_COMMAND, PLACEMENT_METHOD_NAMES, SERVING_SOLVE):
        _loads(h.module, "opt.app.cli.parser")


def test_registry_back_ends_load_solver_layers() -> None:
    refs = [m.backend for m in methods()]
    assert refs and all(isinstance(r, BackendRef) for r in refs)
    targets = [r.target for r in refs] + [m.settings for m in methods() if m.settings]
    for target in targets:
        _loads(target.partition(":")[0], "solvers.registry")
    included = [part for m in methods() for part in getattr(m.params, "parts", ())
                if isinstance(part, str)]
    for ref in included:
        _loads(ref.partition(":")[0], "opt.common.params")


def test_certify_loads_the_plan_checks_through_the_registry_seam() -> None:
    for ref in (certify.CERTIFY_PLAN, certify.VALIDATE_PLAN):
        _loads(ref.target.partition(":")[0], "solvers.registry")
        assert callable(ref.resolve())


def test_api_exports_load_opt_modules() -> None:
    homes = opt.api._HOMES
    assert homes
    for home in set(homes.values()):
        _loads(home, "opt.api")
