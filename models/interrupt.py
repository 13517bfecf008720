"""Ctrl-C during a solver call: the solver is asked to stop, and once it has returned the
interrupt is raised as :class:`KeyboardInterrupt`, never returned as a result.

CP-SAT and HiGHS run in C++ with Python's lock released, so Python's own SIGINT handler cannot
run until they return, and a solver that catches SIGINT itself (CP-SAT by default) reports the
interrupt as an early stop (``FEASIBLE``), indistinguishable from a time limit. Around the
solver call :func:`interruptible`

* installs a Python SIGINT handler that only records the signal (a HiGHS log line calling
  back into Python must not raise inside the solver);
* points Python's signal wake-up descriptor (:func:`signal.set_wakeup_fd`) at a socket a
  watcher thread reads: at a SIGINT it calls ``stop()`` (CP-SAT ``stop_search``, HiGHS
  ``cancelSolve``) every :data:`STOP_EVERY_S` seconds until the call returns (a stop asked for
  before the solver started its search is asked again);
* restores both on exit and, when a SIGINT arrived, hands it to the previous handler (Python's
  default raises :class:`KeyboardInterrupt`), discarding what the solver returned.

Only the main thread receives signals: elsewhere the context does nothing (the main thread
gets the interrupt and stops the solvers it started, e.g. the block search's whole-model
thread, :mod:`solvers.placement.block_branching`). CP-SAT's own handler must be off
(``catch_sigint_signal``, :func:`models.placement.cpsat_run.make_solver`).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

#: seconds between repeated stop requests once a SIGINT arrived
STOP_EVERY_S = 0.05
#: the byte the context writes to its own socket to end the watcher (no signal has number 0)
_DONE = 0


def _can_defer() -> bool:
    """Whether this thread can take SIGINT over: the main thread, with a Python handler."""
    return (threading.current_thread() is threading.main_thread()
            and callable(signal.getsignal(signal.SIGINT)))


def _watch(rsock: socket.socket, seen: threading.Event, done: threading.Event,
           stop: Callable[[], None], forward: int) -> None:
    """Read signal numbers from ``rsock``: at SIGINT set ``seen`` and call ``stop`` until
    ``done``; other signals' bytes go on to ``forward`` (the previous wake-up fd, -1: none)."""
    while not done.is_set() and not seen.is_set():
        select.select([rsock], [], [])
        try:
            data = rsock.recv(512)
        except BlockingIOError:
            continue
        if not data:
            return
        if signal.SIGINT in data:
            seen.set()
        other = bytes(b for b in data if b not in (signal.SIGINT, _DONE))
        if other and forward != -1:
            with contextlib.suppress(OSError):
                os.write(forward, other)
    while seen.is_set() and not done.is_set():
        with contextlib.suppress(Exception):
            stop()
        done.wait(STOP_EVERY_S)


@contextlib.contextmanager
def interruptible(stop: Callable[[], None]) -> Iterator[None]:
    """Run the block (one solver call) so that Ctrl-C calls ``stop()`` (thread-safe: asks the
    running solver to return early) and raises :class:`KeyboardInterrupt` after the block
    (module docstring). Outside the main thread, or when SIGINT is ignored or left to the
    system, the block runs unchanged."""
    if not _can_defer():
        yield
        return
    seen, done = threading.Event(), threading.Event()

    def record(signum: int, frame: Any) -> None:
        seen.set()

    rsock, wsock = socket.socketpair()
    rsock.setblocking(False)
    wsock.setblocking(False)
    previous = signal.signal(signal.SIGINT, record)
    old_fd = signal.set_wakeup_fd(wsock.fileno(), warn_on_full_buffer=False)
    watcher = threading.Thread(target=_watch, args=(rsock, seen, done, stop, old_fd),
                               name="sigint-watcher", daemon=True)
    watcher.start()
    try:
        yield
    except BaseException as exc:
        if seen.is_set():  # the solver failed because it was stopped: the interrupt wins
            raise KeyboardInterrupt from exc
        raise
    finally:
        done.set()
        with contextlib.suppress(OSError):
            wsock.send(bytes([_DONE]))
        watcher.join()
        signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGINT, previous)
        rsock.close()
        wsock.close()
    if seen.is_set():
        _hand_on(previous)


@contextlib.contextmanager
def finishing() -> Iterator[None]:
    """Run the block to its end whatever Ctrl-C does: a SIGINT during it is dropped. For the
    last step of a command whose work is done (writing and printing a complete result): an
    interrupt then could only leave the output half-written or report as interrupted work that
    was finished. Outside the main thread, or without a Python SIGINT handler, the block runs
    unchanged."""
    if not _can_defer():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold Ctrl-C back during the block and deliver it after (Python's default handler raises
    KeyboardInterrupt there). For imports of C extensions: a KeyboardInterrupt raised inside
    their initialisation fails it ("initialization failed") or crashes the process (orjson's
    raised a segmentation fault). Outside the main thread, or without a Python SIGINT
    handler, the block runs unchanged."""
    if not _can_defer():
        yield
        return
    seen = threading.Event()

    def record(signum: int, frame: Any) -> None:
        seen.set()

    previous = signal.signal(signal.SIGINT, record)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if seen.is_set():
        _hand_on(previous)


def _hand_on(previous: Any) -> None:
    """Deliver a recorded SIGINT to the handler that was in place before: call it (Python's
    default raises KeyboardInterrupt), ignore it under ``SIG_IGN``, raise KeyboardInterrupt
    under ``SIG_DFL`` or an unknown (C-level) handler."""
    if callable(previous):
        previous(signal.SIGINT, None)
    elif previous != signal.SIG_IGN:
        raise KeyboardInterrupt
