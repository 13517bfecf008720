"""Convert Vidur's GPU profiles (``microsoft/vidur``, MIT) into hetopt's measured-latency table.

Vidur (Agrawal et al., MLSys 2024) publishes per-kernel latencies measured on real GPUs under
``data/profiling/``: the per-layer GEMMs and element-wise kernels of eight models per token count
and TP degree (``compute/<gpu>/<org>/<model>/mlp.csv``), FlashAttention prefill and decode by
batch and context, and NCCL all-reduce and send/recv by message size, GPU count and node count
(``network/<system>/*.csv``). Every time is the median over repetitions, in milliseconds.

Run it on a git directory of the repository (no work tree needed, e.g. ``git clone --bare
https://github.com/microsoft/vidur vidur.git``)::

    python -m opt.costlib.vidur vidur.git \\
        -o opt/costlib/data/measurements/vidur_gpu.csv

It reads the blobs with ``git show`` and writes rows in the table format of
docs/measurements.md, extended with the work columns (``flops``, ``bytes`` per GPU of the
kernel, ``kv_heads`` per GPU; collectives: message ``bytes``, ``gpus``, ``nodes``,
``topology``). Token counts, batches and contexts are thinned to powers of two (and message
sizes to the measured size nearest each power of two) to keep the bundle small. The source
commit of each file is recorded in the rows and the header.

Attention: the snapshot holds the per-model ``attention.csv`` files only as Git-LFS pointers;
the one attention table with content is ``data/profiling/a100/attention.csv`` at commit
e2d00e9 (A100, Llama-2-70B attention dims: 64 query / 8 KV heads, TP 2, FlashAttention).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from opt.common.errors import InputError
from opt.costlib.measured import MeasuredTable, Measurement, write_measurements_csv

#: Vidur's model directories and hetopt's names for them (cards exist for the Llama-2 ones).
MODELS = {"meta-llama/Llama-2-7b-hf": "llama-2-7b", "meta-llama/Llama-2-70b-hf": "llama-2-70b",
          "meta-llama/Meta-Llama-3-8B": "llama-3-8b", "meta-llama/Meta-Llama-3-70B": "llama-3-70b",
          "codellama/CodeLlama-34b-Instruct-hf": "codellama-34b", "Qwen/Qwen-72B": "qwen-72b",
          "internlm/internlm-20b": "internlm-20b", "microsoft/phi-2": "phi-2"}
GPUS = {"a100": "A100", "h100": "H100"}
#: (vidur column, hetopt kernel kind) of mlp.csv.
MLP_KERNELS = (("attn_pre_proj", "qkv_proj"), ("attn_post_proj", "o_proj"),
               ("mlp_up_proj", "gate_up_proj"), ("mlp_down_proj", "down_proj"),
               ("mlp_act", "act"), ("input_layernorm", "attn_norm"),
               ("post_attention_layernorm", "ffn_norm"), ("attn_rope", "rope"),
               ("add", "add_ffn"))
NETWORK_SYSTEMS = {"a100_dgx": ("A100", "dgx"), "h100_dgx": ("H100", "dgx"),
                   "a100_pairwise_nvlink": ("A100", "pairwise_nvlink"),
                   "h100_pairwise_nvlink": ("H100", "pairwise_nvlink")}
#: The one attention table with content: (commit, path, device, model, query heads, KV heads, TP).
ATTENTION = ("e2d00e9afba96cec9f0e7ea560bbfc4a539fae6a", "data/profiling/a100/attention.csv",
             "A100", "llama-2-70b", 64, 8, 2)
BYTES = 2  # fp16 / bf16, as profiled


@dataclass(frozen=True)
class Repo:
    """A git directory of microsoft/vidur and the commit the compute/network files come from."""

    git_dir: str
    commit: str

    def show(self, path: str, commit: str | None = None) -> list[dict[str, str]]:
        """The CSV at ``path`` (of ``commit``, default :attr:`commit`) as records."""
        ref = f"{commit or self.commit}:{path}"
        run = subprocess.run(["git", "--git-dir", self.git_dir, "show", ref],
                             capture_output=True, text=True, check=False)
        if run.returncode != 0 or run.stdout.startswith("version https://git-lfs"):
            raise InputError(f"cannot read {ref}: {run.stderr.strip() or 'a Git-LFS pointer'}",
                             source=self.git_dir, field=path)
        return list(csv.DictReader(io.StringIO(run.stdout)))


def _pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _median_us(rec: dict[str, str], column: str) -> float | None:
    raw = rec.get(f"time_stats.{column}.median", "")
    if raw in ("", None):
        return None
    value = float(raw) * 1e3
    return value if math.isfinite(value) and value > 0 else None


def _gemm_work(kind: str, n: int, rec: dict[str, str], tp: int) -> tuple[float, float]:
    """(FLOPs, bytes) per GPU of an mlp.csv kernel over ``n`` tokens at TP ``tp``."""
    d, heads, kvh = int(rec["n_embd"]), int(rec["n_head"]), int(rec["n_kv_head"])
    ffn, gated = int(rec["n_expanded_embd"]), rec["use_gated_mlp"] == "True"
    hd = d // heads
    shape = {"qkv_proj": (d, (heads + 2 * kvh) * hd / tp), "o_proj": (heads * hd / tp, d),
             "gate_up_proj": (d, (2 if gated else 1) * ffn / tp), "down_proj": (ffn / tp, d)}
    if kind in shape:
        k, m = shape[kind]
        return 2.0 * n * k * m, BYTES * (k * m + n * k + n * m)
    width = {"act": (3 if gated else 2) * ffn / tp, "attn_norm": 2 * d, "ffn_norm": 2 * d,
             "rope": 2 * (heads + kvh) * hd / tp, "add_ffn": 3 * d}[kind]
    return 4.0 * n * width, BYTES * n * width


def mlp_rows(repo: Repo) -> Iterator[Measurement]:
    """GEMM and element-wise kernel rows of every model on A100 and H100 (powers-of-2 tokens)."""
    for gdir, device in GPUS.items():
        for mdir, model in MODELS.items():
            path = f"data/profiling/compute/{gdir}/{mdir}/mlp.csv"
            seen: set[tuple[str, int, int]] = set()
            try:
                recs = repo.show(path)
            except InputError:   # Llama-3 is profiled on the A100 only
                continue
            for rec in recs:
                n, tp = int(rec["num_tokens"]), int(rec["num_tensor_parallel_workers"])
                if not _pow2(n):
                    continue
                for column, kind in MLP_KERNELS:
                    us = _median_us(rec, column)
                    if us is None or (kind, n, tp) in seen:
                        continue
                    seen.add((kind, n, tp))
                    f, m = _gemm_work(kind, n, rec, tp)
                    yield Measurement(device, kind, n, n, 1, 1.0 / tp, model, us * 1e-6,
                                      f"vidur@{repo.commit[:7]} {path}", "", flops=f, bytes=m)


def attention_rows(repo: Repo) -> Iterator[Measurement]:
    """FlashAttention decode (tokens 1) and prefill rows of the one A100 attention table."""
    commit, path, device, model, heads, kvh, tp = ATTENTION
    hd = 8192 // heads
    qh, kh = heads // tp, kvh // tp
    src = f"vidur@{commit[:7]} {path}"
    seen: set[tuple[int, int, int]] = set()
    for rec in repo.show(path, commit):
        b, kv = int(rec["batch_size"]), int(rec["kv_cache_size"])
        chunk = int(rec["prefill_chunk_size"])
        if rec["is_prefill"] == "True":
            us, t = _median_us(rec, "attn_prefill"), chunk
            if not (_pow2(chunk) and (kv == 0 or _pow2(kv))):
                continue
            f = 4.0 * qh * hd * chunk * (kv + chunk / 2)
        else:
            us, t = _median_us(rec, "attn_decode"), 1
            if not (_pow2(b) and _pow2(kv) and kv >= 32):
                continue
            f = 4.0 * b * qh * hd * (kv + 1)
        ctx = kv + t
        if us is None or (t, ctx, b) in seen:
            continue
        seen.add((t, ctx, b))
        m = BYTES * b * (2 * t * qh * hd + 2 * kh * hd * ctx)
        yield Measurement(device, "flash_attn", t, ctx, b, kh / kvh, model, us * 1e-6, src, "",
                          flops=f, bytes=m, kv_heads=kh)


def network_rows(repo: Repo) -> Iterator[Measurement]:
    """all_reduce and send_recv rows (message size nearest each power of two from 2 KiB)."""
    for system, (device, topology) in NETWORK_SYSTEMS.items():
        for coll in ("all_reduce", "send_recv"):
            path = f"data/profiling/network/{system}/{coll}.csv"
            try:
                recs = repo.show(path)
            except InputError:
                continue
            groups: dict[tuple[int, int], dict[int, list[float]]] = {}
            for rec in recs:
                us = _median_us(rec, coll)
                if us is None:
                    continue
                g, per_node = int(rec["num_workers"]), int(rec["devices_per_node"])
                groups.setdefault((g, per_node), {}).setdefault(int(rec["size"]), []).append(us)
            for (g, per_node), by_size in sorted(groups.items()):
                yield from _sized(by_size, device, coll, g, -(-g // per_node), topology,
                                  f"vidur@{repo.commit[:7]} {path}")


def _sized(by_size: dict[int, list[float]], device: str, kind: str, gpus: int, nodes: int,
           topology: str, src: str) -> Iterator[Measurement]:
    sizes = sorted(by_size)
    picked: set[int] = set()
    p = 11
    while 2 ** p <= sizes[-1] * 1.5:
        target = float(2 ** p)
        picked.add(min(sizes, key=lambda s: abs(math.log(s / target))))  # noqa: B023
        p += 1
    for s in sorted(picked):
        vals = sorted(by_size[s])
        yield Measurement(device, kind, 1, 1, 1, 1.0, None, vals[len(vals) // 2] * 1e-6, src,
                          "", bytes=float(s), gpus=gpus, nodes=nodes, topology=topology)


def convert(git_dir: str, commit: str = "HEAD") -> tuple[MeasuredTable, str]:
    """The converted table and the resolved commit of ``git_dir``."""
    run = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise InputError(f"not a git directory with commit {commit}", source=git_dir)
    repo = Repo(git_dir, run.stdout.strip())
    rows = [*mlp_rows(repo), *attention_rows(repo), *network_rows(repo)]
    return MeasuredTable(tuple(rows), "log-linear", "vidur"), repo.commit


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: convert and write the bundled table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir", help="git directory of microsoft/vidur")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    try:
        table, commit = convert(args.git_dir, args.commit)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    header = (f"Converted by python -m opt.costlib.vidur from github.com/microsoft/vidur at "
              f"commit {commit} (MIT licence, copyright Microsoft Corporation: "
              f"LICENSE-vidur); attention from commit {ATTENTION[0]}.\n"
              "Latencies: Vidur's medians. flops/bytes: work per GPU of the kernel (fp16); "
              "collectives: message bytes, gpus, nodes, topology (docs/measurements.md).")
    write_measurements_csv(table, args.output, header=header)
    print(f"wrote {args.output}: {len(table.rows)} rows, {Path(args.output).stat().st_size:,} "
          "bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
