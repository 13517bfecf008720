"""Task graphs in the DOT format of the scheduling literature (Sinnen-style) → P1 instances.

The format is a small subset of Graphviz DOT::

    digraph "Nodes 7 OutTree" {
        a   [Weight=5];          // node: computation time on any (identical) processor
        b   [Weight=6];
        a -> b  [Weight=15];     /* edge: communication time between two processors */
    }

Accepted: ``strict``/``digraph`` header with an optional (quoted or unquoted) name; node and
edge statements (edge chains ``a -> b -> c`` give every edge the attributes); attribute lists
separated by ``,`` or ``;`` (several ``[..]`` lists allowed); ``node [..]`` / ``edge [..]``
defaults for later statements (DOT semantics) and ``graph [..]`` / ``key = value`` graph
attributes (ignored); quoted ids with ``\\"`` escapes, ``<html>`` ids; comments ``//``,
``/* */`` and lines starting with ``#``; optional semicolons; any whitespace. Every node needs
an integer ``Weight`` ≥ 0 (a node mentioned only by an edge must get one in a later
statement), every edge one too. Other attributes are kept in ``attrs`` and otherwise ignored.

Rejected with an :class:`~opt.common.errors.InputError` naming the file and line: a missing,
non-integer or negative ``Weight``, undirected graphs, subgraphs, ports, duplicate edges,
self-loops, two different weights for one node, and any other syntax.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from opt.common.errors import InputError
from opt.placement.instance import Device, PlacementInstance
from opt.placement.instance_checks import EdgeColumns, TaskColumns, build_instance, make_links

__all__ = ["DotNode", "DotEdge", "DotGraph", "parse_dot", "read_dot", "dot_to_instance"]

WEIGHT = "Weight"


@dataclass(frozen=True)
class DotNode:
    """A task: ``weight`` = computation time; ``line`` = where it was first mentioned."""

    id: str
    weight: int
    line: int
    attrs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DotEdge:
    """A dependency ``src -> dst``; ``weight`` = communication time across processors."""

    src: str
    dst: str
    weight: int
    line: int
    attrs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DotGraph:
    """A parsed task graph; nodes in order of first mention, edges in file order."""

    name: str | None
    nodes: tuple[DotNode, ...]
    edges: tuple[DotEdge, ...]
    source: str | None = None

    @property
    def total_weight(self) -> int:
        """Sum of node weights (the makespan of the serial schedule on one processor)."""
        return sum(n.weight for n in self.nodes)


# --------------------------------------------------------------------------------------------
# tokenizer

_ID = "id"          # unquoted identifier or numeral
_QID = "qid"        # quoted string (already unescaped)
_HTML = "html"      # <...> string
_PUNCT = "punct"    # { } [ ] = ; , -> --

_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<lcomment>//[^\n]*)
  | (?P<bcomment>/\*)
  | (?P<arrow>->|--)
  | (?P<punct>[{}\[\]=;,])
  | (?P<num>-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?))
  | (?P<id>[A-Za-z_\x80-\uffff][A-Za-z_0-9\x80-\uffff]*)
  | (?P<quote>")
  | (?P<html><)
""", re.VERBOSE)


_HASH_LINE_RE = re.compile(r"[ \t\r\f\v]*#[^\n]*")


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    line: int


