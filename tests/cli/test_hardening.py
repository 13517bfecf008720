"""Issue 18 (hardening): bad input gives one line and exit 2, JSON output is standard JSON,
results are never lost, exit codes follow the README ("Exit codes and input limits")."""

from __future__ import annotations

import json
import math

import pytest

from opt.cli import main
from opt.common.errors import InputError
from opt.common.jsonio import json_bytes

SMALL = "sinnen-Nodes_10_Random-p2"  # 10 tasks, optimum 50


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def strict_loads(text: str):
    """json.loads that fails on NaN / Infinity (RFC 8259 JSON only)."""
    def bad(token):
        raise AssertionError(f"non-standard JSON token {token}")
    return json.loads(text, parse_constant=bad)


def one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hetopt: error:"), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# ---- item 3: non-finite numbers ----------------------------------------------------------------

def test_json_encoder_never_writes_nan_or_infinity(tmp_path):
    import numpy as np

    obj = {"a": math.nan, "b": -math.inf, "c": np.float64("inf"), "d": [1.5, np.nan], 3: 1}
    text = json_bytes(obj).decode()
    assert strict_loads(text) == {"a": None, "b": None, "c": None, "d": [1.5, None], "3": 1}


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1"])
def test_time_limit_must_be_finite_and_positive(capsys, value):
    one_line_error(*run(capsys, "solve", SMALL, "--method", "heft", f"--time-limit={value}")[::2],
                   "time_limit")


@pytest.mark.parametrize("slo", ["nan", "inf", "-5", "0"])
def test_serving_slo_must_be_finite_and_positive(capsys, tmp_path, slo):
    out = tmp_path / "plan.json"
    code, _, err = run(capsys, "build", "serving-plan", "--model", "llama-2-7b", "--gpus",
                       "H100", "--context", 1024, f"--slo-ms={slo}", "-o", out)
    one_line_error(code, err, "slo")
    assert not out.exists()


def test_seconds_to_ticks_rejects_non_finite():
    from opt.common.units import seconds_to_ticks

    for bad in (math.nan, math.inf, 1e300):
        with pytest.raises(InputError) as err:
            seconds_to_ticks(bad, "ns")
        assert err.value.field == "duration"


# ---- item 4: params and seeds ------------------------------------------------------------------

@pytest.mark.parametrize("param,needles", [
    ("bogus_param=1", ["params.bogus_param", "cpsat"]),
    ("time_limit=abc", ["param.time_limit", "--time-limit"]),
    ("seed=3", ["--seed"]),
    ("max_time_in_seconds=abc", ["params.max_time_in_seconds"]),
])
def test_bad_params_of_cpsat_are_one_line(capsys, param, needles):
    one_line_error(*run(capsys, "solve", SMALL, "--method", "cpsat", "--time-limit", 2,
                        "--param", param)[::2], *needles)


@pytest.mark.parametrize("method", ["heft", "milp"])
def test_unknown_params_are_not_ignored(capsys, method):
    one_line_error(*run(capsys, "solve", SMALL, "--method", method, "--param", "bogus=1")[::2],
                   "params.bogus", method)


@pytest.mark.parametrize("seed", ["99999999999", "-1"])
def test_seed_range(capsys, seed):
    one_line_error(*run(capsys, "solve", SMALL, "--method", "heft", f"--seed={seed}")[::2],
                   "seed")
