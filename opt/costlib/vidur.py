"""Convert Vidur's GPU profiles (``microsoft/vidur``, MIT) into hetopt's measured-latency table.

Vidur (Agrawal et al., MLSys 2024) publishes per-kernel latencies measured on real GPUs under
``data/profiling/``: the per-layer GEMMs and element-wise kernels of several models per token
count and TP degree (``compute/<gpu>/<org>/<model>/mlp.csv``), FlashAttention prefill and decode
by batch and context (``attention.csv``), and NCCL all-reduce and send/recv by message size,
GPU count and node count (``network/<gpu>_<topology>/*.csv``). Every time is the median over
repetitions, in milliseconds.

Run it on a git directory of the repository (no work tree needed, e.g. ``git clone --bare
https://github.com/microsoft/vidur vidur.git``)::

    python -m opt.costlib.vidur vidur.git \\
        -o opt/costlib/data/measurements/vidur_gpu.csv

It reads the blobs with ``git ls-tree`` / ``git show`` and writes rows in the table format of
docs/measurements.md, extended with the work columns (``flops``, ``bytes`` per GPU of the
kernel, ``kv_heads`` per GPU; collectives: message ``bytes``, ``gpus``, ``nodes``,
``topology``). Every profile set of the commit is taken: each GPU directory of ``compute/``
(device = the directory name in capitals) with each model directory holding an ``mlp.csv``,
and each system of ``network/``. Token counts, batches and contexts are thinned to powers of
two (and message sizes to the measured size nearest each power of two) to keep the bundle
small. The source commit of each file is recorded in the rows and the header.

Attention tables: each row carries its configuration (``n_embd``, ``n_q_head``, ``n_kv_head``,
``num_tensor_parallel_workers``, ``max_model_len``); the model is the one configuration of
``vidur/config/model_config.py`` (at the converted commit) with those dimensions and that
maximum length. A table is read where its blob has content: the converted commit's
``compute/<gpu>/<model>/attention.csv`` first; a GPU without a readable one there takes the
newest readable ``data/profiling/<gpu>/attention.csv`` of any branch (the snapshot holds the
per-model tables as Git-LFS pointers; the one table with content is the A100's at e2d00e9, on
the ``users/nitinkedia7/oss-release`` branch).
"""

from __future__ import annotations

import argparse
import ast
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

#: hetopt's names for Vidur's model directories (cards exist for the Llama-2 ones); another
#: directory is named by its last component in lower case.
MODELS = {"meta-llama/Llama-2-7b-hf": "llama-2-7b", "meta-llama/Llama-2-70b-hf": "llama-2-70b",
          "meta-llama/Meta-Llama-3-8B": "llama-3-8b", "meta-llama/Meta-Llama-3-70B": "llama-3-70b",
          "codellama/CodeLlama-34b-Instruct-hf": "codellama-34b", "Qwen/Qwen-72B": "qwen-72b",
          "internlm/internlm-20b": "internlm-20b", "microsoft/phi-2": "phi-2"}
PROFILING = "data/profiling"
#: Vidur's model configurations (dimensions and maximum lengths of the profiled models).
MODEL_CONFIG = "vidur/config/model_config.py"
#: (vidur column, hetopt kernel kind) of mlp.csv.
MLP_KERNELS = (("attn_pre_proj", "qkv_proj"), ("attn_post_proj", "o_proj"),
               ("mlp_up_proj", "gate_up_proj"), ("mlp_down_proj", "down_proj"),
               ("mlp_act", "act"), ("input_layernorm", "attn_norm"),
               ("post_attention_layernorm", "ffn_norm"), ("attn_rope", "rope"),
               ("add", "add_ffn"))
COLLECTIVES = ("all_reduce", "send_recv")
BYTES = 2  # fp16 / bf16, as profiled


def device_name(gpu_dir: str) -> str:
    """hetopt's device name of a Vidur GPU directory (``a40`` → ``A40``)."""
    return gpu_dir.upper()


