"""Kasahara's Standard Task Graph Set (STG; Tobita & Kasahara, J. Scheduling 5(5), 2002) as
P|prec|Cmax instances on identical processors (``instances/data/stg``, README there).

An ``.stg`` file: the number n of real tasks, then n + 2 lines ``id cost npred pred…`` (node 0
is a dummy entry, node n + 1 a dummy exit, both of cost 0), then ``#`` comment lines. The
dummies are dropped; every real task runs on every processor with its cost, edges carry no
data (no communication), so the instance is the classic P|prec|Cmax problem::

    >>> from instances import stg
    >>> inst = stg.load("50/rand0000", 4)
    >>> stg.record("50/rand0000", 4)["optimum"]
    66
"""

from __future__ import annotations

import json
import pkgutil
from typing import Any

import numpy as np

from opt.common.errors import InputError
from opt.placement.instance import Device, PlacementInstance
from opt.placement.instance_checks import EdgeColumns, TaskColumns, build_instance, make_links

_DIR = "data/stg"


def _text(relpath: str) -> str:
    """A resource file of ``instances/data/stg`` as text, read through the package's loader
    as :mod:`instances` reads its files (InputError when missing)."""
    try:
        data = pkgutil.get_data("instances", f"{_DIR}/{relpath}")
    except FileNotFoundError:
        data = None
    if data is None:
        raise InputError("file not found", source=f"instances/{_DIR}/{relpath}")
    return data.decode("utf-8")


def parse_stg(text: str, source: str = "<stg>") -> tuple[list[int], list[tuple[int, int]]]:
    """(costs of the real tasks 1..n, edges (u, v) between real tasks, 0-based)."""
    rows = [ln.split() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    try:
        n = int(rows[0][0])
        nodes = [[int(x) for x in r] for r in rows[1:n + 3]]
    except (IndexError, ValueError):
        raise InputError("not an STG file (first line n, then n + 2 node lines)",
                         source=source) from None
    if len(nodes) != n + 2 or [r[0] for r in nodes] != list(range(n + 2)):
        raise InputError(f"expected nodes 0..{n + 1} in order", source=source)
    cost = [r[1] for r in nodes[1:n + 1]]
    edges = [(p - 1, r[0] - 1) for r in nodes[1:n + 1] for p in r[3:3 + r[2]] if p > 0]
    return cost, edges


def to_instance(cost: list[int], edges: list[tuple[int, int]], processors: int,
                name: str) -> PlacementInstance:
    """P|prec|Cmax on ``processors`` identical processors P0.. (class cpu, no capacity);
    edges carry 0 bytes over links without contention (no communication)."""
    devices = [Device(f"P{i}", "cpu", None) for i in range(processors)]
    links = make_links(devices, "full", contention=False, latency=0, bandwidth=1.0,
                       source=name)
    c = np.repeat(np.asarray(cost, dtype=np.int64)[:, None], processors, axis=1)
    meta = {"source": f"STG {name}", "processors": processors, "builder": "instances.stg"}
    return build_instance(
        time_unit="unit", devices=devices, links=links,
        tasks=TaskColumns([str(i + 1) for i in range(len(cost))], c),
        edges=EdgeColumns([u for u, _ in edges], [v for _, v in edges], [0] * len(edges)),
        meta=meta, source=name)


def load(graph: str, processors: int) -> PlacementInstance:
    """The bundled graph ``graph`` (e.g. ``"50/rand0000"``) on ``processors`` processors."""
    cost, edges = parse_stg(_text(f"{graph}.stg"), source=f"{graph}.stg")
    return to_instance(cost, edges, processors, f"{graph}-p{processors}")


def records() -> list[dict[str, Any]]:
    """The published optima / bounds of the bundled (graph, processors) pairs: ``name``,
    ``graph``, ``processors``, ``optimum`` (None if open), ``lower_bound``, ``upper_bound``,
    ``reference``."""
    return json.loads(_text("index.json"))


def record(graph: str, processors: int) -> dict[str, Any]:
    """The record of one bundled (graph, processors) pair."""
    for r in records():
        if r["graph"] == graph and r["processors"] == processors:
            return r
    raise InputError(f"no STG record for {graph} on {processors} processors",
                     source=f"instances/{_DIR}/index.json")
