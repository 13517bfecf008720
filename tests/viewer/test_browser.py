"""The pages in a real browser: headless Chromium loads them from disk (file://).

Lanes are drawn (non-background pixels of a screenshot of the lanes canvas; lane labels), hover
over a known task shows its details (a real mouse move at the task's pixel, from the page's
``hetoptView.pixelOf`` hook), a filter changes what is drawn (pixels and drawn-item counts), the
DAG panel has the layer's operators, the page's utilisation equals opt/placement/utilisation.py,
zoom (wheel, buttons) changes the window. Skipped only when Chromium or playwright is absent.
"""

from __future__ import annotations

import numpy as np
import pytest

from opt.app.viewer.html import write_view
from opt.placement.utilisation import utilisation

from .conftest import coloured_pixels, open_page, wait_for


@pytest.fixture(scope="module")
def pages(tmp_path_factory, llama1, heft, afd):
    d = tmp_path_factory.mktemp("pages")
    out = {}
    for name, (inst, sol) in (("llama1", llama1), ("heft", heft), ("afd", afd)):
        write_view(inst, sol, d / f"{name}.html", title=name)
        out[name] = d / f"{name}.html"
    return out


def _lanes_shot(page):
    box = page.locator("#hv-lanes").bounding_box()
    lanes = page.evaluate("hetoptView.lanes()")
    top = lanes[0]["y"]
    bottom = lanes[-1]["y"] + lanes[-1]["h"]
    clip = {"x": box["x"] + 170, "y": box["y"] + top, "width": box["width"] - 180,
            "height": bottom - top}
    return coloured_pixels(page.screenshot(clip=clip))


def test_lanes_are_drawn(browser, pages, llama1):
    inst, sol = llama1
    page = open_page(browser, pages["llama1"])
    lanes = page.evaluate("hetoptView.lanes()")
    compute = [ln["label"] for ln in lanes if ln["type"] == "compute"]
    assert compute == [d.name for d in inst.devices]
    assert any(ln["type"] == "channel" for ln in lanes)
    assert any(ln["type"] == "load" for ln in lanes)
    assert _lanes_shot(page) > 2000
    st = page.evaluate("hetoptView.redraw()")
    assert st["drawn"] > 0 and st["boxes"] + st["bins"] > 20
    page.close()


def test_hover_shows_task_details(browser, pages, llama1):
    inst, sol = llama1
    page = open_page(browser, pages["llama1"])
    t = inst.task_index["s1.L0.qk@g0"]
    ev = next(e for e in sol["compute"] if e["task"] == "s1.L0.qk@g0")
    xy = page.evaluate(f"hetoptView.focus({t})")
    assert xy is not None and xy["width"] > 20
    page.mouse.move(xy["x"], xy["y"])
    wait_for(page, "hetoptView.tipText() !== null")
    rows = dict(page.evaluate("hetoptView.tipRows()"))
    assert rows["task"] == "s1.L0.qk@g0" and rows["kind"] == "qk"
    assert rows["phase"] == "decode" and rows["step"] == 1 and rows["layer"] == 0
    assert rows["device"] == ev["device"]
    assert rows["start"].startswith(f"{ev['start']:,} ns") and rows["end"].startswith(f"{ev['end']:,} ns")
    assert page.locator("#hv-tip").is_visible()
    # a weight load: block and format
    lanes = page.evaluate("hetoptView.lanes()")
    ld = sol["loads"][0]
    page.evaluate(f"hetoptView.setView({ld['start']}, {ld['end']})")
    k = next(i for i, ln in enumerate(lanes) if ln["label"] == f"{ld['device']} loads")
    box = page.locator("#hv-lanes").bounding_box()
    page.mouse.move(box["x"] + 170 + (box["width"] - 180) / 2, box["y"] + lanes[k]["y"] + 6)
    wait_for(page, "hetoptView.tipText() && hetoptView.tipText().includes('weight load')")
    rows = dict(page.evaluate("hetoptView.tipRows()"))
    assert rows["format"] == ld["format"] and rows["weight load"].startswith("L0-")
    page.close()


def test_filter_changes_what_is_drawn(browser, pages, llama1):
    inst, _ = llama1
    page = open_page(browser, pages["llama1"])
    before_px = _lanes_shot(page)
    before = page.evaluate("hetoptView.redraw()")
    page.select_option("#hv-phase", "0")     # prefill only, through the controls
    page.click("#hv-apply")
    page.evaluate("new Promise(r => requestAnimationFrame(r))")
    after = page.evaluate("hetoptView.stats()")
    after_px = _lanes_shot(page)
    assert after["drawn"] < before["drawn"] and after_px < before_px
    assert "tasks pass the filter" in page.locator("#hv-status").inner_text()
    n = page.evaluate("hetoptView.setFilter({phase: null, step0: 2, step1: 2, layer: null})")
    assert n == int((inst.step == 2).sum())
    r = page.evaluate("hetoptView.jump()")
    v = page.evaluate("hetoptView.getView()")
    assert v[0] <= r[0] and r[1] <= v[1] and (v[1] - v[0]) < 1.1 * (r[1] - r[0])
    page.click("#hv-clear")
    assert page.evaluate("hetoptView.model.mask") is None
    page.close()


