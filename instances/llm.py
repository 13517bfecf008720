"""The library of LLM placement slices (``instances/data/llm``): small P1 instances cut from the
seven DOPS model cards (the first layer, short prefills, zero to two decode steps) on the DOPS
platforms HP0–HP128, under the three load rules, each bundled as a file with the workload that
built it (:class:`instances.generated.LlmCase`) and what each exact method proved on it.

Names read ``llm-<model>-<platform>-p<prefill>-d<decode>-b<batch>-l<layers>-<load rule>``::

    >>> from instances import llm
    >>> llm.names()[0]
    'llm-llama-2-7b-hp0-p16-d2-b1-l1-overlap'

:data:`LIBRARY` is the definition; ``benchmarks/llm_library.py`` builds the files from it and
solves them (``index.json`` there: per method its status, makespan and bound; the best known
makespan, the best proven bound and the optimum when one is proven).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from instances.resources import read_json
from opt.common.errors import InputError
from opt.placement.instance import PlacementInstance
from opt.problems import instance_of

if TYPE_CHECKING:  # the builder loads only when slices are built, not when one is read
    from instances.generated import LlmCase

DIR = "data/llm"
PREFIX = "llm-"
#: DOPS §6.1's seven models (Llama-2-70B and Mixtral in INT8, the rest FP16: ``paper_precision``)
MODELS = ("llama-2-7b", "llama-2-13b", "llama-2-70b", "dops-qwen-1.8b", "dops-qwen-7b",
          "dops-qwen-14b", "mixtral-8x7b")
#: per model: (platform, prefill, decode, batch, load rule) — every platform, batch 1 to 16,
#: prefill-only to two decode steps, the three load rules (problems.md §1.2 rule 5)
SHAPES = (("HP0", 16, 2, 1, "overlap"), ("HP32", 16, 1, 1, "overlap"),
          ("HP32", 32, 1, 4, "at_use"), ("HP64", 8, 1, 16, "overlap"),
          ("HP128", 16, 0, 8, "prefetch"), ("HP64", 32, 2, 1, "overlap"))


def case_name(case: LlmCase) -> str:
    """The library name of ``case``."""
    return (f"{PREFIX}{case.model}-{case.platform.lower()}-p{case.prefill}-d{case.decode}"
            f"-b{case.batch}-l{case.layers}-{case.load_timing}")


def library() -> dict[str, LlmCase]:
    """Every library slice by name (model order, then :data:`SHAPES` order)."""
    from instances.generated import LlmCase
    cases = [LlmCase(model=m, platform=p, prefill=pre, decode=dec, batch=b, layers=1,
                     load_timing=rule, paper_precision=True)
             for m in MODELS for p, pre, dec, b, rule in SHAPES]
    return {case_name(c): c for c in cases}


def names() -> list[str]:
    """The library's names (:func:`library` order)."""
    return list(library())


def file_of(name: str) -> str:
    """The package-relative file of slice ``name``."""
    return f"{DIR}/{name}.json.gz"


def load(name: str) -> PlacementInstance:
    """The bundled file of slice ``name`` (solved or not; :func:`instances.load` reads the
    solved ones by name too)."""
    if name not in library():
        raise InputError(f"unknown LLM library slice '{name}'", source=f"instances/{DIR}")
    relpath = file_of(name)
    obj = read_json(relpath, missing="file not found (benchmarks/llm_library.py build writes it)")
    inst = instance_of(obj, source=f"instances/{relpath}")
    assert isinstance(inst, PlacementInstance)
    return inst


def records() -> list[dict[str, Any]]:
    """``index.json``'s entries: ``name``, ``optimum`` (None if open), ``lower_bound``,
    ``upper_bound``, ``methods`` (per method: ``status``, ``objective``, ``lower_bound``,
    ``runtime_s``), ``provenance``."""
    obj = read_json(f"{DIR}/index.json")
    if not isinstance(obj, list):
        raise InputError("expected a list of entries", source=f"instances/{DIR}/index.json")
    return obj
