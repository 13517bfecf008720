"""Read and write time and file size of a full-size P1 instance in each file format: the
JSON column tables (``json.gz``, problems.md §1.2b), the binary column container (``npz``,
§1.2c) and, on request, the row form (``rows.json.gz``, §1.2a).

The instance (``--instance``, else the flagship: Llama-2-7B, HP64, prefill 1024, decode 1024,
batch 16, built once into ``--cache`` as benchmarks/end_to_end.py does) is written once in
each format; then, ``--repeat`` times and interleaving the formats, a forked child reads each
file with :func:`opt.app.cli.helpers.load_instance` (the CLI's reader) and writes it back with
:meth:`PlacementInstance.write`, timing both (wall and CPU seconds). Every file must read
back to the same fingerprint. Prints medians, the ratios to ``npz`` and the sizes.

    python benchmarks/instance_formats.py                  # flagship, json.gz and npz, 5 repeats
    python benchmarks/instance_formats.py --formats rows.json.gz json.gz npz --repeat 3

Times are on a shared machine: quote medians and same-run ratios, not one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bifocal_speed import in_child  # noqa: E402  (this folder)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FORMATS = ("rows.json.gz", "json.gz", "npz")


def timed(fn) -> tuple[Any, float, float]:
    """(value, wall seconds, CPU seconds) of ``fn()``."""
    t0, c0 = time.perf_counter(), time.process_time()
    value = fn()
    return value, time.perf_counter() - t0, time.process_time() - c0


def write_as(inst, path: Path) -> None:
    """``inst`` written to ``path`` in the format its name says (rows for ``rows.*``)."""
    inst.write(path, columns=False if path.name.startswith("rows.") else None)


def one_repeat(path: Path, out: Path) -> dict[str, Any]:
    """Read ``path`` and write the instance to ``out`` (same format): seconds and the
    fingerprint."""
    from opt.api import load_instance
    from opt.common.fingerprint import instance_fingerprint

    inst, read_s, read_cpu = timed(lambda: load_instance(str(path)))
    _, write_s, write_cpu = timed(lambda: write_as(inst, out))
    return {"read": read_s, "read_cpu": read_cpu, "write": write_s, "write_cpu": write_cpu,
            "fingerprint": instance_fingerprint(inst)}


def source_instance(args: argparse.Namespace):
    """The instance to measure: ``--instance`` or the cached flagship build."""
    from opt.api import load_instance

    if args.instance:
        return load_instance(args.instance)
    path = Path(args.cache) / "llama-2-7b-HP64-1024-1024-16-columns.npz"
    if not path.exists():
        from opt.app.cli import main as hetopt

        path.parent.mkdir(parents=True, exist_ok=True)
        hetopt(["build", "placement", "--model", "llama-2-7b", "--platform", "HP64",
                "--prefill", "1024", "--decode", "1024", "--batch", "16", "-o", str(path)])
    return load_instance(str(path))


def report(rows: dict[str, list[dict[str, Any]]], sizes: dict[str, int]) -> dict[str, Any]:
    """Medians per format (printed) with the ratios to ``npz`` when it was measured."""
    med = {f: {k: statistics.median(r[k] for r in rs) for k in
               ("read", "read_cpu", "write", "write_cpu")} for f, rs in rows.items()}
    base = med.get("npz")
    print(f"{'format':14s} {'MB':>7s} {'read s':>8s} {'cpu':>6s} {'write s':>8s} {'cpu':>6s}"
          + ("   read / npz (wall, cpu)" if base else ""))
    for f, m in med.items():
        ratio = (f"   {m['read'] / base['read']:5.2f}x {m['read_cpu'] / base['read_cpu']:5.2f}x"
                 if base else "")
        print(f"{f:14s} {sizes[f] / 1e6:7.2f} {m['read']:8.2f} {m['read_cpu']:6.2f} "
              f"{m['write']:8.2f} {m['write_cpu']:6.2f}{ratio}")
    return {"medians": med, "bytes": sizes, "repeats": len(next(iter(rows.values())))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instance", help="instance file (default: the cached flagship build)")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "hetopt-e2e"),
                    help="folder of the cached flagship build (default %(default)s)")
    ap.add_argument("--formats", nargs="+", choices=FORMATS, default=["json.gz", "npz"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = ap.parse_args(argv)
    inst = source_instance(args)
    print(f"{inst.n_tasks:,} tasks, {inst.n_edges:,} edges; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cpus visible, load {os.getloadavg()[0]:.2f}", flush=True)
    rows: dict[str, list[dict[str, Any]]] = {f: [] for f in args.formats}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {f: Path(tmp) / f"instance.{f}" for f in args.formats}
        sizes = {}
        for f, path in paths.items():
            write_as(inst, path)
            sizes[f] = path.stat().st_size
        del inst
        for i in range(args.repeat):
            for f, path in paths.items():
                rows[f].append(in_child(lambda: one_repeat(path, Path(tmp) / f"out.{f}")))
            print(f"repeat {i + 1}: " + ", ".join(
                f"{f} read {rows[f][-1]['read']:.2f}/{rows[f][-1]['read_cpu']:.2f} write "
                f"{rows[f][-1]['write']:.2f}/{rows[f][-1]['write_cpu']:.2f}" for f in paths),
                flush=True)
    if len({r["fingerprint"] for rs in rows.values() for r in rs}) != 1:
        raise SystemExit("the formats read back to different instances")
    summary = report(rows, sizes)
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
