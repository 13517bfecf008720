"""Bad-input audit of the command line: about a hundred bad inputs of the kind a new
user types, each run as its own ``python -m opt`` process.

Every case expects a refusal: exit 2, one line on stderr (``hetopt: error: …``; argparse's own
usage errors print a usage line first and are counted apart), no traceback, nothing written.
Three more cases are the issue's cache rows: a sweep record copied into another slot and an
edited bench number must be recomputed with a warning, never reused.

* **traceback**: ``Traceback`` on stderr, or an exit code other than 0/1/2/3/130;
* **silent wrong result**: exit 0 where a refusal was due (or a copied/edited cache reused);
* **not one line**: exit 2 with more than one stderr line (argparse usage errors aside).

    python benchmarks/hardening_audit.py [--jobs 2] [--json]

Exit status 1 when any case gives a traceback or a silent wrong result.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ["build", "placement", "--model", "llama-2-7b", "--platform", "HP32", "--prefill", "16",
         "--decode", "1", "--layers", "1"]
SERVE = ["build", "serving-plan", "--model", "gemma-3-27b", "--gpus", "H100", "--context",
         "8192", "--slo-ms", "60"]
HOM = ["theory", "hom", "--gpu", "H100", "--model", "llama-2-7b", "--context", "4096"]
HET = ["theory", "het", "--gpu1", "H100", "--gpu2", "L40S", "--model", "llama-2-7b"]
CSV_HEAD = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def hetopt(argv: list[str], cwd: Path, timeout_s: float = 300.0) -> tuple[int, str, str]:
    """Run ``python -m opt argv`` in ``cwd``: (exit code, stdout, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "opt", *map(str, argv)], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=timeout_s)
    return p.returncode, p.stdout, p.stderr


def setup(d: Path) -> dict[str, str]:
    """The files the cases refer to: an instance and its result, a decode-0 instance, a file,
    traces with one bad cell each."""
    files = {"inst": d / "i.json", "res": d / "r.json", "d0": d / "d0.json",
             "file": d / "f.json", "folder": d / "folder"}
    hetopt([*BUILD, "-o", files["inst"]], d)
    hetopt(["solve", files["inst"], "--method", "pd", "-o", files["res"]], d)
    hetopt([*BUILD[:-4], "--decode", "0", "--layers", "1", "-o", files["d0"]], d)
    doc = json.loads(files["d0"].read_text())
    doc["objective"] = "decode_time"
    files["d0"].write_text(json.dumps(doc))
    files["file"].write_text("{}")
    files["folder"].mkdir(exist_ok=True)
    for name, row in {"tok": "1,m,abc,3,4,x", "resp": "1,m,3,,4,x", "ts": "nan,m,3,3,4,x",
                      "neg": "1,m,3,3,4,x\n-inf,m,3,3,4,x"}.items():
        (d / f"{name}.csv").write_text(CSV_HEAD + row + "\n")
    (d / "cols.csv").write_text("Time,Model,Input,Output\n1,m,3,3\n")
    return {k: str(v) for k, v in files.items()}


def writer_cases(f: dict[str, str]) -> list[tuple[str, list]]:
    """Every writing command with a bad output path of each kind."""
    inst, res = f["inst"], f["res"]
    files = [("build placement", [*BUILD, "-o"]), ("build serving-plan", [*SERVE, "-o"]),
             ("import dot", ["import", "dot", "g.dot", "--processors", "2", "-o"]),
             ("solve", ["solve", inst, "--method", "pd", "-o"]),
             ("solve --export", ["solve", inst, "--method", "milp", "--export"]),
             ("view", ["view", inst, res, "-o"]), ("plot gantt", ["plot", "gantt", inst, res, "-o"]),
             ("plot utilisation", ["plot", "utilisation", inst, res, "-o"]),
             ("plot sweep", ["plot", "sweep", "results", "-o"]),
             ("plot serving", ["plot", "serving", "results", "-o"]),
             ("calibrate", ["calibrate", "--device", "AiM", "--measurements", "m.csv", "-o"]),
             ("compare-measured", ["compare-measured", inst, res, "--measurements", "m.csv",
                                   "--plot"]),
             ("synth-measurements", ["synth-measurements", "--device", "AiM", "--model",
                                     "llama-2-7b", "-o"])]
    folders = [("sweep placement", ["sweep", "placement", "--models", "llama-2-7b", "--platforms",
                                    "HP32", "--prefill", "8", "--decode", "8", "--methods", "pd",
                                    "--out"]),
               ("sweep layout", ["sweep", "layout", "--out"]),
               ("sweep serving", ["sweep", "serving", "--models", "gemma-3-27b", "--gpus", "H100",
                                  "--contexts", "8192", "--slo-ms", "60", "--out"]),
               ("bench", ["bench", "--case", "none", "--out"]),
               ("replay", ["replay", "--model", "llama-2-7b", "--platform", "HP32", "--out"]),
               ("scaling", ["scaling", "--out"]), ("scaling --plot", ["scaling", "--plot"]),
               ("theory plot", ["theory", "plot", "--out"]),
               ("theory verify --detailed", ["theory", "verify", "--detailed", "--out"])]
    out = []
    for name, argv in files:
        out += [(f"{name}: missing parent", [*argv, "no_such_dir/x.out"]),
                (f"{name}: a folder", [*argv, f["folder"]]),
                (f"{name}: read-only", [*argv, "/sys/x.out"])]
    for name, argv in folders:
        out += [(f"{name}: a file", [*argv, f["file"]]),
                (f"{name}: read-only", [*argv, "/sys/hetopt-x"])]
    return out


