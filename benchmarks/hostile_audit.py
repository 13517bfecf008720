"""Hostile-value audit of the command line and the Python API: about a hundred inputs of the
kinds ``benchmarks/hardening_audit.py`` does not try — numeric extremes, wrong types handed to
``opt.api``, outputs with the wrong suffix or on a full disk, gzip where text is due, results
whose status or problem contradicts their content, Ctrl-C during work, and options that
multiply the work or the output. Each case runs as its own process.

Each case states what is due:

* ``refuse``: exit 2 and one line (``hetopt: error: …``, or ``InputError: …`` for the API),
  nothing written;
* ``invalid``: ``hetopt validate`` exits 1 and names the violated rule in one line;
* ``accept``: exit 0;
* ``interrupt``: SIGINT during the work gives exit 130, one closing line (after any progress
  lines) and the previous output file byte for byte (or, for the bench, the case file of a
  case that finished before the signal);
* ``bounded``: the command ends (exit 0, 2 or 3) within its time limit plus a margin;
* ``clean``: a value a tool may accept or refuse: exit 0, 2 or 3, no traceback, no hang.

A case is a **traceback** (a traceback or an unexpected exit code), **silent** (exit 0 where a
refusal was due, or a rule broken without a word), a **hang** (past its limit) or **ok**.

    python benchmarks/hostile_audit.py [--jobs 2] [--json]

Exit status 1 when any case is not ``ok``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from hardening_audit import print_rows  # noqa: E402 (the audits' shared report)

BUILD = ["build", "placement", "--model", "llama-2-7b", "--platform", "HP32", "--prefill", "16",
         "--decode", "1", "--layers", "1"]
SERVE = ["build", "serving-plan", "--model", "gemma-3-27b", "--gpus", "H100", "--context",
         "8192", "--slo-ms", "60"]
HOM = ["theory", "hom", "--gpu", "H100", "--model", "llama-2-7b"]
HET = ["theory", "het", "--gpu1", "H100", "--gpu2", "L40S", "--model", "llama-2-7b"]
#: seconds a case may run before it counts as a hang (``bounded`` cases: their own limit)
CASE_TIMEOUT_S = 240.0
#: what an API case's wrapper does: exit 2 with one line on InputError, a traceback otherwise
API_PRELUDE = """
import sys
import opt.api as h
from opt.common.errors import InputError
try:
{body}
except InputError as exc:
    print(f"InputError: {{exc}}".splitlines()[0], file=sys.stderr)
    sys.exit(2)
"""


@dataclass(frozen=True)
class Case:
    """One hostile input: ``argv`` for ``python -m opt`` or ``code`` for ``python -c``,
    the outcome due (``refuse``, ``invalid``, ``accept``, ``interrupt``, ``bounded``), the
    output file that must stay untouched (``interrupt``) and the time limit (``bounded``)."""

    name: str
    due: str
    argv: tuple[str, ...] = ()
    code: str = ""
    keep: str = ""
    limit_s: float = 0.0
    sigint_after_s: float = 0.0


def run(case: Case, cwd: Path) -> tuple[int | None, str, float]:
    """Run ``case`` in ``cwd``: (exit code or None on a hang, stderr, seconds)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", API_PRELUDE.format(body=_indent(case.code))] if case.code \
        else [sys.executable, "-m", "opt", *case.argv]
    timeout = case.limit_s * 3 + 60 if case.due in ("bounded", "clean") else CASE_TIMEOUT_S
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_terminal_sigint)
    if case.sigint_after_s:
        try:
            p.wait(case.sigint_after_s)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        return None, err, time.monotonic() - t0
    return p.returncode, err, time.monotonic() - t0


def _terminal_sigint() -> None:
    """In the child: Ctrl-C as a terminal delivers it (Python's default handler), even when
    the audit itself runs in the background of a shell, which ignores SIGINT there."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _indent(code: str) -> str:
    return "\n".join("    " + line for line in code.strip().splitlines())


def verdict(case: Case, code: int | None, err: str, cwd: Path, before: bytes | None) -> str:
    """ok | traceback | silent | hang | not one line, for ``case``'s outcome."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    if code is None:
        return "hang"
    if "Traceback" in err or code not in (0, 1, 2, 3, 130):
        return "traceback"
    if case.due == "refuse":
        if code != 2:
            return "silent"
        return "ok" if len(lines) == 1 else "not one line"
    if case.due == "invalid":
        return "ok" if code == 1 and lines else "silent"
    if case.due == "accept":
        return "ok" if code == 0 else "silent"
    if case.due == "interrupt":
        after = (cwd / case.keep).read_bytes() if (cwd / case.keep).exists() else None
        if code == 0:  # finished before the signal: a complete output is fine
            return "ok"
        kept = after == before or (before is None and _finished_case(cwd / case.keep))
        said = bool(lines) and lines[-1].startswith("hetopt: interrupted")  # after progress
        return "ok" if code == 130 and kept and said else "silent"
    return "ok" if code in (0, 2, 3) else "silent"  # bounded, clean: ended, no traceback


