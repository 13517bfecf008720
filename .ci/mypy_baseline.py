"""mypy against a committed baseline that only shrinks.

Runs mypy on the packages and compares its errors, without line numbers, with
``.ci/mypy-baseline.txt``: an error not in the baseline fails the check (exit 1); errors fixed
since the baseline are reported, and ``--update`` rewrites the baseline (only ever smaller:
it refuses to add errors; it creates the file when there is none).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / ".ci" / "mypy-baseline.txt"
LINE = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<msg>.*)$")


def current_errors() -> Counter[str]:
    """mypy's errors as 'path: message [code]' (no line numbers), counted."""
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                          text=True)
    if proc.returncode not in (0, 1) or "error: " not in proc.stdout and proc.returncode:
        sys.stdout.write(proc.stdout + proc.stderr)
        raise SystemExit(f"mypy did not run (exit {proc.returncode})")
    errors: Counter[str] = Counter()
    for line in proc.stdout.splitlines():
        m = LINE.match(line)
        if m:
            errors[f"{m['path']}: {m['msg']}"] += 1
    return errors


def read_baseline() -> Counter[str]:
    if not BASELINE.exists():
        return Counter()
    return Counter(line for line in BASELINE.read_text().splitlines() if line.strip())


def main(argv: list[str]) -> int:
    now, base = current_errors(), read_baseline()
    new = now - base
    fixed = base - now
    total_now, total_base = sum(now.values()), sum(base.values())
    if "--update" in argv:
        if new and BASELINE.exists():
            print(f"mypy: refusing to grow the baseline ({sum(new.values())} new errors)")
            for e in sorted(new.elements()):
                print("  new:", e)
            return 1
        BASELINE.write_text("".join(f"{e}\n" for e in sorted(now.elements())))
        print(f"mypy baseline: {total_base} -> {total_now} errors")
        return 0
    if new:
        print(f"mypy: {sum(new.values())} error(s) not in the baseline "
              f"({total_now} now, baseline {total_base}):")
        for e in sorted(new.elements()):
            print("  new:", e)
        return 1
    note = (f"; {sum(fixed.values())} fixed since the baseline: run "
            f"`python .ci/mypy_baseline.py --update`" if fixed else "")
    print(f"mypy: {total_now} errors, baseline {total_base}, none new{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