def value_cases(f: dict[str, str]) -> list[tuple[str, list]]:
    """Bad values, names and files of the other options."""
    b = [*BUILD, "-o", "x.json"]
    cases = [(f"build placement {' '.join(extra)}", [*b, *extra]) for extra in (
        ["--prefill", "-1"], ["--decode", "-1"], ["--batch", "0"], ["--layers", "0"],
        ["--layers", "999"], ["--tp", "0"], ["--block-span", "0"],
        ["--weight-sparsity", "1.5"], ["--weight-sparsity", "nan"], ["--act-sparsity", "x=1"],
        ["--attn-sparsity", "-0.1"], ["--dtype", "int3"], ["--slo-ttft-ms", "-1"],
        ["--slo-e2e-ms", "inf"], ["--slo-tpot-ms", "0"], ["--formats", "bogus"],
        ["--budget-gb", "-1"], ["--budget-factor", "nan"], ["--measurements", "missing.csv"],
        ["--model", "nope"], ["--platform", "nope"], ["--kv-dtype", "int3"])]
    d0 = [*BUILD[:-4], "--decode", "0", "--layers", "1", "-o", "x.json"]
    cases += [("build --decode 0 --objective decode_time", [*d0, "--objective", "decode_time"]),
              ("build --decode 0 --slo-tpot-ms 1", [*d0, "--slo-tpot-ms", "1"]),
              ("solve a decode-0 file with objective decode_time", ["solve", f["d0"]])]
    s = [*SERVE, "-o", "x.json"]
    cases += [(f"build serving-plan {' '.join(extra)}", [*SERVE[:-4], *extra, "-o", "x.json"])
              for extra in (["--context", "0", "--slo-ms", "60"],
                            ["--context", "-5", "--slo-ms", "60"],
                            ["--context", "8192", "--slo-ms", "0"],
                            ["--context", "8192", "--slo-ms", "nan"])]
    cases += [(f"build serving-plan {' '.join(extra)}", [*s, *extra]) for extra in (
        ["--tp", "0"], ["--batches", "a"], ["--max-gpus", "0"], ["--memory-fraction", "0"],
        ["--memory-fraction", "2"], ["--gpus", "NOPE"])]
    cases += [(f"theory hom {' '.join(extra)}", [*HOM[:-2], *extra]) for extra in (
        ["--context", "-5"], ["--context", "0"], ["--context", "nan"],
        ["--context", "4096", "--price", "-1"], ["--context", "4096", "--group-size", "0"],
        ["--context", "4096", "--kv-dtype", "int3"])]
    cases += [(f"theory het {' '.join(extra)}", [*HET, *extra]) for extra in (
        ["--context", "-5"], ["--context", "inf"], ["--price1", "0"], ["--gpu1", "nope"])]
    r = ["replay", "--model", "llama-2-7b", "--platform", "HP32", "--layers", "1", "--out",
         "rp"]
    cases += [(f"replay --trace {n}.csv", [*r, "--trace", f"{n}.csv"])
              for n in ("tok", "resp", "ts", "neg", "cols")]
    cases += [(f"replay {' '.join(extra)}", [*r, *extra]) for extra in (
        ["--requests", "0"], ["--max-batch", "0"], ["--timeout-ms", "-1"],
        ["--time-scale", "0"], ["--rate", "0"])]
    cases += [("validate RESULT INSTANCE", ["validate", f["res"], f["inst"]]),
              ("view RESULT INSTANCE", ["view", f["res"], f["inst"], "-o", "v.html"]),
              ("plot gantt RESULT INSTANCE", ["plot", "gantt", f["res"], f["inst"], "-o",
                                              "g.png"]),
              ("validate missing result", ["validate", f["inst"], "missing.json"])]
    cases += [(f"solve {' '.join(extra)}", ["solve", f["inst"], *extra]) for extra in (
        ["--time-limit", "-1"], ["--time-limit", "nan"], ["--num-workers", "0"],
        ["--param", "time_limit=3"], ["--method", "nope"])]
    sw = ["sweep", "placement", "--models", "llama-2-7b", "--platforms", "HP32", "--decode", "8",
          "--out", "sw"]
    cases += [(f"sweep placement {' '.join(extra)}", [*sw, *extra]) for extra in (
        ["--prefill", "-1", "--methods", "pd"], ["--prefill", "8", "--methods", "nope"],
        ["--prefill", "8", "--methods", "pd", "--jobs", "0"],
        ["--prefill", "8", "--methods", "pd", "--layers", "0"])]
    return cases


