"""DOT task-graph reader (opt.placement.dot) and the bundled benchmark instances (instances/)."""

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest

import instances
from opt.common.errors import InputError, UnknownNameError
from opt.placement.dot import DotGraph, dot_to_instance, parse_dot, read_dot

DATA = Path(instances.__file__).resolve().parent / "data"
DOT_DIR = DATA / "sinnen-dot"

# counted by hand from the files: (nodes, edges, sum of node weights, sum of edge weights)
REFERENCE = {
    "Nodes_7_OutTree": (7, 6, 40, 81),
    "Nodes_8_Random": (8, 16, 969, 97),
    "Nodes_9_SeriesParallel": (9, 12, 55, 552),
    "Nodes_10_Random": (10, 19, 63, 630),
    "Nodes_11_OutTree": (11, 10, 640, 64),
}
# optimal makespans on 2 and 4 processors, as published with the graphs
# (hyungsangpark/optimal-task-scheduling, commit 2ab99c7; each entry's `reference` in the index)
OPTIMA = {
    "Nodes_7_OutTree": (28, 22),
    "Nodes_8_Random": (581, 581),
    "Nodes_9_SeriesParallel": (55, 55),
    "Nodes_10_Random": (50, 50),
    "Nodes_11_OutTree": (350, 227),
}


def _dot(name: str) -> Path:
    return DOT_DIR / f"{name}.dot"


# --------------------------------------------------------------------------------------------
# reader on the reference graphs

@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_reference_graph_counts_and_weights(name):
    g = read_dot(_dot(name))
    n, m, wn, we = REFERENCE[name]
    assert isinstance(g, DotGraph)
    assert len(g.nodes) == n and len(g.edges) == m
    assert g.total_weight == sum(nd.weight for nd in g.nodes) == wn
    assert sum(e.weight for e in g.edges) == we
    assert sorted(nd.id for nd in g.nodes) == sorted(str(i) for i in range(n))
    assert g.source == str(_dot(name))
    assert g.name and name.split("_")[1] in g.name  # e.g. "..._Nodes_7_..." / "Nodes 10 Random"


def test_reference_graph_file_order_and_values():
    g = read_dot(_dot("Nodes_7_OutTree"))
    assert g.name == "OutTree-Balanced-MaxBf-3_Nodes_7_CCR_2.0_WeightType_Random"
    assert [(nd.id, nd.weight) for nd in g.nodes] == [
        ("0", 5), ("1", 6), ("2", 5), ("3", 6), ("4", 4), ("5", 7), ("6", 7)]
    assert [(e.src, e.dst, e.weight) for e in g.edges] == [
        ("0", "1", 15), ("0", "2", 11), ("0", "3", 11), ("1", "4", 19), ("1", "5", 4),
        ("1", "6", 21)]
    assert g.nodes[1].line == 3 and g.edges[0].line == 4
    # Nodes_9: node 1 is declared before 6 but first used as an edge target later
    g9 = read_dot(_dot("Nodes_9_SeriesParallel"))
    assert [nd.id for nd in g9.nodes] == ["0", "2", "3", "4", "1", "6", "7", "8", "5"]


def test_gzip_and_missing_file(tmp_path):
    p = tmp_path / "g.dot.gz"
    with gzip.open(p, "wt") as fh:
        fh.write(_dot("Nodes_7_OutTree").read_text())
    assert len(read_dot(p).nodes) == 7
    with pytest.raises(InputError, match=r"nope\.dot.*file not found"):
        read_dot(tmp_path / "nope.dot")


# --------------------------------------------------------------------------------------------
# reader on crafted input

CRAFTED = """\
# preprocessor-style line
/* a block comment
   over two lines with a -> b [Weight=99]; inside */
strict digraph crafted {
  graph [rankdir=LR]; label = "a test"
  node [shape=box]
  "a" [Weight=5, color="red"]   // quoted id, comma-separated attributes
  b [ Weight = "7" ; label=<<b>B</b>> ]
  a -> b [Weight=15; style=dashed]
  b -> c -> "d"\t[Weight=2]
  c [Weight=3] d [Weight=4]
  "e f" [Weight=0] [fontsize=9]
  d -> "e f" [Weight=1]
	# a hash line after a tab
}
"""


