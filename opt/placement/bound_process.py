"""The certified lower bound computed in a separate process while the caller schedules: on a full-size instance the bound and a heuristic's schedule each take seconds and
neither needs the other, so on a machine with a spare core they can run side by side.

:func:`start_bound` starts :func:`opt.placement.certified_bounds.certified_lower_bound` in a
child interpreter (``python -m opt.placement.bound_process``, which reads the pickled instance
and options on stdin and writes the pickled bound on stdout) when the instance has at least
:data:`PARALLEL_BOUND_TASKS` tasks, at least two CPUs are usable and the bound is not cached
yet; otherwise it defers the in-process computation. A fresh interpreter, not a fork (a fork
copies the parent's solver thread pools and their locks mid-state) and not multiprocessing's
spawn (which re-runs the caller's main script in the child). :meth:`BoundJob.result` waits for
the child and stores its value in the bound's per-instance cache, so a later call of
``certified_lower_bound`` (``solvers.api.solve`` attaches it) does not recompute it. If the
child cannot be started or fails, the bound is computed in process: the value never depends on
where it ran.

A caller that knows before reading the instance that it will want the bound (``hetopt solve``
of a heuristic on a large file) starts a :class:`BoundWorker` first: the same child, started
with ``--warm``, loads numba (≈ 1.4 s) on the other core while the caller reads, and
:func:`start_bound` hands it the instance instead of starting a child then.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import sys
import threading
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, cast

from opt.placement.bound_options import JIT_TASKS, BoundOptions, jit_kernels
from opt.placement.certified_bounds import (
    CertifiedBound,
    cached_bound,
    certified_lower_bound,
    remember_bound,
)
from opt.placement.instance import PlacementInstance

if TYPE_CHECKING:
    import subprocess

#: tasks from which :func:`start_bound` computes the bound in a child process (below, the bound
#: takes about a second or less, not much more than starting the child and sending the instance)
PARALLEL_BOUND_TASKS = 200_000


def usable_cpus() -> int:
    """CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass
class BoundJob:
    """A certified bound being computed (``process`` None: computed in process on demand)."""

    inst: PlacementInstance
    options: BoundOptions
    process: subprocess.Popen | None = None
    where: str = "in process"
    writer: threading.Thread | None = None

    def result(self) -> CertifiedBound:
        """The bound (waits for the child; computes it here if the child failed)."""
        if self.process is not None:
            out, err = self.process.communicate()
            self._join_writer()
            code = self.process.returncode
            self.process = None
            value = None
            if code == 0:
                try:
                    value = pickle.loads(out)
                except (pickle.UnpicklingError, EOFError, ValueError) as exc:
                    err = str(exc).encode()
            if isinstance(value, CertifiedBound):
                return remember_bound(self.inst, self.options, value)
            why = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {code}"]
            self.where = f"in process (the child failed: {why[0]})"
        return certified_lower_bound(self.inst, self.options)

    def cancel(self) -> None:
        """Stop the child, if any (the caller no longer needs the bound)."""
        if self.process is not None:
            self.process.kill()
            self.process.communicate()
            self.process = None
            self._join_writer()

    def _join_writer(self) -> None:
        """Wait for the payload's writer (done once the child exited: its pipe is closed)."""
        if self.writer is not None:
            self.writer.join()
            self.writer = None