def classify(code: int, err: str) -> str:
    """refused | usage (argparse) | not one line | traceback | silent (exit 0/1/3)."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    if "Traceback" in err or code not in (0, 1, 2, 3, 130):
        return "traceback"
    if code != 2:
        return "silent"
    if len(lines) == 1 and lines[0].startswith("hetopt: error:"):
        return "refused"
    if lines and lines[0].startswith("usage:") and ": error:" in lines[-1]:
        return "usage"
    return "not one line"


def cache_cases(d: Path) -> list[dict[str, str]]:
    """The issue's cache rows: a copied sweep record and an edited bench number."""
    out = []
    sw = ["sweep", "placement", "--models", "llama-2-7b", "--platforms", "HP32", "--prefill",
          "16", "--decode", "1", "2", "--layers", "1", "--methods", "pd", "af", "--out", "sw2",
          "--executor", "serial"]
    hetopt(sw, d)
    a, b = d / "sw2/llama-2-7b/HP32/p16-d1-b1", d / "sw2/llama-2-7b/HP32/p16-d2-b1"
    shutil.copy(a / "af.json", a / "pd.json")
    shutil.copy(a / "af.json", b / "af.json")
    code, out_text, err = hetopt(sw, d)
    ok = code == 0 and err.count("copied from another slot") == 2 and "2 reused" in out_text
    out.append({"case": "sweep: af.json copied over pd.json and into another workload",
                "exit": code, "verdict": "recomputed" if ok else "silent", "line": err[:200]})
    bench = ["bench", "--case", "model-cards", "--out", "bn"]
    code, _, err = hetopt(bench, d)
    path = next((d / "bn").glob("*/model-cards.json"), None)
    if path is None:
        out.append({"case": "bench: edited number", "exit": code, "verdict": "traceback",
                    "line": err[-200:]})
        return out
    doc = json.loads(path.read_text())
    doc["checks"][0]["ours"] = 9.99
    path.write_text(json.dumps(doc))
    code, out_text, err = hetopt(bench, d)
    ok = "recomputing" in out_text + err and "9.99" not in out_text
    out.append({"case": "bench: checks[0].ours = 9.99 in model-cards.json", "exit": code,
                "verdict": "recomputed" if ok else "silent", "line": ""})
    return out


def print_rows(rows: list[dict], fine: tuple[str, ...], *, as_json: bool) -> dict[str, int]:
    """Print every case as a JSON object (``as_json``) or each whose verdict is not in
    ``fine`` as one line; return how many cases have each verdict."""
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        if as_json:
            print(json.dumps(r))
        elif r["verdict"] not in fine:
            print(f"[{r['verdict']}] {r['case']}: exit {r['exit']}: {r['line']}")
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("--json", action="store_true", help="one JSON object per case")
    ap.add_argument("--no-cache-cases", action="store_true",
                    help="skip the sweep/bench cache rows (they solve a little)")
    args = ap.parse_args(argv)
    d = Path(tempfile.mkdtemp(prefix="hetopt-audit-"))
    try:
        files = setup(d)
        cases = writer_cases(files) + value_cases(files)
        before = set(d.rglob("*"))
        with ThreadPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(lambda c: hetopt(c[1], d), cases))
        rows = []
        for (name, argv_), (code, _, err) in zip(cases, runs):
            line = (err.strip().splitlines() or [""])[-1]
            rows.append({"case": name, "exit": code, "verdict": classify(code, err),
                         "line": line[:200]})
        written = sorted(str(p.relative_to(d)) for p in set(d.rglob("*")) - before)
        if not args.no_cache_cases:
            rows += cache_cases(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    counts = print_rows(rows, ("refused", "recomputed"), as_json=args.json)
    print(f"{len(rows)} bad inputs: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))
          + f"; files written by refused cases: {len(written)}")
    return 1 if counts.get("traceback", 0) or counts.get("silent", 0) else 0


if __name__ == "__main__":
    raise SystemExit(main())