def _finished_case(path: Path) -> bool:
    """Whether ``path`` is a bench case file the bench itself trusts (sealed, complete) with no
    failed check: a case that finished before the signal came (a later step was interrupted)."""
    sys.path.insert(0, str(ROOT))
    from opt.app.bench.checks import FAIL
    from opt.app.bench.runner import BenchCase, load_cached

    suite, name = path.parent.name, path.stem
    res, _ = load_cached(path, BenchCase(suite, name, lambda: None))  # type: ignore[arg-type]
    return res is not None and all(c.verdict != FAIL for c in res.checks)


def setup(d: Path) -> dict[str, str]:
    """Files the cases use: a placement instance and its PD result, relabelled copies of the
    result, a serving instance, gzip and binary files, a measured table."""
    def hetopt(*argv: str) -> None:
        subprocess.run([sys.executable, "-m", "opt", *argv], cwd=d, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)

    hetopt(*BUILD, "-o", "i.json")
    hetopt("solve", "i.json", "--method", "pd", "-o", "r.json")
    hetopt(*SERVE, "-o", "s.json")
    hetopt(*BUILD[:4], "--model", "llama-2-7b", "--platform", "HP32", "--prefill", "64",
           "--decode", "16", "--layers", "4", "-o", "mid.json")
    res = json.loads((d / "r.json").read_text())
    relabel = {
        "optimal-no-bound": {"status": "OPTIMAL", "lower_bound": None},
        "optimal-low-bound": {"status": "OPTIMAL"},
        "infeasible-with-schedule": {"status": "INFEASIBLE"},
        "tl-with-schedule": {"status": "TIME_LIMIT_NO_SOLUTION"},
        "feasible-no-solution": {"status": "FEASIBLE", "solution": None},
        "layout-problem": {"problem": "layout"},
        "serving-problem": {"problem": "serving"},
        "bound-above": {"lower_bound": (res.get("objective") or 1) * 2},
        "objective-edited": {"objective": (res.get("objective") or 2) / 2},
        "status-bogus": {"status": "SOLVED"},
    }
    for name, change in relabel.items():
        doc = {**res, **change}
        doc.pop("digest", None)
        (d / f"r-{name}.json").write_text(json.dumps(doc))
    (d / "prev.json").write_text('{"previous": "output"}\n')
    with gzip.open(d / "c.json.gz", "wt") as fh:
        fh.write("{}")
    (d / "bin.json").write_bytes(bytes(range(256)) * 8)
    with gzip.open(d / "garbage.json.gz", "wb") as fh:
        fh.write(bytes(range(256)))
    (d / "m.csv.gz").write_bytes(gzip.compress(b"device,op_kind\n"))
    return {"inst": "i.json", "res": "r.json", "serve": "s.json"}


