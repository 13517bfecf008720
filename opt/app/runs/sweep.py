"""``hetopt sweep placement``: solve a grid of LLM workloads with several placement methods.

For every workload (model × platform × prefill × decode × batch) the P1 instance is built once
(:mod:`opt.placement.builder`) and solved with each method; one JSON record per (workload, method) is
written as soon as it finishes, to ``<out>/<model>/<platform>/p<prefill>-d<decode>-b<batch>/
<method>.json``, so an interrupted sweep resumes where it stopped (``resume=False`` recomputes).
A record is reused only if it was built with the same ``layers``, ``tp``, KV layout and precision
(``paper_precision``: each model in the precision DOPS runs it in, e.g. INT8 for Mixtral-8x7B).

Each instance is solved by :class:`opt.app.runs.sweep_calls.SolveCall` (:func:`solvers.solve`
with the sweep's time limit, workers and parameters); a test may pass another
``solve(instance, method) -> Result``. Durations in records are integer ticks of ``time_unit``.

Work items (:class:`PlacementTask`, one per workload × method) run on an executor
(:mod:`opt.app.runs.executor`: serial, a local process pool, or Dask); each builds its instance inside the
worker and returns the record, which the parent writes atomically as it arrives. A record whose
solve failed or whose schedule failed validation has status ``ERROR`` (and ``invalid: true`` for
the latter); it is kept for inspection, retried by a rerun and never enters a summary.

Cached records are re-checked before reuse (:func:`record_error`): every record carries the
``instance_fingerprint`` of the instance it was solved on and a ``digest`` over all its fields
(:mod:`opt.common.fingerprint`, whose docstring states the threat model: accidental edits, not
an adversary who recomputes digests), and its numbers must agree with each other (makespan ≥
lower bound, OPTIMAL ⇒ equal, TTFT and decode time within the makespan). A record that fails is
recomputed with one line on stderr, never trusted; records written before digests existed are
recomputed too.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from opt.app.runs.executor import Executor, LastBuilt, SerialExecutor, run_records
from opt.app.runs.sweep_calls import SolveCall
from opt.common.errors import InputError
from opt.common.fingerprint import seal, seal_error, slot_error
from opt.common.jsonio import read_json
from opt.common.report import table
from opt.common.result import STATUSES, claims_error
from opt.common.units import TIME_UNITS
from opt.costlib.operators import Precision
from opt.placement.build_options import BuildOptions, Workload, check_tp
from opt.placement.build_options import paper_precision as dops_precision
from opt.placement.builder import build_placement
from opt.placement.schedule_error import ScheduleError
from opt.placement.utilisation import class_shares

BASELINE = "pd"


@dataclass(frozen=True)
class SweepWorkload:
    model: str
    platform: str
    prefill: int
    decode: int
    batch: int

    @property
    def tag(self) -> str:
        return f"p{self.prefill}-d{self.decode}-b{self.batch}"

    def folder(self, out: Path) -> Path:
        return Path(out) / self.model / self.platform / self.tag

    def label(self) -> str:
        return f"{self.model} {self.platform} {self.tag}"


def _unique(items: Iterable) -> list:
    return list(dict.fromkeys(items))


def grid(models: Sequence[str], platforms: Sequence[str], prefill: Sequence[int],
         decode: Sequence[int], batch: Sequence[int]) -> list[SweepWorkload]:
    """Every combination, in the order given (duplicates dropped)."""
    return [SweepWorkload(*c) for c in itertools.product(
        _unique(models), _unique(platforms), _unique(prefill), _unique(decode), _unique(batch))]


def record_path(out: Path, wl: SweepWorkload, method: str) -> Path:
    return wl.folder(out) / f"{method}.json"


# ---- progress ------------------------------------------------------------------------------------

def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


#: Seconds between redraws of :meth:`Progress.advance` on a terminal / in a log.
REDRAW_S, LOG_S = 0.2, 10.0


class Progress:
    """A dependency-free progress bar: ``[12/64] 18% eta 3m12s <label>``.

    On a terminal the line is redrawn in place (``\\r``); otherwise one line per item. The ETA is
    the mean time of the items computed so far times the items left (cached items are free),
    divided by ``workers`` (items computed at once by a parallel executor)."""

    def __init__(self, total: int, stream: TextIO | None = None, tty: bool | None = None,
                 workers: int = 1):
        self.total = total
        self.workers = max(1, workers)
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.done = 0
        self.computed = 0
        self.busy_s = 0.0
        self.t0 = time.perf_counter()
        self._width = 0
        self._last = 0.0

    def _emit(self, text: str) -> None:
        if self.tty:
            pad = max(0, self._width - len(text))
            self._width = len(text)
            self.stream.write("\r" + text + " " * pad)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def start(self, label: str) -> None:
        """Announce item ``done + 1`` (about to run)."""
        pct = 100 * self.done // self.total if self.total else 100
        left = self.total - self.done
        eta = (_duration(self.busy_s / self.computed * left / min(self.workers, max(left, 1)))
               if self.computed else "?")
        self._emit(f"[{self.done + 1}/{self.total}] {pct}% eta {eta} {label}")

    def finish_item(self, seconds: float | None) -> None:
        """One item done; ``seconds`` None for a cached item."""
        self.done += 1
        if seconds is not None:
            self.computed += 1
            self.busy_s += seconds

    def advance(self, count: int, seconds: float | None, label: str) -> None:
        """``count`` units done at once (a replay's requests served by one batch), taking
        ``seconds`` (None: cached, free); redraws at most every :data:`REDRAW_S` seconds (on a
        terminal) or :data:`LOG_S` seconds (a log), and always at the end."""
        self.done += count
        if seconds is not None:
            self.computed += count
            self.busy_s += seconds
        now = time.perf_counter()
        if self.done >= self.total or now - self._last >= (REDRAW_S if self.tty else LOG_S):
            self._last = now
            self.note(label)

    def note(self, label: str) -> None:
        """Show the current count with ``label`` (e.g. a schedule about to be computed)."""
        pct = 100 * self.done // self.total if self.total else 100
        left = self.total - self.done
        eta = _duration(self.busy_s / self.computed * left) if self.computed else "?"
        self._emit(f"[{self.done}/{self.total}] {pct}% eta {eta} {label}")

    def abort(self) -> None:
        """End the in-place line so an error message starts on a fresh line."""
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0

    def close(self) -> None:
        text = (f"[{self.done}/{self.total}] 100% done in "
                f"{_duration(time.perf_counter() - self.t0)} ({self.computed} computed, "
                f"{self.done - self.computed} cached)")
        self._emit(text)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


@contextmanager
def aborting(progress: Progress | None):
    """Run a block; if it raises, end the progress bar's line first so the error message
    starts on a fresh line."""
    try:
        yield
    except BaseException:
        if progress is not None:
            progress.abort()
        raise


# ---- the sweep -----------------------------------------------------------------------------------

SolveFn = Callable[[Any, str], Any]  # (PlacementInstance, method) -> certified Result


def make_record(wl: SweepWorkload, method: str, result: Any, inst: Any, *, layers: int | None,
                tp: int, wall_s: float, settings: dict[str, Any] | None = None
                ) -> dict[str, Any]:
    """The JSON record of one (workload, method) solve; ``settings``: the method's effective
    settings (:func:`solve_settings`), kept so that a record of other settings is not reused."""
    metrics = (result.stats or {}).get("metrics") or {}
    return {"model": wl.model, "platform": wl.platform, "prefill": wl.prefill,
            "decode": wl.decode, "batch": wl.batch, "method": method, "status": result.status,
            "makespan": result.objective, "ttft": metrics.get("ttft"),
            "decode_time": metrics.get("decode_time"), "mean_tpot": metrics.get("mean_tpot"),
            "lower_bound": result.lower_bound, "runtime_s": result.runtime_s,
            "wall_s": wall_s, "time_unit": inst.time_unit, "tasks": inst.n_tasks,
            "layers": layers, "tp": tp,
            "kv_layout": (inst.meta or {}).get("kv_layout", "single"),
            "load_timing": inst.load_timing, "moe_routing": _routing(inst),
            "precision": _precision_tag(inst), **_shares(inst, result), **_traffic(inst, result),
            "kv_reserved": "kv_reserved_bytes" in (inst.meta or {}),
            "instance_fingerprint": getattr(result, "instance_fingerprint", None)
            or inst.fingerprint,
            **({"settings": settings} if settings is not None else {}),
            **((result.stats or {}).get("sweep_record") or {})}  # e.g. a layout's format mix


def solve_settings(solve: Any, method: str) -> dict[str, Any] | None:
    """The effective settings ``solve`` runs ``method`` with, when it declares them
    (:meth:`opt.app.runs.sweep_calls.SolveCall.settings`), else None."""
    of = getattr(solve, "settings", None)
    return of(method) if callable(of) else None


def same_settings(rec: dict[str, Any], settings: dict[str, Any] | None) -> bool:
    """Whether a record was made under ``settings`` (records of methods without declared
    settings carry none)."""
    return rec.get("settings") == settings


def build_failed_record(wl: SweepWorkload, method: str, error: str, *, layers: int | None,
                        tp: int, precision: str, wall_s: float) -> dict[str, Any]:
    """The ERROR record of a workload whose instance cannot be built (the builder's
    InputError, e.g. a KV cache larger than its home's memory): never reused, never in a
    summary, kept so the table says why the cell is empty."""
    return {"model": wl.model, "platform": wl.platform, "prefill": wl.prefill,
            "decode": wl.decode, "batch": wl.batch, "method": method, "status": "ERROR",
            "makespan": None, "ttft": None, "decode_time": None, "mean_tpot": None,
            "lower_bound": None, "runtime_s": 0.0, "wall_s": wall_s, "time_unit": None,
            "tasks": None, "layers": layers, "tp": tp, "precision": precision,
            "error": f"build: {error}"}


@dataclass
class _Failed:
    """Stands in for a Result when a method rejects a workload (recorded as status ERROR)."""

    error: str
    status: str = "ERROR"
    objective: None = None
    lower_bound: None = None
    runtime_s: float = 0.0
    stats: None = None


def _shares(inst: Any, result: Any) -> dict[str, float | None]:
    """NPU / PIM busy fractions and their co-utilisation (DOPS Eq. 5) of a solved record."""

    if getattr(result, "solution", None) is None or result.objective is None:
        return {}
    return class_shares(inst, result.solution, int(result.objective))


def _traffic(inst: Any, result: Any) -> dict[str, dict[str, int]]:
    """Weight loads and evictions of a solved record per device class, upper case
    (``{"loads": {"NPU": 70, "PIM": 28}, "evictions": {...}}``): the evidence for a schedule
    that reloads its weights."""
    sol = getattr(result, "solution", None)
    if sol is None or result.objective is None:
        return {}
    cls = {d.name: d.device_class.upper() for d in inst.devices}
    return {key: dict(sorted(Counter(cls[ev["device"]] for ev in sol.get(key) or ()).items()))
            for key in ("loads", "evictions")}


def _precision_tag(inst: Any) -> str:
    """:func:`precision_tag` of the precision the instance was built with (fp16 throughout when
    its builder recorded none)."""

    return precision_tag(Precision(**(((inst.meta or {}).get("builder") or {})
                                       .get("precision") or {})))


def workload_precision(model: str, paper_precision: bool) -> Any:
    """The :class:`~opt.costlib.operators.Precision` a sweep builds ``model`` with."""

    return dops_precision(model) if paper_precision else Precision()


def _routing(inst: Any) -> str | None:
    """The instance's MoE routing (``meta.moe_routing``; None for a dense model)."""
    return (inst.meta or {}).get("moe_routing")


def _reusable(rec: Any, layers: int | None, tp: int, precision: str) -> bool:
    """A finished record of the same build (ERROR records are retried; records from before the
    head-sharded KV layout, which carry no ``kv_layout``, or before the KV took its share of
    memory, which carry no ``kv_reserved``, are rebuilt, as are records of another load rule or
    MoE routing than the builder's defaults, or that do not say theirs)."""
    build = BuildOptions()
    return isinstance(rec, dict) and rec.get("layers") == layers and rec.get("tp", 1) == tp \
        and rec.get("kv_layout", "single") == build.kv_layout \
        and rec.get("load_timing") == build.load_timing \
        and rec.get("moe_routing", "") in (None, build.moe_routing) \
        and rec.get("precision", "fp16/fp16/fp16") == precision and rec.get("kv_reserved") is True \
        and "makespan" in rec and rec.get("status") not in (None, "ERROR")


@dataclass(frozen=True)
class PlacementTask:
    """One (workload, method) work item: everything a worker needs, picklable when ``solve``
    is (a top-level function or a frozen dataclass instance, as the CLI passes)."""

    workload: SweepWorkload
    method: str
    card: Any  # ModelCard
    catalog: Any  # Catalog
    layers: int | None
    tp: int
    solve: SolveFn
    paper_precision: bool = False


_BUILT = LastBuilt()  # the last instance built in this worker (methods of one workload share it)


def run_placement_task(task: PlacementTask) -> dict[str, Any]:
    """Build the task's instance (reused from the previous task of the same workload), solve it
    and return its record. A method that rejects the workload (InputError) gives an ERROR record
    with ``error``; a schedule that fails validation gives an ERROR record with ``invalid``."""

    wl, method = task.workload, task.method
    t0 = time.perf_counter()
    options = BuildOptions(layers=task.layers, tp=task.tp,
                           precision=workload_precision(wl.model, task.paper_precision))
    try:
        inst = _BUILT.get(("placement", wl, options, task.card, task.catalog),
                          lambda: build_placement(task.card, task.catalog.platform(wl.platform),
                                                  task.catalog,
                                                  Workload(wl.prefill, wl.decode, wl.batch),
                                                  options))
    except InputError as exc:  # e.g. the KV cache does not fit its home: no instance at all
        return seal(build_failed_record(wl, method, str(exc), layers=task.layers, tp=task.tp,
                                        precision=precision_tag(options.precision),
                                        wall_s=time.perf_counter() - t0))
    extra: dict[str, Any] = {}
    try:
        result = task.solve(inst, method)
    except InputError as exc:  # e.g. a heuristic that cannot fit the weights
        result, extra = _Failed(str(exc)), {"error": str(exc)}
    except ScheduleError as exc:  # the validator rejected the schedule: never a number
        result = _Failed(f"invalid schedule: {exc}")
        extra = {"error": result.error, "invalid": True}
    else:
        if result.stats.get("invalid"):  # solvers.certify turned it into an ERROR result
            extra = {"error": result.stats.get("message"), "invalid": True}
    return seal({**make_record(wl, method, result, inst, layers=task.layers, tp=task.tp,
                               wall_s=time.perf_counter() - t0,
                               settings=solve_settings(task.solve, method)), **extra})


def check_workloads(workloads: Sequence[SweepWorkload], *, catalog, cards,
                    layers: int | None, tp: int = 1) -> None:
    """Fail on a bad model, platform, workload, ``layers`` or ``tp`` before hours of solving,
    not in the middle (:class:`InputError` naming it)."""

    for wl in workloads:
        card = cards[wl.model]
        catalog.platform(wl.platform)
        Workload(wl.prefill, wl.decode, wl.batch)
        if layers is not None and not 1 <= layers <= card.layers:
            raise InputError(f"layers must be in 1..{card.layers} for model '{card.name}', "
                             f"got {layers}", field="layers")
        check_tp(card, tp)


@dataclass(frozen=True)
class SweepOptions:
    """How :func:`run_sweep` builds, caches and runs its records.

    ``layers``: transformer layers per instance (None: the model's all); ``tp``: tensor-parallel
    degree; ``paper_precision``: each model in DOPS' precision (INT8 for Mixtral-8x7B and
    Llama-2-70B, :data:`opt.placement.build_options.PAPER_PRECISION`), fp16 otherwise;
    ``resume``: reuse trusted records; ``progress``: the bar on stderr (None: silent);
    ``executor``: where the work items run (None: serially in this process)."""

    layers: int | None = None
    tp: int = 1
    paper_precision: bool = False
    resume: bool = True
    progress: Progress | None = None
    executor: Executor | None = None


def run_sweep(workloads: Sequence[SweepWorkload], methods: Sequence[str], out: Path,
              solve: SolveFn | None = None, *, catalog, cards,
              options: SweepOptions | None = None) -> list[tuple[dict[str, Any], bool]]:
    """Solve every workload with every method; returns (record, was_cached) pairs in grid order.

    Each record is written (atomically) as soon as its solve finishes. ``catalog`` and ``cards``
    resolve platform and model names (names and sizes are checked before anything runs).
    With a parallel executor (``options``) ``solve`` must be picklable. The records do not
    depend on the executor (timings aside)."""
    opts = options or SweepOptions()
    methods = _unique(methods)
    solve = SolveCall() if solve is None else solve
    check_workloads(workloads, catalog=catalog, cards=cards, layers=opts.layers, tp=opts.tp)
    with aborting(opts.progress):
        return _run(workloads, methods, Path(out), solve, catalog, cards, opts)


def placement_slot(wl: SweepWorkload, method: str) -> dict[str, Any]:
    """The fields a placement record must carry to be reused in ``wl``'s ``method`` file."""
    return {"model": wl.model, "platform": wl.platform, "prefill": wl.prefill,
            "decode": wl.decode, "batch": wl.batch, "method": method}


def _cached(path: Path, layers: int | None, tp: int, precision: str,
            settings: dict[str, Any] | None, slot: dict[str, Any]) -> dict[str, Any] | None:
    return trusted_record(path, lambda rec: _reusable(rec, layers, tp, precision)
                          and same_settings(rec, settings), slot=slot)


def _number_error(rec: dict[str, Any], key: str) -> str | None:
    value = rec.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < 0:
        return f"{key} = {value!r} is not a finite number ≥ 0"
    return None


def record_error(rec: Any, value: str = "makespan") -> str | None:
    """Why a cached sweep record cannot be trusted (None when it can): its digest does not
    hold (:func:`opt.common.fingerprint.seal_error`), it names no instance fingerprint, or its
    numbers contradict each other — ``value`` (the objective: ``makespan`` or
    ``cost_usd_per_mtok``) against ``lower_bound`` and the status
    (:func:`opt.common.result.claims_error`), TTFT and decode time within the makespan, a
    serving plan's T_rtt within its SLO. Bench and plot readers may call it too."""
    err = seal_error(rec)
    if err:
        return err
    fp = rec.get("instance_fingerprint")
    if not isinstance(fp, str) or not fp.startswith("sha256:"):
        return "no instance fingerprint"
    if rec.get("status") not in STATUSES:
        return f"unknown status {rec.get('status')!r}"
    for key in (value, "lower_bound", "ttft", "decode_time", "t_rtt_ms", "slo_ms"):
        err = _number_error(rec, key)
        if err:
            return err
    obj = rec.get(value)
    err = claims_error(rec["status"], obj, rec.get("lower_bound"))
    if err:
        return err
    for key in ("ttft", "decode_time"):
        if obj is not None and rec.get(key) is not None and rec[key] > obj:
            return f"{key} {rec[key]} exceeds the {value} {obj}"
    t_rtt, slo = rec.get("t_rtt_ms"), rec.get("slo_ms")
    if obj is not None and t_rtt is not None and slo is not None and t_rtt > slo * (1 + 1e-9):
        return f"T_rtt {t_rtt} ms exceeds the SLO {slo} ms of a plan with a cost"
    return None


def trusted_record(path: Path, reusable: Callable[[Any], bool], value: str = "makespan",
                   slot: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The cached record at ``path`` when it belongs to ``slot`` (the fields naming the file's
    place: :func:`opt.common.fingerprint.slot_error`), is ``reusable`` (same build, not
    ERROR) and passes :func:`record_error`; None otherwise (recompute it). A record of another
    slot, or one that is reusable but fails the check, is reported on stderr in one line."""
    if not path.exists():
        return None
    try:
        rec = read_json(path)
    except InputError as exc:
        distrust(path, str(exc.detail))  # atomic writes leave no torn files: someone edited it
        return None
    err = None if slot is None else slot_error(rec, slot)
    if err:
        distrust(path, err)
        return None
    if not reusable(rec):
        return None
    err = record_error(rec, value)
    if err:
        distrust(path, err)
        return None
    return rec


def distrust(path: Path, reason: str) -> None:
    """One stderr line: a cached record is not reused (on a terminal, over the progress line)."""
    lead = "\r\033[K" if sys.stderr.isatty() else ""
    print(f"{lead}hetopt: {path}: cached record not reused ({reason}); recomputing",
          file=sys.stderr, flush=True)


def precision_tag(precision: Any) -> str:
    """``weight/activation/kv`` of a :class:`~opt.costlib.operators.Precision`."""
    return f"{precision.weight}/{precision.activation}/{precision.kv}"


def _run(workloads: Sequence[SweepWorkload], methods: list[str], out: Path, solve: SolveFn,
         catalog: Any, cards: Any, opts: SweepOptions) -> list[tuple[dict[str, Any], bool]]:
    slots = [(wl, method) for wl in workloads for method in methods]
    settings = {m: solve_settings(solve, m) for m in methods}
    layers, tp, paper_precision = opts.layers, opts.tp, opts.paper_precision
    # per record path: the precision tag and the method settings a reusable record carries
    expect = {record_path(out, *slot): (precision_tag(workload_precision(slot[0].model,
                                                                         paper_precision)),
                                        settings[slot[1]], placement_slot(*slot))
              for slot in slots}
    return run_records(
        slots, path_of=lambda slot: record_path(out, *slot),
        cached=lambda path: _cached(path, layers, tp, *expect[path]) if opts.resume else None,
        task_of=lambda slot: PlacementTask(slot[0], slot[1], cards[slot[0].model], catalog,
                                           layers, tp, solve, paper_precision),
        worker=run_placement_task, label_of=lambda slot: f"{slot[0].label()} {slot[1]}",
        progress=opts.progress, executor=opts.executor or SerialExecutor(),
        group_of=lambda slot: slot[0], distrust=distrust)


# ---- summaries -----------------------------------------------------------------------------------

#: Statuses whose numbers may enter a summary.
SOLVED = ("OPTIMAL", "FEASIBLE")


def usable(rec: dict[str, Any], value: str = "makespan") -> bool:
    """True when ``rec`` may enter a summary: solved (OPTIMAL or FEASIBLE), not marked
    ``invalid`` (a schedule or plan that failed validation) and with a ``value``."""
    return rec.get("status") in SOLVED and not rec.get("invalid") and rec.get(value) is not None


def geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def workload_key(rec: dict[str, Any]) -> tuple:
    """(model, platform, prefill, decode, batch) of a sweep record: the keys of speedups."""
    return (rec["model"], rec["platform"], rec["prefill"], rec["decode"], rec["batch"])


def speedups(records: Sequence[dict[str, Any]], baseline: str = BASELINE
             ) -> dict[tuple, float | None]:
    """(workload key, method) → baseline makespan / method makespan (None when either has no
    schedule or the baseline is not in the sweep; ERROR and invalid records never count)."""
    base = {workload_key(r): r.get("makespan") for r in records
            if r["method"] == baseline and usable(r)}
    out = {}
    for r in records:
        b, m = base.get(workload_key(r)), (r.get("makespan") if usable(r) else None)
        out[(workload_key(r), r["method"])] = b / m if b and m else None
    return out


def geomean_speedups(records: Sequence[dict[str, Any]], baseline: str = BASELINE
                     ) -> list[dict[str, Any]]:
    """Per (model, method): geometric-mean speedup over ``baseline`` across the model's
    workloads (platforms included) where both have a schedule."""
    sp = speedups(records, baseline)
    groups: dict[tuple[str, str], list[float]] = {}
    for r in records:
        groups.setdefault((r["model"], r["method"]), [])
        s = sp[(workload_key(r), r["method"])]
        if s is not None:
            groups[(r["model"], r["method"])].append(s)
    return [{"model": m, "method": meth, "workloads": len(v), "geomean_speedup": geomean(v)}
            for (m, meth), v in groups.items()]


def _ms(value: float | None, unit: str) -> float | None:
    return None if value is None else value * TIME_UNITS[unit] / 1e-3


def render(records: Sequence[dict[str, Any]], baseline: str = BASELINE) -> str:
    """The per-workload table (total latency, TTFT, decode time in ms, speedup over the
    baseline when it is in the sweep) and the per-model geomean speedups."""
    has_base = any(r["method"] == baseline for r in records)
    sp = speedups(records, baseline)
    headers = ["model", "platform", "workload", "method", "status", "total ms", "TTFT ms",
               "decode ms", "runtime s"]
    if has_base:
        headers.append(f"speedup vs {baseline.upper()}")
    rows = []
    for r in records:
        unit = r.get("time_unit", "ns")
        ok = usable(r)  # an ERROR / invalid record is listed, marked, without numbers
        row = [r["model"], r["platform"], f"p{r['prefill']}-d{r['decode']}-b{r['batch']}",
               r["method"], r["status"] + (" (invalid)" if r.get("invalid") else ""),
               _ms(r.get("makespan"), unit) if ok else None,
               _ms(r.get("ttft"), unit) if ok else None,
               _ms(r.get("decode_time"), unit) if ok else None, r.get("runtime_s")]
        if has_base:
            row.append(sp[(workload_key(r), r["method"])])
        rows.append(row)
    parts = [table(headers, rows)]
    if has_base:
        g = geomean_speedups(records, baseline)
        parts += ["", f"geomean speedup over {baseline.upper()} per model and method:",
                  table(["model", "method", "workloads", f"geomean speedup vs "
                                                         f"{baseline.upper()}"],
                        [[x["model"], x["method"], x["workloads"], x["geomean_speedup"]]
                         for x in g])]
    else:
        parts += ["", f"(no speedups: method '{baseline}' is not in the sweep)"]
    return "\n".join(parts)
