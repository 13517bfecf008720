"""The method registry (solvers/registry.py) and the one ``solve`` contract (solvers/api.py):
contents and defaults per problem, the common argument checks, the validated params
(solvers/params.py), the start solution of every problem, a light ``import solvers`` and no
import cycle among the solvers modules."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from pathlib import Path

import pytest

import instances
from opt.common.errors import InputError, UnknownNameError
from opt.common.result import Result
from solvers import default_method, get_method, methods, solve
from solvers.params import ParamSpec
from solvers.registry import DEFAULTS, PROBLEMS, BackendRef, names

ROOT = Path(__file__).resolve().parents[2]

PLACEMENT = ("cpsat", "cpsat-blocks", "milp", "portfolio", "heft", "bifocal", "bifocal-grid",
             "pd", "af", "pd+linear", "pd+attn", "pd+ffn", "policy-search",
             "local-search")
LAYOUT = ("pd/linear", "pd/dual", "bifocal/linear", "bifocal/dual", "bifocal/wla",
          "bifocal/wla+dual", "cpsat-layout", "cpsat-formats")
SERVING = ("bnb", "enum", "milp", "col", "afd", "cad")


@pytest.fixture(scope="module")
def heft_paper():
    return instances.load("heft-topcuoglu-2002")


@pytest.fixture(scope="module")
def plan_instance():
    return instances.load("p3-llama-2-7b-h100-l40s-8k-50ms")


# ---- contents -----------------------------------------------------------------------------------

def test_registry_contents_and_defaults():
    assert names("placement") == PLACEMENT
    assert names("layout") == LAYOUT
    assert names("serving") == SERVING
    assert len(methods()) == len(PLACEMENT) + len(LAYOUT) + len(SERVING)
    exact = {(m.problem, m.name) for m in methods() if m.exact}
    assert exact == {("placement", "cpsat"), ("placement", "cpsat-blocks"),
                     ("placement", "milp"), ("placement", "portfolio"),
                     ("layout", "cpsat-layout"), ("serving", "enum"), ("serving", "milp")}
    assert {m.name for m in methods() if m.warm_start} == {"cpsat", "cpsat-blocks", "milp",
                                                           "portfolio"}
    assert [m.name for m in methods() if m.export] == ["milp"]
    assert dict(DEFAULTS) == {"placement": "portfolio", "layout": "cpsat-layout",
                              "serving": "bnb"}
    for problem in PROBLEMS:
        assert default_method(problem).problem == problem
    for m in methods():
        assert m.problem in PROBLEMS and m.description and "\n" not in m.description
        assert isinstance(m.backend, BackendRef) and callable(m.backend.resolve())
        assert isinstance(m.params, ParamSpec)
    # one name, two problems: the placement MILP and the serving-plan MILP are distinct
    assert get_method("milp", "placement") != get_method("milp", "serving")


def test_registry_lookups_reject_unknown_names():
    with pytest.raises(UnknownNameError, match="unknown serving method 'heft'.*bnb") as err:
        get_method("heft", "serving")
    assert set(err.value.known) == set(SERVING)
    with pytest.raises(UnknownNameError, match="unknown problem 'p4'"):
        methods("p4")
    with pytest.raises(UnknownNameError, match="unknown problem"):
        default_method("nope")


def test_import_solvers_imports_no_back_end():
    code = ("import sys, solvers; heavy = [m for m in sys.modules if m.split('.')[0] in "
            "('ortools', 'pyomo', 'highspy', 'heuristics') or m.startswith('models.placement') "
            "or m in ('solvers.placement.backends', 'solvers.serving.methods')]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def _module_imports(path: Path, package_modules: set[str]) -> set[str]:
    """Modules of ``package_modules`` that ``path`` imports at module level."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in package_modules
                    else node.module for a in node.names}
    return out & package_modules