def test_crafted_dot_parses():
    g = parse_dot(CRAFTED, source="crafted.dot")
    assert g.name == "crafted"
    assert [(nd.id, nd.weight) for nd in g.nodes] == [
        ("a", 5), ("b", 7), ("c", 3), ("d", 4), ("e f", 0)]
    assert [(e.src, e.dst, e.weight) for e in g.edges] == [
        ("a", "b", 15), ("b", "c", 2), ("c", "d", 2), ("d", "e f", 1)]
    a = g.nodes[0]
    assert a.attrs == {"shape": "box", "color": "red"} and a.line == 7
    assert g.nodes[1].attrs["label"] == "<b>B</b>"
    assert g.edges[0].attrs == {"style": "dashed"}
    assert g.nodes[2].line == 10  # c is first mentioned by the edge chain
    assert g.nodes[4].attrs["fontsize"] == "9"


def test_crafted_one_line_and_defaults():
    g = parse_dot('digraph{node[Weight=2];edge[Weight=1];x;y[Weight=3];x->y;y->z[Weight=4]}')
    assert g.name is None
    assert [(nd.id, nd.weight) for nd in g.nodes] == [("x", 2), ("y", 3), ("z", 2)]
    assert [(e.src, e.dst, e.weight) for e in g.edges] == [("x", "y", 1), ("y", "z", 4)]
    # quoted and unquoted ids are the same node; escaped quotes; integral float weight
    g = parse_dot('digraph "q\\"name" { "1" [Weight=1.0]; 1 -> 2 [Weight="+3"]; 2 [Weight=2] }')
    assert g.name == 'q"name'
    assert [(nd.id, nd.weight) for nd in g.nodes] == [("1", 1), ("2", 2)]
    assert g.edges[0].weight == 3


BAD = [
    # (text, line, message pattern)
    ("digraph g {\n a [Weight=1];\n a -> b [Weight=2];\n}", 3, r"node 'b' has no Weight"),
    ("digraph g {\n a [Weight=1];\n b [Weight=1];\n a -> b;\n}", 4, r"edge a -> b has no Weight"),
    ("digraph g {\n a [Weight=1];\n b [Weight=-4];\n}", 3, r"node 'b' has a negative Weight"),
    ("digraph g {\n a [Weight=1]; b [Weight=1]\n a -> b [Weight=-1]\n}", 3, r"negative Weight"),
    ("digraph g {\n\n a [Weight=2.5];\n}", 3, r"non-integer Weight '2.5'"),
    ("digraph g {\n a [Weight=\"x\"];\n}", 2, r"non-integer Weight 'x'"),
    ("digraph g {\n a [Weight=1];\n a : p -> b\n}", 3, r"unexpected character ':'"),
    ("digraph g {\n a [Weight=1];\n ] \n}", 3, r"unexpected '\]'"),
    ("digraph g {\n a [Weight=1 \n", 3, r"unexpected end of file"),
    ("graph g {\n a -- b\n}", 1, r"undirected graph"),
    ("digraph g {\n a [Weight=1]; b [Weight=1]\n a -- b\n}", 3, r"undirected edge"),
    ("hello", 1, r"expected 'digraph'"),
    ("digraph g {\n subgraph s { a }\n}", 2, r"subgraphs are not supported"),
    ("digraph g {\n a [Weight=1]\n}\ndigraph h {}", 4, r"one graph per file"),
    ("digraph g {\n a [Weight=1]\n a -> a [Weight=1]\n}", 3, r"self-loop on node 'a'"),
    ("digraph g {\n a [Weight=1]; b [Weight=1]\n a -> b [Weight=1]\n a -> b [Weight=2]\n}", 4,
     r"duplicate edge a -> b \(first on line 3\)"),
    ("digraph g {\n a [Weight=1]\n a [Weight=2]\n}", 3, r"node 'a' gets Weight '2' but had '1'"),
    ("digraph g {\n /* open\n comment\n", 2, r"unterminated /\* comment"),
    ("digraph g {\n \"open\n}", 2, r"unterminated quoted string"),
    ("digraph g {\n a [Weight=1e3]\n}", 2, r"malformed identifier"),
    ("digraph g {\n a [weight=3]\n}", 2, r"no Weight attribute \(found 'weight'"),
    ("digraph g {\n a [color=red,\n   Weight]\n}", 3, r"'Weight' needs a value"),
]