def cli_value_cases() -> list[Case]:
    """Numeric extremes and odd values on the command line."""
    b, s = [*BUILD, "-o", "x.json"], [*SERVE, "-o", "x.json"]
    out = [Case(f"build placement {' '.join(x)}", "refuse", (*b, *x)) for x in (
        ["--budget-gb", "inf"], ["--prefill", "99999999999999999999"],
        ["--batch", "1000000000000"], ["--layers", "-5"], ["--tp", "1000000"],
        ["--act-sparsity", "prefill=inf"], ["--act-sparsity", "prefill=0.5,decode=nan"],
        ["--attn-sparsity", "1.0000001"], ["--decode", "100000000"])]
    out += [Case(f"build placement {' '.join(x)}", "clean", (*b, *x), limit_s=60.0) for x in (
        ["--budget-gb", "1e308"], ["--budget-factor", "1e-300"],
        ["--block-span", "1000000000"], ["--slo-ttft-ms", "1e308"])]
    out += [Case(f"build serving-plan {' '.join(x)}", "refuse", (*s, *x)) for x in (
        ["--max-replicas", "0"], ["--max-replicas", "-3"], ["--batches", "0"],
        ["--batches", "-1"], ["--tp", "1e3"], ["--tp", "3,-1"], ["--max-owners", "-1"],
        ["--gpus", ","])]
    out += [Case(f"build serving-plan {' '.join(x)}", "clean", (*s, *x), limit_s=60.0)
            for x in (["--max-gpus", "1000000000"], ["--max-microbatches", "1000000000"],
                      ["--memory-fraction", "1e-300"], ["--batches", "1000000000"])]
    out += [Case(f"build serving-plan --context {c}", "refuse",
                 (*SERVE[:6], "--context", c, "--slo-ms", "60", "-o", "x.json"))
            for c in ("1000000000000000", "1e300")]
    out += [Case(f"build serving-plan --slo-ms {v}", "refuse",
                 (*SERVE[:8], "--slo-ms", v, "-o", "x.json")) for v in ("1e308", "-inf")]
    out += [Case(f"theory hom {' '.join(x)}", "refuse", (*HOM, *x)) for x in (
        ["--context", "1e30"])]
    out += [Case("theory hom --group-size 1000000000", "clean",
                 (*HOM, "--context", "4096", "--group-size", "1000000000"), limit_s=30.0)]
    out += [Case(f"theory het {' '.join(x)}", "refuse", (*HET, *x)) for x in (
        ["--context", "1e300"], ["--price1", "inf"], ["--price2", "-1"])]
    out += [Case(f"solve {' '.join(x)}", "refuse", ("solve", "i.json", *x)) for x in (
        ["--seed", "1099511627776"], ["--num-workers", "1000000"],
        ["--time-limit", "inf"], ["--param", "gamma=nan"], ["--param", "gamma=1e400"])]
    r = ["replay", "--model", "llama-2-7b", "--platform", "HP32", "--layers", "1", "--out",
         "rp"]
    out += [Case(f"replay {' '.join(x)}", "refuse", (*r, *x)) for x in (
        ["--requests", "1000000000000"], ["--rate", "inf"], ["--time-scale", "1e308"],
        ["--seed", "1180591620717411303424"])]
    out += [Case("replay --max-batch 1000000000", "clean", (*r, "--max-batch", "1000000000"),
                 limit_s=200.0)]
    out += [Case(f"view --periods {p}", "refuse", ("view", "s.json", "sr.json", "--periods",
                                                   p, "-o", "v.html"))
            for p in ("0", "-1", "1000000000000")]
    out += [Case(f"plot gantt --window {w}", "refuse", ("plot", "gantt", "i.json", "r.json",
                                                         "--window", w, "-o", "g.png"))
            for w in ("inf:0", "5:1", "nan:3", "0:1e400")]
    sw = ["sweep", "placement", "--models", "llama-2-7b", "--platforms", "HP32", "--decode",
          "8", "--methods", "pd", "--out", "sw"]
    out += [Case(f"sweep placement {' '.join(x)}", "refuse", (*sw, *x)) for x in (
        ["--prefill", "8", "--jobs", "1000000"], ["--prefill", "1000000000"])]
    out += [Case("sweep layout --budget-gb nan", "refuse",
                 ("sweep", "layout", "--budget-gb", "nan", "--out", "sl")),
            Case("sweep layout --budget-gb 0 (every layout INFEASIBLE)", "clean",
                 ("sweep", "layout", "--budget-gb", "0", "--out", "sl0"), limit_s=300.0)]
    out += [Case(f"synth-measurements {' '.join(x)}", "refuse",
                 ("synth-measurements", "--device", "AiM", "--model", "llama-2-7b", *x,
                  "-o", "m.csv")) for x in (["--noise", "inf"], ["--noise", "nan"],
                                            ["--seed", "-5"])]
    return out


