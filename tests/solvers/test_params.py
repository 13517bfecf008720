"""One declaration per method param: the checks and their messages, the defaults (each
accepted by its own check, equal to the parameter dataclasses'), the dataclasses' parsing,
``hetopt methods`` and the docs' tables, all read from the declarations."""

from __future__ import annotations

import inspect
import subprocess
import sys
from dataclasses import asdict, fields
from pathlib import Path

import pytest

from heuristics.layout.wla_params import WLA_PARAMS, WlaParams
from heuristics.placement.bifocal_params import BIFOCAL_PARAMS, BifocalParams
from heuristics.placement.list_params import DEVICE_CHOICE_PARAMS
from heuristics.placement.list_scheduler import DEVICE_CHOICES
from heuristics.placement.policy_search import PolicySearchParams
from opt.app.cli.methods import params_markdown, with_params_tables
from opt.common.errors import InputError
from opt.common.params import (
    UNDECLARED,
    Derived,
    ParamSpec,
    auto_or,
    boolean,
    choice,
    flag,
    integer,
    number,
    positive_ints,
    real,
    strings,
)
from solvers import params as P
from solvers.placement import block_branching
from solvers.placement.backends import bifocal_settings, list_settings
from solvers.registry import methods
from tests.cli.run import run

ROOT = Path(__file__).resolve().parents[2]


def _all_params():
    return [(m.name, p) for m in methods() for p in m.params.params]


# ---- checks -------------------------------------------------------------------------------------

@pytest.mark.parametrize("check, good, typed, bad, message", [
    (boolean, True, True, "yes", "must be true or false"),
    (flag, "off", False, 3, "must be true or false"),
    (integer(0, 8), 3, 3, 2.5, "must be an integer in 0..8"),
    (integer(1), 7, 7, 0, "must be an integer ≥ 1"),
    (integer(), -2, -2, True, "must be an integer"),
    (number(0.0, 1.0), 1, 1.0, 1.5, "must be a finite number in [0, 1]"),
    (number(0.0, 1.0, lo_open=True), 0.5, 0.5, 0, "must be a finite number in (0, 1]"),
    (number(), 2, 2.0, float("nan"), "must be a finite number in [0, ∞)"),
    (auto_or(number()), "auto", "auto", -1, "must be a finite number in [0, ∞) or be auto"),
    (auto_or(boolean), False, False, "on", "must be true or false or be auto"),
    (real, -3, -3.0, "1", "must be a number"),
    (positive_ints, 2, [2], [1, 0], "must be a positive integer or a list of them"),
    (strings, ("a",), ["a"], "a", "must be a list of strings"),
    (choice("x", "y"), "y", "y", "z", "must be one of x, y")])
def test_checks_type_values_and_name_what_they_accept(check, good, typed, bad, message):
    assert check(good) == typed and type(check(good)) is type(typed)
    with pytest.raises(ValueError) as err:
        check(bad)
    assert str(err.value) == message


def test_parse_names_the_method_and_the_param():
    spec = ParamSpec((P.Param("gamma", number(0.0, 1.0), "weight", default=0.4),))
    assert spec.parse("m", {"gamma": 1}) == {"gamma": 1.0}
    with pytest.raises(InputError) as err:
        spec.parse("m", {"gamma": 2})
    assert str(err.value).endswith(
        "method 'm': param gamma must be a finite number in [0, 1], got 2")
    assert err.value.field == "params.gamma"
    with pytest.raises(InputError, match=r"takes no param gama \(did you mean gamma\?\)"):
        spec.parse("m", {"gama": 1})


# ---- defaults -----------------------------------------------------------------------------------

def test_every_declared_default_is_accepted_by_its_own_check():
    """Each param of each method declares a default: a value its check returns unchanged, or
    how the back end derives it. The engine is the one param declared without one."""
    undeclared = set()
    for method, p in _all_params():
        if p.default is UNDECLARED:
            undeclared.add(p.name)
        elif isinstance(p.default, Derived):
            assert p.default.text, (method, p.name)
        else:
            assert p.check(p.default) == p.default, (method, p.name, p.default)
        assert p.help, (method, p.name)
    assert not undeclared


