"""Where sweep work items run: in-process, on a local process pool, or on a Dask cluster.

A sweep is a list of independent *work items*; each is a picklable object passed to a picklable
top-level function that builds its instance inside the worker, solves it and returns a plain
JSON record (:mod:`opt.app.runs.sweep`, :mod:`opt.app.runs.serving_sweep`). The parent process alone writes the
records (:func:`write_record`, atomically), so a killed sweep leaves only whole files behind
and a rerun recomputes just the missing ones; the executor never changes a record's content
(only its timing fields ``runtime_s`` / ``wall_s``).

* ``serial`` — in the calling process, in order (the behaviour of a plain loop);
* ``process`` — a :class:`concurrent.futures.ProcessPoolExecutor` of ``jobs`` workers started by
  the ``forkserver`` method (clean single-threaded parents; no fork of a threaded process);
  with one job, or one item to compute, it runs serially instead;
* ``dask`` — a :class:`distributed.Client` on ``scheduler`` (``tcp://host:8786``) or, without a
  scheduler, on a new ``LocalCluster`` of ``jobs`` single-threaded worker processes. Workers of
  a remote cluster need hetopt installed (same version).

``dask`` is the optional ``dist`` extra: it is imported only when a Dask executor is made, and
a missing installation is an :class:`~opt.common.errors.InputError` naming the flag.

Every executor's :meth:`Executor.map_unordered` yields ``(index, result)`` pairs as results
finish; an exception raised by a work item propagates to the caller (the records already
written stay).
"""

from __future__ import annotations

import os
import pickle
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opt.common.errors import InputError
from opt.common.jsonio import write_json_atomic

#: Executor kinds accepted by :func:`make_executor` (and ``--executor``).
EXECUTORS = ("serial", "process", "dask")


class Executor(ABC):
    """Runs ``fn(item)`` for each item and yields ``(index, result)`` as results finish.

    ``in_order`` is true when results arrive in submission order and each item is computed only
    when its result is requested (the serial executor): a progress bar can then announce an
    item before it runs. ``workers`` is the number of items that can run at once."""

    kind: str = "serial"
    in_order: bool = True
    workers: int = 1

    @abstractmethod
    def map_unordered(self, fn: Callable[[Any], Any], items: Sequence[Any]
                      ) -> Iterator[tuple[int, Any]]:
        """Yield ``(index, fn(items[index]))`` for every item as it finishes."""

    def close(self) -> None:  # noqa: B027 - optional hook: executors without workers keep it
        """Release workers (pending items are cancelled)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        return f"{self.kind} ({self.workers} worker{'s' if self.workers != 1 else ''})"


class SerialExecutor(Executor):
    """In the calling process, in order."""

    kind = "serial"

    def map_unordered(self, fn, items):
        for i, item in enumerate(items):
            yield i, fn(item)


def _check_picklable(fn: Callable[[Any], Any], items: Sequence[Any], kind: str) -> None:
    """Fail early, with a message, on work that cannot be sent to another process."""
    try:
        pickle.dumps(fn)
        if items:
            pickle.dumps(items[0])
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise InputError(f"the {kind} executor needs picklable work items (top-level "
                         f"functions and plain data): {exc}; use --executor serial",
                         field="executor") from None


#: Seconds Ctrl-C waits for each terminated worker and for the pool's manager thread.
TERMINATE_WAIT_S = 5.0
#: Seconds between a pool worker's checks that the sweep's process is still alive.
PARENT_POLL_S = 1.0


def _watch_parent(pid: int) -> None:
    """Pool-worker initializer: exit when process ``pid`` (the sweep) is gone, so a killed
    sweep (SIGKILL included) leaves no workers behind. A daemon thread polls every
    :data:`PARENT_POLL_S` seconds. Workers ignore SIGINT: Ctrl-C reaches the whole process
    group, and only the parent reports it (one line) and stops the pool."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        import time

        while True:
            time.sleep(PARENT_POLL_S)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # alive, owned by someone else (cannot happen for a parent)
                pass

    threading.Thread(target=watch, name="hetopt-parent-watch", daemon=True).start()