def model_name(vidur_model: str) -> str:
    """hetopt's model name of a Vidur model directory / configuration name."""
    return MODELS.get(vidur_model, vidur_model.rsplit("/", 1)[-1].lower())


@dataclass(frozen=True)
class Repo:
    """A git directory of microsoft/vidur and the commit the compute/network files come from."""

    git_dir: str
    commit: str

    def _git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "--git-dir", self.git_dir, *args],
                              capture_output=True, text=True, check=False)

    def text(self, path: str, commit: str | None = None) -> str:
        """The content of ``path`` at ``commit`` (default :attr:`commit`); :class:`InputError`
        for a missing blob or a Git-LFS pointer."""
        ref = f"{commit or self.commit}:{path}"
        run = self._git("show", ref)
        if run.returncode != 0 or run.stdout.startswith("version https://git-lfs"):
            raise InputError(f"cannot read {ref}: {run.stderr.strip() or 'a Git-LFS pointer'}",
                             source=self.git_dir, field=path)
        return run.stdout

    def show(self, path: str, commit: str | None = None) -> list[dict[str, str]]:
        """The CSV at ``path`` (of ``commit``, default :attr:`commit`) as records."""
        return list(csv.DictReader(io.StringIO(self.text(path, commit))))

    def files(self, under: str, commit: str | None = None) -> list[tuple[str, str]]:
        """(path, blob id) of every file under ``under`` at ``commit``, sorted by path."""
        run = self._git("ls-tree", "-r", commit or self.commit, "--", under)
        out = []
        for line in run.stdout.splitlines():
            meta, path = line.split("\t", 1)
            out.append((path, meta.split()[2]))
        return sorted(out)

    def history(self, under: str) -> list[str]:
        """Commits of every branch that touch ``under``, newest first (commit date)."""
        return self._git("rev-list", "--all", "--date-order", "--", under).stdout.split()


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


def compute_sets(repo: Repo) -> list[tuple[str, str, str]]:
    """(GPU directory, Vidur model directory, mlp.csv path) of every compute profile set, by
    GPU directory, then the models in :data:`MODELS` order, then other models by name."""
    root = f"{PROFILING}/compute/"
    out = []
    for path, _ in repo.files(root):
        parts = path[len(root):].split("/")
        if parts[-1] == "mlp.csv" and len(parts) >= 3:
            out.append((parts[0], "/".join(parts[1:-1]), path))
    order = list(MODELS)
    return sorted(out, key=lambda s: (s[0], order.index(s[1]) if s[1] in order else len(order),
                                      s[1]))


def mlp_rows(repo: Repo) -> Iterator[Measurement]:
    """GEMM and element-wise kernel rows of every compute profile set (powers-of-2 tokens)."""
    for gdir, mdir, path in compute_sets(repo):
        device, model = device_name(gdir), model_name(mdir)
        seen: set[tuple[str, int, int]] = set()
        for rec in repo.show(path):
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


@dataclass(frozen=True)
class ModelConfig:
    """The attention dimensions of one model configuration of Vidur (``name``: its
    ``get_name()``, the model directory)."""

    name: str
    embedding_dim: int
    num_q_heads: int
    num_kv_heads: int
    max_position_embeddings: int


def _class_fields(node: ast.ClassDef) -> tuple[dict[str, object], str | None]:
    """(constant field defaults, the constant ``get_name()`` returns) of a class body."""
    own: dict[str, object] = {}
    name = None
    for stmt in node.body:
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(stmt.value, ast.Constant)):
            own[stmt.target.id] = stmt.value.value
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "get_name":
            ret = next((s for s in ast.walk(stmt) if isinstance(s, ast.Return)), None)
            if ret is not None and isinstance(ret.value, ast.Constant):
                name = str(ret.value.value)
    return own, name


