"""The viewer's payload: encoding round trips, counts, time ranges, and utilisation intervals
that agree with opt/placement/utilisation.py."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from opt.app.viewer.html import render_page
from opt.app.viewer.payload import Blob, decode, encode
from opt.app.viewer.placement import placement_payload
from opt.app.viewer.serving import serving_payload, step_labels
from opt.placement.utilisation import (
    PAIR,
    class_intervals,
    compute_events,
    intersection,
    length,
    utilisation,
)
from opt.serving.period import steady_round
from opt.serving.plan import plan_from_solution


def _roundtrip(header, blob, compress=True):
    return decode(*encode(header, blob, compress=compress))


def test_blob_narrow_dtypes_and_delta_fallback():
    b = Blob()
    b.ints("small", [0, 1, -3])
    b.ints("u8", [0, 200])
    b.ints("big", [0, 2**40])
    off = np.array([0, 3, 5])
    b.ints("off", off)
    b.times("t", [5, 7, 9, 100, 2**33], "off", off)        # a delta of 2^33 - 100: Float64
    b.times("d", [5, 7, 9, 100, 130], "off", off)
    b.strings("s", ["a", "bé", ""])
    head, cols = _roundtrip({"x": 1}, b)
    spec = head["blob"]["columns"]
    assert (spec["small"]["dtype"], spec["u8"]["dtype"], spec["big"]["dtype"]) == \
        ("Int8", "Uint8", "Float64")
    assert spec["t"]["enc"] == "raw" and spec["t"]["dtype"] == "Float64"
    assert spec["d"]["enc"] == "delta" and spec["d"]["dtype"] == "Int8"
    assert cols["d"].tolist() == [5, 7, 9, 100, 130]
    assert cols["t"].tolist() == [5, 7, 9, 100, 2**33]
    assert cols["big"].tolist() == [0, 2**40]
    assert cols["s"] == ["a", "bé", ""]
    assert all(c["offset"] % 8 == 0 for c in spec.values())
    nl = Blob()  # a newline inside a value is shown as U+2424: still one value per line
    nl.strings("nl", ["a\nb", "c"])
    assert _roundtrip({}, nl)[1]["nl"] == ["a\u2424b", "c"]


def test_placement_payload_counts_and_times(llama1):
    inst, sol = llama1
    header, blob = placement_payload(inst, sol)
    head, cols = _roundtrip(header, blob)
    n = inst.n_tasks
    assert head["counts"]["tasks"] == n == len(cols["c.task"]) == len(cols["task.ids"])
    assert sorted(cols["c.task"].tolist()) == list(range(n))
    assert cols["task.ids"] == list(inst.task_ids)
    lanes = head["lanes"]
    assert [ln["label"] for ln in lanes if ln["type"] == "compute"] == \
        [d.name for d in inst.devices]
    # every compute event comes back exactly, in its device's lane, sorted by start
    dev, start, end, task = compute_events(inst, sol)
    got_start = np.empty(n)
    got_end = np.empty(n)
    got_lane = np.empty(n, dtype=np.int64)
    off = cols["c.off"]
    for k in range(len(lanes)):
        sl = slice(int(off[k]), int(off[k + 1]))
        assert np.all(np.diff(cols["c.start"][sl]) >= 0)
        t = cols["c.task"][sl]
        got_start[t] = cols["c.start"][sl]
        got_end[t] = cols["c.start"][sl] + cols["c.dur"][sl]
        got_lane[t] = k
    assert np.array_equal(got_start[task], start) and np.array_equal(got_end[task], end)
    assert [lanes[k]["device"] for k in got_lane[task]] == dev.tolist()
    assert head["extent"][0] == 0 and head["extent"][1] >= head["metrics"]["makespan"] == end.max()
    # per-task metadata
    assert np.array_equal(cols["task.step"], inst.step)
    assert np.array_equal(cols["task.layer"], inst.layer)
    assert [head["tables"]["kind"][k] for k in cols["task.kind"]] == list(inst.kind)
    # transfers: one per channel they occupy (full topology: one), loads as in the solution
    assert head["counts"]["transfers"] == len(sol["transfers"]) == head["counts"]["transfer_lanes"]
    assert len(cols["t.src"]) == len(sol["transfers"])
    assert sorted(zip(cols["t.start"].tolist(), (cols["t.start"] + cols["t.dur"]).tolist())) == \
        sorted((e["start"], e["end"]) for e in sol["transfers"])
    assert len(cols["l.block"]) == len(sol["loads"]) == head["counts"]["loads"]
    assert sorted(cols["l.start"].tolist()) == sorted(e["start"] for e in sol["loads"])
    # edges
    src, dst = cols["edge.src"].astype(np.int64), cols["edge.src"] + cols["edge.ddst"]
    assert sorted(zip(src.tolist(), dst.astype(np.int64).tolist())) == \
        sorted(zip(inst.edge_src.tolist(), inst.edge_dst.tolist()))


def test_utilisation_intervals_agree_with_module(llama1):
    inst, sol = llama1
    header, blob = placement_payload(inst, sol)
    head, cols = _roundtrip(header, blob)
    util = utilisation(inst, sol)
    T = util.makespan
    iv = class_intervals(inst, sol)
    for c in head["classes"]:
        s, d = cols[f"u.{c}.start"], cols[f"u.{c}.dur"]
        assert np.array_equal(s, iv[c][0]) and np.array_equal(s + d, iv[c][1])
        assert d.sum() / T == pytest.approx(util.class_busy[c], abs=1e-12)
    co = intersection(iv[PAIR[0]], iv[PAIR[1]])
    assert cols["u.co.dur"].sum() == length(co)
    assert cols["u.co.dur"].sum() / T == pytest.approx(util.co_utilisation, abs=1e-12)
    # per-device busy = the validator's utilisation
    off = cols["c.off"]
    for k, ln in enumerate(head["lanes"]):
        if ln["type"] == "compute":
            busy = cols["c.dur"][int(off[k]):int(off[k + 1])].sum()
            assert busy / T == pytest.approx(util.device[ln["label"]], abs=1e-12)
    assert head["metrics"]["utilisation"]["co_utilisation"] == util.co_utilisation


def test_placement_without_metadata(heft):
    inst, sol = heft
    header, blob = placement_payload(inst, sol)
    head, cols = _roundtrip(header, blob, compress=False)
    assert head["has"] == {"phase": False, "step": False, "layer": False, "shard": False,
                           "kind": False}
    assert head["pair"] is None and head["tables"]["kind"] == ["task"]
    assert head["counts"]["tasks"] == 10 and head["time_unit"] == "unit"


def test_serving_payload_is_the_steady_round_repeated(afd):
    inst, sol = afd
    sr = steady_round(inst, sol)
    header, blob = serving_payload(inst, sol, periods=3)
    head, cols = _roundtrip(header, blob)
    assert Fraction(head["t_rtt_exact"]) == sr.t_rtt
    assert [ln["label"] for ln in head["lanes"]] == list(sr.resources)
    assert head["counts"]["jobs"] == len(sr.jobs) and len(cols["j.start"]) == 3 * len(sr.jobs)
    span = float(sr.cycle * sr.t_rtt)
    base = sorted((j[0], j[3], j[4], j[1], j[2]) for j in sr.jobs)
    off = cols["j.off"]
    for rep in range(3):
        got = []
        for k in range(len(sr.resources)):
            for i in range(int(off[k]), int(off[k + 1])):
                if cols["j.round"][i] == rep * sr.cycle:
                    got.append((k, cols["j.start"][i] - rep * span, cols["j.end"][i] - rep * span,
                                cols["j.stream"][i], cols["j.step"][i]))
        assert np.allclose(np.array(sorted(got), dtype=float), np.array(base, dtype=float))
    # no overlaps on any resource, across the repeated periods too
    for k in range(len(sr.resources)):
        sl = slice(int(off[k]), int(off[k + 1]))
        assert np.all(cols["j.start"][sl][1:] >= cols["j.end"][sl][:-1] - 1e-6)
    short, long_ = step_labels(inst, plan_from_solution(inst, sol))
    assert cols["step.short"] == short and len(short) == head["counts"]["steps"]
    assert long_[0].startswith("stage 0 on ") and long_[0].endswith("+ embed")
    assert head["extent"][1] >= 3 * span


def test_page_is_self_contained(llama1, tmp_path):
    inst, sol = llama1
    page = render_page(*placement_payload(inst, sol))
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page and "<script src" not in page and "<link" not in page
    assert page.count("<script") == 3  # header, blob, code