def api_cases() -> list[Case]:
    """Wrong types and values handed to ``opt.api``."""
    wl = "h.Workload(prefill=16, decode=1)"
    bp = f'"llama-2-7b", "HP32", {wl}'
    bo = "options=h.BuildOptions(layers=1)"
    sw = "h.ServingWorkload(context_tokens=8192, tpot_slo_s=0.06)"
    bs = f'"gemma-3-27b", "H100", {sw}'
    calls = {
        "build_placement(model=1)": f'h.build_placement(1, "HP32", {wl})',
        "build_placement(platform=None)": f'h.build_placement("llama-2-7b", None, {wl})',
        'Workload(prefill="16")': 'h.build_placement("llama-2-7b", "HP32", '
                                  'h.Workload(prefill="16", decode=1))',
        "Workload(prefill=True)": 'h.build_placement("llama-2-7b", "HP32", '
                                  'h.Workload(prefill=True, decode=1))',
        "Workload(batch=0)": 'h.build_placement("llama-2-7b", "HP32", '
                             'h.Workload(prefill=16, decode=1, batch=0))',
        "build_placement(workload=dict)": 'h.build_placement("llama-2-7b", "HP32", '
                                          '{"prefill": 16, "decode": 1})',
        "BuildOptions(layers=0.5)": f"h.build_placement({bp}, "
                                    "options=h.BuildOptions(layers=0.5))",
        'BuildOptions(load_timing="soon")': f"h.build_placement({bp}, options=h.BuildOptions("
                                            'layers=1, load_timing="soon"))',
        'BuildOptions(formats="dual")': f"h.build_placement({bp}, options=h.BuildOptions("
                                        'layers=1, formats="dual"), '
                                        "budget=h.Budget(factor=1.5))",
        "Budget(gb=nan)": f'h.build_placement({bp}, {bo}, budget=h.Budget(gb=float("nan")))',
        "Goal(slo_ttft_ms=-1)": f"h.build_placement({bp}, {bo}, goal=h.Goal(slo_ttft_ms=-1))",
        "ServingWorkload(tpot_slo_s=inf)": 'h.build_serving("gemma-3-27b", "H100", '
                                           'h.ServingWorkload(8192, float("inf")))',
        "ServingWorkload(context_tokens=0)": 'h.build_serving("gemma-3-27b", "H100", '
                                             "h.ServingWorkload(0, 0.06))",
        "Parallelism(tp_degrees=[0])": f"h.build_serving({bs}, "
                                       "parallelism=h.Parallelism(tp_degrees=[0]))",
        "ServingGrid(batches=[])": f"h.build_serving({bs}, grid=h.ServingGrid(batches=[]))",
        "ServingGrid(max_owners=-1)": f"h.build_serving({bs}, "
                                      "grid=h.ServingGrid(max_owners=-1))",
        "build_serving(memory_fraction=2)": f"h.build_serving({bs}, memory_fraction=2)",
        'GpuCost(kind="x")': f'h.build_serving({bs}, cost=h.GpuCost(kind="x"))',
        "build_serving(gpus=[1, 2])": f'h.build_serving("gemma-3-27b", [1, 2], {sw})',
        "solve(inst, method=5)": 'h.solve(h.load_instance("heft-topcuoglu-2002"), method=5)',
        'solve(inst, time_limit="10")': 'h.solve(h.load_instance("heft-topcuoglu-2002"), '
                                        '"heft", time_limit="10")',
        "solve(None)": "h.solve(None)",
        "solve(inst, seed=-1)": 'h.solve(h.load_instance("heft-topcuoglu-2002"), "heft", '
                                'seed=-1)',
        "solve(inst, bogus=1)": 'h.solve(h.load_instance("heft-topcuoglu-2002"), "heft", '
                                'bogus=1)',
        "validate(None, res)": 'h.validate(None, h.read_result("r.json"))',
        "validate(inst, None)": 'h.validate(h.read_instance("i.json"), None)',
        "write_instance(inst, 5)": 'h.write_instance(h.read_instance("i.json"), 5)',
        'write_instance(res, "x.json")': 'h.write_instance(h.read_result("r.json"), "x.json")',
        'write_result(inst, "x.json")': 'h.write_result(h.read_instance("i.json"), "x.json")',
        'write_instance(inst, "x.csv")': 'h.write_instance(h.read_instance("i.json"), "x.csv")',
        'write_instance(serving, "x.npz")': 'h.write_instance(h.read_instance("s.json"), '
                                            '"x.npz")',
        'write_result(res, "x.npz")': 'h.write_result(h.read_result("r.json"), "x.npz")',
        "read_instance(5)": "h.read_instance(5)",
        'read_result("i.json")': 'h.read_result("i.json")',
        'read_instance("bin.json")': 'h.read_instance("bin.json")',
        'read_instance("garbage.json.gz")': 'h.read_instance("garbage.json.gz")',
        'load_instance("")': 'h.load_instance("")',
        "load_instance(None)": "h.load_instance(None)",
        'instance_names("nope")': 'h.instance_names("nope")',
        "methods(5)": "h.methods(5)",
        "lower_bound(None)": "h.lower_bound(None)",
    }
    return [Case(f"api {name}", "refuse", code=code) for name, code in calls.items()]