def model_configs(source: str) -> list[ModelConfig]:
    """The model configurations declared in the text of Vidur's ``model_config.py`` (class
    defaults, a subclass overriding its base's; read, not run)."""
    fields: dict[str, dict[str, object]] = {}
    out = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        base = node.bases[0].id if node.bases and isinstance(node.bases[0], ast.Name) else ""
        own, name = _class_fields(node)
        fields[node.name] = {**fields.get(base, {}), **own}
        keys = ("embedding_dim", "num_q_heads", "num_kv_heads", "max_position_embeddings")
        dims = [v for v in (fields[node.name].get(k) for k in keys) if isinstance(v, int)]
        if name is not None and len(dims) == len(keys):
            out.append(ModelConfig(name, *dims))
    return out


def attention_model(rec: dict[str, str], configs: Sequence[ModelConfig], where: str
                    ) -> tuple[ModelConfig, int]:
    """The model configuration and TP degree of an attention row: the one configuration with
    the row's ``n_embd``, ``n_q_head``, ``n_kv_head`` (taken from the configuration when the
    table lacks it) and ``max_model_len`` (when present); :class:`InputError` otherwise."""
    d, heads = int(rec["n_embd"]), int(rec["n_q_head"])
    kvh = int(rec["n_kv_head"]) if rec.get("n_kv_head") else None
    length = int(rec["max_model_len"]) if rec.get("max_model_len") else None
    found = [c for c in configs if (c.embedding_dim, c.num_q_heads) == (d, heads)
             and kvh in (None, c.num_kv_heads)
             and length in (None, c.max_position_embeddings)]
    if len(found) != 1:
        raise InputError(f"{len(found)} model configurations of {MODEL_CONFIG} have the "
                         f"attention dimensions n_embd {d}, n_q_head {heads}, n_kv_head {kvh}, "
                         f"max_model_len {length}: {[c.name for c in found]}", field=where)
    return found[0], int(rec["num_tensor_parallel_workers"])


def attention_tables(repo: Repo) -> list[tuple[str, str, str]]:
    """(device, commit, path) of every attention table with content: the converted commit's
    ``compute/<gpu>/…/attention.csv``, and for a GPU without one the newest readable
    ``<gpu>/attention.csv`` of any branch."""
    readable: dict[str, bool] = {}

    def ok(blob: str) -> bool:
        if blob not in readable:
            run = subprocess.run(["git", "--git-dir", repo.git_dir, "cat-file", "blob", blob],
                                 capture_output=True, check=False)
            readable[blob] = (run.returncode == 0 and bool(run.stdout)
                              and not run.stdout.startswith(b"version https://git-lfs"))
        return readable[blob]

    root = f"{PROFILING}/compute/"
    out = [(device_name(p[len(root):].split("/")[0]), repo.commit, p)
           for p, blob in repo.files(root) if p.endswith("/attention.csv") and ok(blob)]
    have = {dev for dev, _, _ in out}
    for commit in repo.history(PROFILING):
        for p, blob in repo.files(PROFILING, commit):
            parts = p[len(PROFILING) + 1:].split("/")
            if len(parts) != 2 or parts[1] != "attention.csv":
                continue
            dev = device_name(parts[0])
            if dev not in have and ok(blob):
                have.add(dev)
                out.append((dev, commit, p))
    return out


def attention_rows(repo: Repo, configs: Sequence[ModelConfig],
                   tables: Sequence[tuple[str, str, str]]) -> Iterator[Measurement]:
    """FlashAttention decode (tokens 1) and prefill rows of the attention ``tables``
    (:func:`attention_tables`), each row's configuration read from its columns."""
    for device, commit, path in tables:
        src = f"vidur@{commit[:7]} {path}"
        seen: set[tuple[str, int, int, int, int]] = set()
        for rec in repo.show(path, commit):
            cfg, tp = attention_model(rec, configs, f"{path}@{commit[:7]}")
            m = _attention_row(rec, cfg, tp, device, src)
            if m is None or (cfg.name, tp, m.tokens, m.context, m.batch) in seen:
                continue
            seen.add((cfg.name, tp, m.tokens, m.context, m.batch))
            yield m


