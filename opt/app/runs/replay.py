"""Request-level serving replay on a P1 platform (DOPS' request-stream evaluation).

A *trace* is a list of requests (arrival time s, input tokens, output tokens), read from a CSV
in the BurstGPT column layout (:func:`read_burstgpt_csv`) or generated
(:func:`generate_trace`). The replay serves it on one platform with one placement method:

Batching (FCFS, static batches)
    One batch runs at a time. A batch opens with the oldest waiting request and is dispatched
    at ``D = max(server free, min(first arrival + timeout, arrival of the max_batch-th
    request))``; it takes every waiting request that arrived by ``D`` (FCFS, at most
    ``max_batch``). Defaults: max batch 4, timeout 10 ms.
Shape and padding
    A batch runs as one P1 workload: batch B = its size, prefill = its longest input, decode
    steps = its longest output − 1 (the prefill's LM head emits the first token; decode step i
    emits token i + 1). Both lengths are then *rounded up to a bucket*
    (:class:`ReplayOptions` ``input_buckets`` / ``output_buckets``, default powers of two
    from 64 tokens / 32 steps; lengths above the last bucket are rounded up to a multiple of
    it), so batches of similar lengths share one schedule: the padded shape is what runs (the
    server is busy for the padded makespan), and padding's cost is part of what is measured.
    The replay reports the padded tokens against the real ones.
Decode-prefix reuse (``decode_prefix``, default on)
    Steps are chained (step i+1's embed waits for step i's LM head), so a list scheduler in
    upward-rank order schedules step by step, and the schedule of a workload with D decode
    steps *begins with* the schedule of the same batch and prefill with d < D steps: the
    same placements and token times t_0..t_d (tests check this equality for Bifocal without
    its token term and the static policies; Bifocal's token term, which looks at the
    remaining steps, would break it). With ``decode_prefix`` a batch needing d decode steps
    reuses any cached schedule of its (method, B, padded prefill) with ≥ d steps (else it
    schedules d padded up to its output bucket), takes t_0..t_d and keeps the server busy
    until t_d: no output padding is paid, and the number of distinct schedules is at most
    one per output bucket and usually far fewer. ``decode_prefix=False`` runs every batch as
    its padded shape (the server is busy for the padded makespan).
Schedules and their reuse
    Each distinct (method, B, padded prefill, padded decode) is scheduled once by the caller's
    ``schedule(instance, method) -> ShapeTimes`` (the core never imports the solvers; see
    ``opt.app.runs.replay_schedules``) and cached as a JSON file under ``<out>/schedules/<method>/``, written
    as soon as it finishes, so an interrupted replay resumes without rescheduling; per-method
    metrics are written to ``<out>/<method>.json`` when the method finishes.
Per-request metrics (seconds)
    TTFT = D + t_0 − arrival (t_0: end of the prefill's LM head in the batch's schedule);
    E2E = D + t_{o−1} − arrival (o output tokens; t_i: end of decode step i's LM head);
    TBT = (E2E − TTFT)/(o − 1), the request's mean time between tokens (None when o = 1).
    Median, p90, p99 and mean over the requests per method.
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from opt.app.runs.sweep import aborting
from opt.common.errors import InputError
from opt.common.jsonio import read_json, write_json_atomic
from opt.common.report import table
from opt.common.units import TIME_UNITS

#: BurstGPT's CSV columns (https://github.com/HPMLL/BurstGPT).
BURSTGPT_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens",
                    "Log Type")
#: The paper's sample: 500 requests, mean input 708 and mean output 286 tokens.
PAPER_REQUESTS, PAPER_MEAN_INPUT, PAPER_MEAN_OUTPUT = 500, 708, 286
DEFAULT_INPUT_BUCKETS = (64, 128, 256, 512, 1024, 2048)
DEFAULT_OUTPUT_BUCKETS = (32, 64, 128, 256, 512, 1024)
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Request:
    """One request: arrival_s seconds after the trace start; token counts ≥ 1."""

    id: int
    arrival_s: float
    input_tokens: int
    output_tokens: int


# ---- traces -------------------------------------------------------------------------------------

def _cell(row: dict[str, Any], column: str, line: int, path: Any) -> float:
    """The number in ``column`` of a trace row; an InputError naming that column otherwise."""
    text = row.get(column)
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"line {line}: expected a number, got {text!r}", source=str(path),
                         field=column) from None
    if not math.isfinite(value):
        raise InputError(f"line {line}: expected a finite number, got {text!r}",
                         source=str(path), field=column)
    return value


def read_burstgpt_csv(path: str | Path, *, limit: int | None = None, model: str | None = None,
                      time_scale: float = 1.0) -> list[Request]:
    """Requests of a BurstGPT-layout CSV (columns :data:`BURSTGPT_COLUMNS`; extra columns are
    ignored). Arrival = (Timestamp − first Timestamp) · ``time_scale``; rows with 0 request or
    response tokens (failed requests in BurstGPT) are skipped; ``model`` keeps only rows of
    that Model; ``limit`` keeps the first N kept rows (in timestamp order)."""
    _check_scale(time_scale)
    path = Path(path)
    try:
        fh = path.open(newline="")
    except OSError as exc:
        raise InputError(f"cannot read trace: {exc.strerror}", source=str(path)) from None
    rows = []
    with fh:
        reader = csv.DictReader(fh)
        missing = [c for c in ("Timestamp", "Request tokens", "Response tokens")
                   if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"missing column(s) {', '.join(missing)}; expected the BurstGPT "
                             f"layout {', '.join(BURSTGPT_COLUMNS)}", source=str(path),
                             field=missing[0])
        for line, row in enumerate(reader, start=2):
            if model is not None and row.get("Model") != model:
                continue
            ts, n_in, n_out = (_cell(row, c, line, path) for c in
                               ("Timestamp", "Request tokens", "Response tokens"))
            if n_in < 1 or n_out < 1:
                continue
            rows.append((ts, int(n_in), int(n_out)))
    rows.sort(key=lambda r: r[0])
    if limit is not None and limit < 1:
        raise InputError(f"the number of requests must be ≥ 1, got {limit}", field="requests")
    if limit is not None:
        rows = rows[:limit]
    if not rows:
        raise InputError("no usable requests (non-zero request and response tokens)",
                         source=str(path))
    t0 = rows[0][0]
    return [Request(i, (ts - t0) * time_scale, n_in, n_out)
            for i, (ts, n_in, n_out) in enumerate(rows)]


def generate_trace(n: int = PAPER_REQUESTS, *, mean_input: float = PAPER_MEAN_INPUT,
                   mean_output: float = PAPER_MEAN_OUTPUT, rate_per_s: float = 1.0,
                   burstiness: float = 0.25, sigma: float = 0.8, max_input: int = 2048,
                   max_output: int = 1024, seed: int = 0, time_scale: float = 1.0
                   ) -> list[Request]:
    """A seeded bursty trace: Gamma inter-arrival times (shape ``burstiness`` < 1 → bursty,
    coefficient of variation 1/√shape; mean 1/``rate_per_s`` s, BurstGPT's fitted family) and
    log-normal lengths (``sigma``) clipped to [1, max] and rescaled so the sample means equal
    ``mean_input`` / ``mean_output`` (to rounding). Arrival times are multiplied by
    ``time_scale`` (< 1 compresses the trace: more back-pressure)."""
    for name, value in (("requests", n), ("max_input", max_input), ("max_output", max_output)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InputError(f"{name} must be an integer ≥ 1, got {value!r}", field=name)
    for name, value in (("rate_per_s", rate_per_s), ("burstiness", burstiness),
                        ("sigma", sigma)):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise InputError(f"{name} must be > 0, got {value!r}", field=name)
    for name, value, cap in (("mean_input", mean_input, max_input),
                             ("mean_output", mean_output, max_output)):
        if not isinstance(value, (int, float)) or not 1 <= value <= cap:
            raise InputError(f"{name} must be in [1, {cap}], got {value!r}", field=name)
    _check_scale(time_scale)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be an integer ≥ 0, got {seed!r}", field="seed")
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(burstiness, 1.0 / (rate_per_s * burstiness), size=n)
    gaps[0] = 0.0
    arrivals = np.cumsum(gaps) * time_scale

    def lengths(mean: float, cap: int) -> np.ndarray:
        raw = rng.lognormal(0.0, sigma, size=n)
        scale = mean / raw.mean()
        for _ in range(50):  # clipping lowers the mean: rescale until it matches
            vals = np.clip(raw * scale, 1.0, cap)
            if abs(vals.mean() - mean) < 0.01:
                break
            scale *= mean / vals.mean()
        return np.maximum(1, np.rint(np.clip(raw * scale, 1.0, cap))).astype(int)

    ins, outs = lengths(mean_input, max_input), lengths(mean_output, max_output)
    return [Request(i, float(arrivals[i]), int(ins[i]), int(outs[i])) for i in range(n)]


def _check_scale(time_scale: float) -> None:
    if not isinstance(time_scale, (int, float)) or not math.isfinite(time_scale) \
            or time_scale <= 0:
        raise InputError(f"time_scale must be > 0, got {time_scale!r}", field="time_scale")


def trace_summary(requests: Sequence[Request]) -> dict[str, Any]:
    """Count, duration (s), mean/max input and output tokens of a trace."""
    ins = np.array([r.input_tokens for r in requests])
    outs = np.array([r.output_tokens for r in requests])
    return {"requests": len(requests), "duration_s": requests[-1].arrival_s - requests[0].arrival_s,
            "mean_input": float(ins.mean()), "mean_output": float(outs.mean()),
            "max_input": int(ins.max()), "max_output": int(outs.max())}


# ---- batching and shapes ------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplayOptions:
    """max_batch: requests per batch; timeout_s: batch timeout (s); input_buckets /
    output_buckets: padded prefill tokens / decode steps (ascending; beyond the last, multiples
    of it); layers: build with only the first N layers (None = all); decode_prefix: reuse the
    prefix of one long-decode schedule per (B, padded prefill) (module docstring)."""

    max_batch: int = 4
    timeout_s: float = 0.010
    input_buckets: tuple[int, ...] = DEFAULT_INPUT_BUCKETS
    output_buckets: tuple[int, ...] = DEFAULT_OUTPUT_BUCKETS
    layers: int | None = None
    decode_prefix: bool = True

    def check(self) -> ReplayOptions:
        if self.max_batch < 1:
            raise InputError(f"max_batch must be ≥ 1, got {self.max_batch}", field="max_batch")
        if not (math.isfinite(self.timeout_s) and self.timeout_s >= 0):
            raise InputError(f"timeout must be ≥ 0 s, got {self.timeout_s}", field="timeout")
        for name in ("input_buckets", "output_buckets"):
            b = getattr(self, name)
            if not b or any(x < 1 for x in b) or list(b) != sorted(set(b)):
                raise InputError(f"{name} must be ascending positive integers, got {b!r}",
                                 field=name)
        return self


def bucket(value: int, buckets: Sequence[int]) -> int:
    """The smallest bucket ≥ value; beyond the last bucket, the next multiple of it
    (value 0 stays 0: a batch of one-token outputs has no decode step)."""
    if value <= 0:
        return 0
    for b in buckets:
        if value <= b:
            return int(b)
    last = int(buckets[-1])
    return last * math.ceil(value / last)


@dataclass(frozen=True)
class Shape:
    """A padded batch shape: batch B, prefill tokens, decode steps."""

    batch: int
    prefill: int
    decode: int

    @property
    def tag(self) -> str:
        return f"b{self.batch}-p{self.prefill}-d{self.decode}"


def batch_shape(batch: Sequence[Request], options: ReplayOptions) -> Shape:
    """The padded shape of a batch: its size, longest input and longest output − 1 rounded
    up to their buckets."""
    return Shape(len(batch), bucket(max(r.input_tokens for r in batch), options.input_buckets),
                 bucket(max(r.output_tokens for r in batch) - 1, options.output_buckets))


@dataclass
class ShapeTimes:
    """What a schedule of one shape tells the replay: token_ticks[i] = end of step i's LM head
    (i = 0 the prefill), makespan, both in ticks of ``time_unit``; runtime_s: scheduling time."""

    token_ticks: list[int]
    makespan: int
    time_unit: str
    runtime_s: float
    tasks: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def seconds(self, ticks: float) -> float:
        return ticks * TIME_UNITS[self.time_unit]


ScheduleFn = Callable[[Any, str], ShapeTimes]  # (PlacementInstance, method) -> ShapeTimes


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    vals = np.array([v for v in values if v is not None], dtype=np.float64)
    if not len(vals):
        return {"median": None, "p90": None, "p99": None, "mean": None}
    p = np.percentile(vals, PERCENTILES)
    return {"median": float(p[0]), "p90": float(p[1]), "p99": float(p[2]),
            "mean": float(vals.mean())}


# ---- the replay ---------------------------------------------------------------------------------

class ShapeCache:
    """Schedules of padded shapes, one JSON file each under ``folder/<method>/<shape>.json``
    (written atomically when the schedule finishes; reused on a rerun unless ``fresh``)."""

    def __init__(self, folder: Path, build: Callable[[Shape], Any], schedule: ScheduleFn, *,
                 fresh: bool = False, progress: Any = None):
        self.folder, self.build, self.schedule = Path(folder), build, schedule
        self.fresh, self.progress = fresh, progress
        self.memo: dict[tuple[str, Shape], ShapeTimes] = {}
        self.computed = 0
        self.reused = 0
        self.schedule_s = 0.0

    def _load(self, path: Path, decode: int) -> ShapeTimes | None:
        try:
            times = ShapeTimes(**read_json(path))
        except (InputError, TypeError):
            return None  # torn or foreign file: recompute
        return times if len(times.token_ticks) == decode + 1 else None

    def get(self, method: str, shape: Shape, *, longer_ok: bool = False) -> ShapeTimes:
        """The schedule of ``shape``; with ``longer_ok`` any known one of the same method,
        batch and prefill with at least as many decode steps (the shortest such)."""
        key = (method, shape)
        if key in self.memo:
            return self.memo[key]
        if longer_ok:
            known = [s for (m, s) in self.memo if m == method and s.batch == shape.batch
                     and s.prefill == shape.prefill and s.decode >= shape.decode]
            if not self.fresh and (self.folder / method).is_dir():
                for f in (self.folder / method).glob(f"b{shape.batch}-p{shape.prefill}-d*.json"):
                    d = f.stem.rsplit("-d", 1)[1]
                    if d.isdigit() and int(d) >= shape.decode:
                        known.append(Shape(shape.batch, shape.prefill, int(d)))
            for s in sorted(set(known), key=lambda x: x.decode):
                if (method, s) in self.memo:
                    return self.memo[(method, s)]
                times = self._load(self.folder / method / f"{s.tag}.json", s.decode)
                if times is not None:
                    self.reused += 1
                    self.memo[(method, s)] = times
                    return times
        path = self.folder / method / f"{shape.tag}.json"
        times = None
        if not self.fresh and path.exists():
            times = self._load(path, shape.decode)
        if times is None:
            if self.progress is not None:  # shown while it runs; the count is of requests
                self.progress.note(f"{method}: scheduling {shape.tag}")
            t0 = time.perf_counter()
            times = self.schedule(self.build(shape), method)
            self.schedule_s += time.perf_counter() - t0
            self.computed += 1
            write_json_atomic(asdict(times), path)
        else:
            self.reused += 1
        self.memo[key] = times
        return times


def simulate(requests: Sequence[Request], method: str, cache: ShapeCache,
             options: ReplayOptions, progress: Any = None) -> dict[str, Any]:
    """Serve ``requests`` (sorted by arrival) with ``method``; per-request and summary metrics
    (seconds), batches and padding (see the module docstring). ``progress`` advances by the
    requests of each batch served."""
    reqs = sorted(requests, key=lambda r: (r.arrival_s, r.id))
    t_last = time.perf_counter()
    n, i, free = len(reqs), 0, 0.0
    per_req: list[dict[str, Any]] = []
    batches = []
    shapes: dict[str, int] = {}
    real_tokens = padded_tokens = 0
    while i < n:
        first = reqs[i]
        full_at = reqs[i + options.max_batch - 1].arrival_s \
            if i + options.max_batch - 1 < n else math.inf
        dispatch = max(free, first.arrival_s, min(first.arrival_s + options.timeout_s, full_at))
        j = i
        while j < n and j - i < options.max_batch and reqs[j].arrival_s <= dispatch:
            j += 1
        batch = reqs[i:j]
        shape = batch_shape(batch, options)
        st = cache.get(method, shape, longer_ok=options.decode_prefix)
        shape = Shape(shape.batch, shape.prefill, len(st.token_ticks) - 1)  # the one used
        sec = st.seconds
        steps = max(r.output_tokens for r in batch) - 1 if options.decode_prefix \
            else shape.decode  # decode steps the batch runs (prefix mode: its own maximum)
        busy = sec(st.token_ticks[steps]) if options.decode_prefix else sec(st.makespan)
        for r in batch:
            ttft = dispatch + sec(st.token_ticks[0]) - r.arrival_s
            e2e = dispatch + sec(st.token_ticks[r.output_tokens - 1]) - r.arrival_s
            per_req.append({"id": r.id, "arrival_s": r.arrival_s, "dispatch_s": dispatch,
                            "ttft_s": ttft, "e2e_s": e2e,
                            "tbt_s": (e2e - ttft) / (r.output_tokens - 1)
                            if r.output_tokens > 1 else None,
                            "input_tokens": r.input_tokens, "output_tokens": r.output_tokens,
                            "shape": shape.tag})
            real_tokens += r.input_tokens + r.output_tokens
        padded_tokens += shape.batch * (shape.prefill + steps + 1)
        free = dispatch + busy
        batches.append({"dispatch_s": dispatch, "size": len(batch), "shape": shape.tag,
                        "decode_steps": steps, "busy_s": busy})
        shapes[shape.tag] = shapes.get(shape.tag, 0) + 1
        i = j
        if progress is not None:
            now = time.perf_counter()
            progress.advance(len(batch), now - t_last, f"{method}: {i}/{n} requests")
            t_last = now
    end = max(r["e2e_s"] + r["arrival_s"] for r in per_req)
    return {"method": method, "requests": len(per_req), "batches": len(batches),
            "distinct_shapes": len(shapes), "shapes": shapes,
            "ttft_s": _percentiles([r["ttft_s"] for r in per_req]),
            "tbt_s": _percentiles([r["tbt_s"] for r in per_req]),
            "e2e_s": _percentiles([r["e2e_s"] for r in per_req]),
            "completion_s": end,
            "throughput_tokens_per_s": sum(r["output_tokens"] for r in per_req) / end
            if end > 0 else None,
            "mean_batch": len(per_req) / len(batches),
            "padding_factor": padded_tokens / real_tokens if real_tokens else None,
            "busy_fraction": sum(b["busy_s"] for b in batches) / end if end > 0 else None,
            "per_request": per_req}


def config_key(requests: Sequence[Request], model: str, platform: str,
               options: ReplayOptions) -> dict[str, Any]:
    """What a stored per-method result must match to be reused."""
    digest = hash(tuple((r.arrival_s, r.input_tokens, r.output_tokens) for r in requests))
    key = {"model": model, "platform": platform, "options": asdict(options),
           "trace": {**trace_summary(requests), "hash": digest & 0xFFFFFFFFFFFF}}
    return json.loads(json.dumps(key))  # as it reads back from the stored JSON (lists)


@dataclass(frozen=True)
class ReplayStore:
    """Where a replay keeps what it computed: ``schedule_dir`` holds the schedules (None:
    ``<out>/schedules/``; schedules depend on model, platform, build and shape only, so traces
    may share them); ``fresh`` recomputes results and schedules instead of reusing them."""

    fresh: bool = False
    schedule_dir: str | Path | None = None


def run_replay(requests: Sequence[Request], methods: Sequence[str], out: str | Path,
               schedule: ScheduleFn, build: Callable[[Shape], Any], *, model: str,
               platform: str, options: ReplayOptions | None = None,
               store: ReplayStore | None = None,
               progress: Any = None) -> list[tuple[dict[str, Any], bool]]:
    """Replay ``requests`` with every method; returns (result, was_cached) per method.

    ``build(shape)`` makes the P1 instance of a padded shape; ``schedule(instance, method)``
    schedules it (:data:`ScheduleFn`). Results go to ``<out>/<method>.json``, schedules where
    ``store`` says (:class:`ReplayStore`); a rerun reuses both unless ``store.fresh``.
    ``progress`` (:class:`opt.app.runs.sweep.Progress`) counts requests served: its total is set
    here to methods × requests, known before anything runs."""
    opts = (options or ReplayOptions()).check()
    if not requests:
        raise InputError("the trace has no requests", field="trace")
    methods = list(dict.fromkeys(methods))
    if progress is not None:
        progress.total = len(methods) * len(requests)
    out = Path(out)
    where = store or ReplayStore()
    fresh = where.fresh
    key = config_key(requests, model, platform, opts)
    cache = ShapeCache(Path(where.schedule_dir) if where.schedule_dir is not None
                       else out / "schedules", build, schedule, fresh=fresh, progress=progress)
    results = []
    with aborting(progress):
        for method in methods:
            path = out / f"{method.replace('/', '_')}.json"
            if not fresh and path.exists():
                try:
                    rec = read_json(path)
                except InputError:
                    rec = None
                if isinstance(rec, dict) and rec.get("key") == key:
                    results.append((rec, True))
                    if progress is not None:
                        progress.advance(len(requests), None, f"{method}: cached")
                    continue
            t0 = time.perf_counter()
            before = (cache.computed, cache.schedule_s)
            rec = simulate(requests, method, cache, opts, progress)
            rec.update(key=key, wall_s=time.perf_counter() - t0,
                       schedules_computed=cache.computed - before[0],
                       schedule_s=cache.schedule_s - before[1])
            write_json_atomic(rec, path)
            results.append((rec, False))
    if progress is not None:
        progress.close()
    return results


def render(results: Sequence[dict[str, Any]]) -> str:
    """Per method: TTFT / TBT / E2E median, p90, p99 in milliseconds, batches, shapes."""

    def ms(v):
        return None if v is None else v * 1e3

    rows = []
    for r in results:
        rows.append([r["method"], r["requests"], r["batches"], r["distinct_shapes"],
                     *(ms(r[m][q]) for m in ("ttft_s", "tbt_s", "e2e_s")
                       for q in ("median", "p90", "p99")),
                     r.get("padding_factor")])
    heads = ["method", "requests", "batches", "shapes"] + [
        f"{m} {q} ms" for m in ("TTFT", "TBT", "E2E") for q in ("p50", "p90", "p99")] + ["pad x"]
    return table(heads, rows)