@pytest.mark.parametrize("text,line,pattern", BAD, ids=[b[2][:30] for b in BAD])
def test_malformed_dot_names_file_and_line(tmp_path, text, line, pattern):
    path = tmp_path / "bad.dot"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_dot(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: line {line}: "), msg
    assert re.search(pattern, msg), msg
    assert info.value.source == str(path) and info.value.line == line


def test_parse_dot_without_file_name():
    with pytest.raises(InputError, match=r"^<string>: line 1: node 'x' has no Weight"):
        parse_dot("digraph { x }")


# --------------------------------------------------------------------------------------------
# conversion to a placement instance

def test_dot_to_instance_semantics():
    g = read_dot(_dot("Nodes_7_OutTree"))
    inst = dot_to_instance(g, 3)
    assert [d.name for d in inst.devices] == ["P0", "P1", "P2"]
    assert all(d.device_class == "cpu" and d.weight_capacity is None for d in inst.devices)
    assert inst.time_unit == "unit"
    assert inst.task_ids == tuple(nd.id for nd in g.nodes)
    assert (inst.cost == np.array([[nd.weight] * 3 for nd in g.nodes])).all()
    assert inst.edge_bytes.tolist() == [e.weight for e in g.edges]
    pairs = zip(inst.edge_src.tolist(), inst.edge_dst.tolist())
    assert [(inst.task_ids[s], inst.task_ids[d]) for s, d in pairs] == [
        (e.src, e.dst) for e in g.edges]
    links = inst.links
    assert links.topology == "full" and links.contention is False
    for e in g.edges:  # transfer time = edge weight across processors, 0 on the same one
        assert links.transfer(0, 2, e.weight) == e.weight
        assert links.transfer(1, 1, e.weight) == 0
    assert inst.block_ids == () and not inst.block_load
    assert inst.meta["graph"] == g.name and inst.meta["processors"] == 3
    assert inst.meta["source"] == str(_dot("Nodes_7_OutTree")) == inst.source
    inst2 = dot_to_instance(g, 2, source="elsewhere.dot")
    assert inst2.meta["source"] == "elsewhere.dot" == inst2.source


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "2"])
def test_dot_to_instance_rejects_bad_processor_count(bad):
    g = parse_dot("digraph { a [Weight=1] }")
    with pytest.raises(InputError, match=r"processors.*positive integer"):
        dot_to_instance(g, bad)


def test_dot_cycle_is_rejected_with_file():
    g = parse_dot("digraph { a [Weight=1]; b [Weight=1]; a -> b [Weight=1]; "
                  "b -> a [Weight=1] }", source="cyc.dot")
    with pytest.raises(InputError, match=r"^cyc\.dot: .*cycle"):
        dot_to_instance(g, 2)


# --------------------------------------------------------------------------------------------
# bundled instances

def _longest_path(inst) -> int:
    """Heaviest path by node weights (fastest device), no communication: a lower bound."""
    best = inst.cost.astype(float)
    best[inst.cost < 0] = np.inf
    w = best.min(axis=1)
    finish = np.zeros(inst.n_tasks)
    preds: dict[int, list[int]] = {}
    for s, d in zip(inst.edge_src.tolist(), inst.edge_dst.tolist()):
        preds.setdefault(d, []).append(s)
    for v in inst.topological_order.tolist():
        finish[v] = w[v] + max((finish[u] for u in preds.get(v, [])), default=0.0)
    return int(finish.max())


def test_index_lists_every_data_file_and_is_well_formed():
    index = json.loads((DATA.parent / "index.json").read_text())
    keys = {"name", "file", "problem", "optimum", "lower_bound", "upper_bound", "reference",
            "notes"}
    assert all(keys <= set(e) <= keys | {"provenance"} for e in index)
    files = {e["file"] for e in index}
    assert files == {f"data/{p.name}" for p in DATA.glob("*.json")}
    assert len({e["name"] for e in index}) == len(index)
    assert instances.names() == [e["name"] for e in index]
    assert set(instances.names("placement")) | set(instances.names("layout")) | \
        set(instances.names("serving")) == set(instances.names())
    assert instances.names("serving_plan") == instances.names("serving")  # the former name
    expected = {"heft-topcuoglu-2002"} | {f"sinnen-{g}-p{k}" for g in REFERENCE for k in (2, 4)}
    expected |= {"p1-llama-2-7b-hp32-p64-d2-l2"}
    assert set(instances.names("placement")) == expected
    assert instances.names("layout") == ["p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5"]
    for e in index:  # computed optima carry their provenance
        if e["problem"] == "serving" or e["name"].startswith(("p1-", "p2-")):
            assert {"method", "versions", "time_limit", "seed"} <= set(e["provenance"])


