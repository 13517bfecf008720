"""hetopt's public Python API (docs/api.md): ``import opt.api as hetopt``.

Every name is loaded on first use (PEP 562), so ``import opt.api`` imports nothing else::

    import opt.api as hetopt

    inst = hetopt.load_instance("heft-topcuoglu-2002")
    res = hetopt.solve(inst, time_limit=10)
    assert res.status == hetopt.Status.OPTIMAL and res.objective == 73
    assert res.schedule().makespan == 73
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

#: the façade's functions (opt.app.facade)
_FUNCTIONS = ("read_instance", "write_instance", "read_result", "write_result",
              "build_placement", "build_layout", "build_serving", "import_dot",
              "instance_names", "load_instance", "solve", "validate", "lower_bound", "methods",
              "simulate", "view")
#: the builders' typed options and where each lives
_OPTIONS = {"Workload": "opt.placement.build_options",
            "BuildOptions": "opt.placement.build_options",
            "Precision": "opt.costlib.operators", "Sparsity": "opt.costlib.operators",
            "Budget": "opt.placement.request", "Goal": "opt.placement.request",
            "Sources": "opt.costlib.sources", "ServingWorkload": "opt.serving.builder",
            "ServingGrid": "opt.serving.instance", "Parallelism": "opt.serving.request",
            "GpuCost": "opt.serving.request"}
#: the typed solution views (opt.placement.schedule)
_SCHEDULE = ("Schedule", "ScheduledTask", "ScheduledTransfer", "ScheduledLoad",
             "ScheduledEviction", "LayoutSolution")

__all__ = ["Problem", "Status", "Result", "PlacementInstance", "ServingInstance", "InputError",
           "Schedule", "ScheduledTask", "ScheduledTransfer", "ScheduledLoad",
           "ScheduledEviction", "LayoutSolution", "ServingPlan", "PlanMetrics", "SimReport",
           "Workload", "BuildOptions", "Precision", "Sparsity", "Budget", "Goal", "Sources",
           "ServingWorkload", "ServingGrid", "Parallelism", "GpuCost",
           "read_instance", "write_instance", "read_result", "write_result",
           "build_placement", "build_layout", "build_serving", "import_dot",
           "instance_names", "load_instance", "solve", "validate", "lower_bound", "methods",
           "simulate", "view"]

#: where each name lives
_HOMES = {"Problem": "opt.problems", "Status": "opt.common.result",
          "Result": "opt.common.result", "PlacementInstance": "opt.placement.instance",
          "ServingInstance": "opt.serving.instance", "InputError": "opt.common.errors",
          "ServingPlan": "opt.serving.plan", "PlanMetrics": "opt.serving.checker",
          "SimReport": "opt.serving.simulator",
          **{name: "opt.placement.schedule" for name in _SCHEDULE}, **_OPTIONS,
          **{name: "opt.app.facade" for name in _FUNCTIONS}}

if TYPE_CHECKING:
    from opt.app.facade import (
        build_layout,
        build_placement,
        build_serving,
        import_dot,
        instance_names,
        load_instance,
        lower_bound,
        methods,
        read_instance,
        read_result,
        simulate,
        solve,
        validate,
        view,
        write_instance,
        write_result,
    )
    from opt.common.errors import InputError
    from opt.common.result import Result, Status
    from opt.costlib.operators import Precision, Sparsity
    from opt.costlib.sources import Sources
    from opt.placement.build_options import BuildOptions, Workload
    from opt.placement.instance import PlacementInstance
    from opt.placement.request import Budget, Goal
    from opt.placement.schedule import (
        LayoutSolution,
        Schedule,
        ScheduledEviction,
        ScheduledLoad,
        ScheduledTask,
        ScheduledTransfer,
    )
    from opt.problems import Problem
    from opt.serving.builder import ServingWorkload
    from opt.serving.checker import PlanMetrics
    from opt.serving.instance import ServingGrid, ServingInstance
    from opt.serving.plan import ServingPlan
    from opt.serving.request import GpuCost, Parallelism
    from opt.serving.simulator import SimReport


def __getattr__(name: str) -> Any:
    """Import ``name``'s module on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'opt.api' has no attribute {name!r}")
    value = getattr(__import__(home, fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
