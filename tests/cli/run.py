"""Running ``hetopt`` in-process for the CLI tests: (exit code, stdout, stderr)."""

from __future__ import annotations

from opt.app.cli import main


def run(capsys, *argv) -> tuple[int, str, str]:
    """``hetopt argv`` (each item as text) through :func:`opt.app.cli.main`; a refusal by the
    parser (argparse's SystemExit) gives its exit code like any other."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # refused by the parser (argparse)
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
