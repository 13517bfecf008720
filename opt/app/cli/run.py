"""Running a parsed command: :func:`run_command` checks its output paths, calls its handler
and turns bad input, a broken pipe and Ctrl-C into one line and an exit code
(:data:`opt.app.cli.common.EXIT_CODES_HELP`). :func:`opt.app.cli.parser.main` loads it
through its :class:`~opt.app.cli.parser.Handler` once the arguments are parsed, so
``hetopt --help`` does not."""

from __future__ import annotations

import _thread
import argparse
import atexit
import signal
import sys
import threading
from collections.abc import Callable
from types import MappingProxyType

from opt.common.errors import InputError
from opt.common.outpath import (
    FILE,
    JSON_SUFFIXES,
    PLACEMENT_SUFFIXES,
    check_output,
    suffix_error,
)

#: Output options by their ``dest``: (option, kind). ``--plot`` is a folder of PNGs except for
#: the commands in :data:`PLOT_FILE`; ``--out`` of ``theory verify`` only matters with
#: ``--detailed``.
OUTPUT_OPTIONS = MappingProxyType({"output": ("--output", "file"), "export": ("--export", "file"),
                                   "out": ("--out", "folder"), "plot": ("--plot", "folder")})
PLOT_FILE = frozenset({"cmd_compare"})
#: How long after a swallowed Ctrl-C it is delivered again (:func:`_redeliver_interrupt`):
#: long enough for the callback that swallowed it to return; no outcome depends on it
REDELIVERY_DELAY_S = 0.05
#: What ``--output`` holds, by handler: (the document, "json" or "placement"); its name must
#: end in a suffix its reader reads as that document (opt.common.outpath.JSON_SUFFIXES,
#: PLACEMENT_SUFFIXES).
OUTPUT_DOCUMENTS = MappingProxyType({
    "cmd_solve": ("a result", "json"), "cmd_build_serving": ("a serving instance", "json"),
    "cmd_build_placement": ("a placement instance", "placement"),
    "cmd_import_dot": ("a placement instance", "placement")})


def check_output_args(args: argparse.Namespace) -> None:
    """Check every output path of the parsed command before any work
    (:func:`opt.common.outpath.check_output`, and for the commands of
    :data:`OUTPUT_DOCUMENTS` the suffix of ``--output``: one InputError naming the option and
    path)."""
    name = getattr(args.func, "function_name", "")
    for dest, (option, kind) in OUTPUT_OPTIONS.items():
        path = getattr(args, dest, None)
        if not isinstance(path, str) or (dest == "out" and name == "cmd_verify"
                                         and not getattr(args, "detailed", False)):
            continue
        check_output(path, option, FILE if dest == "plot" and name in PLOT_FILE else kind)
    path = getattr(args, "output", None)
    if isinstance(path, str) and name in OUTPUT_DOCUMENTS:
        what, kind = OUTPUT_DOCUMENTS[name]
        why = suffix_error(path, PLACEMENT_SUFFIXES if kind == "placement" else JSON_SUFFIXES,
                           what)
        if why is not None:
            raise InputError(f"cannot write '{path}': {why}", source="<argument>",
                             field="--output")


# ---- running a command ----------------------------------------------------------------------

def run_command(args: argparse.Namespace) -> int:
    """Run the handler of the parsed command: bad input prints one line and exits 2; Ctrl-C
    prints one line (where finished records are kept) and exits 130. Once the interpreter
    exits, Ctrl-C is ignored (:func:`_ignore_sigint`)."""
    atexit.unregister(_ignore_sigint)  # once per process, however many commands ran in it
    atexit.register(_ignore_sigint)
    running = threading.Event()
    running.set()
    previous, sys.unraisablehook = sys.unraisablehook, _redeliverer(running)
    try:
        return _run_handler(args)
    finally:
        running.clear()
        sys.unraisablehook = previous


def _run_handler(args: argparse.Namespace) -> int:
    """:func:`run_command` without its interrupt delivery."""
    try:
        check_output_args(args)
        return args.func(args)
    except InputError as exc:
        print(f"hetopt: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # Ctrl-C: one line, exit 130 (128 + SIGINT)
        return _interrupted(args)
    except Exception as exc:
        # Ctrl-C inside a C extension's import (ortools, highspy) surfaces as the ImportError
        # it caused: still an interrupt, not a crash
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, KeyboardInterrupt):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        return _interrupted(args)


def _ignore_sigint() -> None:
    """At interpreter exit: the command has finished (its outputs written, its exit code
    decided), so a Ctrl-C now must not kill the process by the signal — its shell would report
    an interrupt (130) for work that was done. (Python resets its own SIGINT handler to the
    system's default while it shuts down, but leaves an ignored signal ignored.)"""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _redeliverer(running: threading.Event) -> Callable[[sys.UnraisableHookArgs], None]:
    """A ``sys.unraisablehook`` for a running command. A Ctrl-C that lands in a callback from
    C (llvmlite calls Python back while numba compiles) cannot propagate: Python would print it
    as "Exception ignored" with its traceback and carry on as if no key was pressed. The hook
    delivers it again to the main thread, from a daemon thread a moment later (delivered at
    once it would land in the hook itself) and only while ``running`` is set, where it ends
    the command like any Ctrl-C. Anything else goes to Python's own hook."""

    def deliver() -> None:
        if running.is_set():
            _thread.interrupt_main()

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type,
                                                           KeyboardInterrupt):
            timer = threading.Timer(REDELIVERY_DELAY_S, deliver)
            timer.daemon = True
            timer.start()
            return
        sys.__unraisablehook__(unraisable)

    return hook


def _interrupted(args: argparse.Namespace) -> int:
    """Ctrl-C: one line on stderr (where finished records are kept), exit 130."""
    out = getattr(args, "out", None)
    print(f"hetopt: interrupted{f'; finished records are kept in {out}/' if out else ''}",
          file=sys.stderr)
    return 130