def _child(warm: bool) -> subprocess.Popen | None:
    """A bound child waiting for its payload on stdin (``warm``: loading numba meanwhile);
    None if it cannot be started."""
    import subprocess  # only when a child is started (start-up time)

    try:
        return subprocess.Popen([sys.executable, "-m", "opt.placement.bound_process",
                                 *(["--warm"] if warm else [])],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError:
        return None


@dataclass
class BoundWorker:
    """A bound child started before the instance exists (:meth:`start`), warming numba while
    the caller reads; :func:`start_bound` takes it, :meth:`close` stops it if nobody did."""

    process: subprocess.Popen | None = None

    @classmethod
    def start(cls) -> BoundWorker:
        """A warming child when two CPUs are usable (else an empty worker)."""
        return cls(_child(warm=True) if usable_cpus() >= 2 else None)

    def take(self) -> subprocess.Popen | None:
        """The child, if it is still alive (the caller owns it from now on)."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is not None:  # died while warming
            proc.communicate()
            return None
        return proc

    def close(self) -> None:
        """Stop the child if it was not taken."""
        proc, self.process = self.process, None
        if proc is not None:
            proc.kill()
            proc.communicate()


def start_bound(inst: PlacementInstance, options: BoundOptions | None = None, *,
                min_tasks: int = PARALLEL_BOUND_TASKS,
                worker: BoundWorker | None = None) -> BoundJob:
    """Start the certified bound of ``inst``: in a child interpreter (``worker``'s when given
    and alive) when ``inst`` has at least ``min_tasks`` tasks, two CPUs are usable and the
    bound is not cached; else deferred."""
    opts = options or BoundOptions()
    job = BoundJob(inst, opts)
    if inst.n_tasks < min_tasks or usable_cpus() < 2 or cached_bound(inst, opts) is not None:
        return job
    proc = worker.take() if worker is not None else None
    if proc is None:
        proc = _child(warm=inst.n_tasks >= JIT_TASKS)  # warm: it will use numba
    if proc is None:
        return job
    stdin, proc.stdin = proc.stdin, None  # closed by the writer; communicate() must not
    assert stdin is not None
    # written by a thread: the pipe's writes release the GIL, so the caller goes on with its
    # schedule while the child starts and reads (it blocked here for seconds at full size)
    writer = threading.Thread(target=_send, args=(stdin, (bound_payload(inst), opts)),
                              name="bound-payload", daemon=True)
    writer.start()
    job.process, job.writer, job.where = proc, writer, "child process"
    return job


def _send(stdin: IO[bytes], obj: object) -> None:
    """Pickle ``obj`` to the child's stdin and close it."""
    try:
        with stdin:
            pickle.dump(obj, stdin, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError:  # the child died before reading: result() reports it and falls back
        pass


def bound_payload(inst: PlacementInstance) -> PlacementInstance:
    """``inst`` without what the bound never reads, for the child: the task ids become a
    ``range`` (only their number is used) and the kinds small integer codes (only compared
    for equality), the per-task phase, step, layer and shard and the metadata are dropped;
    the topological order cached on ``inst`` travels with it. Pickling
    the 921,475 task ids and kinds of the flagship took 1.5 s of the caller's time."""
    codes = {k: i for i, k in enumerate(dict.fromkeys(inst.kind))}
    kind = tuple(map(codes.__getitem__, inst.kind))
    light = dataclasses.replace(inst, task_ids=cast(Any, range(inst.n_tasks)),
                                kind=cast(Any, kind), phase=None, step=None, layer=None,
                                shard=None, meta={})
    for name in ("topological_order", "legal", "load_duration"):  # (CSR: cheaper rebuilt)
        if name in inst.__dict__:
            light.__dict__[name] = inst.__dict__[name]  # cached_property's own slot
    return light


def _child_main(argv: list[str]) -> int:
    """``python -m opt.placement.bound_process [--warm]``: (instance, options) pickled on stdin
    → the bound pickled on stdout. With ``--warm`` the compiled kernels are loaded (numba's
    import and cache, ≈ 1 s) while a thread reads the payload (the reads release the GIL)."""
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(sys.stdin.buffer.read()),
                              name="bound-payload", daemon=True)
    reader.start()
    if "--warm" in argv:
        _warm()
    reader.join()
    inst, opts = pickle.loads(chunks[0])
    sys.stdout.buffer.write(pickle.dumps(certified_lower_bound(inst, opts),
                                         protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
    return 0


def _warm() -> None:
    """numba imported and its compiled heads/tails walk loaded from the cache (one tiny call
    with the real call's argument types); nothing without numba."""
    import numpy as np

    jit = jit_kernels(JIT_TASKS)
    if jit is not None:
        z1, z2, z0 = (np.zeros(k, dtype=np.int64) for k in (1, 2, 0))
        jit.longest_paths(z1, z2, z0, z2, z0, z1, z1)


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