def file_cases() -> list[Case]:
    """Outputs with the wrong suffix or on a full disk, gzip and binary inputs."""
    out = [Case(f"{' '.join(argv[:2])} -o {o}", "refuse", (*argv, "-o", o)) for argv, o in (
        (BUILD, "x.csv"), (SERVE, "x.npz"), (("solve", "i.json", "--method", "pd"), "r.npz"),
        (("solve", "i.json", "--method", "pd"), "r.csv"), (BUILD, "/dev/full"),
        (SERVE, "/dev/full"),
        (("import", "dot", str(ROOT / "instances/data/sinnen-dot/Nodes_7_OutTree.dot"),
          "--processors", "2"), "/dev/full"))]
    out += [Case("build serving-plan --gpu-calibration c.json.gz", "refuse",
                 (*SERVE, "--gpu-calibration", "c.json.gz", "-o", "x.json")),
            Case("build serving-plan --gpu-calibration bin.json", "refuse",
                 (*SERVE, "--gpu-calibration", "bin.json", "-o", "x.json")),
            Case("build placement --measurements m.csv.gz", "refuse",
                 (*BUILD, "--measurements", "m.csv.gz", "-o", "x.json")),
            Case("solve garbage.json.gz", "refuse", ("solve", "garbage.json.gz")),
            Case("validate i.json bin.json", "refuse", ("validate", "i.json", "bin.json")),
            Case("calibrate --gpu bin.json", "refuse",
                 ("calibrate", "--gpu", "--measurements", "bin.json", "-o", "c.json"))]
    return out


def status_cases() -> list[Case]:
    """Results whose status, bound, objective or problem contradicts their content."""
    names = ("optimal-no-bound", "optimal-low-bound", "infeasible-with-schedule",
             "tl-with-schedule", "feasible-no-solution", "layout-problem", "serving-problem",
             "bound-above", "objective-edited", "status-bogus")
    refused = {"status-bogus", "serving-problem"}  # not a placement result at all: bad input
    return [Case(f"validate a result: {n}", "refuse" if n in refused else "invalid",
                 ("validate", "i.json", f"r-{n}.json")) for n in names]


def signal_and_size_cases() -> list[Case]:
    """Ctrl-C during work; options that multiply the work or the output."""
    out = [Case(f"Ctrl-C during solve --method {m} -o prev.json", "interrupt",
                ("solve", "mid.json", "--method", m, "--time-limit", "60", "-o", "prev.json"),
                keep="prev.json", sigint_after_s=6.0) for m in ("cpsat", "milp")]
    out.append(Case("Ctrl-C during bench --case small-llm-exact", "interrupt",
                    ("bench", "--case", "small-llm-exact", "--out", "bn"),
                    keep="bn/placement/small-llm-exact.json", sigint_after_s=8.0))
    out.append(Case("solve a 100000-GPU serving instance --time-limit 10", "bounded",
                    ("solve", "big-s.json", "--time-limit", "10"), limit_s=10.0))
    out.append(Case("view s.json sr.json --periods 100000000", "refuse",
                    ("view", "s.json", "sr.json", "--periods", "100000000", "-o", "v.html")))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("--json", action="store_true", help="one JSON object per case")
    ap.add_argument("--only", default="", help="run only the cases whose name holds this text")
    args = ap.parse_args(argv)
    d = Path(tempfile.mkdtemp(prefix="hetopt-hostile-"))
    try:
        setup(d)
        subprocess.run([sys.executable, "-m", "opt", "solve", "s.json", "--time-limit", "10",
                        "-o", "sr.json"], cwd=d, capture_output=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        subprocess.run([sys.executable, "-m", "opt", *SERVE[:-2], "--slo-ms", "60",
                        "--max-gpus", "100000", "--max-owners", "8", "-o", "big-s.json"],
                       cwd=d, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        quick = [c for c in cli_value_cases() + api_cases() + file_cases() + status_cases()
                 if args.only in c.name]
        slow = [c for c in signal_and_size_cases() if args.only in c.name]
        before = {c.name: (d / c.keep).read_bytes() if c.keep and (d / c.keep).exists()
                  else None for c in slow}
        with ThreadPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(lambda c: run(c, d), quick))
        runs += [run(c, d) for c in slow]  # one at a time: their timing matters
        rows = []
        for c, (code, err, secs) in zip(quick + slow, runs):
            line = (err.strip().splitlines() or [""])[-1]
            rows.append({"case": c.name, "due": c.due, "exit": code, "seconds": round(secs, 1),
                         "verdict": verdict(c, code, err, d, before.get(c.name)),
                         "line": line[:200]})
    finally:
        shutil.rmtree(d, ignore_errors=True)
    counts = print_rows(rows, ("ok",), as_json=args.json)
    print(f"{len(rows)} hostile inputs: "
          + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())))
    return 0 if counts.get("ok", 0) == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
