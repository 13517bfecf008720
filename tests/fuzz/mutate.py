"""Mutations of JSON and text inputs for the fuzz suite (hypothesis strategies).

A mutation picks one place in a seed document and breaks it: drops a field, changes its type,
puts a negative / NaN / infinite / huge / zero number there, wraps it in the wrong nesting,
writes unicode junk, duplicates a list item; or truncates the serialised file. Seeds are the
small bundled instances and results written by the tests (docs/hardening.md).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

JUNK_TEXT = st.sampled_from(["", " ", "\x00", "é\u0301", "\U0001F600", "\ud7ff", "NaN", "1e999",
                             "-1", "null", "{", "../../etc/passwd", "a" * 300, "\u202e"])
NUMBERS = st.sampled_from([0, -1, -0.0, 0.5, 1.5, -7.25, 2 ** 31, 2 ** 63, -(2 ** 63), 2 ** 64,
                           10 ** 30, 1e300, -1e300, float("nan"), float("inf"), float("-inf"),
                           True, False])
OTHER = st.one_of(NUMBERS, JUNK_TEXT, st.none(), st.just([]), st.just({}), st.just([1, "x"]),
                  st.just({"x": 1}))
KINDS = ("drop", "replace", "wrap_list", "wrap_object", "duplicate", "rename", "truncate")


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (tuple of keys / indices) to a value of ``doc``, the root excluded; long
    lists contribute their first three items only (keeps big seeds cheap)."""
    out: list[tuple] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append(prefix + (k,))
            out += paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            out.append(prefix + (i,))
            out += paths(v, prefix + (i,))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


def apply(doc: Any, path: tuple, kind: str, value: Any) -> Any:
    """``doc`` (deep-copied) with mutation ``kind`` at ``path`` (``value`` for replace)."""
    doc = copy.deepcopy(doc)
    parent, key = _parent(doc, path), path[-1]
    if kind == "drop":
        del parent[key]
    elif kind == "replace":
        parent[key] = value
    elif kind == "wrap_list":
        parent[key] = [parent[key]]
    elif kind == "wrap_object":
        parent[key] = {"value": parent[key]}
    elif kind == "duplicate" and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(parent[key]))
    elif kind == "rename" and isinstance(parent, dict):
        parent[f"{key}\u00e9"] = parent.pop(key)
    else:  # duplicate in an object / rename in a list: a junk value instead
        parent[key] = "\U0001F600"
    return doc


def dumps(doc: Any) -> bytes:
    """JSON with NaN / Infinity allowed (Python's writer), as a hand-edited file could be."""
    return json.dumps(doc, allow_nan=True, ensure_ascii=False).encode("utf-8", "surrogatepass")


@st.composite
def mutated_json(draw, seed: Any) -> bytes:
    """The bytes of ``seed`` with one mutation (or truncated at a random byte)."""
    kind = draw(st.sampled_from(KINDS))
    if kind == "truncate":
        data = dumps(seed)
        return data[:draw(st.integers(0, len(data) - 1))]
    where = paths(seed)
    path = where[draw(st.integers(0, len(where) - 1))]
    value = draw(OTHER) if kind == "replace" else None
    return dumps(apply(seed, path, kind, value))


@st.composite
def mutated_text(draw, seed: str) -> bytes:
    """``seed`` text with a slice deleted, replaced by junk, duplicated, or truncated."""
    n = len(seed)
    i = draw(st.integers(0, n - 1))
    j = draw(st.integers(i, min(n, i + 40)))
    kind = draw(st.sampled_from(("delete", "junk", "duplicate", "truncate", "number")))
    if kind == "delete":
        text = seed[:i] + seed[j:]
    elif kind == "junk":
        text = seed[:i] + draw(JUNK_TEXT | st.text(max_size=8)) + seed[j:]
    elif kind == "duplicate":
        text = seed[:j] + seed[i:j] + seed[j:]
    elif kind == "number":
        text = seed[:i] + str(draw(NUMBERS)) + seed[j:]
    else:
        text = seed[:i]
    return text.encode("utf-8", "surrogatepass")
