"""``hetopt view INSTANCE RESULT -o FILE``: one self-contained HTML page of a P1 schedule (per-device
lanes, transfers on their channels, weight loads; utilisation and NPU–PIM co-utilisation; the DAG
of one layer of one token) or of a P3 plan's steady-state pipeline (docs/viewer.md).

The result is validated first (:func:`opt.placement.validator.validate_placement` /
:func:`opt.serving.plan.check_plan`); bad input prints one line and exits 2.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from opt.common.errors import InputError


def _load_instance(ref: str):
    from opt.problems import INSTANCE_SUFFIXES, read_problem_instance

    if Path(ref).exists() or ref.endswith(INSTANCE_SUFFIXES):
        from opt.common.result import swapped_error

        try:
            return read_problem_instance(ref)
        except InputError as exc:
            raise swapped_error(ref, exc) from None
    import instances  # bundled instances by name, as the rest of the CLI accepts them

    if ref not in instances.names():
        raise InputError(f"no such file or bundled instance '{ref}'", source="<argument>",
                         field="instance")
    return instances.load(ref)


def _check(inst: Any, res: Any, source: str) -> dict[str, Any]:
    """Validate ``res.solution`` against ``inst``; InputError with the rule on failure."""
    if res.solution is None:
        raise InputError(f"no solution to view (status {res.status})", source=source)
    serving = getattr(inst, "problem", "placement") == "serving"
    if serving != (res.problem == "serving"):
        raise InputError(f"a {res.problem} result does not fit a "
                         f"{inst.problem} instance",
                         source=source, field="problem")
    from opt.common.fingerprint import fingerprint_error

    mismatch = fingerprint_error(res.instance_fingerprint, inst)
    if mismatch:
        raise InputError(mismatch, source=source, field="instance_fingerprint")
    if serving:
        from opt.serving.checker import check_plan
        from opt.serving.plan import PlanError

        try:
            check_plan(inst, res.solution)
        except (PlanError, KeyError, TypeError) as exc:
            raise InputError(f"invalid serving plan: {exc}", source=source) from None
        return {}
    from opt.placement.schedule_error import ScheduleError
    from opt.placement.validator import validate_placement

    try:
        return {"metrics": validate_placement(inst, res.solution)}
    except (ScheduleError, KeyError, TypeError) as exc:
        raise InputError(f"invalid schedule: {exc}", source=source) from None


def cmd_view(args: Any) -> int:
    """Handler of ``hetopt view`` (returns the exit code; 2 on bad input, one line on stderr)."""
    from opt.app.viewer.html import write_page
    from opt.common.result import read_result

    t0 = time.perf_counter()
    try:
        inst = _load_instance(args.instance)
        res = read_result(args.result)
        extra = _check(inst, res, args.result)
        title = args.title or Path(str(getattr(inst, "source", None) or args.instance)).name
        if getattr(inst, "problem", "placement") == "serving":
            from opt.app.viewer.serving import serving_payload

            try:
                header, blob = serving_payload(inst, res.solution, periods=args.periods,
                                               title=args.title
                                               or f"{inst.model} · {res.method} plan")
            except InputError as exc:  # the drawn periods' cap: name the option
                if exc.field != "periods":
                    raise
                raise InputError(f"view: argument --periods: {exc.detail}") from None
        else:
            from opt.app.viewer.placement import placement_payload

            header, blob = placement_payload(inst, res.solution, title=title, **extra)
        header["source"] = {"instance": str(args.instance), "result": str(args.result),
                            "method": res.method, "status": res.status}
        size = write_page(header, blob, args.output, compress=not args.no_compress)
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
