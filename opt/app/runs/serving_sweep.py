"""``hetopt sweep serving``: cost per token of COL / AFD / CAD / B&B plans over models × GPU
mixes × contexts × TPOT SLOs (OpWeave Fig. 9/13).

Each (model, GPU mix, context, SLO) instance is built once (:mod:`opt.serving.builder`) and
solved with every method; one JSON record per (cell, method) is written as soon as it finishes,
to ``<out>/<model>/<gpus>/s<context>-slo<ms>/<method>.json``, so a rerun skips finished cells.
Each instance is solved by :class:`opt.app.runs.sweep_calls.SolveCall` unless the caller passes
another ``solve(instance, method) -> Result``.

Work items (:class:`ServingTask`, one per cell × method) run on an executor (:mod:`opt.app.runs.executor`);
each builds its instance inside the worker and the parent writes the record atomically as it
arrives. A plan the checker rejects is an ``ERROR`` record (``invalid: true``): retried by a rerun,
shown as ``ERROR`` and never counted in a comparison. Cached records carry the instance
fingerprint and a digest and are re-checked before reuse as the placement sweep's are
(:func:`opt.app.runs.sweep.record_error`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opt.app.runs.executor import Executor, LastBuilt, SerialExecutor, run_records
from opt.app.runs.sweep import Progress, aborting, distrust, trusted_record, usable
from opt.app.runs.sweep_calls import SolveCall
from opt.common.errors import InputError
from opt.common.fingerprint import seal
from opt.common.report import table
from opt.costlib.latency import Link
from opt.serving.builder import DEFAULT_TP, ServingWorkload, build_serving_plan
from opt.serving.instance import ServingGrid
from opt.serving.kernel_cost import DEFAULT_GPU_COST, DEFAULT_UNMEASURED_GPU, load_calibrations

#: How this build costs a stage-boundary crossing (problems.md §3.1 "Network model"): records
#: of mixed-GPU cells without it were built with the instance-wide slowest network.
NETWORK_RULE = "per_crossing"

BASELINES = ("col", "afd", "cad")


@dataclass(frozen=True)
class ServingCell:
    model: str
    gpus: tuple[str, ...]
    context: int
    slo_ms: float

    @property
    def gpu_tag(self) -> str:
        return "+".join(self.gpus)

    def folder(self, out: Path) -> Path:
        return Path(out) / self.model / self.gpu_tag / f"s{self.context}-slo{self.slo_ms:g}"

    def label(self) -> str:
        return f"{self.model} {self.gpu_tag} {self.context // 1024}K {self.slo_ms:g}ms"


def cells(models: Sequence[str], gpu_mixes: Sequence[str], contexts: Sequence[int],
          slos_ms: Sequence[float]) -> list[ServingCell]:
    """Every combination; a GPU mix is a comma-separated list of GPU types."""
    mixes = [tuple(g.strip() for g in mix.split(",") if g.strip()) for mix in gpu_mixes]
    return [ServingCell(m, g, c, s) for m, g, c, s in
            itertools.product(dict.fromkeys(models), dict.fromkeys(mixes),
                              dict.fromkeys(contexts), dict.fromkeys(slos_ms))]


def make_record(cell: ServingCell, method: str, result: Any, wall_s: float,
                fingerprint: str | None = None, gpu_cost: str = DEFAULT_GPU_COST,
                unmeasured_gpu: str = DEFAULT_UNMEASURED_GPU, network: Link | None = None
                ) -> dict[str, Any]:
    """The JSON record of one (cell, method) solve (``fingerprint``: of the cell's instance,
    when the result carries none)."""
    sol = result.solution
    return {"model": cell.model, "gpus": list(cell.gpus), "context": cell.context,
            "slo_ms": cell.slo_ms, "gpu_cost": gpu_cost, "unmeasured_gpu": unmeasured_gpu,
            "network_rule": NETWORK_RULE,
            **({"network_override": network.to_dict()} if network is not None else {}),
            "method": method, "status": result.status,
            "cost_usd_per_mtok": result.objective, "lower_bound": result.lower_bound,
            "t_rtt_ms": result.stats.get("t_rtt_ms"),
            "tightest_t_rtt_ms": result.stats.get("tightest_t_rtt_ms"),
            "bottleneck": result.stats.get("bottleneck"), "gpus_used": result.stats.get("gpus"),
            "stages_per_token": None if sol is None else sol["stages_per_token"],
            "plan": None if sol is None else {k: sol[k] for k in
                                              ("template", "owners", "microbatches")},
            "search": result.stats.get("search"), "message": result.stats.get("message"),
            "runtime_s": result.runtime_s, "wall_s": wall_s,
            "instance_fingerprint": getattr(result, "instance_fingerprint", None) or fingerprint,
            **({"invalid": True, "error": result.stats.get("checker")}
               if result.status == "ERROR" else {})}


@dataclass(frozen=True)
class ServingTask:
    """One (cell, method) work item: everything a worker needs (picklable when ``solve`` is)."""

    cell: ServingCell
    method: str
    card: Any  # ModelCard
    catalog: Any  # Catalog
    grid: ServingGrid | None
    tp_degrees: tuple[int, ...]
    solve: Callable[[Any, str], Any]
    gpu_cost: str = DEFAULT_GPU_COST
    unmeasured_gpu: str = DEFAULT_UNMEASURED_GPU
    network: Link | None = None  # every GPU type's inter-node link (Fig. 14's sweep)


_BUILT = LastBuilt()  # the last instance built in this worker (methods of one cell share it)


def run_serving_task(task: ServingTask) -> dict[str, Any]:
    """Build the cell's instance (reused from the previous task of the same cell), solve it with
    the task's method and return the record."""
    cell = task.cell
    t0 = time.perf_counter()
    inst = _BUILT.get(("serving", cell, task.grid, task.tp_degrees, task.card, task.catalog,
                       task.gpu_cost, task.unmeasured_gpu, task.network),
                      lambda: build_serving_plan(task.card, task.catalog, cell.gpus,
                                                 ServingWorkload(cell.context, cell.slo_ms / 1e3),
                                                 grid=task.grid, tp_degrees=task.tp_degrees,
                                                 gpu_cost=task.gpu_cost,
                                                 unmeasured_gpu=task.unmeasured_gpu,
                                                 network=task.network))
    result = task.solve(inst, task.method)
    fp = None if getattr(result, "instance_fingerprint", None) else inst.fingerprint
    return seal(make_record(cell, task.method, result, time.perf_counter() - t0, fp,
                            task.gpu_cost, task.unmeasured_gpu, task.network))


