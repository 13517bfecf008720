"""P2 weight-layout strategies (SPEC §2, DOPS §6.5) as placement back ends of ``solvers.solve``.

=====================  ===================================================================
method                 what it does
=====================  ===================================================================
``pd/linear``          PD static policy, every block stored ``linear``
``pd/dual``            PD static policy, every block stored ``dual`` (storage ×2)
``bifocal/linear``     Bifocal, every block ``linear``
``bifocal/dual``       Bifocal, every block ``dual``
``bifocal/wla``        Bifocal + WLA over linear / npu_opt / pim_opt (the paper's arbiter)
``bifocal/wla+dual``   Bifocal + WLA with ``dual`` as a memory-budgeted option (extension)
``cpsat-layout``       exact joint placement + format model (CP-SAT, no evictions)
``cpsat-formats``      exact format-only model for a fixed placement and orders (CP-SAT)
=====================  ===================================================================

Every method honours ``layout.memory_budget``: a layout that cannot fit (all-dual over the
budget, or a budget below the least storage of any assignment) gives status ``INFEASIBLE``
with ``stats["message"]``. Heuristic strategies report ``FEASIBLE``; their lower bound is the
analytic P1 bound of the format-relaxed instance (:func:`opt.layout.relaxed_instance`), which
``solvers.solve`` attaches. This module imports heuristics and models lazily.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from models.options import SolveOptions
from opt.errors import InputError
from opt.instance import PlacementInstance
from opt.layout import (budget_message, fits_budget, format_mix, storage_bytes, uniform,
                        with_formats)
from opt.result import Result

Backend = Callable[[PlacementInstance, SolveOptions], Result]


def infeasible(method: str, options: SolveOptions, message: str, t0: float) -> Result:
    """An INFEASIBLE result whose ``stats["message"]`` says why."""
    return Result(problem="placement", method=method, status="INFEASIBLE",
                  runtime_s=time.perf_counter() - t0, seed=options.seed,
                  params=dict(options.params), solution=None, stats={"message": message})


def layout_stats(inst: PlacementInstance, formats: dict[str, str]) -> dict[str, Any]:
    """Format mix and storage of an assignment (also copied into sweep records)."""
    mix = format_mix(formats)
    store = storage_bytes(inst, formats)
    return {"format_mix": mix, "storage_bytes": store,
            "memory_budget": inst.layout.memory_budget,
            "sweep_record": {"format_mix": mix, "storage_bytes": store,
                             "memory_budget": inst.layout.memory_budget}}


def _fixed_format(method: str, scheduler: str, fmt: str) -> Backend:
    """``scheduler`` (``pd`` or ``bifocal``) with every block stored as ``fmt``."""

    def backend(inst: PlacementInstance, options: SolveOptions) -> Result:
        t0 = time.perf_counter()
        msg = budget_message(inst)
        if fmt not in inst.layout.formats or fmt not in inst.block_load:
            return infeasible(method, options, f"format '{fmt}' is not among the instance's "
                                               f"formats {list(inst.layout.formats)}", t0)
        phi = uniform(inst, fmt)
        if msg is None and not fits_budget(inst, phi):
            msg = (f"all-{fmt} storage takes {storage_bytes(inst, phi):.0f} bytes > memory "
                   f"budget {inst.layout.memory_budget} (other layouts may fit)")
        if msg is not None:
            return infeasible(method, options, msg, t0)
        view = with_formats(inst, phi)
        stats: dict[str, Any] = {}
        if scheduler == "pd":
            from heuristics.static_policies import static_schedule

            solution = static_schedule(view, "pd")
        else:
            from heuristics.bifocal import bifocal_schedule
            from heuristics.wla import WlaParams

            _, bp = WlaParams.split(options.params)  # Bifocal's knobs (WLA's are ignored)
            solution = bifocal_schedule(view, bp, stats=stats)
        return Result(problem="placement", method=method, status="FEASIBLE",
                      runtime_s=time.perf_counter() - t0, seed=options.seed,
                      params=dict(options.params), solution=solution,
                      stats={**stats, **layout_stats(inst, phi)})

    backend.__name__ = backend.__qualname__ = f"_layout_{scheduler}_{fmt}"
    return backend


def _wla(method: str, dual: bool) -> Backend:
    def backend(inst: PlacementInstance, options: SolveOptions) -> Result:
        from dataclasses import asdict, replace

        from heuristics.wla import WlaParams, wla

        t0 = time.perf_counter()
        p, bp = WlaParams.split(options.params)
        p = replace(p, dual=dual or p.dual)
        msg = budget_message(inst, ("linear", "npu_opt", "pim_opt") + (("dual",) if p.dual
                                                                       else ()))
        if msg is not None:
            return infeasible(method, options, msg, t0)
        try:
            out = wla(inst, p, bp)
        except InputError as exc:
            if exc.field == "memory_budget":
                return infeasible(method, options, str(exc), t0)
            raise
        stats = {**out.stats(), "wla_params": asdict(p), **layout_stats(inst, out.formats)}
        stats["sweep_record"].update(evaluations=len(out.trajectory),
                                     stop_reason=out.stop_reason,
                                     trajectory=[r["makespan"] for r in out.trajectory])
        return Result(problem="placement", method=method, status="FEASIBLE",
                      runtime_s=time.perf_counter() - t0, seed=options.seed,
                      params=dict(options.params), solution=out.solution, stats=stats)

    backend.__name__ = backend.__qualname__ = "_wla_dual" if dual else "_wla"
    return backend


def _cpsat_layout(inst: PlacementInstance, options: SolveOptions) -> Result:
    from models.layout_cpsat import solve_layout_cpsat

    t0 = time.perf_counter()
    msg = budget_message(inst)
    if msg is not None:
        return infeasible("cpsat-layout", options, msg, t0)
    return solve_layout_cpsat(inst, options)


def _cpsat_formats(inst: PlacementInstance, options: SolveOptions) -> Result:
    from models.layout_cpsat import solve_format_only

    t0 = time.perf_counter()
    msg = budget_message(inst)
    if msg is not None:
        return infeasible("cpsat-formats", options, msg, t0)
    return solve_format_only(inst, options)


#: Layout strategies by method name (merged into ``solvers.api.PLACEMENT_METHODS``).
LAYOUT_METHODS: dict[str, Backend] = {
    "pd/linear": _fixed_format("pd/linear", "pd", "linear"),
    "pd/dual": _fixed_format("pd/dual", "pd", "dual"),
    "bifocal/linear": _fixed_format("bifocal/linear", "bifocal", "linear"),
    "bifocal/dual": _fixed_format("bifocal/dual", "bifocal", "dual"),
    "bifocal/wla": _wla("bifocal/wla", dual=False),
    "bifocal/wla+dual": _wla("bifocal/wla+dual", dual=True),
    "cpsat-layout": _cpsat_layout,
    "cpsat-formats": _cpsat_formats,
}
#: Layout methods that take a warm start (``solvers.solve`` seeds them like the P1 models).
LAYOUT_EXACT = frozenset({"cpsat-layout"})
