"""The validator's vectorised fast paths (rules 1 and 3) agree with its checked paths: on valid
schedules they return the same arrays, and on any mutated schedule the outcome — the metrics or
the violation message — is the same with or without them."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import opt.placement.compute_transfer_checks as C
import opt.placement.validator as V
from heuristics.placement.bifocal import bifocal_schedule
from heuristics.placement.list_scheduler import heft
from instances import load
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.placement.schedule_error import ScheduleError
from tests.placement.solution_forms import solution_form  # noqa: F401 (rows and columns)


def _instances():
    cat = bundled_catalog()
    dops = build_placement(bundled_cards()["llama-2-7b"], cat.platform("HP64"), cat,
                           Workload(16, 3, 2), BuildOptions(layers=2))
    return [(load("heft-topcuoglu-2002"), heft), (dops, bifocal_schedule)]


CASES = [(inst, schedule(inst)) for inst, schedule in _instances()]


def _outcome(inst, sol, fast: bool, monkeypatch):
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(C, "_fast_compute", lambda *a, **k: None)
            m.setattr(C, "_fast_transfers", lambda *a, **k: None)
        try:
            return ("ok", V.validate_placement(inst, sol).to_dict())
        except ScheduleError as exc:
            return ("invalid", str(exc))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_fast_paths_take_valid_schedules(case, monkeypatch):
    inst, sol = CASES[case]
    assert C._fast_compute(inst, sol["compute"]) is not None
    td, s, e = C._fast_compute(inst, sol["compute"])
    assert C._fast_transfers(inst, sol["transfers"], td, s, e) is not None
    assert _outcome(inst, sol, True, monkeypatch) == _outcome(inst, sol, False, monkeypatch)


def _mutate_assignment(sol, data):
    """The ``assignment`` map reordered, one entry moved to another device, dropped or an
    unknown task added (the fast path compares it with the compute events in order)."""
    items = list(sol["assignment"].items())
    k = data.draw(st.integers(0, len(items) - 1))
    how = data.draw(st.sampled_from(["reverse", "device", "drop", "unknown"]))
    if how == "reverse":
        items.reverse()
    elif how == "device":
        items[k] = (items[k][0], data.draw(st.sampled_from(["NPU0", "PIM0", "P1", "P2", "x"])))
    elif how == "drop":
        items.pop(k)
    else:
        items.append(("no-such-task", items[k][1]))
    sol["assignment"] = dict(items)
    return sol


def _mutate(sol, data):
    sol = copy.deepcopy(sol)
    key = data.draw(st.sampled_from(["compute", "transfers", "assignment"]))
    if key == "assignment":
        return _mutate_assignment(sol, data)
    events = sol[key]
    if not events:
        return sol
    k = data.draw(st.integers(0, len(events) - 1))
    how = data.draw(st.sampled_from(["shift", "end", "device", "drop", "dup", "float", "bool",
                                     "task"]))
    ev = events[k]
    if how == "shift":
        ev["start"] += data.draw(st.integers(-3, 3))
        ev["end"] = ev["start"] + (ev["end"] - ev["start"])
    elif how == "end":
        ev["end"] += data.draw(st.integers(-2, 2))
    elif how == "device":
        field = "device" if key == "compute" else data.draw(st.sampled_from(["from", "to"]))
        ev[field] = data.draw(st.sampled_from(["NPU0", "PIM0", "PIM1", "P1", "P2", "nope"]))
    elif how == "drop":
        events.pop(k)
    elif how == "dup":
        events.append(dict(ev))
    elif how == "float":
        ev["start"] = float(ev["start"])
    elif how == "bool":
        ev["end"] = True
    else:
        field = "task" if key == "compute" else "src"
        ev[field] = data.draw(st.sampled_from(["x", 7, None]))
    return sol


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fast_and_checked_paths_agree_on_mutations(data, monkeypatch):
    inst, sol = CASES[data.draw(st.integers(0, len(CASES) - 1))]
    bad = _mutate(sol, data)
    assert _outcome(inst, bad, True, monkeypatch) == _outcome(inst, bad, False, monkeypatch)
