"""Convert the DOPS authors' released AiM operator data (github.com/YIAI-02/TriForm, MIT) into a
measured-latency table (docs/measurements.md) for one model card and platform.

Source (read with git from a snapshot of the repository, e.g. a bare clone):
- ``measurements/pim/out_run/results/score_output.csv``: AiM-simulator (Ramulator2/CENT) cycle
  counts of decode attention for one query token, 32 heads of dimension 128 (dim 4096), at 28
  context lengths 16…4096: op ``score`` (q·Kᵀ, our ``qk``) and ``output`` (p·V, our ``sv``).
- ``measurements/pim/out_run/results/model_formula.json``: the authors' least-squares fit of the
  GEMV cycles of a ``weight`` op (a V-vector times a V×N matrix), fitted on 108 traces with
  V ∈ [64, 1024], N ∈ [64, 4096] (``weight.csv``).
- Cycles → seconds at 1 GHz, as the authors' scheduler does (``algorithms/config.py``
  ``PIM_FREQ_GHZ = 1.0``, ``cost_model.node_device_cost``).

Rows written (device ``AiM``, decode only: T_q = 1; the data has no prefill, no batch and no
vector-op figures, so those stay the model's):
- ``qk`` / ``sv`` at the 28 measured contexts, share = the KV head group's share on the
  platform, latency = the measured cycles × (query heads of the group / 32): a linear scaling
  in heads (the trace has 32 heads only; an assumption, stated in each row's source);
- ``q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj`` from the ``weight`` fit at
  the card's (V, N, H) (H as the authors' ``_infer_vnH_for_node``: heads, KV heads for k/v),
  at contexts 2 and 10⁶ with the same latency (context-independent; log-linear lookup holds it
  constant in between). V or N outside the fitted range is flagged ``extrapolated`` in the row.
- batch: 1 by default (what was simulated); ``--batches 1 4 8 16`` adds rows at B × the
  single-vector cycles (AiM multiplies one vector per pass; our assumption, flagged).

    PYTHONPATH=. python benchmarks/triform_pim_table.py \\
        --git-dir TriForm.git --model dops-qwen-1.8b --platform HP32

(``TriForm.git``: a git directory of github.com/YIAI-02/TriForm, e.g. a bare clone.)
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
from pathlib import Path

from opt.costlib.hardware import load_catalog
from opt.costlib.measured import MeasuredTable, Measurement, write_measurements_csv
from opt.costlib.modelcard import load_cards

REPO_URL = "https://github.com/YIAI-02/TriForm"
LICENCE = ("MIT (LICENSE of github.com/YIAI-02/TriForm at commit "
           "86e4aae4089129cba371d75070618d0f64ac6065: 'Copyright (c) 2026 DOPS Authors'; "
           "the full text is opt/costlib/data/measurements/TRIFORM_LICENSE.txt)")
SCORE_OUTPUT = "measurements/pim/out_run/results/score_output.csv"
FORMULA = "measurements/pim/out_run/results/model_formula.json"
PIM_FREQ_HZ = 1e9
TRACE_HEADS = 32
FIT_RANGE = {"V": (64, 1024), "N": (64, 4096)}
OUT_DIR = Path(__file__).resolve().parent.parent / "opt/costlib/data/measurements"


def git_show(git_dir: Path, commit: str, path: str) -> str:
    """The text of ``path`` at ``commit`` of the repository at ``git_dir``."""
    return subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def resolve_commit(git_dir: Path, commit: str) -> str:
    return subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", commit], check=True,
                          capture_output=True, text=True).stdout.strip()


def weight_cycles(formula: dict, v: int, n: int, h: int) -> float:
    """The authors' ``weight`` fit: c0 + c1·V + c2·N + c3·V·N + c4·H cycles."""
    f = formula["per_op_formula"]["weight"]
    basis = {"1": 1.0, "V": v, "N": n, "VxN": v * n, "H": h}
    return sum(c * basis[b] for b, c in zip(f["basis"], f["coeffs"]))


