"""P2 weight-layout strategies (problems.md §2, DOPS §6.5): back ends ``(instance,
SolveOptions) -> Result`` of ``solvers.solve`` on placement instances, registered (with the
params each accepts) in :mod:`solvers.registry`.

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
analytic P1 bound of the format-relaxed instance (:func:`opt.placement.layout.relaxed_instance`), which
``solvers.solve`` attaches. The two exact models (CP-SAT) are in :mod:`solvers.layout.exact`.
"""

from __future__ import annotations

import time
from typing import Any

from heuristics.layout.wla import WLA_VERSION, WlaParams
from heuristics.layout.wla import wla as run_wla
from heuristics.placement.bifocal import BifocalParams, bifocal_schedule
from heuristics.placement.static_policies import static_schedule
from models.options import SolveOptions
from opt.common.errors import InputError
from opt.common.result import Result
from opt.placement.instance import PlacementInstance
from opt.placement.layout import (
    budget_message,
    fits_budget,
    format_mix,
    storage_bytes,
    uniform,
    with_formats,
)
from solvers.placement.backends import bifocal_settings, static_settings
from solvers.registry import parsed_params


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


def bifocal_layout_settings(params: dict[str, Any]) -> dict[str, Any]:
    """The effective settings of ``bifocal/linear`` and ``bifocal/dual`` (typed ``params``):
    Bifocal's (:func:`solvers.placement.backends.bifocal_settings`), so a sweep record made
    under another Bifocal default is recomputed."""
    return bifocal_settings(params)


def pd_layout_settings(params: dict[str, Any]) -> dict[str, Any]:
    """The effective settings of ``pd/linear`` and ``pd/dual``: the static policy's list
    scheduler settings (:func:`solvers.placement.backends.static_settings`, defaults)."""
    return static_settings(params)


def wla_settings(params: dict[str, Any]) -> dict[str, Any]:
    """The effective settings of the WLA strategies (typed ``params``): WLA's own fields
    (:class:`heuristics.layout.wla.WlaParams`, defaults filled in), Bifocal's and WLA's
    :data:`heuristics.layout.wla.WLA_VERSION` under the record field ``revision`` (a record of
    another version is recomputed)."""
    from dataclasses import asdict, fields

    own = {f.name for f in fields(WlaParams)}
    return {"wla": asdict(WlaParams(**{k: v for k, v in params.items() if k in own})),
            "bifocal": bifocal_settings({k: v for k, v in params.items() if k not in own}),
            "revision": WLA_VERSION}


def fixed_format(inst: PlacementInstance, options: SolveOptions, *, method: str,
                 scheduler: str, fmt: str) -> Result:
    """``scheduler`` (``pd`` or ``bifocal``) with every block stored as ``fmt``."""
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
        solution = static_schedule(view, "pd")
    else:
        bp = BifocalParams(**parsed_params(method, "layout", options.params))
        solution = bifocal_schedule(view, bp, stats=stats)
    return Result(problem="placement", method=method, status="FEASIBLE",
                  runtime_s=time.perf_counter() - t0, seed=options.seed,
                  params=dict(options.params), solution=solution,
                  stats={**stats, **layout_stats(inst, phi)})


def wla(inst: PlacementInstance, options: SolveOptions, *, method: str, dual: bool) -> Result:
    """Bifocal + WLA (``dual``: with ``dual`` as a memory-budgeted option)."""
    from dataclasses import asdict, fields, replace

    t0 = time.perf_counter()
    given = parsed_params(method, "layout", options.params)
    own = {f.name for f in fields(WlaParams)}
    p = WlaParams(**{k: v for k, v in given.items() if k in own})
    bp = BifocalParams(**{k: v for k, v in given.items() if k not in own})
    if dual:
        p = replace(p, dual=True)
    msg = budget_message(inst, ("linear", "npu_opt", "pim_opt") + (("dual",) if p.dual
                                                                   else ()))
    if msg is not None:
        return infeasible(method, options, msg, t0)
    try:
        out = run_wla(inst, p, bp)
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