def _reusable(rec: Any) -> bool:
    return isinstance(rec, dict) and "cost_usd_per_mtok" in rec and \
        rec.get("status") not in (None, "ERROR")


def serving_slot(cell: ServingCell, method: str) -> dict[str, Any]:
    """The fields a serving record must carry to be reused in ``cell``'s ``method`` file."""
    return {"model": cell.model, "gpus": list(cell.gpus), "context": cell.context,
            "slo_ms": cell.slo_ms, "method": method}


def _cached(path: Path, slot: dict[str, Any]) -> dict[str, Any] | None:
    """A finished, trusted record at ``path`` of ``slot`` (an ERROR record is retried; one
    that fails :func:`opt.app.runs.sweep.record_error` or belongs to another slot is
    recomputed)."""
    return trusted_record(path, _reusable, "cost_usd_per_mtok", slot=slot)


@dataclass(frozen=True)
class ServingSweepOptions:
    """How :func:`run_serving_sweep` builds, caches and runs its records.

    ``grid``: the planner's search grid (None: the default); ``tp_degrees``: tensor-parallel
    degrees a stage may use; ``gpu_cost``, ``unmeasured_gpu``: the GPU cost model
    (:mod:`opt.serving.kernel_cost`); ``network``: a link replacing the catalog's (None: the
    catalog's); ``resume``: reuse trusted records; ``progress``: the bar on stderr (None:
    silent); ``executor``: where the work items run (None: serially in this process)."""

    grid: ServingGrid | None = None
    tp_degrees: tuple[int, ...] = DEFAULT_TP
    gpu_cost: str = DEFAULT_GPU_COST
    unmeasured_gpu: str = DEFAULT_UNMEASURED_GPU
    network: Link | None = None
    resume: bool = True
    progress: Progress | None = None
    executor: Executor | None = None


def run_serving_sweep(todo: Sequence[ServingCell], methods: Sequence[str], out: Path,
                      solve: Callable[[Any, str], Any] | None = None, *, catalog, cards,
                      options: ServingSweepOptions | None = None
                      ) -> list[tuple[dict[str, Any], bool]]:
    """Solve every cell with every method; (record, was_cached) pairs in grid order.

    With a parallel executor (``options``) ``solve`` must be picklable. The records do not
    depend on the executor (timings aside)."""
    opts = options or ServingSweepOptions()
    solve = SolveCall() if solve is None else solve
    for cell in todo:  # bad names fail before any solving
        cards[cell.model]
        for g in cell.gpus:
            catalog.device(g)
        if cell.context < 1 or cell.slo_ms <= 0:
            raise InputError(f"context must be ≥ 1 and SLO > 0, got {cell.context} tokens, "
                             f"{cell.slo_ms} ms", field="contexts/slo")
    with aborting(opts.progress):
        return _run(todo, list(dict.fromkeys(methods)), Path(out), solve, catalog, cards, opts)