def head_groups(n_kv: int, n_pim: int) -> list[float]:
    """Shares heads/H_kv of the KV head groups (as the builder's ``heads`` layout)."""
    g = max(1, min(n_pim, n_kv))
    sizes = [n_kv // g + (1 if i < n_kv % g else 0) for i in range(g)]
    return sorted({s / n_kv for s in sizes})


def rows_for(card, n_pim: int, score_rows: list[dict], formula: dict, batches: list[int],
             where: str) -> list[Measurement]:
    """The table rows for ``card`` on a platform with ``n_pim`` PIM devices."""
    out: list[Measurement] = []
    src = f"{REPO_URL} @ {where}"
    for share in head_groups(card.kv_heads, n_pim):
        heads = card.heads * share
        for r in score_rows:
            kind = {"score": "qk", "output": "sv"}[r["op"]]
            sec = float(r["cycles"]) / PIM_FREQ_HZ * heads / TRACE_HEADS
            for b in batches:
                note = "" if b == 1 else f"; batch {b} = {b} x the single-query cycles (assumed)"
                out.append(Measurement(
                    "AiM", kind, 1, int(r["seqlen"]), b, share, card.name, sec * b,
                    f"{src} {SCORE_OUTPUT} ({r['op']}, seq {r['seqlen']}, {r['cycles']} cycles, "
                    f"32 heads) x {heads:g}/32 heads (linear in heads, assumed), 1 GHz{note}",
                    f"{kind}@{r['seqlen']}"))
    gemv = {"q_proj": (card.hidden, card.q_dim, card.heads),
            "k_proj": (card.hidden, card.kv_dim, card.kv_heads),
            "v_proj": (card.hidden, card.kv_dim, card.kv_heads),
            "o_proj": (card.q_dim, card.hidden, card.heads),
            "gate_proj": (card.hidden, card.ffn, card.heads),
            "up_proj": (card.hidden, card.ffn, card.heads),
            "down_proj": (card.ffn, card.hidden, card.heads)}
    for kind, (v, n, h) in gemv.items():
        sec = weight_cycles(formula, v, n, h) / PIM_FREQ_HZ
        outside = [k for k, x in (("V", v), ("N", n))
                   if not FIT_RANGE[k][0] <= x <= FIT_RANGE[k][1]]
        flag = f"; extrapolated in {', '.join(outside)}" if outside else ""
        for b in batches:
            note = "" if b == 1 else f"; batch {b} = {b} x the single-vector cycles (assumed)"
            for ctx in (2, 1_000_000):
                out.append(Measurement(
                    "AiM", kind, 1, ctx, b, 1.0, card.name, sec * b,
                    f"{src} {FORMULA} weight fit at V={v}, N={n}, H={h} "
                    f"(fitted on V 64-1024, N 64-4096{flag}), 1 GHz{note}", f"{kind}@{ctx}"))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", type=Path, required=True,
                    help="a git directory of github.com/YIAI-02/TriForm (e.g. a bare clone)")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("--model", default="dops-qwen-1.8b")
    ap.add_argument("--platform", default="HP32")
    ap.add_argument("--batches", type=int, nargs="+", default=[1])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    cat, card = load_catalog(), load_cards()[args.model]
    n_pim = sum(1 for _, kind in cat.platform(args.platform).device_names()
                if cat.device(kind).device_class == "pim")
    commit = resolve_commit(args.git_dir, args.commit)
    score_rows = list(csv.DictReader(io.StringIO(git_show(args.git_dir, commit,
                                                          SCORE_OUTPUT))))
    formula = json.loads(git_show(args.git_dir, commit, FORMULA))
    rows = rows_for(card, n_pim, score_rows, formula, sorted(set(args.batches)), commit[:12])
    out = args.out or OUT_DIR / f"triform-aim-{args.model}-{args.platform.lower()}.csv"
    header = (f"DOPS authors' AiM operator data converted by benchmarks/triform_pim_table.py\n"
              f"source: {REPO_URL} commit {commit} ({SCORE_OUTPUT}, {FORMULA})\n"
              f"licence: {LICENCE}\n"
              f"model {args.model}, platform {args.platform} ({n_pim} PIM devices); decode only\n"
              f"regenerate: PYTHONPATH=. python benchmarks/triform_pim_table.py --model "
              f"{args.model} --platform {args.platform}"
              + (f" --batches {' '.join(map(str, args.batches))}" if args.batches != [1] else ""))
    write_measurements_csv(MeasuredTable(rows=tuple(rows), interpolate="log-linear"), out,
                           header=header)
    print(f"{out}: {len(rows)} rows from {REPO_URL}@{commit[:12]}")


if __name__ == "__main__":
    main()