def test_no_import_cycle_among_solvers_modules():
    paths = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in (ROOT / "solvers").rglob("*.py")}
    graph = {m: _module_imports(p, set(paths)) - {m} for m, p in paths.items()}
    # a package's __init__ runs before its submodules anyway: its own edges are not cycles
    graph["solvers"] = set()
    state: dict[str, int] = {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            assert state.get(n) != 1, f"import cycle: {' -> '.join(stack + [m, n])}"
            if n not in state:
                visit(n, stack + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


# ---- solve: defaults and unknown methods --------------------------------------------------------

def test_solve_without_method_uses_the_problem_default(heft_paper, plan_instance):
    res = solve(plan_instance)
    assert res.method == "bnb" and res.status in ("OPTIMAL", "FEASIBLE")
    assert res.objective is not None and res.stats["checker"] == "valid"
    res = solve(heft_paper, time_limit=10, deterministic=True)
    assert res.method == "portfolio" and res.status == "OPTIMAL" and res.objective == 73


def test_unknown_method_lists_the_instance_problems_methods(heft_paper, plan_instance):
    with pytest.raises(UnknownNameError) as err:
        solve(heft_paper, "bnb")
    assert set(err.value.known) == set(PLACEMENT + LAYOUT)
    with pytest.raises(UnknownNameError, match="serving method 'cpsat'") as err:
        solve(plan_instance, "cpsat")
    assert set(err.value.known) == set(SERVING)
    with pytest.raises(InputError, match="PlacementInstance or ServingInstance"):
        solve({"tasks": []}, "cpsat")


# ---- solve: common arguments --------------------------------------------------------------------

@pytest.mark.parametrize("field,value", [
    ("num_workers", 0), ("num_workers", 1.5), ("num_workers", True),
    ("time_limit", 0), ("time_limit", -1.0), ("time_limit", math.nan), ("time_limit", "5"),
    ("time_limit", math.inf), ("time_limit", -math.inf),
    ("seed", -1), ("seed", 2**31), ("seed", 0.5), ("seed", True)])
@pytest.mark.parametrize("method", ["heft", "bnb"])
def test_bad_common_arguments(heft_paper, plan_instance, method, field, value):
    inst = plan_instance if method == "bnb" else heft_paper
    with pytest.raises(InputError) as err:
        solve(inst, method, **{field: value})
    assert err.value.field == field


def test_bad_warm_start_and_export(heft_paper, plan_instance):
    with pytest.raises(UnknownNameError, match="warm start 'lpt'"):
        solve(heft_paper, "heft", warm_start="lpt")
    for inst, method in ((heft_paper, "heft"), (heft_paper, "cpsat"), (plan_instance, "milp")):
        with pytest.raises(InputError, match="export is available for the placement MILP"):
            solve(inst, method, export_path="model.mps")


# ---- solve: params ------------------------------------------------------------------------------

@pytest.mark.parametrize("method,param,accepted", [
    ("heft", "gamma", "device_choice"), ("pd+ffn", "window", "device_choice"), ("pd/dual", "share", "none"),
    ("bifocal", "gama", "window, phase, token, gamma"),
    ("policy-search", "max_evals", "max_evaluations"),
    ("bifocal/wla", "shares", "share, eps, budget, refine, dual, dual_ratio, wla_rule, window"),
    ("cpsat", "max_time", "symmetry_breaking, redundant, group_cumulative, group_energy and the CP-SAT parameters"),
    ("cpsat-blocks", "node_time", "node_time_limit"),
    ("milp", "mip_gap_rel", "the HiGHS options"),
    ("cpsat-formats", "warm", "formats, base and the CP-SAT parameters"),
    ("bnb", "frontir", "frontier, bounds, sub_block_layers, max_stages, period, owners, "
                       "microbatches"),
    ("enum", "frontier", "owners, microbatches"),
    ("col", "owners", "frontier, bounds, microbatches")])
def test_unknown_param_names_method_and_accepted_names(heft_paper, plan_instance, method,
                                                       param, accepted):
    inst = plan_instance if method in SERVING and method != "milp" else heft_paper
    with pytest.raises(InputError) as err:
        solve(inst, method, **{param: 1})
    assert err.value.field == f"params.{param}"
    assert f"method '{method}'" in str(err.value) and accepted in str(err.value)


def test_serving_milp_params_are_its_own(plan_instance):
    with pytest.raises(InputError, match="owners, microbatches and the HiGHS options") as err:
        solve(plan_instance, "milp", ownrs=[1])
    assert err.value.field == "params.ownrs"


@pytest.mark.parametrize("method,params", [
    ("bifocal", {"H": 2.5}), ("bifocal", {"window": "yes"}), ("bifocal/linear", {"gamma": 2}),
    ("bifocal/wla", {"budget": 0}), ("policy-search", {"max_evaluations": 0}),
    ("cpsat", {"redundant": "no"}), ("cpsat", {"num_search_workers": "x"}),
    ("cpsat", {"max_presolve_iterations": 2.5}),
    ("cpsat", {"search_branching": "FIXED_SEARCH"}),   # enums cannot be set through params
    ("cpsat-blocks", {"portfolio": 1}), ("cpsat-blocks", {"node_time_limit": "1"}),
    ("cpsat-layout", {"warm": "hot"}), ("cpsat-layout", {"formats": "linear"}),
    ("cpsat-formats", {"base": "pd"}),
    ("milp", {"threads": 2.5}), ("milp", {"presolve": 1}), ("milp", {"mip_rel_gap": "x"}),
    ("bnb", {"frontier": 3}), ("bnb", {"sub_block_layers": 0}), ("enum", {"owners": "a"})])
def test_ill_typed_param_is_named(heft_paper, plan_instance, method, params):
    inst = plan_instance if method in ("bnb", "enum") else heft_paper
    (name, value), = params.items()
    with pytest.raises(InputError) as err:
        solve(inst, method, time_limit=5, **params)
    assert err.value.field == f"params.{name}" and f"method '{method}'" in str(err.value)
    assert repr(value) in str(err.value)


def test_valid_params_reach_the_back_end_untouched(heft_paper, plan_instance):
    res = solve(heft_paper, "cpsat", time_limit=10, deterministic=True, log_search_progress=False,
                subsolvers=["default_lp", "core"], symmetry_breaking=False)
    assert res.status == "OPTIMAL" and res.params["subsolvers"] == ["default_lp", "core"]
    res = solve(heft_paper, "milp", time_limit=10, presolve="off", mip_rel_gap=0)
    assert res.status == "OPTIMAL" and res.params["presolve"] == "off"
    res = solve(heft_paper, "bifocal", gamma=1, H=2)
    assert res.params == {"gamma": 1, "H": 2}
    res = solve(plan_instance, "bnb", frontier="off", owners=1)
    assert res.params == {"frontier": "off", "owners": 1} and res.stats["frontier"] is False


# ---- solve: start solutions ---------------------------------------------------------------------

def test_serving_initial_solution_is_a_plan_or_a_result(plan_instance):
    base = solve(plan_instance, "col")
    assert base.solution is not None
    for start in (base, base.solution):
        res = solve(plan_instance, "bnb", initial_solution=start)
        assert res.status in ("OPTIMAL", "FEASIBLE")
        assert res.objective <= base.objective * (1 + 1e-12)
        # a short limit: the start is kept whatever HiGHS reaches by then (30 s took ~15 s)
        res = solve(plan_instance, "milp", time_limit=3, initial_solution=start)
        assert res.objective <= base.objective * (1 + 1e-12)
    bad = {**base.solution, "owners": [{**base.solution["owners"][0], "config": "nope"}]}
    with pytest.raises(InputError, match="invalid initial plan") as err:
        solve(plan_instance, "bnb", initial_solution=bad)
    assert err.value.field == "initial_solution"


def test_placement_initial_solution_as_result(heft_paper):
    start = solve(heft_paper, "heft")
    assert isinstance(start, Result)
    res = solve(heft_paper, "cpsat", time_limit=10, deterministic=True, initial_solution=start)
    assert res.stats["warm_start"] == "initial_solution" and res.objective == 73