class ProcessExecutor(Executor):
    """A local :class:`concurrent.futures.ProcessPoolExecutor` of ``jobs`` workers.

    ``preload``: modules the fork server imports once, so each worker starts warm (e.g. the
    solver packages). Workers exit by themselves within about a second when the sweep's process
    dies (:func:`_watch_parent`)."""

    kind = "process"
    in_order = False

    def __init__(self, jobs: int, preload: Sequence[str] = ()):
        self.workers = jobs
        self.preload = tuple(preload)
        self._pool = None

    def _get_pool(self):
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods
                                              else "spawn")
            if ctx.get_start_method() == "forkserver" and self.preload:
                ctx.set_forkserver_preload(list(self.preload))
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx,
                                             initializer=_watch_parent,
                                             initargs=(os.getpid(),))
        return self._pool

    def map_unordered(self, fn, items):
        from concurrent.futures import FIRST_COMPLETED, wait

        if len(items) <= 1 or self.workers <= 1:  # no pool for a single item
            yield from SerialExecutor().map_unordered(fn, items)
            return
        _check_picklable(fn, items, self.kind)
        pool = self._get_pool()
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=futures.__getitem__):
                    yield futures[fut], fut.result()
        except KeyboardInterrupt:
            # no cancel() from this thread: the pool's manager thread cancels what is queued
            # when __exit__ stops the pool (_terminate); a future cancelled here, then failed
            # by the manager when its worker is terminated, is an InvalidStateError traceback
            raise
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __exit__(self, *exc: object) -> None:
        if exc and exc[0] is KeyboardInterrupt:
            self._terminate()  # do not wait for running solves (up to their time limit)
        self.close()

    def _terminate(self) -> None:
        """Stop the workers now: cancel what is queued, terminate what runs."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())
        manager = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            proc.terminate()
        for proc in processes:
            proc.join(TERMINATE_WAIT_S)
        if manager is not None:  # let the pool fail its futures and close its queues now
            manager.join(TERMINATE_WAIT_S)


class DaskExecutor(Executor):
    """A :class:`distributed.Client` on an existing scheduler, or on a new ``LocalCluster``."""

    kind = "dask"
    in_order = False

    def __init__(self, client: Any, cluster: Any = None):
        self.client = client
        self.cluster = cluster  # ours to close (None for an external scheduler)
        self.workers = max(1, sum(client.nthreads().values()))  # worker threads now

    def map_unordered(self, fn, items):
        from distributed import as_completed

        if not items:
            return
        futures = self.client.map(fn, list(items), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        done = as_completed(futures, with_results=True)
        try:
            for fut, result in done:
                yield index[fut.key], result
        finally:
            self.client.cancel([f for f in futures if not f.done()])

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _dask():
    try:
        import distributed
    except ImportError as exc:
        raise InputError("--executor dask / --scheduler need dask distributed: install it with "
                         "pip install 'hetopt[dist]'", field="executor") from exc
    return distributed


def make_executor(kind: str | None = None, jobs: int | None = None,
                  scheduler: str | None = None, *, preload: Sequence[str] = (),
                  dask_processes: bool = True) -> Executor:
    """The executor of ``kind`` (``serial`` | ``process`` | ``dask``).

    kind: None means ``dask`` when a ``scheduler`` is given, else ``process``.
    jobs: parallel workers for ``process`` and a local Dask cluster (default: the CPU count).
    scheduler: address of a running Dask scheduler (``tcp://host:8786``); implies ``dask``.
    preload: modules a process pool's fork server imports once.
    dask_processes: a local Dask cluster of processes (True) or of threads in this process."""
    if kind is None:
        kind = "dask" if scheduler else "process"
    if kind not in EXECUTORS:
        raise InputError(f"unknown executor {kind!r}; known: {', '.join(EXECUTORS)}",
                         field="executor")
    if scheduler and kind != "dask":
        raise InputError(f"--scheduler needs --executor dask, got --executor {kind}",
                         field="scheduler")
    if jobs is not None and jobs < 1:
        raise InputError(f"jobs must be ≥ 1, got {jobs}", field="jobs")
    n = jobs if jobs is not None else (os.cpu_count() or 1)
    if kind == "serial":
        return SerialExecutor()
    if kind == "process":
        return ProcessExecutor(n, preload=preload)
    distributed = _dask()
    if scheduler:
        try:
            client = distributed.Client(scheduler, timeout=30)
        except OSError as exc:
            raise InputError(f"cannot reach the Dask scheduler {scheduler}: {exc}",
                             field="scheduler") from None
        return DaskExecutor(client)
    cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1,
                                       processes=dask_processes, dashboard_address=None)
    return DaskExecutor(distributed.Client(cluster), cluster)


def jobs_executor(jobs: int) -> Executor:
    """``jobs`` workers: this process for 1 (serial), a local process pool for more, its fork
    server preloading the solvers (``hetopt bench --jobs``)."""
    return make_executor("serial" if jobs == 1 else "process", jobs, preload=("solvers",))


# ---- records -------------------------------------------------------------------------------------

def write_record(record: dict[str, Any], path: Path) -> None:
    """Write ``record`` to ``path`` atomically: a temporary file in the same folder, flushed to
    disk, then renamed over ``path`` (a killed writer leaves the old file or none, never half
    a file)."""
    write_json_atomic(record, path)


#: Timing fields of a record: they differ between runs and executors, nothing else may.
TIMING_FIELDS = ("runtime_s", "wall_s")


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` without its timing fields and its digest, which covers them (to compare runs
    on different executors)."""
    out = {k: v for k, v in record.items() if k not in TIMING_FIELDS and k != "digest"}
    if isinstance(out.get("search"), dict):  # serving: search statistics carry times too
        out["search"] = {k: v for k, v in out["search"].items() if not k.endswith("_s")}
    return out


# ---- driving a sweep -----------------------------------------------------------------------------

def drive(executor: Executor, fn: Callable[[Any], Any], items: Sequence[Any],
          labels: Sequence[str], progress: Any = None) -> Iterator[tuple[int, Any]]:
    """``executor.map_unordered(fn, items)`` with a progress bar (:class:`opt.app.runs.sweep.Progress`).

    In-order executors announce an item before it runs; the others announce each item as it
    finishes. ``progress.finish_item`` gets the record's ``wall_s`` (seconds in the worker)."""
    it = executor.map_unordered(fn, items)
    k = 0
    while True:
        if progress and executor.in_order and k < len(items):
            progress.start(labels[k])
        try:
            i, result = next(it)
        except StopIteration:
            return
        if progress:
            if not executor.in_order:
                progress.start(labels[i])
            wall = result.get("wall_s") if isinstance(result, dict) else None
            progress.finish_item(float(wall) if wall is not None else 0.0)
        k += 1
        yield i, result


def run_records(slots: Sequence[Any], *, path_of: Callable[[Any], Path],
                cached: Callable[[Path], dict[str, Any] | None], task_of: Callable[[Any], Any],
                worker: Callable[[Any], dict[str, Any]], label_of: Callable[[Any], str],
                progress: Any, executor: Executor, group_of: Callable[[Any], Any] | None = None,
                distrust: Callable[[Path, str], None] | None = None
                ) -> list[tuple[dict[str, Any], bool]]:
    """The resumable sweep loop shared by the placement and serving sweeps: for every slot,
    reuse the record ``cached(path_of(slot))`` when there is one, else run
    ``worker(task_of(slot))`` on ``executor`` and write its record atomically as it arrives.
    Returns (record, was_cached) pairs in slot order.

    ``group_of``: the slots that solve one instance (a workload's methods). When this run
    computed a record of a group, a cached record of that group whose
    ``instance_fingerprint`` differs (an instance of another build or another slot) is
    reported with ``distrust(path, reason)`` and recomputed."""
    done: list[Any] = [None] * len(slots)
    missing: list[int] = []
    for k, slot in enumerate(slots):
        rec = cached(path_of(slot))
        if rec is None:
            missing.append(k)
            continue
        done[k] = (rec, True)
        if progress:
            progress.start(label_of(slot))
            progress.finish_item(None)
    if progress:
        progress.workers = executor.workers
    _compute(missing, slots, done, path_of, task_of, worker, label_of, progress, executor)
    if group_of is not None:
        stale = _stale(slots, done, group_of)
        for k in stale:
            if distrust is not None:
                distrust(path_of(slots[k]), "its instance fingerprint is not the one this run "
                                            "built for the slot")
        _compute(stale, slots, done, path_of, task_of, worker, label_of, None, executor)
    if progress:
        progress.close()
    return done


def _compute(indices: Sequence[int], slots: Sequence[Any], done: list[Any], path_of, task_of,
             worker, label_of, progress: Any, executor: Executor) -> None:
    """Run the slots ``indices`` on ``executor``, writing each record as it arrives."""
    tasks = [task_of(slots[k]) for k in indices]
    labels = [label_of(slots[k]) for k in indices]
    for j, rec in drive(executor, worker, tasks, labels, progress):
        k = indices[j]
        write_record(rec, path_of(slots[k]))
        done[k] = (rec, False)


def _stale(slots: Sequence[Any], done: Sequence[tuple[dict[str, Any], bool]],
           group_of: Callable[[Any], Any]) -> list[int]:
    """Cached records whose instance fingerprint differs from the one a record computed in
    this run for the same group carries."""
    fresh: dict[Any, str] = {}
    for slot, (rec, was_cached) in zip(slots, done):
        fp = rec.get("instance_fingerprint")
        if not was_cached and isinstance(fp, str):
            fresh.setdefault(group_of(slot), fp)
    return [k for k, (slot, (rec, was_cached)) in enumerate(zip(slots, done))
            if was_cached and fresh.get(group_of(slot), rec.get("instance_fingerprint"))
            != rec.get("instance_fingerprint")]


# ---- a one-entry instance cache per worker --------------------------------------------------------

@dataclass
class _Entry:
    key: Any
    value: Any


class LastBuilt:
    """Remembers the last value built (per process, thread-safe): consecutive work items on
    the same instance (one workload, several methods) build it once. Keys are compared with
    ``==`` (frozen dataclasses compare by value, so a catalog sent again still matches)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entry: _Entry | None = None

    def get(self, key: Any, build: Callable[[], Any]) -> Any:
        with self._lock:
            entry = self._entry
            if entry is not None and entry.key == key:
                return entry.value
        value = build()
        with self._lock:
            self._entry = _Entry(key, value)
        return value
