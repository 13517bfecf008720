"""Fuzz the input readers and the command line: a mutated input gives an
InputError / exit 2 (or exit 1 for a result that reads but does not hold) or a valid result —
never a traceback.

Each reader has a short run (CI: :data:`SHORT` examples each, under a minute in all) and a
``slow`` long run (:data:`LONG` examples each: ``pytest -m slow tests/fuzz``). Every finding is
fixed and kept as a regression example (:data:`FIXED_EXAMPLES`); :data:`KNOWN` lists crashes
still open (none), which the fuzz runs would skip; docs/hardening.md has the findings.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import instances
from opt.app.cli import build_parser, main
from opt.common.errors import InputError
from opt.costlib.hardware import bundled_catalog, catalog_from_dict, load_catalog
from opt.costlib.modelcard import bundled_cards, load_cards
from opt.placement.dot import dot_to_instance, parse_dot
from opt.problems import read_problem_instance
from solvers import solve
from tests.fuzz.mutate import mutated_json, mutated_text

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "instances" / "data"
SHORT, LONG = 60, 3000
COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                    HealthCheck.data_too_large,
                                                    HealthCheck.filter_too_much])


# ---- seeds ----------------------------------------------------------------------------------

def _json(name: str):
    return json.loads((DATA / f"{name}.json").read_text())


SEED_DIR = Path(tempfile.mkdtemp(prefix="hetopt-fuzz-"))
P1, P2, P3 = "heft-topcuoglu-2002", "p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5", \
    "p3-tiny-gemma-a100-l40s"
INSTANCE_SEEDS = {name: _json(name) for name in (P1, P2, P3)}
RESULT_SEEDS = {}
for _name, _method in ((P1, "heft"), (P2, "bifocal/wla"), (P3, "bnb")):
    (SEED_DIR / f"{_name}.json").write_text(json.dumps(INSTANCE_SEEDS[_name]))
    _res = solve(instances.load(_name), _method, time_limit=10)
    _res.write(SEED_DIR / f"{_name}.result.json")
    RESULT_SEEDS[_name] = json.loads((SEED_DIR / f"{_name}.result.json").read_text())
_cat = bundled_catalog()
CATALOG_SEED = {"devices": [_cat.device("AiM").to_dict(),
                            {**_cat.device("H100").to_dict(), "name": "H100b"}],
                "platforms": [_cat.platform("HP32").to_dict()],
                "node_types": [_cat.node_type("H100").to_dict()]}
CARD_SEEDS = {
    "card": bundled_cards()["mixtral-8x7b"].to_dict(),
    "cards": {"schema": 1, "cards": [bundled_cards()["gemma-3-27b"].to_dict()]},
    "hf": {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
           "hidden_size": 2048, "intermediate_size": 5120, "num_attention_heads": 16,
           "num_key_value_heads": 2, "head_dim": 256, "num_hidden_layers": 48,
           "vocab_size": 151936, "full_attention_interval": 4, "linear_num_key_heads": 16,
           "linear_num_value_heads": 32, "linear_key_head_dim": 128,
           "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "num_experts": 512,
           "num_experts_per_tok": 10, "moe_intermediate_size": 512,
           "shared_expert_intermediate_size": 512, "tie_word_embeddings": False},
    "hf-gemma": {"model_type": "gemma3", "text_config": {
        "model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504,
        "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
        "num_hidden_layers": 62, "vocab_size": 262208, "sliding_window": 1024,
        "sliding_window_pattern": 6, "hidden_activation": "gelu_pytorch_tanh"}},
}
DOT_SEED = (DATA / "sinnen-dot" / "Nodes_7_OutTree.dot").read_text()


# ---- running one input ----------------------------------------------------------------------

#: Open crashes the fuzz runs skip: (reader, exception type, file of the innermost frame).
#: Empty: the five placement-reader crashes of the first long run are fixed (regression
#: examples in :data:`FIXED_EXAMPLES`).
KNOWN: tuple[tuple[str, str, str], ...] = ()


def _write(data: bytes, suffix: str = ".json") -> Path:
    fd, name = tempfile.mkstemp(suffix=suffix, dir=SEED_DIR)
    with open(fd, "wb") as fh:
        fh.write(data)
    return Path(name)


def _cli(argv: list[str]) -> int:
    """``main(argv)`` with its output swallowed; SystemExit (argparse) becomes its code."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            return main(argv)
        except SystemExit as exc:
            return int(exc.code or 0)