def test_bifocal_and_wla_dataclasses_are_their_declarations():
    assert BifocalParams() == BifocalParams(**BIFOCAL_PARAMS.defaults())
    assert asdict(BifocalParams()) == BIFOCAL_PARAMS.defaults()
    assert [f.name for f in fields(BifocalParams)] == list(BIFOCAL_PARAMS.names)
    assert WlaParams() == WlaParams(**WLA_PARAMS.defaults())
    assert asdict(WlaParams()) == WLA_PARAMS.defaults()
    assert P.BIFOCAL.params == BIFOCAL_PARAMS.params and P.WLA.params == WLA_PARAMS.params


def test_declared_defaults_are_the_back_ends():
    """The declarations' defaults are those the back ends and the recorded settings use."""
    assert {k: v for k, v in bifocal_settings({}).items() if k != "revision"} == \
        BIFOCAL_PARAMS.defaults()
    assert list_settings({}) == DEVICE_CHOICE_PARAMS.defaults()
    search = PolicySearchParams()
    assert P.POLICY_SEARCH.defaults() == {"max_evaluations": search.max_evaluations,
                                          "device_choice": search.device_choice}
    (device_choice,) = DEVICE_CHOICE_PARAMS.params
    assert device_choice.check.what == f"one of {', '.join(DEVICE_CHOICES)}"
    from heuristics.placement.list_scheduler import heft

    assert inspect.signature(heft).parameters["device_choice"].default == device_choice.default
    blocks = P.CPSAT_BLOCKS.defaults()
    assert blocks["node_time_limit"] == block_branching.NODE_TIME_LIMIT_S
    assert blocks["leaf_time_limit"] == block_branching.LEAF_TIME_LIMIT_S


# ---- the dataclasses parse against their declarations -------------------------------------------

@pytest.mark.parametrize("cls_parse, spec", [
    (BifocalParams.from_dict, BIFOCAL_PARAMS),
    (lambda params: WlaParams.split(params)[0], WLA_PARAMS)])
def test_dataclass_parsing_refuses_what_its_declaration_refuses(cls_parse, spec):
    for p in spec.params:
        with pytest.raises(InputError) as err:
            cls_parse({p.name: object()})
        assert err.value.field == f"params.{p.name}" and p.check.what in str(err.value)
    with pytest.raises(InputError, match="takes no param nope"):
        cls_parse({"nope": 1})


def test_from_dict_types_values_and_fills_defaults():
    got = BifocalParams.from_dict({"gamma": 1, "H": 2, "lam": 3, "siblings": False})
    assert got == BifocalParams(gamma=1.0, H=2, siblings=False)
    assert type(got.gamma) is float
    wla, bif = WlaParams.split({"budget": 12, "share": 1, "token": False})
    assert wla == WlaParams(budget=12, share=1.0) and bif == BifocalParams(token=False)


# ---- what shows the params reads the declarations -----------------------------------------------

def test_a_heuristic_s_declarations_are_imported_when_first_read():
    """The registry names the heuristics' declarations: listing the methods imports none of
    them; reading a method's params imports its declaration."""
    code = ("import sys; from solvers.registry import get_method, params_by_spec; "
            "params_by_spec(); before = [m for m in sys.modules if m.startswith('heuristics')]; "
            "names = get_method('bifocal', 'placement').params.names; "
            "print(before, 'heuristics.placement.bifocal_params' in sys.modules, len(names))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.split() == ["[]", "True", str(len(BIFOCAL_PARAMS.params))]


def test_hetopt_methods_prints_the_declarations(capsys):
    code, out, err = run(capsys, "methods", "--params", "--problem", "placement")
    assert code == 0 and err == ""
    for p in BIFOCAL_PARAMS.params:
        assert any(line.split()[:1] == [p.name] and p.check.label in line
                   for line in out.splitlines()), p.name
    code, out, _ = run(capsys, "methods", "--json")
    assert code == 0 and '"default": 0.4' in out and '"derived"' in out
    code, out, err = run(capsys, "methods", "--problem", "p4")
    assert code == 2 and out == "" and "unknown problem 'p4'" in err


def test_the_docs_tables_are_the_declarations():
    doc = (ROOT / "docs" / "cli.md").read_text()
    assert params_markdown() in doc
    assert with_params_tables(doc) == doc, (
        "docs/cli.md's params tables differ from the declarations; rewrite them with "
        "opt.app.cli.methods.with_params_tables")
