"""Viewer at full size: build the flagship P1 schedule (Llama-2-7B, HP64, prefill 1024, decode
1024, batch 16; bifocal), write its `hetopt view` page, and time its load-to-first-draw in
headless Chromium (median of N fresh loads from file://).

    PYTHONPATH=. python benchmarks/viewer_load.py [--out DIR] [--runs 3] [--screenshot PNG]

"load to first draw" = the page's performance.now() at its first completed lanes frame (time
origin: navigation start), so it includes reading the HTML, base64 + gzip decoding of the
payload, building the per-lane indices and the first frame. Also reported: the frame time of a
full redraw zoomed out (every task in view) and zoomed in. Needs Chromium and playwright.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

from opt.app.viewer.html import write_view
from opt.common.result import read_result
from opt.costlib.hardware import bundled_catalog
from opt.costlib.modelcard import bundled_cards
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from opt.problems import read_problem_instance


def flagship(out: Path):
    """(instance, solution), built and solved once, cached under ``out``."""
    ipath, rpath = out / "flagship.json.gz", out / "flagship_bifocal.json.gz"
    if ipath.exists() and rpath.exists():
        return read_problem_instance(ipath), read_result(rpath).solution
    from opt.api import solve

    cat = bundled_catalog()
    inst = build_placement(bundled_cards()["llama-2-7b"], cat.platform("HP64"), cat,
                           Workload(1024, 1024, 16), BuildOptions())
    res = solve(inst, "bifocal")
    inst.write(ipath)
    res.write(rpath)
    return inst, res.solution


def measure(page_path: Path, runs: int, screenshot: Path | None) -> dict:
    from playwright.sync_api import sync_playwright

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    loads, frames = [], {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        for r in range(runs):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(page_path.resolve().as_uri())
            page.wait_for_function("window.hetoptView && (hetoptView.ready || hetoptView.error)",
                                   timeout=120_000)
            err = page.evaluate("hetoptView.error")
            if err:
                raise RuntimeError(err)
            loads.append(page.evaluate("hetoptView.t_first_draw"))
            if r == runs - 1:
                frames["zoomed_out_ms"] = statistics.median(
                    page.evaluate("hetoptView.redraw().ms") for _ in range(5))
                m = page.evaluate("hetoptView.model.head.metrics.makespan")
                page.evaluate(f"hetoptView.setView({m * 0.5}, {m * 0.5005})")
                frames["zoomed_in_ms"] = statistics.median(
                    page.evaluate("hetoptView.redraw().ms") for _ in range(5))
                frames["zoomed_in_drawn"] = page.evaluate("hetoptView.stats().drawn")
                page.evaluate("hetoptView.timeline.fit()")
                if screenshot:
                    page.wait_for_timeout(300)
                    page.screenshot(path=str(screenshot), full_page=True)
            page.close()
        browser.close()
    return {"load_to_first_draw_ms": loads, "median_ms": statistics.median(loads), **frames}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/hetopt-viewer-bench", help="cache and output folder")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--screenshot", help="PNG of the loaded page")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    inst, sol = flagship(out)
    t1 = time.perf_counter()
    page = out / "flagship.html"
    size = write_view(inst, sol, page, title="Llama-2-7B · HP64 · 1024/1024/16 · bifocal")
    t2 = time.perf_counter()
    res = measure(page, args.runs, Path(args.screenshot) if args.screenshot else None)
    report = {"tasks": inst.n_tasks, "transfers": len(sol["transfers"]),
              "file_bytes": size, "file_mb": round(size / 1e6, 2),
              "build_and_solve_s": round(t1 - t0, 1), "write_s": round(t2 - t1, 1), **res}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