def _known(reader: str, exc: BaseException) -> bool:
    import traceback

    where = traceback.extract_tb(exc.__traceback__)[-1].filename.replace("\\", "/")
    return any(r == reader and type(exc).__name__ == t and where.endswith(f)
               for r, t, f in KNOWN)


def survive(reader: str, run: Callable[[], object]) -> None:
    """``run()`` may raise InputError (bad input) or return; anything else fails the test,
    except a :data:`KNOWN` failure, which is skipped (``reject``)."""
    try:
        run()
    except InputError:
        pass
    except Exception as exc:  # noqa: BLE001 - any other exception is the finding
        if _known(reader, exc):
            reject()
        raise


def check_instance(data: bytes) -> None:
    path = _write(data)

    def run() -> None:
        inst = read_problem_instance(path)
        kind = getattr(inst, "problem", "placement")
        seed = P3 if kind == "serving" else P1
        code = _cli(["validate", str(path), str(SEED_DIR / f"{seed}.result.json")])
        assert code in (0, 1, 2), code

    survive("instance", run)


def check_result(seed: str, data: bytes) -> None:
    path = _write(data)
    code = _cli(["validate", str(SEED_DIR / f"{seed}.json"), str(path)])
    assert code in (0, 1, 2), code
    code = _cli(["validate", str(SEED_DIR / f"{seed}.json"), str(path), "--json"])
    assert code in (0, 1, 2), code


def check_catalog(data: bytes) -> None:
    path = _write(data)

    def run() -> None:
        cat = load_catalog(path)
        assert catalog_from_dict(cat.to_dict()) == cat
        assert _cli(["hardware", "--catalog", str(path)]) == 0

    survive("catalog", run)


def check_cards(data: bytes) -> None:
    folder = Path(tempfile.mkdtemp(dir=SEED_DIR))
    (folder / "config.json").write_bytes(data)

    def run() -> None:
        cards = load_cards(folder / "config.json")
        for card in cards:
            assert card.total_params > 0 and card.kv_bytes_per_token() >= 0
        assert _cli(["models", "--models-file", str(folder / "config.json")]) == 0

    survive("cards", run)


def check_dot(data: bytes) -> None:
    def run() -> None:
        text = data.decode("utf-8", "replace")
        inst = dot_to_instance(parse_dot(text, "g.dot"), 2, source="g.dot")
        assert inst.n_tasks >= 1

    survive("dot", run)
    path = _write(data, ".dot")
    assert _cli(["import", "dot", str(path), "--processors", "2", "-o",
                 str(path.with_suffix(".json"))]) in (0, 2)


# ---- the command line -----------------------------------------------------------------------

#: Commands that are fast whatever their options: run; the others are only parsed.
RUN = ("models", "hardware", "instances", "validate", "import")
COMMANDS = RUN + ("build", "solve", "lower-bound", "sweep", "bench", "replay", "scaling",
                  "plot", "theory", "view")
TOKENS = st.sampled_from([
    "--json", "--catalog", "--models-file", "-o", "--output", "--processors", "--time-limit",
    "--method", "--methods", "--seed", "--layers", "--requests", "--fresh", "--param", "-h",
    "dot", "placement", "serving-plan", "serving", "layout", "het", "gantt", "--", "-", "=",
    "0", "-1", "1", "2", "1e999", "nan", "-inf", "é", "\U0001F600", "", "x=1", "nope.json",
    P1, P3, str(SEED_DIR / f"{P1}.json"), str(SEED_DIR / f"{P1}.result.json"),
    str(SEED_DIR / f"{P3}.result.json"), str(DATA / "sinnen-dot" / "Nodes_7_OutTree.dot"),
    str(SEED_DIR / "out.json"),
])
ARGV = st.tuples(st.sampled_from(COMMANDS), st.lists(TOKENS | st.text(max_size=6), max_size=7))