def _tokens(text: str, err) -> Iterator[_Tok]:
    pos, line, n = 0, 1, len(text)
    at_line_start = True
    while pos < n:
        if at_line_start:
            # a line whose first non-blank character is '#' is discarded (C preprocessor output)
            m = _HASH_LINE_RE.match(text, pos)
            if m:
                pos = m.end()
                continue
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise err(line, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind == "ws":
            pos = m.end()
            continue
        at_line_start = False
        if kind == "nl":
            line += 1
            at_line_start = True
            pos = m.end()
        elif kind == "lcomment":
            pos = m.end()
        elif kind == "bcomment":
            end = text.find("*/", m.end())
            if end < 0:
                raise err(line, "unterminated /* comment")
            line += text.count("\n", pos, end)
            pos = end + 2
        elif kind == "arrow" or kind == "punct":
            yield _Tok(_PUNCT, m.group(), line)
            pos = m.end()
        elif kind in ("num", "id"):
            end = m.end()
            if kind == "num" and end < n and (text[end].isalpha() or text[end] == "_"):
                raise err(line, f"malformed identifier starting {text[pos:end + 1]!r}")
            yield _Tok(_ID, m.group(), line)
            pos = end
        elif kind == "quote":
            start_line, i, buf = line, m.end(), []
            while True:
                if i >= n:
                    raise err(start_line, "unterminated quoted string")
                c = text[i]
                if c == "\\" and i + 1 < n and text[i + 1] == '"':
                    buf.append('"')
                    i += 2
                elif c == "\\" and i + 1 < n and text[i + 1] == "\n":  # line continuation
                    line += 1
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    if c == "\n":
                        line += 1
                    buf.append(c)
                    i += 1
            yield _Tok(_QID, "".join(buf), start_line)
            pos = i
        else:  # html string: balanced < >
            start_line, depth, i = line, 0, pos
            while True:
                if i >= n:
                    raise err(start_line, "unterminated <...> string")
                c = text[i]
                depth += c == "<"
                depth -= c == ">"
                line += c == "\n"
                i += 1
                if depth == 0:
                    break
            yield _Tok(_HTML, text[pos + 1:i - 1], start_line)
            pos = i


# --------------------------------------------------------------------------------------------
# parser

_KEYWORDS = {"strict", "graph", "digraph", "node", "edge", "subgraph"}


def _error(source: str | None):
    def err(line: int, message: str) -> InputError:
        exc = InputError(f"line {line}: {message}", source=source or "<string>")
        exc.line = line  # type: ignore[attr-defined]
        return exc
    return err


#: Largest node or edge Weight (a duration in ticks) and number of processors accepted.
MAX_WEIGHT, MAX_PROCESSORS = 2 ** 48, 1024


def _weight(value: str, what: str, line: int, err) -> int:
    text = value.strip()
    m = re.fullmatch(r"\+?([0-9]+)(?:\.0*)?", text)
    if m is None:
        if re.fullmatch(r"-[0-9]+(?:\.0*)?", text):
            raise err(line, f"{what} has a negative Weight {value!r}")
        raise err(line, f"{what} has a non-integer Weight {value!r}")
    weight = int(m.group(1))
    if weight > MAX_WEIGHT:
        raise err(line, f"{what} has a Weight {weight} above 2^48 (durations are int64 ticks "
                        f"that schedules add up)")
    return weight


def _case_hint(attrs: Mapping[str, object]) -> str:
    other = [k for k in attrs if k.lower() == WEIGHT.lower()]
    return f" (found {other[0]!r}; the name is case-sensitive)" if other else ""


class _Parser:
    def __init__(self, text: str, source: str | None):
        self.source = source
        self.err = _error(source)
        self.toks = list(_tokens(text, self.err))
        self.i = 0
        self.last_line = text.count("\n") + 1

    # -- token helpers
    def peek(self, k: int = 0) -> _Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def next(self, expected: str) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise self.err(self.last_line, f"unexpected end of file, expected {expected}")
        self.i += 1
        return tok

    def is_punct(self, text: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok is not None and tok.kind == _PUNCT and tok.text == text

    def expect(self, text: str) -> _Tok:
        tok = self.next(f"'{text}'")
        if tok.kind != _PUNCT or tok.text != text:
            raise self.err(tok.line, f"expected '{text}', got {self.show(tok)}")
        return tok

    @staticmethod
    def show(tok: _Tok) -> str:
        return f"'{tok.text}'" if tok.kind in (_PUNCT, _ID) else f'"{tok.text}"'

    @staticmethod
    def keyword(tok: _Tok | None) -> str | None:
        if tok is not None and tok.kind == _ID and tok.text.lower() in _KEYWORDS:
            return tok.text.lower()
        return None

    def ident(self, what: str) -> _Tok:
        tok = self.next(what)
        if tok.kind == _PUNCT or self.keyword(tok):
            raise self.err(tok.line, f"expected {what}, got {self.show(tok)}")
        return tok

    # -- grammar
    def parse(self) -> DotGraph:
        tok = self.next("'digraph'")
        if self.keyword(tok) == "strict":
            tok = self.next("'digraph'")
        kw = self.keyword(tok)
        if kw == "graph":
            raise self.err(tok.line, "undirected graph: a task graph must be a 'digraph'")
        if kw != "digraph":
            raise self.err(tok.line, f"expected 'digraph', got {self.show(tok)}")
        name = None
        if not self.is_punct("{"):
            name = self.ident("a graph name or '{'").text
        self.expect("{")
        self.node_defaults: dict[str, tuple[str, int]] = {}
        self.edge_defaults: dict[str, tuple[str, int]] = {}
        self.nodes: dict[str, dict] = {}      # id -> {"line", "attrs", "weight_line"}
        self.edges: list[tuple[str, str, int, dict]] = []
        self.edge_seen: dict[tuple[str, str], int] = {}
        while not self.is_punct("}"):
            self.statement()
            while self.is_punct(";"):
                self.i += 1
        self.expect("}")
        extra = self.peek()
        if extra is not None:
            raise self.err(extra.line, f"unexpected {self.show(extra)} after the graph's closing "
                                       f"'}}' (one graph per file)")
        return self.build(name)

    def attr_lists(self) -> dict[str, tuple[str, int]]:
        """``[k=v, k=v; k] [..]`` → {key: (value, line)}; nothing when no '[' follows."""
        attrs: dict[str, tuple[str, int]] = {}
        while self.is_punct("["):
            self.i += 1
            while not self.is_punct("]"):
                key = self.ident("an attribute name or ']'")
                if self.is_punct("="):
                    self.i += 1
                    val = self.next("an attribute value")
                    if val.kind == _PUNCT:
                        raise self.err(val.line, f"expected a value for attribute "
                                                 f"'{key.text}', got {self.show(val)}")
                    attrs[key.text] = (val.text, val.line)
                elif key.text == WEIGHT:
                    raise self.err(key.line, "attribute 'Weight' needs a value (Weight=<int>)")
                else:
                    attrs[key.text] = ("true", key.line)
                if self.is_punct(",") or self.is_punct(";"):
                    self.i += 1
            self.expect("]")
        return attrs

    def statement(self) -> None:
        tok = self.next("a statement or '}'")
        kw = self.keyword(tok)
        if kw in ("node", "edge", "graph"):
            if not self.is_punct("["):
                nxt = self.peek()
                raise self.err(tok.line, f"expected '[' after '{tok.text}', got "
                                         f"{self.show(nxt) if nxt else 'end of file'}")
            attrs = self.attr_lists()
            if kw == "node":
                self.node_defaults.update(attrs)
            elif kw == "edge":
                self.edge_defaults.update(attrs)
            return
        if kw == "subgraph" or (tok.kind == _PUNCT and tok.text == "{"):
            raise self.err(tok.line, "subgraphs are not supported in task graphs")
        if tok.kind == _PUNCT or kw is not None:
            raise self.err(tok.line, f"unexpected {self.show(tok)}")
        if self.is_punct("="):  # graph attribute  key = value
            self.i += 1
            val = self.next("a value")
            if val.kind == _PUNCT:
                raise self.err(val.line, f"expected a value after '{tok.text} =', got "
                                         f"{self.show(val)}")
            return
        ids = [tok]
        while self.is_punct("->") or self.is_punct("--"):
            op = self.next("'->'")
            if op.text == "--":
                raise self.err(op.line, "undirected edge '--' in a digraph; use '->'")
            if self.is_punct("{") or self.keyword(self.peek()) == "subgraph":
                raise self.err(op.line, "subgraphs are not supported in task graphs")
            ids.append(self.ident("a node id after '->'"))
        attrs = self.attr_lists()
        if len(ids) == 1:
            self.mention(tok, attrs)
            return
        for a, b in zip(ids, ids[1:]):
            self.mention(a, {})
            self.mention(b, {})
            key = (a.text, b.text)
            if a.text == b.text:
                raise self.err(b.line, f"self-loop on node '{a.text}'")
            if key in self.edge_seen:
                raise self.err(b.line, f"duplicate edge {a.text} -> {b.text} (first on line "
                                       f"{self.edge_seen[key]})")
            self.edge_seen[key] = a.line
            self.edges.append((a.text, b.text, a.line, {**self.edge_defaults, **attrs}))

    def mention(self, tok: _Tok, attrs: dict[str, tuple[str, int]]) -> None:
        """Create the node on first mention (with the ``node [..]`` defaults then in force,
        as Graphviz does) and merge a statement's explicit attributes."""
        rec = self.nodes.get(tok.text)
        if rec is None:
            rec = self.nodes[tok.text] = {"line": tok.line, "attrs": dict(self.node_defaults),
                                          "explicit": set()}
        if WEIGHT in attrs and WEIGHT in rec["explicit"]:
            old, new = rec["attrs"][WEIGHT], attrs[WEIGHT]
            if old[0].strip() != new[0].strip():
                raise self.err(new[1], f"node '{tok.text}' gets Weight {new[0]!r} but had "
                                       f"{old[0]!r} on line {old[1]}")
        rec["attrs"].update(attrs)
        rec["explicit"].update(attrs)

    def build(self, name: str | None) -> DotGraph:
        nodes = []
        for nid, rec in self.nodes.items():
            attrs = rec["attrs"]
            if WEIGHT not in attrs:
                raise self.err(rec["line"], f"node '{nid}' has no Weight attribute"
                                            f"{_case_hint(attrs)}")
            val, line = attrs[WEIGHT]
            w = _weight(val, f"node '{nid}'", line, self.err)
            nodes.append(DotNode(nid, w, rec["line"],
                                 {k: v for k, (v, _) in attrs.items() if k != WEIGHT}))
        edges = []
        for src, dst, line, attrs in self.edges:
            if WEIGHT not in attrs:
                raise self.err(line, f"edge {src} -> {dst} has no Weight attribute"
                                     f"{_case_hint(attrs)}")
            val, wline = attrs[WEIGHT]
            w = _weight(val, f"edge {src} -> {dst}", wline, self.err)
            edges.append(DotEdge(src, dst, w, line,
                                 {k: v for k, (v, _) in attrs.items() if k != WEIGHT}))
        return DotGraph(name, tuple(nodes), tuple(edges), self.source)


def parse_dot(text: str, source: str | None = None) -> DotGraph:
    """Parse DOT text; ``source`` (a file name) is used in error messages."""
    return _Parser(text, source).parse()


def read_dot(path: str | Path) -> DotGraph:
    """Read a DOT task graph (``.dot`` or gzip-compressed ``.dot.gz``)."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise InputError("file not found", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=str(path)) from None
    return parse_dot(text, source=str(path))


# --------------------------------------------------------------------------------------------
# conversion

def dot_to_instance(graph: DotGraph, processors: int, *, source: str | None = None
                    ) -> PlacementInstance:
    """A P1 instance on ``processors`` identical processors ``P0..P{k-1}`` (class cpu).

    Every task may run on every processor with duration = node Weight; edge bytes = edge
    Weight over full-topology links without contention, latency 0 and bandwidth 1, so a
    transfer between two processors takes exactly the edge Weight (0 on the same processor).
    ``source`` (default: the graph's file) goes into error messages and ``meta["source"]``.
    """
    source = source if source is not None else graph.source
    if isinstance(processors, bool) or not isinstance(processors, (int, np.integer)) \
            or not 1 <= processors <= MAX_PROCESSORS:
        raise InputError(f"need a positive integer number of processors (at most "
                         f"{MAX_PROCESSORS}), got {processors!r}", source="<argument>",
                         field="processors")
    k = int(processors)
    devices = [Device(f"P{i}", "cpu", None) for i in range(k)]
    links = make_links(devices, "full", contention=False, latency=0, bandwidth=1.0,
                       source=source)
    ids = [nd.id for nd in graph.nodes]
    index = {t: i for i, t in enumerate(ids)}
    for e in graph.edges:
        for end in (e.src, e.dst):
            if end not in index:
                raise InputError(f"line {e.line}: edge {e.src} -> {e.dst} names an unknown "
                                 f"node '{end}'", source=source)
    weights = np.array([nd.weight for nd in graph.nodes], dtype=np.int64)
    cost = np.repeat(weights[:, None], k, axis=1) if len(ids) else np.zeros((0, k), np.int64)
    meta = {"source": source, "graph": graph.name, "processors": k,
            "builder": "opt.placement.dot.dot_to_instance",
            "notes": "identical processors; edge bytes = communication time (latency 0, "
                     "bandwidth 1, no contention)"}
    return build_instance(
        time_unit="unit", devices=devices, links=links,
        tasks=TaskColumns(ids, cost),
        edges=EdgeColumns([index[e.src] for e in graph.edges], [index[e.dst] for e in graph.edges],
                          [e.weight for e in graph.edges]),
        meta=meta, source=source)
