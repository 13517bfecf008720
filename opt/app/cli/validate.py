"""``hetopt validate INSTANCE RESULT``: check a result against its instance, for either problem.

Bad input — unreadable files, a result of the other problem kind, a result computed on another
instance (its ``instance_fingerprint``) — is one line and exit 2. A result that reads but does
not hold — a broken schedule or plan, a reported number that is not the recomputed one, a status
or lower bound that contradicts the objective (:func:`opt.common.result.claims_error`), a status
that contradicts the content (:func:`opt.common.result.status_error`; an ERROR result), a
problem its method does not solve or a ``placement`` result that changes a block's format — is
``invalid`` and exit 1, the rule in one line. With ``--json`` the verdict is always JSON (``valid``, ``error``).
"""

from __future__ import annotations

import argparse
import sys

from opt.app.cli.helpers import load_instance, print_json
from opt.common.errors import InputError
from opt.common.result import read_result
from solvers.certify import validate


def cmd_validate(args: argparse.Namespace) -> int:
    """``validate``: check a result against its instance (exit 1 if invalid, 2 if bad input);
    the check is :func:`solvers.certify.validate`."""
    inst = load_instance(args.instance)
    res = read_result(args.result)
    try:
        report = validate(inst, res)
    except InputError as exc:  # another problem's result, or another instance's
        detail = exc.detail + (f" {args.instance}" if exc.field == "problem" else "")
        raise InputError(detail, source=args.result, field=exc.field) from None
    if args.json:
        print_json(report.to_dict())
    elif not report.valid:
        print(f"invalid: {report.violations[0]}", file=sys.stderr)
    else:
        for line in report.text:
            print(line)
    return 0 if report.valid else 1