def check_argv(argv: tuple[str, list[str]]) -> None:
    command, rest = argv
    if command in RUN:
        assert _cli([command, *rest]) in (0, 1, 2)
        return
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            build_parser().parse_args([command, *rest])
    except SystemExit as exc:
        assert exc.code in (0, 2)


# ---- the fuzz runs: a short one for CI, a long slow one -------------------------------------

STRATEGIES = {
    "instance": (st.sampled_from(sorted(INSTANCE_SEEDS)).flatmap(
        lambda n: mutated_json(INSTANCE_SEEDS[n])), check_instance),
    "result": (st.sampled_from(sorted(RESULT_SEEDS)).flatmap(
        lambda n: st.tuples(st.just(n), mutated_json(RESULT_SEEDS[n]))),
        lambda pair: check_result(*pair)),
    "catalog": (mutated_json(CATALOG_SEED), check_catalog),
    "cards": (st.sampled_from(sorted(CARD_SEEDS)).flatmap(
        lambda n: mutated_json(CARD_SEEDS[n])), check_cards),
    "dot": (mutated_text(DOT_SEED), check_dot),
    "argv": (ARGV, check_argv),
}


def _fuzz(name: str, examples: int) -> int:
    """Run the fuzz of ``name`` for ``examples`` examples; the number of inputs tried
    (printed too: ``pytest -s`` shows it)."""
    strategy, check = STRATEGIES[name]
    tried = [0]

    @settings(max_examples=examples, **COMMON)
    @given(strategy)
    def run(value) -> None:
        tried[0] += 1
        check(value)

    run()
    print(f"fuzz {name}: {tried[0]} inputs tried")
    return tried[0]


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_fuzz(name):
    assert _fuzz(name, SHORT) >= SHORT // 2


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_fuzz_long(name):
    assert _fuzz(name, LONG) >= LONG // 2


# ---- known failures in the placement instance reader (harden-a's files) -------------------

def _edit(edit: Callable[[dict], None]) -> dict:
    doc = json.loads(json.dumps(INSTANCE_SEEDS[P2]))
    edit(doc)
    return doc


#: Findings of the long run, fixed: now plain regression tests.
FIXED_EXAMPLES = {
    "layout.formats holds a list": lambda d: d["layout"].update(formats=[["linear"]]),
    "layout.fixed is a list": lambda d: d["layout"].update(fixed=[{}]),
    "layout.storage_multiplier is a list": lambda d: d["layout"].update(storage_multiplier=[1]),
    "tasks[0].block is a list": lambda d: d["tasks"][0].update(block=[None]),
    "edges[0].src is an object": lambda d: d["edges"][0].update(src={"value": "s0.embed"}),
    "meta is a list": lambda d: d.update(meta=[1]),
    "tasks[0].cost.<device> is -2^64": lambda d: d["tasks"][0].update(
        cost={k: -2 ** 64 for k in d["tasks"][0]["cost"]}),
    "edges[0].bytes is -2^64": lambda d: d["edges"][0].update(bytes=-2 ** 64),
    "blocks[0].load.<device>.<format> is 2^64": lambda d: d["blocks"][0]["load"].update(
        {dev: {fmt: 2 ** 64 for fmt in per} for dev, per in d["blocks"][0]["load"].items()}),
    "blocks[0].bytes is 2^63": lambda d: d["blocks"][0].update(bytes=2 ** 63),
}


@pytest.mark.parametrize("what", sorted(FIXED_EXAMPLES))
def test_fixed_instance_reader_failures(what):
    from opt.placement.io import instance_from_dict

    with pytest.raises(InputError):
        instance_from_dict(_edit(FIXED_EXAMPLES[what]), source="fuzz.json")