def test_dag_of_one_layer_of_one_token(browser, pages, llama1):
    inst, _ = llama1
    page = open_page(browser, pages["llama1"])
    want = int(((inst.step == 1) & (inst.layer == 0)).sum())
    assert page.locator("#hv-dag g.hv-node").count() == want    # the default DAG: step 1, layer 0
    page.fill("#hv-dag-step", "2")
    page.fill("#hv-dag-layer", "0")
    page.click("#hv-dag-show")
    mask = (inst.step == 2) & (inst.layer == 0)
    idx = set(np.flatnonzero(mask).tolist())
    n_edges = sum(1 for s, d in zip(inst.edge_src.tolist(), inst.edge_dst.tolist())
                  if s in idx and d in idx)
    assert page.locator("#hv-dag g.hv-node").count() == int(mask.sum())
    assert page.locator("#hv-dag path.hv-edge, #hv-dag path.hv-edge-x").count() == n_edges
    assert "step 2, layer 0" in page.locator("#hv-dag-info").inner_text()
    page.close()


def test_page_utilisation_equals_module(browser, pages, llama1):
    inst, sol = llama1
    util = utilisation(inst, sol)
    page = open_page(browser, pages["llama1"])
    v = page.evaluate(f"hetoptView.utilisation(0, {util.makespan})")
    for name, u in util.device.items():
        assert v["rows"][name] == pytest.approx(u, abs=1e-12)
    for c, u in util.class_busy.items():
        assert v["series"][c] == pytest.approx(u, abs=1e-12)
    assert v["series"]["co"] == pytest.approx(util.co_utilisation, abs=1e-12)
    assert "U_co" in page.locator("#hv-util").inner_text()
    page.close()


def test_zoom_and_pan(browser, pages):
    page = open_page(browser, pages["llama1"])
    v0 = page.evaluate("hetoptView.getView()")
    box = page.locator("#hv-lanes").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 40)
    page.mouse.wheel(0, -400)
    wait_for(page, f"hetoptView.getView()[1] - hetoptView.getView()[0] < {0.8 * (v0[1] - v0[0])}")
    page.click("#hv-fit")
    assert page.evaluate("hetoptView.getView()") == pytest.approx(v0)
    page.click("#hv-zin")
    v1 = page.evaluate("hetoptView.getView()")
    assert v1[1] - v1[0] == pytest.approx((v0[1] - v0[0]) / 2)
    page.mouse.move(box["x"] + 600, box["y"] + 40)
    page.mouse.down()
    page.mouse.move(box["x"] + 400, box["y"] + 40, steps=4)
    page.mouse.up()
    v2 = page.evaluate("hetoptView.getView()")
    assert v2[0] > v1[0] and v2[1] - v2[0] == pytest.approx(v1[1] - v1[0])
    page.close()


def test_small_instance_without_metadata(browser, pages, heft):
    inst, sol = heft
    page = open_page(browser, pages["heft"])
    assert not page.locator("#hv-filter-group").is_visible()
    assert page.locator("#hv-dag g.hv-node").count() == inst.n_tasks
    assert _lanes_shot(page) > 500
    xy = page.evaluate("hetoptView.focus(0)")
    page.mouse.move(xy["x"], xy["y"])
    wait_for(page, "hetoptView.tipText() !== null")
    assert dict(page.evaluate("hetoptView.tipRows()"))["task"] == inst.task_ids[0]
    page.close()


def test_serving_pipeline(browser, pages, afd):
    inst, sol = afd
    page = open_page(browser, pages["afd"])
    lanes = page.evaluate("hetoptView.lanes()")
    assert [ln["type"] for ln in lanes].count("job") == len(sol["owners"])
    assert len(lanes) == 3 * len(sol["owners"])
    assert _lanes_shot(page) > 2000
    head = page.evaluate("hetoptView.model.head")
    J = "hetoptView.model.J"
    # the longest job: hover shows its microbatch and stage
    i = page.evaluate(f"(() => {{ const J = {J}; let b = 0; for (let i = 0; i < J.start.length; i++)"
                      f" if (J.end[i] - J.start[i] > J.end[b] - J.start[b]) b = i; return b; }})()")
    xy = page.evaluate(f"hetoptView.pixelOf({i})")
    page.mouse.move(xy["x"], xy["y"])
    wait_for(page, "hetoptView.tipText() !== null")
    rows = dict(page.evaluate("hetoptView.tipRows()"))
    assert rows["microbatch"] == page.evaluate(f"{J}.stream[{i}]")
    assert "stage" in rows["step"] and rows["resource"].endswith("replica")
    assert head["periods"] == 3 and len(page.evaluate("hetoptView.timeline.markers")) == 3 * head["cycle"] + 1
    page.close()
