"""Result.write serialises the fields without asdict's deep copy of the solution:
the file holds exactly the bytes of ``json_bytes(result.to_dict())``."""

from __future__ import annotations

import gzip
from collections import namedtuple
from dataclasses import dataclass

import instances
from opt.common.jsonio import json_bytes
from opt.common.result import Result, _big
from solvers import solve


@dataclass(frozen=True)
class _Inner:
    a: int
    b: tuple[int, ...]


def _written(res: Result, path) -> bytes:
    res.write(path)
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def test_written_bytes_equal_to_dict_bytes(tmp_path):
    inst = instances.load("p1-llama-2-7b-hp32-p64-d2-l2")
    for method in ("heft", "bifocal"):
        res = solve(inst, method)
        res.stats["nested"] = {"inner": _Inner(1, (2, 3)), 4: [5.5, None]}
        want = json_bytes(res.to_dict(), indent=not _big(res.solution))
        for name in ("r.json", "r.json.gz"):
            assert _written(res, tmp_path / name) == want


def test_unserialisable_values_fail_as_before(tmp_path):
    import pytest

    point = namedtuple("point", "x y")
    res = Result(problem="placement", method="heft", status="FEASIBLE",
                 stats={"p": point(1, 2)})
    with pytest.raises(TypeError):
        json_bytes(res.to_dict())
    with pytest.raises(TypeError):
        res.write(tmp_path / "r.json")


def test_body_without_the_solution_is_to_dict_without_it():
    res = solve(instances.load("p1-llama-2-7b-hp32-p64-d2-l2"), "heft")
    res.stats["nested"] = {"inner": _Inner(1, (2, 3))}
    full = res.to_dict()
    assert json_bytes(res.body()) == json_bytes(full)
    full.pop("solution")
    assert "solution" not in res.body(solution=False)
    assert json_bytes(res.body(solution=False)) == json_bytes(full)