def _measured_gpus(catalog: Any, gpu_cost: str) -> frozenset[str]:
    """GPU types the bundled calibration covers (none under the roofline)."""
    if gpu_cost != "calibrated":
        return frozenset()
    return frozenset(load_calibrations(catalog))


def _same_cost(rec: dict[str, Any] | None, build: tuple[str, str, frozenset[str]]
               ) -> dict[str, Any] | None:
    """A cached record built on the same GPU costs: ``gpu_cost`` (records without the field:
    the roofline), the same ``unmeasured_gpu`` rule when the cell has a GPU type without
    measurements (records without it: the roofline), and, for a mixed cell under calibrated
    costs, the per-crossing network rule."""
    gpu_cost, unmeasured, measured = build
    if rec is None or rec.get("gpu_cost", "roofline") != gpu_cost:
        return None
    gpus = set(rec.get("gpus", ()))
    if gpu_cost == "calibrated" and not gpus <= measured \
            and rec.get("unmeasured_gpu", "roofline") != unmeasured:
        return None
    if gpu_cost == "calibrated" and len(gpus) > 1 and rec.get("network_rule") != NETWORK_RULE:
        return None
    return rec


def _same_network(rec: dict[str, Any] | None, network: Link | None) -> dict[str, Any] | None:
    """A cached record built with the same network override (records without one: none)."""
    want = None if network is None else network.to_dict()
    return rec if rec is not None and rec.get("network_override") == want else None


def _run(todo: Sequence[ServingCell], methods: list[str], out: Path,
         solve: Callable[[Any, str], Any], catalog: Any, cards: Any, opts: ServingSweepOptions
         ) -> list[tuple[dict[str, Any], bool]]:
    gpu_cost, unmeasured_gpu, network = opts.gpu_cost, opts.unmeasured_gpu, opts.network
    build = (gpu_cost, unmeasured_gpu, _measured_gpus(catalog, gpu_cost))
    tp_degrees = tuple(opts.tp_degrees)
    slots = [(cell, method) for cell in todo for method in methods]
    slot_of = {slot[0].folder(out) / f"{slot[1]}.json": serving_slot(*slot) for slot in slots}
    return run_records(
        slots, path_of=lambda slot: slot[0].folder(out) / f"{slot[1]}.json",
        cached=lambda path: _same_network(_same_cost(_cached(path, slot_of[path]), build),
                                          network)
        if opts.resume else None,
        task_of=lambda slot: ServingTask(slot[0], slot[1], cards[slot[0].model], catalog,
                                         opts.grid, tp_degrees, solve, gpu_cost,
                                         unmeasured_gpu, network),
        worker=run_serving_task, label_of=lambda slot: f"{slot[0].label()} {slot[1]}",
        progress=opts.progress, executor=opts.executor or SerialExecutor(),
        group_of=lambda slot: slot[0], distrust=distrust)


def render(records: Sequence[dict[str, Any]]) -> str:
    """One row per cell: $ per million tokens per method (INFEASIBLE marked '-- (x ms)' with the
    tightest T_rtt), and the best baseline's cost over the best other plan's."""
    methods = list(dict.fromkeys(r["method"] for r in records))
    by_cell: dict[tuple, dict[str, dict]] = {}
    for r in records:
        by_cell.setdefault((r["model"], "+".join(r["gpus"]), r["context"], r["slo_ms"]),
                           {})[r["method"]] = r
    rows = []
    for (model, gpus, ctx, slo), recs in by_cell.items():
        row: list[Any] = [model, gpus, f"{ctx // 1024}K", slo]
        for m in methods:
            r = recs.get(m)
            if r is None:
                row.append("")
            elif r.get("status") == "ERROR" or r.get("invalid"):
                row.append("ERROR")  # a failed solve or a plan the checker rejected
            elif r["cost_usd_per_mtok"] is None:
                tight = r.get("tightest_t_rtt_ms")
                row.append("infeasible" + (f" ({tight:.0f} ms)" if tight else ""))
            else:
                row.append(f"{r['cost_usd_per_mtok']:.4f}")
        base = [recs[m]["cost_usd_per_mtok"] for m in BASELINES
                if m in recs and usable(recs[m], "cost_usd_per_mtok")]
        others = [recs[m]["cost_usd_per_mtok"] for m in recs
                  if m not in BASELINES and usable(recs[m], "cost_usd_per_mtok")]
        row.append(f"{min(base) / min(others):.3f}" if base and others else "")
        rows.append(row)
    return table(["model", "GPUs", "context", "SLO ms", *[f"{m} $/Mtok" for m in methods],
                  "best baseline / best"], rows)
