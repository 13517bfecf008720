"""Fixtures of the viewer tests: small solved instances, their pages, and a headless Chromium
(the browser tests skip, with the reason, only when Chromium or playwright is absent)."""

from __future__ import annotations

import os
import shutil
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

import instances
from opt.placement.build_options import BuildOptions, Workload
from opt.placement.builder import build_placement
from solvers import solve

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def llama1(catalog, cards):
    """A 1-layer Llama-2-7B HP64 instance (prefill 128, 3 decode steps, batch 16), solved by
    bifocal: (instance, solution)."""
    inst = build_placement(cards["llama-2-7b"], catalog.platform("HP64"), catalog,
                           Workload(128, 3, 16), BuildOptions(layers=1))
    res = solve(inst, "bifocal")
    return inst, res.solution


@pytest.fixture(scope="session")
def heft():
    inst = instances.load("heft-topcuoglu-2002")
    return inst, solve(inst, "heft").solution


@pytest.fixture(scope="session")
def afd():
    inst = instances.load("p3-tiny-gemma-a100-l40s")
    return inst, solve(inst, "afd").solution


@pytest.fixture(scope="session")
def browser():
    # in CI (.ci/run installs both) a missing browser is a failure, never a silent skip
    missing = pytest.fail if os.environ.get("CI") else pytest.skip
    if CHROMIUM is None:
        missing("Chromium is not installed (apt-get install chromium); browser tests skipped")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (pip install playwright); browser tests skipped")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def wait_for(page, expression: str, timeout_s: float = 30.0) -> None:
    """Wait until ``expression`` is truthy in the page. Polled with ``page.evaluate`` (the
    DevTools protocol, outside the page's Content-Security-Policy) rather than Playwright's
    ``wait_for_function``, which evaluates its predicate with ``eval`` inside the page and so
    is refused by the viewer's CSP (no 'unsafe-eval')."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(f"!!({expression})"):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {expression}")
        time.sleep(0.02)


def open_page(browser, path: Path, width: int = 1400, height: int = 1000):
    """A page with ``path`` loaded from disk (file://) and drawn; page errors fail the test."""
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(Path(path).resolve().as_uri())
    wait_for(page, "window.hetoptView && (hetoptView.ready || hetoptView.error)", 60.0)
    assert page.evaluate("hetoptView.error") is None
    page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    assert not errors, errors
    page.errors = errors
    return page


def decode_png(data: bytes) -> tuple[int, int, int, bytes]:
    """(width, height, channels, raw pixel rows) of an 8-bit non-interlaced RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            ch = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * ch
    out = bytearray(h * stride)
    prev = bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - ch] if x >= ch else 0
            b = prev[x]
            c = prev[x - ch] if x >= ch else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out[y * stride:(y + 1) * stride] = line
        prev = line
    return w, h, ch, bytes(out)


def coloured_pixels(png: bytes) -> int:
    """Pixels of a screenshot that are neither white nor the lanes' light-grey backgrounds nor
    hatching: saturated or dark ones (drawn events, text)."""
    try:
        import io

        from PIL import Image

        a = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)
    except ImportError:  # no Pillow: the small decoder above
        w, h, ch, px = decode_png(png)
        a = np.frombuffer(px, dtype=np.uint8).reshape(h, w, ch)[:, :, :3].astype(np.int16)
    hi, lo = a.max(axis=2), a.min(axis=2)
    return int(((hi - lo > 40) | (hi < 120)).sum())
