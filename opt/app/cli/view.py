"""``hetopt view INSTANCE RESULT -o FILE``: one self-contained HTML page of a P1 schedule (per-device
lanes, transfers on their channels, weight loads; utilisation and NPU–PIM co-utilisation; the DAG
of one layer of one token) or of a P3 plan's steady-state pipeline (docs/viewer.md).

The result is validated first (:func:`opt.app.viewer.page.write_view`); bad input prints one
line and exits 2.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import instances  # bundled instances by name, as the rest of the CLI accepts them
from opt.app.viewer.page import write_view
from opt.common.errors import InputError
from opt.common.result import read_result, swapped_error
from opt.problems import INSTANCE_SUFFIXES, read_problem_instance


def _load_instance(ref: str):
    if Path(ref).exists() or ref.endswith(INSTANCE_SUFFIXES):
        try:
            return read_problem_instance(ref)
        except InputError as exc:
            raise swapped_error(ref, exc) from None

    if ref not in instances.names():
        raise InputError(f"no such file or bundled instance '{ref}'", source="<argument>",
                         field="instance")
    return instances.load(ref)


def cmd_view(args: Any) -> int:
    """Handler of ``hetopt view`` (returns the exit code; 2 on bad input, one line on stderr)."""
    t0 = time.perf_counter()
    try:
        inst = _load_instance(args.instance)
        res = read_result(args.result)
        title = args.title or (None if getattr(inst, "problem", "placement") == "serving"
                               else Path(str(getattr(inst, "source", None)
                                             or args.instance)).name)
        try:
            size, header = write_view(
                inst, res, args.output, title=title, periods=args.periods,
                compress=not args.no_compress,
                source={"instance": str(args.instance), "result": str(args.result)})
        except InputError as exc:  # the drawn periods' cap: name the option
            if exc.field != "periods":
                raise
            raise InputError(f"view: argument --periods: {exc.detail}") from None
    except InputError as exc:
        print(f"hetopt: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"hetopt: error: {exc.filename or args.output}: {exc.strerror or exc}",
              file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        import json

        print(json.dumps({"output": args.output, "bytes": size,
                          "seconds": time.perf_counter() - t0, "counts": header["counts"]}))
    else:
        print(f"{args.output}: {size / 1e6:.2f} MB ({header['kind']}; "
              f"{', '.join(f'{k} {v:,}' for k, v in header['counts'].items())}) "
              f"in {time.perf_counter() - t0:.1f} s")
    return 0