@pytest.mark.parametrize("name", instances.names("placement"))
def test_load_every_instance(name):
    rec = instances.info(name)
    assert rec.name == name and rec.problem == "placement" and rec.reference
    inst = instances.load(name)
    assert inst.n_tasks > 0 and inst.n_devices > 0
    assert inst.legal.any(axis=1).all()
    assert len(inst.topological_order) == inst.n_tasks
    assert inst.source == f"instances/{rec.file}"
    if rec.optimum is None:  # medium instances: best known value and proven bound
        assert rec.lower_bound < rec.upper_bound and rec.provenance
        return
    assert rec.lower_bound <= rec.optimum <= rec.upper_bound
    if len(inst.block_ids):
        return  # weight loads: the plain chain / serial bounds below ignore them
    # real bounds: the heaviest chain (no communication) ≤ optimum ≤ everything serial on the
    # best single device (no transfers at all on one device)
    assert _longest_path(inst) <= rec.optimum
    legal_everywhere = inst.legal.all(axis=0)
    assert rec.optimum <= int(inst.cost[:, legal_everywhere].sum(axis=0).min())


@pytest.mark.parametrize("graph", sorted(REFERENCE))
@pytest.mark.parametrize("k", [2, 4])
def test_sinnen_instance_matches_importer_and_optimum(graph, k):
    name = f"sinnen-{graph}-p{k}"
    rec = instances.info(name)
    inst = instances.load(name)
    n, m, wn, _ = REFERENCE[graph]
    opt = OPTIMA[graph][k == 4]
    assert rec.optimum == rec.lower_bound == rec.upper_bound == opt
    assert "hyungsangpark/optimal-task-scheduling" in rec.reference and "2ab99c7" in rec.reference
    assert "MIT" in rec.reference
    assert inst.n_tasks == n and inst.n_edges == m and inst.n_devices == k
    assert inst.meta["processors"] == k
    # serial schedule on one processor ≥ optimum ≥ max(critical path, total work / k)
    assert wn >= opt
    assert _longest_path(inst) <= opt
    assert -(-wn // k) <= opt
    # the bundled JSON is exactly what the importer produces from the bundled DOT file
    fresh = dot_to_instance(read_dot(_dot(graph)), k, source=inst.meta["source"]).to_dict()
    stored = inst.to_dict()
    stored["meta"].pop("licence")
    assert stored == fresh


def test_more_processors_never_hurt():
    for g in REFERENCE:
        assert instances.info(f"sinnen-{g}-p4").optimum <= instances.info(f"sinnen-{g}-p2").optimum


def test_heft_entry():
    rec = instances.info("heft-topcuoglu-2002")
    assert (rec.optimum, rec.lower_bound, rec.upper_bound) == (73, 73, 73)
    assert "Topcuoglu" in rec.reference and "2002" in rec.reference
    assert "HEFT gives 80, CPOP 86" in rec.notes
    inst = instances.load("heft-topcuoglu-2002")
    assert inst.n_tasks == 10 and inst.n_edges == 15 and inst.n_devices == 3


def test_iter_instances():
    pairs = list(instances.iter_instances("placement"))
    assert [rec.name for rec, _ in pairs] == instances.names("placement")
    assert all(inst.n_tasks > 0 for _, inst in pairs)
    serving = list(instances.iter_instances("serving_plan"))
    assert [rec.name for rec, _ in serving] == instances.names("serving_plan")
    assert all(inst.problem == "serving" for _, inst in serving)


def test_licence_is_bundled():
    text = (DATA / "LICENSE-sinnen-dot").read_text()
    assert "MIT License" in text and "Hyung Park" in text


def test_unknown_instance_lists_known_names():
    with pytest.raises(UnknownNameError) as info:
        instances.load("sinnen-Nodes_7_OutTree-p3")
    msg = str(info.value)
    assert "unknown instance 'sinnen-Nodes_7_OutTree-p3'" in msg
    for name in instances.names():
        assert name in msg
    assert set(info.value.known) == set(instances.bundled_names())  # the STG graphs too
    with pytest.raises(UnknownNameError):
        instances.info("nope")
    with pytest.raises(KeyError):  # UnknownNameError is also a KeyError
        instances.info("nope")


def test_llm_instances_bracket_their_solvers():
    """The P2 optimum is reproduced by the joint model; heuristics never beat the P1 bound."""
    from solvers import solve

    p2 = instances.load("p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5")
    rec = instances.info("p2-dops-qwen-1.8b-hp32-p8-l1-budget1.5")
    assert p2.layout.memory_budget is not None and len(p2.layout.formats) == 4
    assert solve(p2, "bifocal/wla").objective >= rec.optimum
    p1 = instances.load("p1-llama-2-7b-hp32-p64-d2-l2")
    rec = instances.info("p1-llama-2-7b-hp32-p64-d2-l2")
    assert p1.n_tasks == 105
    for m in ("heft", "bifocal"):
        res = solve(p1, m)
        assert res.objective >= rec.lower_bound and res.lower_bound <= rec.lower_bound