def _attention_row(rec: dict[str, str], cfg: ModelConfig, tp: int, device: str, src: str
                   ) -> Measurement | None:
    """One attention row (None: off the powers-of-two grid or without a time)."""
    hd = cfg.embedding_dim // cfg.num_q_heads
    qh, kh = cfg.num_q_heads // tp, cfg.num_kv_heads // tp
    b, kv = int(rec["batch_size"]), int(rec["kv_cache_size"])
    chunk = int(rec["prefill_chunk_size"])
    if rec["is_prefill"] == "True":
        us, t = _median_us(rec, "attn_prefill"), chunk
        if not (_pow2(chunk) and (kv == 0 or _pow2(kv))):
            return None
        f = 4.0 * qh * hd * chunk * (kv + chunk / 2)
    else:
        us, t = _median_us(rec, "attn_decode"), 1
        if not (_pow2(b) and _pow2(kv) and kv >= 32):
            return None
        f = 4.0 * b * qh * hd * (kv + 1)
    if us is None:
        return None
    ctx = kv + t
    m = BYTES * b * (2 * t * qh * hd + 2 * kh * hd * ctx)
    return Measurement(device, "flash_attn", t, ctx, b, kh / cfg.num_kv_heads,
                       model_name(cfg.name), us * 1e-6, src, "", flops=f, bytes=m, kv_heads=kh)


def network_rows(repo: Repo) -> Iterator[Measurement]:
    """all_reduce and send_recv rows of every ``network/<gpu>_<topology>`` system (message
    size nearest each power of two from 2 KiB)."""
    root = f"{PROFILING}/network/"
    for path, _ in repo.files(root):
        system, _, fname = path[len(root):].partition("/")
        coll = fname.removesuffix(".csv")
        if coll not in COLLECTIVES:
            continue
        gdir, _, topology = system.partition("_")
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
            yield from _sized(by_size, device_name(gdir), coll, g, -(-g // per_node), topology,
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


@dataclass(frozen=True)
class Converted:
    """The converted table, the resolved commit and the attention tables read
    (``path@commit``, the full commit)."""

    table: MeasuredTable
    commit: str
    attention: tuple[str, ...]


def convert(git_dir: str, commit: str = "HEAD") -> Converted:
    """The converted table of ``git_dir`` at ``commit``."""
    run = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise InputError(f"not a git directory with commit {commit}", source=git_dir)
    repo = Repo(git_dir, run.stdout.strip())
    configs = model_configs(repo.text(MODEL_CONFIG))
    tables = attention_tables(repo)
    rows = [*mlp_rows(repo), *attention_rows(repo, configs, tables), *network_rows(repo)]
    return Converted(MeasuredTable(tuple(rows), "log-linear", "vidur"), repo.commit,
                     tuple(f"{path}@{commit}" for _, commit, path in tables))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: convert and write the bundled table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("git_dir", help="git directory of microsoft/vidur")
    ap.add_argument("--commit", default="HEAD")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    try:
        out = convert(args.git_dir, args.commit)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    header = (f"Converted by python -m opt.costlib.vidur from github.com/microsoft/vidur at "
              f"commit {out.commit} (MIT licence, copyright Microsoft Corporation: "
              f"LICENSE-vidur); attention tables with content: {', '.join(out.attention)} "
              f"(models by {MODEL_CONFIG}@{out.commit[:7]}).\n"
              "Latencies: Vidur's medians. flops/bytes: work per GPU of the kernel (fp16); "
              "collectives: message bytes, gpus, nodes, topology (docs/measurements.md).")
    write_measurements_csv(out.table, args.output, header=header)
    print(f"wrote {args.output}: {len(out.table.rows)} rows, "
          f"{Path(args.output).stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
