"""The certified lower bound computed in a separate process while the caller schedules (issue 20
item 1): on a full-size instance the bound and a heuristic's schedule each take seconds and
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
"""

from __future__ import annotations

import os
import pickle
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from opt.placement.bound_options import BoundOptions
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

    def result(self) -> CertifiedBound:
        """The bound (waits for the child; computes it here if the child failed)."""
        if self.process is not None:
            out, err = self.process.communicate()
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


def start_bound(inst: PlacementInstance, options: BoundOptions | None = None, *,
                min_tasks: int = PARALLEL_BOUND_TASKS) -> BoundJob:
    """Start the certified bound of ``inst``: in a child interpreter when ``inst`` has at least
    ``min_tasks`` tasks, two CPUs are usable and the bound is not cached; else deferred."""
    opts = options or BoundOptions()
    job = BoundJob(inst, opts)
    if inst.n_tasks < min_tasks or usable_cpus() < 2 or cached_bound(inst, opts) is not None:
        return job
    import subprocess  # only when a child is started (startup: issue 20 item 5)

    try:
        proc = subprocess.Popen([sys.executable, "-m", "opt.placement.bound_process"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError:
        return job
    stdin, proc.stdin = proc.stdin, None  # closed here; communicate() must not flush it
    assert stdin is not None
    try:
        with stdin:
            pickle.dump((inst, opts), stdin, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError:  # the child died before reading: result() reports it and falls back
        pass
    job.process, job.where = proc, "child process"
    return job


def _child_main() -> int:
    """``python -m opt.placement.bound_process``: (instance, options) pickled on stdin → the
    bound pickled on stdout."""
    inst, opts = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps(certified_lower_bound(inst, opts),
                                         protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
