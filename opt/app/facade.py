"""The functions of the public API :mod:`opt.api` (``import opt.api as hetopt``): reading and
writing instances and results, the builders, bundled instances by name, ``solve``,
``validate``, ``lower_bound`` and the method list. Each builder takes the options of its
``hetopt build`` command as keywords (``--slo-ttft-ms`` is ``slo_ttft_ms``) and builds through
the same code as the command.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import instances
from opt.app.cli.placement import placement_from_args
from opt.app.cli.serving import serving_from_args
from opt.common.errors import InputError, UnknownNameError
from opt.common.result import Result, Status, read_result
from opt.placement.certified_bounds import certified_lower_bound
from opt.placement.instance import PlacementInstance
from opt.placement.layout import relaxed_instance
from opt.problems import PROBLEMS, problem_name, read_problem_instance
from opt.serving.instance import ServingInstance
from solvers.api import solve as _solve
from solvers.certify import Validation
from solvers.certify import validate as _validate
from solvers.registry import Method
from solvers.registry import methods as _methods

Instance = PlacementInstance | ServingInstance


def read_instance(path: str | Path) -> Instance:
    """The instance in the file at ``path`` (``.json``, ``.json.gz`` or ``.npz``), of any
    problem (its ``problem`` field)."""
    return read_problem_instance(path)


def write_instance(instance: Instance, path: str | Path) -> None:
    """Write ``instance`` to ``path`` (``.json``, ``.json.gz``; ``.npz`` for placement)."""
    instance.write(path)


def write_result(result: Result, path: str | Path) -> None:
    """Write ``result`` to ``path`` (``.json`` or ``.json.gz``)."""
    result.write(path)


def build_placement(*, model: str, platform: str, prefill: int, decode: int, batch: int = 1,
                    layers: int | None = None, tp: int = 1, block_span: int = 4,
                    kv_layout: str = "heads", dtype: str = "fp16",
                    weight_dtype: str | None = None, act_dtype: str | None = None,
                    kv_dtype: str | None = None, paper_precision: bool = False,
                    weight_sparsity: float | None = None, act_sparsity: str | None = None,
                    attn_sparsity: float | None = None, time_unit: str = "ns",
                    load_timing: str = "at_use",
                    formats: Sequence[str] | None = None, budget_gb: float | None = None,
                    budget_factor: float | None = None, measurements: str | None = None,
                    objective: str = "makespan", slo_ttft_ms: float | None = None,
                    slo_tpot_ms: float | None = None, slo_e2e_ms: float | None = None,
                    catalog: str | None = None, models_file: str | None = None
                    ) -> PlacementInstance:
    """A P1 instance (``hetopt build placement``; a P2 layout instance when ``budget_gb`` or
    ``budget_factor`` is given): ``model`` on ``platform`` for ``prefill`` input tokens,
    ``decode`` steps and ``batch`` requests. Durations in ticks of ``time_unit``; weight loads
    follow ``load_timing`` (problems.md §1.2 rule 5: ``at_use``, DOPS Eq. 1, or
    ``prefetch``)."""
    if budget_gb is not None and budget_factor is not None:
        raise InputError("give budget_gb or budget_factor, not both", field="budget")
    return placement_from_args(argparse.Namespace(**locals()))


def build_layout(*, budget_gb: float | None = None, budget_factor: float | None = None,
                 **options: Any) -> PlacementInstance:
    """A P2 layout instance (``hetopt build layout``): :func:`build_placement` with a memory
    budget, ``budget_gb`` (10^9 bytes) or ``budget_factor`` (× the blocks' linear bytes)."""
    if budget_gb is None and budget_factor is None:
        raise InputError("a layout instance needs budget_gb or budget_factor", field="budget")
    return build_placement(budget_gb=budget_gb, budget_factor=budget_factor, **options)


def build_serving(*, model: str, gpus: str | Sequence[str], context: int, slo_ms: float,
                  tp: str | Sequence[int] = "1,2,4,8", no_ep: bool = False,
                  batches: str | Sequence[int] = "1,2,4,8,16,32,64,128,256",
                  max_gpus: int = 32, max_owners: int = 3, max_replicas: int = 4,
                  max_microbatches: int = 4, memory_fraction: float = 1.0,
                  gpu_cost: str = "calibrated", unmeasured_gpu: str = "transfer",
                  gpu_calibration: str | None = None,
                  measurements: str | None = None,
                  catalog: str | None = None, models_file: str | None = None
                  ) -> ServingInstance:
    """A P3 serving instance (``hetopt build serving``): ``model`` on the GPU mix ``gpus``
    (types, e.g. ``"H100,L40S"`` or ``["H100", "L40S"]``) at mean context ``context`` tokens
    under a TPOT SLO of ``slo_ms`` milliseconds. GPU kernels are costed by ``gpu_cost``:
    ``calibrated`` (fitted to measured profiles, ``gpu_calibration`` a fit file replacing the
    bundled one) or ``roofline``; ``unmeasured_gpu`` (``transfer`` | ``roofline``) what
    ``calibrated`` does for GPU types without measurements; ``measurements`` is a measured
    table used where it has entries."""
    args = dict(locals())
    for key in ("gpus", "tp", "batches"):
        if not isinstance(args[key], str):
            args[key] = ",".join(str(v) for v in args[key])
    return serving_from_args(argparse.Namespace(**args))


def instance_names(problem: str | None = None) -> list[str]:
    """Names of every bundled instance (of ``problem``: a :class:`Problem` or its name), the
    STG graphs included."""
    return instances.bundled_names(None if problem is None else _problem(problem))


def load_instance(name: str) -> Instance:
    """The bundled instance ``name`` (:func:`instance_names`), or an instance file's path."""
    if Path(name).exists():
        return read_problem_instance(name)
    return instances.load(name)


def solve(instance: Instance, method: str | None = None, *, time_limit: float | None = None,
          num_workers: int | None = None, seed: int = 0, **params: Any) -> Result:
    """Solve ``instance`` with ``method`` (None: its problem's default, :func:`methods`) and
    return the certified :class:`Result` (objective recomputed, status a :class:`Status`).
    time_limit: seconds (None: no limit); num_workers: solver threads (None: 1); params:
    the method's parameters (``methods()``' ``params``) and ``solvers.solve``'s options
    (``initial_solution``, ``warm_start``, ``deterministic``, ``log``, ``export_path``)."""
    res = _solve(instance, method, time_limit=time_limit,
                 num_workers=1 if num_workers is None else num_workers, seed=seed, **params)
    res.status = Status(res.status)
    return res


def validate(instance: Instance, result: Result) -> Validation:
    """Check ``result`` against ``instance``: a :class:`solvers.certify.Validation` (valid,
    recomputed objective, violations)."""
    return _validate(instance, result)


def lower_bound(instance: Instance) -> float:
    """A certified lower bound on the instance's optimum: the makespan bound of
    :mod:`opt.placement.certified_bounds` in ticks (for a layout instance, of its
    format-relaxed instance). Serving instances have none here (InputError)."""
    if isinstance(instance, ServingInstance):
        raise InputError("lower_bound applies to placement and layout instances; a serving "
                         "method's result carries its own bound", field="instance")
    inst = relaxed_instance(instance) if instance.problem == "layout" else instance
    return float(certified_lower_bound(inst).value)


def methods(problem: str | None = None) -> list[Method]:
    """The registered methods (of ``problem``): name, problem, exact, default params."""
    return list(_methods(None if problem is None else _problem(problem)))


def _problem(problem: str) -> str:
    """The name of ``problem`` (a :class:`Problem` or a name; UnknownNameError otherwise)."""
    name = problem_name(str(problem))
    if name not in PROBLEMS:
        raise UnknownNameError("problem", name, PROBLEMS)
    return name


__all__ = ["read_instance", "write_instance", "read_result", "write_result",
           "build_placement", "build_layout", "build_serving", "instance_names",
           "load_instance", "solve", "validate", "lower_bound", "methods"]
